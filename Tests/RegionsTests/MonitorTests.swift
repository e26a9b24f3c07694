import LocationModel
import Testing

@testable import Regions

/// The decision rule, states, dwell and the index, on a virtual clock.
@Suite struct MonitorTests {
  let center = Coordinate(latitude: 59.3293, longitude: 18.0686)
  let t0: Int64 = 1_764_500_000_000

  func circle(_ id: String = "c", radius: Double = 200, dwell: Double? = nil) throws -> Region {
    try Region(id: id, shape: .circle(center: center, radius: radius), dwell: dwell)
  }

  /// Feeds fixes at 1 Hz at the given distances from the center (on the 0-degree azimuth), with
  /// a 5 m error, the clock at the fix time; returns every transition.
  func walk(
    _ monitor: inout RegionMonitor, distances: [Double], start: Int64, error: Double = 5
  ) -> [RegionTransition] {
    var all: [RegionTransition] = []
    for (i, distance) in distances.enumerated() {
      let time = start + Int64(i) * 1000
      all += monitor.update(with: location(offset(center, 0, distance), time: time, error95: error), now: time)
    }
    return all
  }

  @Test func entersAfterTwoConfirmingFixesAndExitsLikewise() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle())
    // Outside: unknown -> outside, no event.
    #expect(walk(&monitor, distances: [400, 390], start: t0).isEmpty)
    #expect(monitor.status(id: "c")?.state == .outside)
    #expect(monitor.status(id: "c")?.since == t0 + 1000)
    // Margin 5 + 5 = 10 m: 195 m is 5 m inside (no vote), 150 m decides.
    let enter = walk(&monitor, distances: [300, 195, 150, 140], start: t0 + 10_000)
    #expect(enter.map(\.event) == [.enter])
    #expect(enter.first?.time == t0 + 13_000)
    #expect(monitor.status(id: "c")?.state == .inside)
    #expect(abs((monitor.status(id: "c")?.distanceToBoundary ?? 0) + 60) < 0.01)
    let exit = walk(&monitor, distances: [205, 215, 230], start: t0 + 20_000)
    #expect(exit.map(\.event) == [.exit])
    #expect(exit.first?.time == t0 + 22_000)
  }

  @Test func unknownToInsideFiresEnter() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle())
    let events = walk(&monitor, distances: [0, 0], start: t0)
    #expect(events.map(\.event) == [.enter])
    #expect(events.first?.location.fix.time == t0 + 1000)
  }

  @Test func notifyFlagsSilenceEvents() throws {
    var monitor = RegionMonitor()
    monitor.add(try Region(id: "q", shape: .circle(center: center, radius: 200), notifyOnEntry: false, notifyOnExit: false))
    #expect(walk(&monitor, distances: [0, 0, 0, 500, 500, 0, 0], start: t0).isEmpty)
    #expect(monitor.status(id: "q")?.state == .inside)
  }

  @Test func singleSpikeDoesNotTransition() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle())
    #expect(walk(&monitor, distances: [0, 0], start: t0).count == 1)
    // One fix 400 m away reporting a 3 m error, then back.
    let events = walk(&monitor, distances: [400, 0, 400, 195, 400, 0], start: t0 + 2000, error: 3)
    #expect(events.isEmpty)
    #expect(monitor.status(id: "c")?.state == .inside)
  }

  @Test func fixesThatCannotDecide() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle())
    let inside = center
    // No error estimate.
    #expect(monitor.update(with: location(inside, time: t0, error95: nil), now: t0).isEmpty)
    #expect(monitor.update(with: location(inside, time: t0 + 1000, error95: nil), now: t0 + 1000).isEmpty)
    // No fix (mode 1).
    var noFix = location(inside, time: t0 + 2000, error95: 5)
    noFix.fix.mode = .noFix
    #expect(monitor.update(with: noFix, now: t0 + 2000).isEmpty)
    #expect(monitor.update(with: noFix, now: t0 + 2000).isEmpty)
    // Stale: 11 s older than the clock.
    #expect(monitor.update(with: location(inside, time: t0 + 3000, error95: 5), now: t0 + 14_001).isEmpty)
    #expect(monitor.update(with: location(inside, time: t0 + 4000, error95: 5), now: t0 + 15_001).isEmpty)
    // From the future (clock 11 s behind).
    #expect(monitor.update(with: location(inside, time: t0 + 30_000, error95: 5), now: t0 + 18_999).isEmpty)
    #expect(monitor.status(id: "c")?.state == .unknown)
    // A deciding fix, then the same fix again (a repeated epoch), then an older one: no confirmation.
    let fix = location(inside, time: t0 + 40_000, error95: 5)
    #expect(monitor.update(with: fix, now: t0 + 40_000).isEmpty)
    #expect(monitor.update(with: fix, now: t0 + 40_500).isEmpty)
    #expect(monitor.update(with: location(inside, time: t0 + 39_000, error95: 5), now: t0 + 40_600).isEmpty)
    #expect(monitor.status(id: "c")?.state == .unknown)
    // The next newer fix confirms.
    #expect(monitor.update(with: location(inside, time: t0 + 41_000, error95: 5), now: t0 + 41_000).map(\.event) == [.enter])
  }

  @Test func errorCircleMustClearTheBoundary() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle())
    // 50 m inside with a 60 m error: never decides.
    #expect(walk(&monitor, distances: Array(repeating: 150, count: 20), start: t0, error: 60).isEmpty)
    #expect(monitor.status(id: "c")?.state == .unknown)
    // 50 m inside with a 44 m error: 44 + 5 < 50, decides.
    #expect(walk(&monitor, distances: [150, 150], start: t0 + 30_000, error: 44).map(\.event) == [.enter])
  }

  @Test func confirmationRestartsAfterAnOutage() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle())
    _ = walk(&monitor, distances: [0, 0], start: t0)
    // One outside vote, then 61 s without a fix, then one more: not confirmed.
    #expect(walk(&monitor, distances: [400], start: t0 + 10_000).isEmpty)
    #expect(walk(&monitor, distances: [400], start: t0 + 71_001).isEmpty)
    #expect(monitor.status(id: "c")?.state == .inside)
    #expect(walk(&monitor, distances: [400], start: t0 + 72_001).map(\.event) == [.exit])
  }

  @Test func outageKeepsStateAndReportsCrossingMadeDuringIt() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle())
    _ = walk(&monitor, distances: [0, 0], start: t0)
    // An hour without fixes, still inside afterwards: nothing.
    #expect(walk(&monitor, distances: [10, 10, 10], start: t0 + 3_600_000).isEmpty)
    // Another hour, and the device is now outside: one exit at the confirming fix.
    let events = walk(&monitor, distances: [900, 900, 900], start: t0 + 7_200_000)
    #expect(events.map(\.event) == [.exit])
    #expect(events.first?.time == t0 + 7_201_000)
  }

  @Test func dwellFiresOnceAfterTheDwellTimeAndRearmsAfterExit() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle(dwell: 60))
    #expect(walk(&monitor, distances: [0, 0], start: t0).map(\.event) == [.enter])
    // Entered at t0 + 1 s: due at t0 + 61 s.
    #expect(monitor.advance(to: t0 + 30_000).isEmpty)
    _ = walk(&monitor, distances: [0], start: t0 + 30_000)
    #expect(monitor.advance(to: t0 + 60_999).isEmpty)
    let dwell = monitor.advance(to: t0 + 61_000)
    #expect(dwell.map(\.event) == [.dwell])
    #expect(dwell.first?.time == t0 + 61_000)
    #expect(dwell.first?.location.fix.time == t0 + 30_000)
    #expect(monitor.advance(to: t0 + 200_000).isEmpty)
    // Exit, re-enter, and it fires again 60 s later.
    _ = walk(&monitor, distances: [500, 500], start: t0 + 300_000)
    #expect(walk(&monitor, distances: [0, 0], start: t0 + 310_000).map(\.event) == [.enter])
    #expect(monitor.advance(to: t0 + 360_000).isEmpty)
    #expect(walk(&monitor, distances: [0], start: t0 + 371_000).map(\.event) == [.dwell])
  }

  @Test func dwellWaitsForFreshEvidenceAfterAnOutage() throws {
    var monitor = RegionMonitor()
    monitor.add(try circle(dwell: 120))
    _ = walk(&monitor, distances: [0, 0], start: t0)
    // Last inside vote at t0 + 1 s; outage reset 60 s: at t0 + 200 s the dwell is due but unproven.
    #expect(monitor.advance(to: t0 + 200_000).isEmpty)
    let events = walk(&monitor, distances: [0], start: t0 + 300_000)
    #expect(events.map(\.event) == [.dwell])
    #expect(events.first?.time == t0 + 300_000)
  }

  @Test func addingWithTheSameIdReplacesAndResetsState() throws {
    var monitor = RegionMonitor()
    let first = monitor.add(try circle())
    #expect(!first)
    _ = walk(&monitor, distances: [0, 0], start: t0)
    #expect(monitor.status(id: "c")?.state == .inside)
    let replaced = monitor.add(try circle(radius: 300))
    #expect(replaced)
    #expect(monitor.count == 1)
    #expect(monitor.status(id: "c")?.state == .unknown)
    #expect(monitor.regions.map(\.shape) == [.circle(center: center, radius: 300)])
    let removed = monitor.remove(id: "c")
    let removedAgain = monitor.remove(id: "c")
    #expect(removed && !removedAgain)
    #expect(monitor.count == 0)
    #expect(walk(&monitor, distances: [0, 0], start: t0 + 5000).isEmpty)
  }

  @Test func transitionsComeInIdOrder() throws {
    var monitor = RegionMonitor()
    for id in ["b", "a", "c"] { monitor.add(try circle(id)) }
    #expect(walk(&monitor, distances: [0, 0], start: t0).map(\.id) == ["a", "b", "c"])
    #expect(monitor.regions.map(\.id) == ["a", "b", "c"])
  }

  /// The index never leaves out a region the fix could decide for: for random regions and
  /// random fixes, every region nearer than the query radius is a candidate.
  @Test func indexReturnsEveryRegionWithinTheQueryRadius() throws {
    var generator = SeededGenerator(seed: 42)
    var monitor = RegionMonitor()
    var regions: [Region] = []
    let latitudes: [Double] = [0, 45, -60, 80, 89.9, -89.95]
    for i in 0..<600 {
      let latitude = latitudes[i % latitudes.count] + Double.random(in: -0.05...0.05, using: &generator)
      var longitude = [179.99, -179.99, 0.0, 33.0][i % 4] + Double.random(in: -0.02...0.02, using: &generator)
      if longitude > 180 { longitude -= 360 }
      if longitude < -180 { longitude += 360 }
      let c = Coordinate(latitude: max(-90, min(90, latitude)), longitude: longitude)
      let region: Region
      if i % 3 == 0 {
        region = try Region(
          id: "p\(i)",
          shape: .polygon(exterior: ring(around: c, radius: Double.random(in: 20...5_000, using: &generator), count: 7), holes: []))
      } else {
        region = try Region(id: "c\(i)", shape: .circle(center: c, radius: Double.random(in: 1...200_000, using: &generator)))
      }
      regions.append(region)
      monitor.add(region)
    }
    var checked = 0
    for i in 0..<400 {
      let base = regions[i % regions.count]
      let anchor: Coordinate
      switch base.shape {
      case .circle(let c, _): anchor = c
      case .polygon(let exterior, _): anchor = exterior[0]
      }
      let fix = offset(anchor, Double.random(in: 0..<360, using: &generator), Double.random(in: 0...300_000, using: &generator))
      let radius = Double.random(in: 1...500, using: &generator)
      var candidates: Set<String> = []
      monitor.index.forEachCandidate(in: GeoBox(center: fix, radius: radius)) { slot in
        if let id = monitor.entries[Int(slot)]?.region.id { candidates.insert(id) }
      }
      for region in regions where region.signedDistance(to: fix) < radius {
        #expect(candidates.contains(region.id), "\(region.id) at \(fix)")
        checked += 1
      }
    }
    #expect(checked > 100)
  }
}

