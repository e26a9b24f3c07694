import FoundationEssentials
import LocationCore
import LocationTestKit
import NMEA
import Testing
import LocationModel
import LocationProtocol

#if canImport(Glibc)
  import Glibc
#endif

/// Collects the backend's events until `count` locations have arrived.
func collect(
  _ backend: some LocationBackend, locations count: Int
) async throws -> (locations: [Location], statuses: [(BackendStatus, String?)]) {
  var iterator = backend.events.makeAsyncIterator()
  try await backend.start()
  var locations: [Location] = []
  var statuses: [(BackendStatus, String?)] = []
  while locations.count < count, let event = await iterator.next() {
    switch event {
    case .location(let location): locations.append(location)
    case .status(let status, let detail): statuses.append((status, detail))
    case .error: continue
    }
  }
  await backend.stop()
  return (locations, statuses)
}

func temporaryFile(named name: String, contents: String) throws -> String {
  let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
    "locationcore-tests-\(UInt64.random(in: 0...UInt64.max))")
  try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  let url = directory.appendingPathComponent(name)
  try contents.write(to: url, atomically: true, encoding: .utf8)
  return url.path
}

/// The simulator's own geometry: great circles on the sphere of radius `Geodesy.earthRadius`
/// (see `SimulatedRoute`). Its steps, leg lengths and courses are measured with it; measuring them
/// on the WGS84 ellipsoid would differ by up to 0.5% by design.
private enum Sphere {
  /// Haversine distance, metres.
  static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
    let lat1 = a.latitude * .pi / 180
    let lat2 = b.latitude * .pi / 180
    let dLat = lat2 - lat1
    let dLon = (b.longitude - a.longitude) * .pi / 180
    let h = sin(dLat / 2) * sin(dLat / 2) + cos(lat1) * cos(lat2) * sin(dLon / 2) * sin(dLon / 2)
    return 2 * Geodesy.earthRadius * asin(min(1, h.squareRoot()))
  }

  /// Initial great-circle course from `a` to `b`, degrees true, `0..<360`.
  static func bearing(_ a: Coordinate, _ b: Coordinate) -> Double {
    let lat1 = a.latitude * .pi / 180
    let lat2 = b.latitude * .pi / 180
    let dLon = (b.longitude - a.longitude) * .pi / 180
    let y = sin(dLon) * cos(lat2)
    let x = cos(lat1) * sin(lat2) - sin(lat1) * cos(lat2) * cos(dLon)
    let degrees = atan2(y, x) * 180 / .pi
    return degrees < 0 ? degrees + 360 : degrees
  }
}

@Suite(.timeLimit(.minutes(3)))
struct SimulatedBackendTests {
  @Test func sameSeedGivesTheSameFixesAndAnotherSeedDoesNot() async throws {
    func run(seed: UInt64) async throws -> [Location] {
      let backend = SimulatedBackend(
        parameters: SimulationParameters(noiseSigma: 3, seed: seed),
        clock: VirtualClock(autoAdvance: true))
      return try await collect(backend, locations: 200).locations
    }
    let first = try await run(seed: 42)
    let second = try await run(seed: 42)
    let other = try await run(seed: 43)
    #expect(first.count == 200)
    // The same fixes; each run is its own segment of the simulation's timeline.
    #expect(first.map(\.fix) == second.map(\.fix))
    #expect(Set(first.map(\.provenance.timelineSegment)).count == 1)
    #expect(first.first?.provenance.timelineSegment != second.first?.provenance.timelineSegment)
    #expect(first.map(\.fix.coordinate) != other.map(\.fix.coordinate))
  }

