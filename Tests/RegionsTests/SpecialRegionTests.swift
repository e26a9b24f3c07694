import LocationModel
import Testing

@testable import Regions

/// Regions at the edges of the map and of size, through the monitor and its index.
@Suite struct SpecialRegionTests {
  let t0: Int64 = 1_764_500_000_000

  /// Indices of the first point on the other side of `region`'s boundary, for each crossing.
  func crossings(_ region: Region, _ points: [Coordinate]) -> [Int] {
    var result: [Int] = []
    var inside = region.signedDistance(to: points[0]) < 0
    for (k, point) in points.enumerated() where (region.signedDistance(to: point) < 0) != inside {
      inside.toggle()
      result.append(k)
    }
    return result
  }

  /// Feeds fixes at 1 Hz along `points` with the given 95% error; returns the events with the
  /// index of the fix that caused them.
  func drive(_ monitor: inout RegionMonitor, _ points: [Coordinate], error: Double = 5) -> [(Int, RegionEventKind, String)] {
    var events: [(Int, RegionEventKind, String)] = []
    for (k, point) in points.enumerated() {
      let time = t0 + Int64(k) * 1000
      for transition in monitor.update(with: location(point, time: time, error95: error), now: time) {
        events.append((k, transition.event, transition.id))
      }
    }
    return events
  }

  /// A straight run along the parallel -16.9 from 179.7 E to 179.7 W crosses the antimeridian
  /// inside a polygon that spans it: one enter, one exit, none for a polygon west of it.
  @Test func drivingAcrossTheAntimeridian() throws {
    var monitor = RegionMonitor()
    let fiji = try Region(
      id: "fiji",
      shape: .polygon(
        exterior: [
          Coordinate(latitude: -17.0, longitude: 179.9), Coordinate(latitude: -17.0, longitude: -179.9),
          Coordinate(latitude: -16.8, longitude: -179.9), Coordinate(latitude: -16.8, longitude: 179.9),
        ], holes: []))
    monitor.add(fiji)
    monitor.add(try Region(id: "west", shape: .circle(center: Coordinate(latitude: -16.9, longitude: 179.5), radius: 1_000)))
    let start = Coordinate(latitude: -16.9, longitude: 179.7)
    let points = (0..<700).map { offset(start, 90, Double($0) * 100) }
    let events = drive(&monitor, points)
    #expect(events.map(\.1) == [.enter, .exit])
    #expect(events.allSatisfy { $0.2 == "fiji" })
    // 0.2 and 0.4 degrees of longitude at -16.9 are 21.3 and 42.6 km: fixes 214 and 427.
    let truth = crossings(fiji, points)
    #expect(truth == [214, 427])
    #expect(zip(events.map(\.0), truth).allSatisfy { $0 >= $1 && $0 <= $1 + 2 })
  }

  /// A flight over the north pole through a ring at 85 N: enter, then exit on the far side.
  @Test func flyingOverThePole() throws {
    var monitor = RegionMonitor()
    let ring = stride(from: -180.0, to: 180.0, by: 15.0).map { Coordinate(latitude: 85, longitude: $0) }
    let arctic = try Region(id: "arctic", shape: .polygon(exterior: ring, holes: []), dwell: 60)
    monitor.add(arctic)
    let start = Coordinate(latitude: 80, longitude: 30)
    // 250 m/s for 2 h: north over the pole and down the 150 W meridian to about 82 N.
    let points = (0..<7_200).map { Geodesic.direct(from: start, azimuth: 0, distance: Double($0) * 250).coordinate }
    let events = drive(&monitor, points)
    #expect(events.map(\.1) == [.enter, .dwell, .exit])
    // On the 30 E and 150 W meridians (vertices) the ring is crossed at 85 N: 558.5 km from 80 N
    // (fix 2,234) and 1,675 km (fix 6,702).
    let truth = crossings(arctic, points)
    #expect(truth == [2_234, 6_702])
    let decided = events.filter { $0.1 != .dwell }.map(\.0)
    #expect(zip(decided, truth).allSatisfy { $0 >= $1 && $0 <= $1 + 2 })
    #expect(monitor.status(id: "arctic")?.state == .outside)
  }

  /// A 1 m circle cannot be entered with a 5 m error (the fix cannot tell); with centimetre fixes
  /// (RTK) and a small margin it can.
  @Test func oneMetreCircle() throws {
    let center = Coordinate(latitude: 35.6762, longitude: 139.6503)
    var monitor = RegionMonitor()
    monitor.add(try Region(id: "spot", shape: .circle(center: center, radius: 1)))
    #expect(drive(&monitor, Array(repeating: center, count: 10)).isEmpty)
    #expect(monitor.status(id: "spot")?.state == .unknown)
    var precise = RegionMonitor(configuration: RegionMonitorConfiguration(minimumMargin: 0.2))
    precise.add(try Region(id: "spot", shape: .circle(center: center, radius: 1)))
    let events = drive(&precise, [offset(center, 0, 5), offset(center, 0, 5), center, center, offset(center, 0, 5), offset(center, 0, 5)], error: 0.05)
    #expect(events.map(\.1) == [.enter, .exit])
    #expect(events.map(\.0) == [3, 5])
  }

  /// A 100 km circle: entered and left at its edge, 100 km from the center.
  @Test func hundredKilometreCircle() throws {
    let center = Coordinate(latitude: -23.5505, longitude: -46.6333)
    var monitor = RegionMonitor()
    let metro = try Region(id: "metro", shape: .circle(center: center, radius: 100_000))
    monitor.add(metro)
    // From 100.52 km west to 100.48 km east at 50 m/s.
    let start = offset(center, 270, 100_520)
    let points = (0..<4_021).map { offset(start, Geodesic.inverse(start, center).initialAzimuth, Double($0) * 50) }
    let events = drive(&monitor, points)
    #expect(events.map(\.1) == [.enter, .exit])
    // The edge is 520 m from the start and 200.52 km from it: fixes 11 and 4,011 are the first
    // past each.
    let truth = crossings(metro, points)
    #expect(truth == [11, 4_011])
    #expect(zip(events.map(\.0), truth).allSatisfy { $0 >= $1 && $0 <= $1 + 2 })
  }
}