/// After adding, replacing and removing regions at random, every grid cell lists exactly the
/// live regions whose boxes cover it, once each, and the settled-outside regions are not in the
/// attention set.
@Suite struct IndexMaintenanceTests {
  @Test func indexStaysExactUnderAddReplaceRemove() throws {
    var generator = SeededGenerator(seed: 7)
    var monitor = RegionMonitor()
    let base = Coordinate(latitude: 64.1466, longitude: -21.9426)
    for step in 0..<2_000 {
      let id = "r\(Int.random(in: 0..<150, using: &generator))"
      if Double.random(in: 0..<1, using: &generator) < 0.3 {
        monitor.remove(id: id)
      } else {
        let center = offset(base, Double.random(in: 0..<360, using: &generator), Double.random(in: 0...50_000, using: &generator))
        let radius = [30.0, 3_000, 60_000, 400_000][step % 4]
        monitor.add(try Region(id: id, shape: .circle(center: center, radius: radius)))
      }
    }
    var expected: [Int64: [Int32]] = [:]
    var expectedCoarse: [Int64: [Int32]] = [:]
    var expectedGlobal: [Int32] = []
    for (slot, entry) in monitor.entries.enumerated() {
      guard let entry else { continue }
      if let keys = RegionIndex.keys(of: entry.box, cellsPerDegree: RegionIndex.fineCellsPerDegree, limit: RegionIndex.maxCellsPerRegion) {
        for key in keys { expected[key, default: []].append(Int32(slot)) }
      } else if let keys = RegionIndex.keys(of: entry.box, cellsPerDegree: RegionIndex.coarseCellsPerDegree, limit: RegionIndex.maxCellsPerRegion) {
        for key in keys { expectedCoarse[key, default: []].append(Int32(slot)) }
      } else {
        expectedGlobal.append(Int32(slot))
      }
    }
    #expect(monitor.index.fine.mapValues { $0.sorted() } == expected)
    #expect(monitor.index.coarse.mapValues { $0.sorted() } == expectedCoarse)
    #expect(monitor.index.global.sorted() == expectedGlobal)
    #expect(monitor.slots.count == monitor.count)
    #expect(monitor.attention.count == monitor.count)
    // One far fix twice settles everything outside.
    let far = Coordinate(latitude: -45, longitude: 170)
    let t0: Int64 = 1_764_500_000_000
    _ = monitor.update(with: location(far, time: t0, error95: 5), now: t0)
    _ = monitor.update(with: location(far, time: t0 + 1000, error95: 5), now: t0 + 1000)
    #expect(monitor.attention.isEmpty)
    #expect(monitor.statuses.allSatisfy { $0.state == .outside })
  }
}