  @Test func fixesLieOnTheRouteWithinFourSigmaOfDOPTimesTheRangeError() throws {
    let sigma = 3.0
    let parameters = SimulationParameters(speed: 12, rate: 5, noiseSigma: sigma, seed: 7)
    var generator = SimulatedFixGenerator(parameters: parameters, startTime: 1_776_000_000_000)
    var normalized = 0.0
    var count = 0
    for _ in 0..<2000 {
      guard let epoch = generator.next(), let coordinate = epoch.fix.coordinate,
        let hdop = epoch.fix.hdop
      else {
        Issue.record("generator produced no position")
        return
      }
      // The horizontal error has covariance UERE² · Q: its mean square is (UERE · HDOP)².
      let scale = sigma * hdop
      #expect(parameters.route.distance(from: coordinate) <= 4 * scale)
      #expect(parameters.route.distance(from: epoch.truePosition) < 0.01)
      let error = Geodesy.distance(coordinate, epoch.truePosition)
      normalized += error * error / (scale * scale)
      count += 1
    }
    // E[r² / (UERE · HDOP)²] = 1: the noise is really there and follows the geometry.
    let meanSquare = normalized / Double(count)
    #expect(abs(meanSquare - 1) < 0.1, "mean normalized square error \(meanSquare)")
  }

