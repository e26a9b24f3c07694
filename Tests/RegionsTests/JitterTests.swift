import LocationModel
import Testing

@testable import Regions

#if canImport(Glibc)
  import Glibc
#endif

/// A simulated receiver: the true position plus correlated Gaussian noise whose spread matches
/// the 95% error it reports, with outages and single wild fixes.
struct NoisyReceiver {
  var generator: SeededGenerator
  /// Per-axis error now, metres (north, east).
  var north = 0.0
  var east = 0.0
  /// Correlation of the error from one second to the next (GNSS errors wander over tens of
  /// seconds rather than jumping independently each fix).
  let correlation = 0.9

  init(seed: UInt64) { generator = SeededGenerator(seed: seed) }

  /// The reported 95% error at second `k`: between 3 and 7 m, changing slowly.
  func error95(at k: Int) -> Double { 5 + 2 * sin(Double(k) * 2 * .pi / 900) }

  /// The measured fix for the true position at second `k`.
  mutating func fix(truth: Coordinate, k: Int, time: Int64) -> Location {
    let e95 = error95(at: k)
    let sigma = e95 / AccuracyEstimate.horizontal95PerSigma
    let innovation = (1 - correlation * correlation).squareRoot() * sigma
    north = correlation * north + innovation * generator.gaussian()
    east = correlation * east + innovation * generator.gaussian()
    let distance = (north * north + east * east).squareRoot()
    let azimuth = atan2(east, north) * 180 / .pi
    return location(offset(truth, azimuth, distance), time: time, error95: e95)
  }

  /// A wild fix: 200 m from the truth in a random direction, reporting a 3 m error.
  mutating func spike(truth: Coordinate, time: Int64) -> Location {
    location(offset(truth, Double.random(in: 0..<360, using: &generator), 200), time: time, error95: 3)
  }
}

@Suite struct JitterTests {
  static let t0: Int64 = 1_764_500_000_000
  static let site = Coordinate(latitude: 47.3769, longitude: 8.5417)

  enum Kind: String, CaseIterable { case circle, polygon }

  /// The region, a point on its boundary, and the outward direction there (azimuth, degrees).
  static func region(_ kind: Kind) throws -> (Region, Coordinate, Double) {
    switch kind {
    case .circle:
      let region = try Region(id: "circle", shape: .circle(center: site, radius: 500), dwell: 600)
      return (region, offset(site, 70, 500), 70)
    case .polygon:
      // An L-shaped polygon with a hole; the standing point is on the middle of its south edge.
      let sw = site
      let se = offset(sw, 90, 1_200)
      let ne = offset(se, 0, 600)
      let mid = offset(ne, 270, 600)
      let top = offset(mid, 0, 600)
      let nw = offset(sw, 0, 1_200)
      let hole = ring(around: offset(offset(sw, 0, 900), 90, 300), radius: 100, count: 6, clockwise: true)
      let region = try Region(
        id: "polygon", shape: .polygon(exterior: [sw, se, ne, mid, top, nw], holes: [hole]), dwell: 600)
      let boundary = Geodesic.direct(from: sw, azimuth: Geodesic.inverse(sw, se).initialAzimuth, distance: 600).coordinate
      return (region, boundary, 180)
    }
  }

  struct Case: CustomTestStringConvertible, Sendable {
    var kind: Kind
    /// Signed true distance from the boundary, metres (negative inside).
    var distance: Double
    var testDescription: String { "\(kind.rawValue) at \(distance) m" }
  }

  static let standing: [Case] = Kind.allCases.flatMap { kind in
    [-50.0, -20, -5, 5, 20, 50].map { Case(kind: kind, distance: $0) }
  }