@Suite struct ConfigurationTests {
  @Test func defaultsAreValid() throws {
    try RegionMonitorConfiguration.default.validate()
    #expect(RegionMonitorConfiguration.default.normalized == .default)
    #expect(RegionMonitorConfiguration.default.errorFraction == 1.0)
    #expect(RegionMonitorConfiguration.default.minimumMargin == 5)
    #expect(RegionMonitorConfiguration.default.confirmations == 2)
    #expect(RegionMonitorConfiguration.default.maximumFixAge == 10)
    #expect(RegionMonitorConfiguration.default.outageReset == 60)
  }

  @Test func outOfRangeValuesAreRefusedAndNormalized() {
    let bad = [
      RegionMonitorConfiguration(errorFraction: .nan), RegionMonitorConfiguration(minimumMargin: -1),
      RegionMonitorConfiguration(confirmations: 0), RegionMonitorConfiguration(maximumFixAge: .infinity),
      RegionMonitorConfiguration(outageReset: -0.5),
    ]
    for configuration in bad {
      #expect(throws: RegionError.self) { try configuration.validate() }
      #expect(configuration.normalized == .default)
      #expect(RegionMonitor(configuration: configuration).configuration == .default)
    }
  }
}

/// A fix with a poor (2 km) error deep inside a large polygon still decides: the distance is
/// computed out to the fix's margin, not only to 1 km.
@Suite struct LargeMarginTests {
  @Test func poorFixDeepInsideLargePolygonDecides() throws {
    let center = Coordinate(latitude: -1.2921, longitude: 36.8219)
    let region = try Region(id: "county", shape: .polygon(exterior: ring(around: center, radius: 30_000, count: 4_000), holes: []))
    var monitor = RegionMonitor()
    monitor.add(region)
    let t0: Int64 = 1_764_500_000_000
    var events: [RegionTransition] = []
    for k in 0..<2 {
      let time = t0 + Int64(k) * 1000
      events += monitor.update(with: location(center, time: time, error95: 2_000), now: time)
    }
    #expect(events.map(\.event) == [.enter])
    // The margin is 2,005 m: the distance is exact to beyond it (about 29.8 km to the nearest
    // edge).
    let distance = try #require(monitor.status(id: "county")?.distanceToBoundary)
    #expect(distance < -2_005)
  }
}