  @Test func movesAtTheGivenSpeedAndRateWithCourseAlongTheLeg() throws {
    let route = SimulatedRoute(waypoints: [
      Coordinate(latitude: 3.1386, longitude: 101.6044),
      Coordinate(latitude: 3.1486, longitude: 101.6044),
    ])
    var generator = SimulatedFixGenerator(
      parameters: SimulationParameters(route: route, speed: 12, rate: 4, noiseSigma: 0),
      startTime: 1_000_000)
    let epochs = (0..<5).compactMap { _ in generator.next() }
    #expect(epochs.map(\.fix.time) == [1_000_000, 1_000_250, 1_000_500, 1_000_750, 1_001_000])
    for (a, b) in zip(epochs, epochs.dropFirst()) {
      let step = Sphere.distance(try #require(a.fix.coordinate), try #require(b.fix.coordinate))
      #expect(abs(step - 3.0) < 0.01)  // 12 m/s at 4 Hz
    }
    // Due north along a meridian (a great circle): course 0 up to rounding.
    #expect(
      epochs.allSatisfy {
        abs($0.fix.courseOverGround ?? 99) < 1e-9 && $0.fix.speedOverGround == 12
      })
    #expect(
      epochs.allSatisfy {
        $0.fix.mode == .fix3D && $0.fix.satellitesUsed == $0.sky.filter(\.used).count
          && ($0.fix.satellitesUsed ?? 0) >= 4
      })
  }

  @Test func anOutageYieldsNoFixesAndAStatusChange() async throws {
    let parameters = SimulationParameters(
      noiseSigma: 1, outages: [SimulationOutage(start: .seconds(5), end: .seconds(10))])
    let clock = VirtualClock(wallOrigin: 2_000_000_000_000, autoAdvance: true)
    let (locations, statuses) = try await collect(
      SimulatedBackend(parameters: parameters, clock: clock), locations: 15)
    let seconds = locations.compactMap { $0.fix.time.map { ($0 - 2_000_000_000_000) / 1000 } }
    #expect(seconds == Array(0..<5) + Array(10..<20))
    #expect(statuses.map(\.0) == [.connected, .noFix, .connected])
    #expect(statuses[1].1 == "outage")
  }

  @Test func scheduledDegradationChangesTheFixMode() async throws {
    let parameters = SimulationParameters(
      noiseSigma: 0,
      modeChanges: [
        SimulationModeChange(at: .seconds(2), mode: .fix2D),
        SimulationModeChange(at: .seconds(4), mode: .noFix),
        SimulationModeChange(at: .seconds(5), mode: .fix3D),
      ])
    let (locations, statuses) = try await collect(
      SimulatedBackend(parameters: parameters, clock: VirtualClock(autoAdvance: true)), locations: 7
    )
    #expect(locations.map(\.fix.mode) == [.fix3D, .fix3D, .fix2D, .fix2D, .noFix, .fix3D, .fix3D])
    #expect(
      locations.map { $0.fix.coordinate != nil } == [true, true, true, true, false, true, true])
    #expect(locations[2].fix.altitudeMSL == nil && locations[0].fix.altitudeMSL != nil)
    #expect(statuses.map(\.0) == [.connected, .noFix, .connected])
  }

  @Test(arguments: ["rte", "trk", "wpt"])
  func followsARouteFromAGPXFile(kind: String) async throws {
    let points = [(3.1000, 101.6000, 10.0), (3.1010, 101.6000, 20.0), (3.1010, 101.6010, 30.0)]
    let body: String
    let pointXML = { (tag: String) in
      points.map { "<\(tag) lat=\"\($0.0)\" lon=\"\($0.1)\"><ele>\($0.2)</ele></\(tag)>" }.joined(
        separator: "\n")
    }
    switch kind {
    case "rte": body = "<rte><name>r</name>\n\(pointXML("rtept"))\n</rte>"
    case "trk": body = "<trk><trkseg>\n\(pointXML("trkpt"))\n</trkseg></trk>"
    default: body = pointXML("wpt")
    }
    let gpx = """
      <?xml version="1.0" encoding="UTF-8"?>
      <gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">
      \(body)
      </gpx>
      """
    let path = try temporaryFile(named: "route.gpx", contents: gpx)
    let options = try SimulatedBackend.Options.parse("simulate:\(path)?noise=0&speed=20")
    let backend = try SimulatedBackend(options: options, clock: VirtualClock(autoAdvance: true))
    #expect(backend.parameters.route.waypoints.count == 3)
    let (locations, _) = try await collect(backend, locations: 30)
    let first = try #require(locations.first?.fix.coordinate)
    #expect(abs(first.latitude - 3.1) < 1e-9 && abs(first.longitude - 101.6) < 1e-9)
    #expect(locations.first?.fix.altitudeMSL == 10)
    for location in locations {
      let coordinate = try #require(location.fix.coordinate)
      #expect(backend.parameters.route.distance(from: coordinate) < 0.01)
    }
    // 20 m/s: after 5 s, 100 m north along the first leg (111.2 m long); after 10 s, 200 m along
    // the route, that is 88.8 m east along the second leg.
    let metresPerDegree = Geodesy.earthRadius * .pi / 180
    let five = try #require(locations[5].fix.coordinate)
    #expect(
      abs(five.latitude - (3.1 + 100 / metresPerDegree)) < 1e-7
        && abs(five.longitude - 101.6) < 1e-9)
    #expect(abs(try #require(locations[5].fix.courseOverGround)) < 1e-9)
    let ten = try #require(locations[10].fix.coordinate)
    let east = 200 - 0.001 * metresPerDegree
    #expect(abs(ten.latitude - 3.101) < 1e-7)
    #expect(abs(ten.longitude - (101.6 + east / (metresPerDegree * cos(3.1 * .pi / 180)))) < 1e-7)
    // The great circle eastwards from 3.101 N heads 0.00002 degrees north of east there.
    #expect(abs(try #require(locations[10].fix.courseOverGround) - 90) < 1e-4)
    #expect(locations.allSatisfy { $0.provenance.source == path && $0.provenance.isSimulated })
  }

  @Test func gpxErrorsAreTypedAndExplained() throws {
    let malformed = try temporaryFile(
      named: "bad.gpx", contents: "<gpx><rte><rtept lat=\"1\" lon=\"2\"/></rte")
    #expect(throws: GPXError.self) { try GPXReader.points(contentsOf: malformed) }
    let empty = try temporaryFile(named: "empty.gpx", contents: "<gpx version=\"1.1\"></gpx>")
    #expect(throws: GPXError.noPoints) { try GPXReader.points(contentsOf: empty) }
    let outOfRange = try temporaryFile(
      named: "range.gpx", contents: "<gpx>\n<wpt lat=\"91\" lon=\"0\"/></gpx>")
    #expect(throws: GPXError.invalidCoordinate(line: 2, latitude: "91", longitude: "0")) {
      try GPXReader.points(contentsOf: outOfRange)
    }
    #expect(throws: GPXError.self) { try GPXReader.points(contentsOf: "/nonexistent/route.gpx") }
  }

  /// A route "file" that is a FIFO or a directory must be refused at once: a blocking read of a
  /// FIFO nobody writes would hang the daemon's start (the config names the route).
  @Test(.timeLimit(.minutes(3)))
  func gpxRouteThatIsNotARegularFileIsRefusedAtOnce() throws {
    let file = try temporaryFile(named: "route.gpx", contents: "")
    let directory = String(file.dropLast("/route.gpx".count))
    let fifo = directory + "/fifo.gpx"
    #expect(mkfifo(fifo, 0o600) == 0)
    for path in [fifo, directory] {
      #expect(throws: GPXError.unreadable(path: path, message: "not a regular file")) {
        try GPXReader.points(contentsOf: path)
      }
    }
  }

  @Test func parsesSimulateURIs() throws {
    let options = try SimulatedBackend.Options.parse(
      "simulate?rate=5&speed=12&noise=3&seed=42&outage=60-90,120-130&mode=300:2d,360:nofix")
    #expect(options.routeFile == nil)
    #expect(options.rate == 5 && options.speed == 12 && options.noise == 3 && options.seed == 42)
    #expect(
      options.outages == [
        SimulationOutage(start: .seconds(60), end: .seconds(90)),
        SimulationOutage(start: .seconds(120), end: .seconds(130)),
      ])
    #expect(
      options.modeChanges == [
        SimulationModeChange(at: .seconds(300), mode: .fix2D),
        SimulationModeChange(at: .seconds(360), mode: .noFix),
      ])
    #expect(
      try SimulatedBackend.Options.parse("simulate:/srv/route.gpx").routeFile == "/srv/route.gpx")
    #expect(
      throws: BackendURIError.invalidValue(
        key: "rate", value: "11", expected: "a rate in Hz within 1...10")
    ) {
      try SimulatedBackend.Options.parse("simulate?rate=11")
    }
    #expect(throws: BackendURIError.self) {
      try SimulatedBackend.Options.parse("simulate?outage=90-60")
    }
    #expect(throws: BackendURIError.self) {
      try SimulatedBackend.Options.parse("simulate?mode=10:4d")
    }
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?seed=-1") }
    // Found by fuzzing: times too large for a Duration trapped instead of being refused.
    #expect(throws: BackendURIError.self) {
      try SimulatedBackend.Options.parse("simulate?outage=10-2099999999999999999999999999999")
    }
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?outage=1e300-1e301") }
    // END above START by less than a Duration's resolution: an outage that would end where it
    // begins (found by the config fuzz harness). The second END is START itself as a Double.
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?outage=0-0.00000000000000000004") }
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?outage=1-1.0000000000000000001") }
    // A START far beyond END and the limit is refused before it becomes a Duration (which traps).
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?outage=1e300-5") }
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?outage=100000000000000000000-5") }
    let shortest = try SimulatedBackend.Options.parse("simulate?outage=0-0.000000001").outages
    #expect(shortest.map { $0.end > $0.start } == [true])
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?mode=1e300:2d") }
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?outage=0-1000000001") }
    #expect(
      try SimulatedBackend.Options.parse("simulate?outage=0-1000000000&mode=1000000000:2d").outages
        == [SimulationOutage(start: .zero, end: .seconds(1_000_000_000))])
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulated") }
  }

  @Test func defaultLoopIsAroundKualaLumpurAndClosed() {
    let route = SimulatedRoute.defaultLoop
    #expect(route.length > 1000 && route.length < 2500)
    let centre = Coordinate(latitude: 3.1386, longitude: 101.6044)
    #expect(route.waypoints.allSatisfy { Geodesy.distance($0, centre) < 1000 })
    let start = route.point(atDistance: 0).coordinate
    let lap = route.point(atDistance: route.length).coordinate
    #expect(Geodesy.distance(start, lap) < 1e-6)
  }

  @Test func seededGeneratorIsReproducibleAndGaussian() {
    var a = SeededGenerator(seed: 99)
    var b = SeededGenerator(seed: 99)
    #expect((0..<100).map { _ in a.next() } == (0..<100).map { _ in b.next() })
    var gaussian = SeededGenerator(seed: 5)
    var sum = 0.0
    var sumOfSquares = 0.0
    for _ in 0..<10_000 {
      let (x, y) = gaussian.nextGaussianPair()
      sum += x + y
      sumOfSquares += x * x + y * y
    }
    let mean = sum / 20_000
    let variance = sumOfSquares / 20_000 - mean * mean
    #expect(abs(mean) < 0.03)
    #expect(abs(variance - 1) < 0.05)
  }
}