  /// A device standing still near a boundary for an hour of 1 Hz fixes, with noise, outages and a
  /// 200 m spike every five minutes: no transition apart from the first decision when it
  /// arrives, and a single dwell when it stands inside.
  @Test(arguments: standing)
  func standingStillNearABoundaryCausesNoTransition(_ test: Case) throws {
    let (region, boundary, outward) = try Self.region(test.kind)
    var monitor = RegionMonitor()
    monitor.add(region)
    var receiver = NoisyReceiver(seed: UInt64(abs(test.distance)) * 7 + (test.kind == .circle ? 1 : 2))
    let spot = offset(boundary, test.distance < 0 ? outward + 180 : outward, abs(test.distance))
    #expect(abs(region.signedDistance(to: spot) - test.distance) < 0.5)
    // Arrive: 60 s at 200 m farther from the boundary on the same side.
    let approach = offset(boundary, test.distance < 0 ? outward + 180 : outward, abs(test.distance) + 200)
    var events: [RegionTransition] = []
    var k = 0
    func feed(_ fix: Location) {
      let time = Self.t0 + Int64(k) * 1000
      events += monitor.update(with: fix, now: time)
    }
    while k < 60 {
      feed(receiver.fix(truth: approach, k: k, time: Self.t0 + Int64(k) * 1000))
      k += 1
    }
    let arrival = events
    events = []
    // Outages: 45 s, 120 s and 400 s (longer than the outage reset); the receiver reports no fix.
    let outages = [900..<945, 2_000..<2_120, 3_000..<3_400]
    var spikes = 0
    while k < 60 + 3_600 {
      let time = Self.t0 + Int64(k) * 1000
      if outages.contains(where: { $0.contains(k - 60) }) {
        var none = location(spot, time: time, error95: nil, mode: .noFix)
        none.fix.coordinate = nil
        feed(none)
      } else if (k - 60) % 300 == 150 {
        feed(receiver.spike(truth: spot, time: time))
        spikes += 1
      } else {
        feed(receiver.fix(truth: spot, k: k, time: time))
      }
      k += 1
    }
    // One spike a 5 minutes, less the one that falls in the 400 s outage.
    #expect(spikes == 11)
    let inside = test.distance < 0
    #expect(arrival.map(\.event) == (inside ? [.enter] : []))
    let transitions = events.filter { $0.event != .dwell }.map { "\($0.event) at \($0.time - Self.t0) ms" }
    #expect(transitions.isEmpty, "\(transitions)")
    #expect(events.filter { $0.event == .dwell }.count == (inside ? 1 : 0))
    #expect(monitor.status(id: region.id)?.state == (inside ? .inside : .outside))
  }

  /// Routes that truly cross: every crossing reported once, within two fixes of the first fix
  /// past the boundary, at 20 m/s (72 km/h) with the same noise.
  @Test(arguments: Kind.allCases)
  func crossingsAreReportedOnceAndPromptly(_ kind: Kind) throws {
    let (region, boundary, outward) = try Self.region(kind)
    // Waypoints: straight in from 400 m outside to 150 m inside, then a zigzag along the
    // boundary between 60 m outside and 60 m inside, then straight out.
    let along = outward + 90
    var waypoints = [offset(boundary, outward, 400)]
    for i in 0..<8 {
      let base = offset(boundary, along, Double(i % 4) * 40 - 60)
      waypoints.append(offset(base, i % 2 == 0 ? outward + 180 : outward, i == 0 ? 150 : 60))
    }
    waypoints.append(offset(boundary, outward, 400))
    // Positions every second at 20 m/s along the geodesic legs.
    var truth: [Coordinate] = []
    var carry = 0.0
    for (a, b) in zip(waypoints, waypoints.dropFirst()) {
      let leg = Geodesic.inverse(a, b)
      var s = carry
      while s < leg.distance {
        truth.append(Geodesic.direct(from: a, azimuth: leg.initialAzimuth, distance: s).coordinate)
        s += 20
      }
      carry = s - leg.distance
    }
    var receiver = NoisyReceiver(seed: kind == .circle ? 11 : 12)
    var monitor = RegionMonitor()
    monitor.add(region)
    var reported: [(index: Int, event: RegionEventKind)] = []
    for (k, position) in truth.enumerated() {
      let time = Self.t0 + Int64(k) * 1000
      for transition in monitor.update(with: receiver.fix(truth: position, k: k, time: time), now: time)
      where transition.event != .dwell {
        reported.append((k, transition.event))
      }
    }
    // True crossings: the first fix past the boundary each time the side changes.
    var crossings: [(index: Int, event: RegionEventKind)] = []
    var wasInside = region.signedDistance(to: truth[0]) < 0
    for (k, position) in truth.enumerated() {
      let isInside = region.signedDistance(to: position) < 0
      if isInside != wasInside { crossings.append((k, isInside ? .enter : .exit)) }
      wasInside = isInside
    }
    #expect(crossings.count == 8)
    #expect(reported.map(\.event) == crossings.map(\.event))
    for (report, crossing) in zip(reported, crossings) {
      #expect(report.index >= crossing.index && report.index <= crossing.index + 2, "\(report) vs \(crossing)")
    }
  }
}