/// Routes follow great circles, wherever they are: across the antimeridian, over and near the poles.
@Suite struct GeodesicRouteTests {
  /// Fixes of `route` at `speed` m/s, one per second, without noise.
  func fixes(_ route: SimulatedRoute, speed: Double, count: Int) -> [Fix] {
    var generator = SimulatedFixGenerator(
      parameters: SimulationParameters(route: route, speed: speed, rate: 1, noiseSigma: 0),
      startTime: 1_000_000)
    return (0..<count).compactMap { _ in generator.next()?.fix }
  }

  /// Each step between consecutive fixes is `speed` metres (shorter only where the route turns
  /// back at a waypoint) and on the route.
  func expectSteadyProgress(_ route: SimulatedRoute, _ fixes: [Fix], speed: Double) throws {
    var turns = 0
    for (a, b) in zip(fixes, fixes.dropFirst()) {
      let from = try #require(a.coordinate)
      let to = try #require(b.coordinate)
      let step = Sphere.distance(from, to)
      #expect(step < 1.01 * speed, "\(from) -> \(to)")
      if abs(step - speed) > 0.01 * speed { turns += 1 }
      #expect(route.distance(from: to) < 0.01)
    }
    #expect(turns <= 2)
  }

  @Test func aRouteAcrossTheAntimeridianTakesTheShortWay() throws {
    let a = Coordinate(latitude: 10, longitude: 179.999)
    let b = Coordinate(latitude: 10, longitude: -179.999)
    let route = SimulatedRoute(gpx: [GPXPoint(coordinate: a), GPXPoint(coordinate: b)])
    let leg = Sphere.distance(a, b)
    #expect(abs(leg - 219.0) < 0.5)
    #expect(abs(route.length - 2 * leg) < 1e-6)
    let fixes = fixes(route, speed: 10, count: 40)
    try expectSteadyProgress(route, fixes, speed: 10)
    #expect(fixes.allSatisfy { abs($0.coordinate?.longitude ?? 0) > 179.998 })
    // East across the line, then back west on the closing leg.
    let course = try #require(fixes[0].courseOverGround)
    #expect(abs(course - Sphere.bearing(a, b)) < 1e-6 && abs(course - 90) < 0.001)
    let back = try #require(fixes[30].courseOverGround)
    #expect(abs(back - 270) < 0.001)
    let crossed = try #require(fixes[15].coordinate)
    #expect(crossed.longitude < -179.999 + 1e-9 || crossed.longitude > 179.999)
  }

  @Test func aRouteOverThePoleGoesOverIt() throws {
    let a = Coordinate(latitude: 89.9, longitude: 0)
    let b = Coordinate(latitude: 89.9, longitude: 180)
    let route = SimulatedRoute(waypoints: [a, b])
    let leg = Sphere.distance(a, b)
    #expect(abs(leg - 0.2 * Geodesy.earthRadius * .pi / 180) < 1)
    #expect(abs(route.length - 2 * leg) < 1e-3)
    let fixes = fixes(route, speed: 500, count: 60)
    try expectSteadyProgress(route, fixes, speed: 500)
    // Northwards up the meridian of 0, over the pole, southwards down the meridian of 180.
    #expect(abs(try #require(fixes[1].courseOverGround)) < 1e-6)
    #expect(abs(try #require(fixes[1].coordinate?.longitude)) < 1e-9)
    let middle = route.point(atDistance: leg / 2).coordinate
    #expect(abs(middle.latitude - 90) < 1e-9)
    #expect(abs(try #require(fixes[40].courseOverGround) - 180) < 1e-6)
    #expect(abs(abs(try #require(fixes[40].coordinate?.longitude)) - 180) < 1e-9)
  }

  @Test func aHighLatitudeLegFollowsTheGreatCircleNotTheParallel() throws {
    let a = Coordinate(latitude: 80, longitude: -170)
    let b = Coordinate(latitude: 80, longitude: 170)
    let route = SimulatedRoute(waypoints: [a, b])
    #expect(abs(route.length - 2 * Sphere.distance(a, b)) < 1e-3)
    let start = route.point(atDistance: 0)
    #expect(abs(try #require(start.course) - Sphere.bearing(a, b)) < 1e-6)
    // The great circle between two points on a parallel bulges polewards.
    let middle = route.point(atDistance: Sphere.distance(a, b) / 2).coordinate
    #expect(middle.latitude > 80.1)
    #expect(abs(abs(middle.longitude) - 180) < 1e-9)
    try expectSteadyProgress(route, fixes(route, speed: 1000, count: 20), speed: 1000)
  }

  @Test func noiseNearThePoleStaysAValidCoordinateNearTheRoute() throws {
    let route = SimulatedRoute(waypoints: [Coordinate(latitude: 90, longitude: 0)])
    var generator = SimulatedFixGenerator(
      parameters: SimulationParameters(route: route, speed: 0, rate: 1, noiseSigma: 5),
      startTime: 1_000_000)
    for _ in 0..<50 {
      let coordinate = try #require(generator.next()?.fix.coordinate)
      #expect(coordinate.isValid)
      #expect(Geodesy.distance(coordinate, route.waypoints[0]) < 40)
    }
  }

  @Test func gpxElevationIsUsedWhenPresentAndInterpolatedForPointsWithout() throws {
    let one = SimulatedRoute(gpx: [
      GPXPoint(coordinate: Coordinate(latitude: 3.1, longitude: 101.6), elevation: 5),
      GPXPoint(coordinate: Coordinate(latitude: 3.101, longitude: 101.6)),
    ])
    #expect(one.elevations == [5, 5])
    let fix = try #require(fixes(one, speed: 10, count: 1).first)
    #expect(fix.altitudeMSL == 5)
    let single = SimulatedRoute(gpx: [
      GPXPoint(coordinate: Coordinate(latitude: 3.1, longitude: 101.6), elevation: 5)
    ])
    #expect(try #require(fixes(single, speed: 0, count: 1).first).altitudeMSL == 5)
    // Three points, the middle one without <ele>: halfway between its neighbours by distance.
    let three = SimulatedRoute(gpx: [
      GPXPoint(coordinate: Coordinate(latitude: 0, longitude: 0), elevation: 10),
      GPXPoint(coordinate: Coordinate(latitude: 0.001, longitude: 0)),
      GPXPoint(coordinate: Coordinate(latitude: 0.002, longitude: 0), elevation: 30),
    ])
    let middle = try #require(three.elevations?[1])
    #expect(abs(middle - 20) < 1e-6)
    #expect(
      SimulatedRoute(gpx: [GPXPoint(coordinate: Coordinate(latitude: 1, longitude: 1))])
        .elevations == nil)
  }

  /// Antipodal consecutive points have no single great circle between them: a GPX route with
  /// such a leg (the closing leg included) is refused, naming the two points' lines.
  @Test func gpxRouteWithAnAntipodalLegIsRefused() throws {
    let cases: [(String, GPXError)] = [
      (
        "<gpx><rte>\n<rtept lat=\"0\" lon=\"0\"/>\n<rtept lat=\"0\" lon=\"180\"/>\n</rte></gpx>",
        .antipodalLeg(fromLine: 2, toLine: 3)
      ),
      (
        "<gpx><trk><trkseg>\n<trkpt lat=\"90\" lon=\"0\"/>\n<trkpt lat=\"-90\" lon=\"0\"/>\n</trkseg></trk></gpx>",
        .antipodalLeg(fromLine: 2, toLine: 3)
      ),
      // Only the closing leg, from the last point back to the first, is antipodal.
      (
        "<gpx>\n<wpt lat=\"10\" lon=\"20\"/>\n<wpt lat=\"45\" lon=\"90\"/>\n<wpt lat=\"-10\" lon=\"-160\"/>\n</gpx>",
        .antipodalLeg(fromLine: 4, toLine: 2)
      ),
    ]
    for (text, error) in cases {
      let path = try temporaryFile(named: "antipodal.gpx", contents: text)
      #expect(throws: error) { try GPXReader.points(contentsOf: path) }
      #expect(throws: error) { try SimulatedBackend.Options(routeFile: path).parameters() }
    }
    #expect(GPXError.antipodalLeg(fromLine: 2, toLine: 3).description.contains("lines 2 and 3"))
  }

  /// A route built in code with antipodal waypoints still moves: northwards along the first
  /// waypoint's meridian, over the pole, to the antipode.
  @Test func anAntipodalLegInCodeIsTravelledOverThePole() throws {
    let a = Coordinate(latitude: 0, longitude: 0)
    let b = Coordinate(latitude: 0, longitude: 180)
    let route = SimulatedRoute(waypoints: [a, b])
    let half = Geodesy.earthRadius * .pi
    #expect(abs(route.length - 2 * half) < 1e-3)
    let start = route.point(atDistance: 1000)
    #expect(abs(start.coordinate.latitude - 1000 / Geodesy.earthRadius * 180 / .pi) < 1e-9)
    #expect(abs(try #require(start.course)) < 1e-9)
    let quarter = route.point(atDistance: half / 2).coordinate
    #expect(abs(quarter.latitude - 90) < 1e-6)
    let end = route.point(atDistance: half - 1).coordinate
    #expect(Geodesy.distance(end, b) < 2)
    let fixes = fixes(route, speed: 1000, count: 3)
    #expect(abs(try #require(fixes[2].coordinate?.latitude) - 2000 / Geodesy.earthRadius * 180 / .pi) < 1e-9)
  }

  /// `<ele>` is an `xsd:decimal` within the range the URI's `altitude` accepts; anything else is
  /// refused with the line of the element, never dropped or passed on.
  @Test func gpxElevationIsValidated() throws {
    for bad in ["abc", "1e30", "-1e6", "100000.5", "-1000.1", "", "nan", "inf", "0x10", "1e2", "1-"] {
      let path = try temporaryFile(
        named: "ele.gpx",
        contents: "<gpx>\n<wpt lat=\"1\" lon=\"2\">\n<ele>\(bad)</ele></wpt></gpx>")
      #expect(throws: GPXError.invalidElevation(line: 3, value: bad), "\(bad)") {
        try GPXReader.points(contentsOf: path)
      }
    }
    for (good, value) in [(" 12.5 ", 12.5), ("-1000", -1000), ("100000", 100_000), ("+7", 7), (".5", 0.5)] {
      let path = try temporaryFile(
        named: "ele.gpx", contents: "<gpx><wpt lat=\"1\" lon=\"2\"><ele>\(good)</ele></wpt></gpx>")
      #expect(try GPXReader.points(contentsOf: path).first?.elevation == value)
    }
    #expect(GPXError.invalidElevation(line: 3, value: "abc").description.contains("-1000...100000"))
  }

  /// `lat` and `lon` are `xsd:decimal` too: hexadecimal or exponent forms are refused.
  @Test func gpxCoordinatesMustBeDecimal() throws {
    for (lat, lon) in [("0x10", "2"), ("1", "1e1"), ("nan", "0"), ("1", "")] {
      let path = try temporaryFile(
        named: "coordinate.gpx", contents: "<gpx>\n<wpt lat=\"\(lat)\" lon=\"\(lon)\"/></gpx>")
      #expect(throws: GPXError.invalidCoordinate(line: 2, latitude: lat, longitude: lon)) {
        try GPXReader.points(contentsOf: path)
      }
    }
  }

  /// A route of one point, or of one point repeated, is a fixed position: speed 0, no course,
  /// whatever speed the URI gives.
  @Test func aStationaryRouteReportsNoMotion() throws {
    let here = Coordinate(latitude: 3.1, longitude: 101.6)
    for route in [SimulatedRoute(waypoints: [here]), SimulatedRoute(waypoints: [here, here, here])] {
      for fix in fixes(route, speed: 10, count: 3) {
        #expect(fix.speedOverGround == 0)
        #expect(fix.courseOverGround == nil)
        #expect(fix.coordinate == here)
      }
    }
  }

  /// The backend's status says the speed it moves at: 0 on a stationary route.
  @Test func theStatusOfAStationaryRouteSaysItStandsStill() async throws {
    let here = Coordinate(latitude: 3.1, longitude: 101.6)
    let backend = SimulatedBackend(
      parameters: SimulationParameters(route: SimulatedRoute(waypoints: [here, here]), speed: 10),
      clock: VirtualClock(), source: "still.gpx")
    var events = backend.events.makeAsyncIterator()
    try await backend.start()
    #expect(await nextStatus(.connected, &events) == .some("simulating still.gpx at 0.0 m/s"))
    let location = try #require(await nextLocation(&events))
    #expect(location.fix.speedOverGround == 0)
    await backend.stop()
  }

  /// Due north, the great circle's course can come out a hair under 360: every written course
  /// reads 0, never 360 (TPV track, RMC and VTG course), and an azimuth likewise.
  @Test func aCourseDueNorthIsWrittenAsZeroNot360() throws {
    let route = SimulatedRoute(waypoints: [
      Coordinate(latitude: 10, longitude: 10), Coordinate(latitude: 10.001, longitude: 10),
    ])
    var fix = try #require(fixes(route, speed: 10, count: 1).first)
    var json: [UInt8] = []
    GPSDJSON.appendTPV(fix, to: &json)
    let text = String(decoding: json, as: UTF8.self)
    #expect(text.contains("\"track\":0.0000"), "\(text)")
    fix.courseOverGround = 359.999_999
    json = []
    GPSDJSON.appendTPV(fix, to: &json)
    #expect(String(decoding: json, as: UTF8.self).contains("\"track\":0.0000"))
    let encoder = NMEAEncoder()
    #expect(encoder.rmcBody(fix).split(separator: ",", omittingEmptySubsequences: false)[8] == "0.00")
    #expect(encoder.vtgBody(fix).split(separator: ",", omittingEmptySubsequences: false)[1] == "0.00")
    fix.satellites = [Satellite(constellation: .gps, prn: 5, elevation: 40, azimuth: 359.7, snr: 40, used: true)]
    #expect(NMEAEncoder.gsvBodies(fix).first?.split(separator: ",")[6] == "000")
    json = []
    fix.satellites[0].azimuth = 359.97
    GPSDJSON.appendSKY(fix, to: &json)
    #expect(String(decoding: json, as: UTF8.self).contains("\"az\":0.0"))
    #expect(CompassAngle.rounded(-0.000_01, places: 4) == 0)
    #expect(CompassAngle.rounded(725.5, places: 1) == 5.5)
    #expect(CompassAngle.rounded(359.94, places: 1) == 359.9)
  }
}
