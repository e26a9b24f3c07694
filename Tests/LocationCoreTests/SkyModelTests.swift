import Foundation
import GNSSSky
import Glibc
import LocationCore
import LocationModel
import NMEA
import Testing

/// The sky model, the receiver's start-up and obstruction, through the generator and the URI.
struct SkyModelTests {
  /// 2025-04-16T12:00:00Z, the week of the bundled almanac.
  static let almanacWeek: Int64 = 1_744_804_800_000

  @Test func theBundledAlmanacParsesAsShipped() throws {
    let almanac = try GPSAlmanac.parseYUMA(BundledAlmanac.yuma)
    #expect(almanac.records.count == 31)
    #expect(almanac.records.map(\.prn) == Array(1...20) + Array(22...32))
    #expect(almanac.records.allSatisfy { $0.week == 314 && $0.timeOfApplicability == 319_488 })
    let first = try #require(almanac.records.first)
    #expect(first.eccentricity == 0.4820823669e-3 && first.sqrtSemiMajorAxis == 5153.677734)
    #expect(GPSAlmanac.bundled == almanac)
    // Week 314 modulo 1024 is resolved to the era of the simulated time.
    #expect(almanac.fullWeek(near: OrbitConstants.gpsSeconds(utcMilliseconds: Self.almanacWeek)) == 2362)
  }

  @Test(arguments: [
    ("ID:  01\n", AlmanacError.expectedHeader(line: 1, text: "ID:  01")),
    ("******** Week 314 almanac for PRN-01 ********\nID: 01\nHealth: 000\n", .truncatedRecord(line: 4, prn: 1)),
    ("******** Week 314 almanac for PRN-01 ********\nID: 01\nHealthy: 000\n", .unexpectedLabel(line: 3, expected: "Health", found: "Healthy")),
    ("******** Week 314 almanac for PRN-01 ********\nID: 33\n", .invalidValue(line: 2, label: "ID", value: "33", expected: "a PRN within 1...32")),
    ("******** Week 314 almanac for PRN-01 ********\nID: 01\nHealth: zero\n", .invalidValue(line: 3, label: "Health", value: "zero", expected: "a number")),
    ("", .empty),
  ])
  func badAlmanacsAreRefusedWithTheirLine(_ text: String, _ error: AlmanacError) {
    #expect(throws: error) { try GPSAlmanac.parseYUMA(text) }
  }

  @Test func aDuplicateOrMixedEpochIsRefused() throws {
    let records = BundledAlmanac.yuma.split(separator: "\n\n", omittingEmptySubsequences: true)
    let twice = records[0] + "\n\n" + records[0] + "\n"
    #expect(throws: AlmanacError.duplicatePRN(line: 17, prn: 1)) { try GPSAlmanac.parseYUMA(String(twice)) }
    let otherWeek = records[0] + "\n\n" + records[1].replacingOccurrences(of: "week:                        314", with: "week:                        315")
    #expect(throws: (any Error).self) { try GPSAlmanac.parseYUMA(String(otherWeek)) }
    // CRLF files are accepted.
    let crlf = records[0].split(separator: "\n").joined(separator: "\r\n") + "\r\n"
    #expect(try GPSAlmanac.parseYUMA(String(crlf)).records.count == 1)
  }

  @Test func anAlmanacFileIsReadByPathAndItsErrorsNameTheLine() throws {
    let path = "/tmp/locationd-sky-\(UInt32.random(in: 0...UInt32.max)).alm"
    let broken = BundledAlmanac.yuma.replacingOccurrences(of: "SQRT(A)  (m 1/2):           5153.668945", with: "SQRT(A)  (m 1/2):           oops")
    try writeFile(path, broken)
    defer { removeFile(path) }
    #expect(throws: AlmanacError.invalidValue(line: 23, label: "SQRT(A)  (m 1/2)", value: "oops", expected: "a number")) {
      try SimulatedBackend.Options.readAlmanac(path)
    }
    let options = try SimulatedBackend.Options.parse("simulate?almanac=\(path)")
    #expect(throws: GPXError.self) { try options.parameters() }
    try writeFile(path, String(BundledAlmanac.yuma.split(separator: "\n\n")[0]) + "\n")
    let one = try SimulatedBackend.Options.parse("simulate?almanac=\(path)&systems=gps").parameters()
    #expect(one.sky.almanac.records.map(\.prn) == [1])
  }

  /// Almanac errors speak of the almanac (not of a GPX file), a file past the limit says so in
  /// words, and a UTF-8 byte order mark at the start is accepted.
  @Test func almanacErrorsNameTheAlmanacAndABOMIsAccepted() throws {
    let path = "/tmp/locationd-sky-\(UInt32.random(in: 0...UInt32.max)).alm"
    defer { removeFile(path) }
    try writeFile(path, "\u{FEFF}" + String(BundledAlmanac.yuma.split(separator: "\n\n")[0]) + "\n")
    let one = try SimulatedBackend.Options.parse("simulate?almanac=\(path)&systems=gps").parameters()
    #expect(one.sky.almanac.records.map(\.prn) == [1])
    try writeFile(path, String(repeating: "x", count: SimulatedBackend.Options.maximumAlmanacBytes + 1))
    let options = try SimulatedBackend.Options.parse("simulate?almanac=\(path)")
    do {
      _ = try options.parameters()
      Issue.record("an almanac over 1 MiB was read")
    } catch {
      #expect(error.description == "cannot read almanac \(path): larger than 1 MiB")
    }
  }

  @Test func positionsAreOnGPSOrbitsAndLookAnglesAreConsistent() {
    let gps = OrbitConstants.gpsSeconds(utcMilliseconds: Self.almanacWeek)
    for record in GPSAlmanac.bundled.records {
      let p = record.position(gpsSeconds: gps, fullWeek: 2362)
      let radius = (p.x * p.x + p.y * p.y + p.z * p.z).squareRoot()
      // Semi-major axis about 26,560 km, eccentricity below 0.02.
      #expect(abs(radius - 26_560_000) < 0.025 * 26_560_000)
    }
    // A satellite straight above the receiver is at 90° elevation.
    let receiver = LookAngles.ecef(latitude: 45, longitude: 10, height: 0)
    let above = LookAngles.ecef(latitude: 45, longitude: 10, height: 20_000_000)
    let los = LookAngles.lineOfSight(from: receiver, latitude: 45, longitude: 10, to: above)
    #expect(abs(LookAngles.angles(east: los.east, north: los.north, up: los.up).elevation - 90) < 1e-6)
  }

  @Test func dopsOfAKnownGeometry() throws {
    // Four satellites: zenith and three at 0° elevation 120° apart. G^T G is diagonal-ish; the
    // textbook values: HDOP = 2/sqrt(3) * ... computed here from the closed form of Q.
    let directions: [(east: Double, north: Double, up: Double)] = [
      (0, 0, 1), (0, 1, 0), (0.8660254037844386, -0.5, 0), (-0.8660254037844386, -0.5, 0),
    ]
    let dop = try #require(DilutionOfPrecision.compute(directions: directions))
    // G^T G = diag(1.5, 1.5, 1, 4) with the up/clock cross term 1 (the zenith row); Q_EE = Q_NN =
    // 2/3, and the up/clock block [[1, -1], [-1, 4]]⁻¹ = [[4/3, 1/3], [1/3, 1/3]].
    #expect(abs(dop.horizontal - (4.0 / 3.0).squareRoot()) < 1e-12)
    #expect(abs((dop.vertical ?? 0) - (4.0 / 3.0).squareRoot()) < 1e-12)
    #expect(abs((dop.position ?? 0) - (8.0 / 3.0).squareRoot()) < 1e-12)
    // Three satellites give no 3D solution; coplanar ones are singular.
    #expect(DilutionOfPrecision.compute(directions: Array(directions.prefix(3))) == nil)
    #expect(DilutionOfPrecision.compute(directions: Array(repeating: (0, 0, 1), count: 5)) == nil)
  }

  @Test func theMaskAndTheCanyonHideWhatTheyShould() {
    let open = SkyModel(elevationMask: 5).satellites(
      latitude: 3.1386, longitude: 101.6044, height: 67, utcMilliseconds: Self.almanacWeek)
    #expect(open.allSatisfy { $0.visible && ($0.used == ($0.elevation >= 5)) || !$0.used })
    #expect(open.filter { $0.elevation < 5 }.allSatisfy { !$0.used })
    let street = 90.0
    let canyon = SkyModel(elevationMask: 5).satellites(
      latitude: 3.1386, longitude: 101.6044, height: 67, utcMilliseconds: Self.almanacWeek,
      obstruction: .urbanCanyon(streetAzimuth: street, wallElevation: 40))
    #expect(canyon.filter(\.used).count < open.filter(\.used).count)
    for satellite in canyon {
      let across = abs(sin((satellite.azimuth - street) * .pi / 180))
      let wall = atan(tan(40 * Double.pi / 180) * across) * 180 / .pi
      #expect(satellite.visible == (satellite.elevation >= wall))
    }
    let tunnel = SkyModel().satellites(
      latitude: 3.1386, longitude: 101.6044, height: 67, utcMilliseconds: Self.almanacWeek, obstruction: .tunnel)
    #expect(!tunnel.isEmpty && tunnel.allSatisfy { !$0.visible && !$0.used })
  }

  @Test func aTunnelLosesTheFixAndReacquiresWithinTheConfiguredDelay() throws {
    // The default loop's leg 2 is a tunnel; 20 m/s at 10 Hz.
    let options = try SimulatedBackend.Options.parse(
      "simulate?speed=20&rate=10&obstruction=2:tunnel&reacquire=2-4&seed=3")
    let parameters = try options.parameters()
    var generator = SimulatedFixGenerator(parameters: parameters, startTime: Self.almanacWeek)
    var inside = 0
    var exitedAt: Double?
    var reacquiredAt: Double?
    for _ in 0..<1200 {
      let next = generator.next()
      let epoch = try #require(next)
      let seconds = Double(epoch.elapsed.components.seconds) + Double(epoch.elapsed.components.attoseconds) / 1e18
      if epoch.obstruction == .tunnel {
        inside += 1
        #expect(epoch.fix.mode == .noFix && epoch.fix.coordinate == nil && epoch.fix.satellites.isEmpty)
        // What the receiver sends: status V and empty position fields.
        let rmc = NMEAEncoder().rmcBody(epoch.fix)
        #expect(rmc.split(separator: ",", omittingEmptySubsequences: false)[2] == "V")
        exitedAt = nil
        reacquiredAt = nil
      } else if inside > 0 {
        if exitedAt == nil { exitedAt = seconds }
        if reacquiredAt == nil, epoch.fix.mode.hasPosition { reacquiredAt = seconds }
      }
      if reacquiredAt != nil { break }
    }
    #expect(inside > 10, "epochs in the tunnel: \(inside)")
    let exit = try #require(exitedAt)
    let back = try #require(reacquiredAt)
    #expect(back - exit >= 2 - 0.1 && back - exit <= 4 + 0.1, "reacquired \(back - exit) s after the exit")
  }

  @Test(arguments: [ReceiverStart.cold, .warm, .hot])
  func startUpSendsNoFixUntilTheTimeToFirstFix(start: ReceiverStart) throws {
    let options = try SimulatedBackend.Options.parse("simulate?rate=5&start=\(start.rawValue)&seed=11")
    var generator = SimulatedFixGenerator(parameters: try options.parameters(), startTime: Self.almanacWeek)
    var firstFix: Double?
    for _ in 0..<300 {
      let next = generator.next()
      let epoch = try #require(next)
      let seconds = Double(epoch.elapsed.components.seconds) + Double(epoch.elapsed.components.attoseconds) / 1e18
      if epoch.fix.mode.hasPosition {
        firstFix = seconds
        break
      }
      let sentences = NMEAEncoder(sentences: [.rmc, .gga, .gsa, .gsv]).encode(epoch.fix)
      let rmc = try #require(sentences.first)
      // Status V, empty position; a cold start also has no time and no satellites yet.
      #expect(rmc.hasPrefix(start == .cold ? "$GPRMC,,V,,,,," : "$GPRMC,") && rmc.contains(",V,,,,,"))
      #expect(sentences.contains { $0.hasPrefix("$GPGGA,") && $0.contains(",,,,,0,") })
      if start == .cold { #expect(epoch.fix.satellites.isEmpty) }
      else { #expect(!epoch.fix.satellites.isEmpty && epoch.fix.satellites.allSatisfy { !$0.used && $0.snr == nil }) }
    }
    let ttff = try #require(firstFix)
    let range = start.defaultTimeToFirstFix
    #expect(ttff >= range.lowerBound && ttff <= range.upperBound + 0.2, "\(start) TTFF \(ttff) s")
  }

  @Test func fixModeFollowsTheCountOfUsedSatellites() throws {
    // A canyon so deep that few satellites remain: mode and the count agree at every epoch.
    let options = try SimulatedBackend.Options.parse(
      "simulate?speed=0&systems=gps&mask=30&obstruction=0:canyon:80")
    var generator = SimulatedFixGenerator(parameters: try options.parameters(), startTime: Self.almanacWeek)
    var modes: Set<FixMode> = []
    for _ in 0..<400 where modes.count < 3 {
      let next = generator.next()
      let epoch = try #require(next)
      let used = epoch.sky.filter(\.used).count
      let expected: FixMode = used >= 4 ? .fix3D : used == 3 ? .fix2D : .noFix
      #expect(epoch.fix.mode == expected)
      #expect(epoch.fix.satellitesUsed == (expected.hasPosition ? used : 0))
      if expected == .fix2D { #expect(epoch.fix.vdop == nil && epoch.fix.hdop != nil) }
      modes.insert(epoch.fix.mode)
      for _ in 0..<29 { _ = generator.next() }
    }
    #expect(modes.contains(.noFix))
  }

  @Test func skyURISettingsAreValidated() throws {
    let options = try SimulatedBackend.Options.parse(
      "simulate?mask=12.5&systems=gps,galileo&uere=4&start=warm&ttff=20-22&reacquire=3&obstruction=1:canyon:35,4:tunnel&time=2025-04-16T12:00:00Z")
    #expect(options.elevationMask == 12.5 && options.systems == [.gps, .galileo] && options.noise == 4)
    #expect(options.start == .warm && options.timeToFirstFix == 20...22 && options.reacquisition == 3...3)
    #expect(options.obstructions[4] == .tunnel && options.startTime == Self.almanacWeek)
    let parameters = try options.parameters()
    guard case .urbanCanyon(let street, let wall)? = parameters.obstructions[1] else {
      Issue.record("leg 1 is a canyon")
      return
    }
    // The default loop's leg 1 runs from (3.1406, 101.6064) to (3.1386, 101.6074): south-south-east.
    #expect(wall == 35 && street > 150 && street < 160)
    // A leg the route does not have is refused when the route is known.
    let legs = SimulatedRoute.defaultLoop.waypoints.count
    let beyond = try SimulatedBackend.Options.parse("simulate?obstruction=99:tunnel")
    #expect(throws: GPXError.obstructionBeyondRoute(leg: 99, legs: legs)) { try beyond.parameters() }
    #expect(try SimulatedBackend.Options.parse("simulate?obstruction=\(legs - 1):tunnel").parameters().obstructions.count == 1)
    for bad in [
      "simulate?mask=91", "simulate?systems=gps,gps", "simulate?systems=galileo,qzss", "simulate?start=lukewarm",
      "simulate?ttff=5-2", "simulate?obstruction=1:cave", "simulate?obstruction=x:tunnel",
      "simulate?obstruction=1:canyon:95", "simulate?time=2025-04-16", "simulate?time=2025-04-16T25:00:00Z",
      "simulate?almanac=", "simulate?obstruction=", "simulate?obstruction=0:tunnel,0:open",
      "simulate?obstruction=1:tunnel,",
      // Numbers are plain decimals, counts digits only, as everywhere.
      "simulate?ttff=0x10", "simulate?ttff=0x1p3", "simulate?ttff=0x1-0x10", "simulate?reacquire=0x10",
      "simulate?obstruction=0:canyon:0x1p4", "simulate?obstruction=+1:tunnel", "simulate?obstruction=18446744073709551615:tunnel", "simulate?seed=+5",
      "simulate?baud=+9600", "simulate?ttff=inf", "simulate?mode=0x10:2d", "simulate?outage=0x10-0x20",
    ] {
      #expect(throws: BackendURIError.self, "\(bad)") { try SimulatedBackend.Options.parse(bad) }
    }
    for bad in ["checksum:0x1p-3", "stuck@0x10-0x20", "seed=+5", "checksum:nan"] {
      #expect(throws: NMEAFaultScheduleError.self, "\(bad)") { try NMEAFaultSchedule.parse(bad) }
    }
  }
}

private func writeFile(_ path: String, _ text: String) throws {
  let bytes = Array(text.utf8)
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  guard fd >= 0 else { throw GPXError.unreadable(path: path, message: "cannot create") }
  defer { close(fd) }
  _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

private func removeFile(_ path: String) { unlink(path) }

struct GPXObstructionTests {
  @Test func gpxExtensionsMarkTunnelsAndCanyonsAndBadValuesNameTheirLine() throws {
    let path = "/tmp/locationd-sky-\(UInt32.random(in: 0...UInt32.max)).gpx"
    defer { unlink(path) }
    let gpx = """
      <?xml version="1.0"?>
      <gpx version="1.1" creator="t" xmlns="http://www.topografix.com/GPX/1/1" xmlns:l="https://example.org/locationd">
      <rte>
      <rtept lat="3.1406" lon="101.6024"/>
      <rtept lat="3.1406" lon="101.6064"><extensions><l:obstruction>tunnel</l:obstruction></extensions></rtept>
      <rtept lat="3.1386" lon="101.6074"><extensions><l:obstruction>canyon:45</l:obstruction></extensions></rtept>
      <rtept lat="3.1366" lon="101.6064"/>
      </rte>
      </gpx>
      """
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    _ = Array(gpx.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    let parameters = try SimulatedBackend.Options.parse("simulate:\(path)?obstruction=3:canyon").parameters()
    #expect(parameters.obstructions[1] == .tunnel)
    guard case .urbanCanyon(let street, let wall)? = parameters.obstructions[2],
      case .urbanCanyon(_, let uriWall)? = parameters.obstructions[3]
    else {
      Issue.record("legs 2 and 3 are canyons")
      return
    }
    // Leg 2 runs south-south-west from (3.1386, 101.6074) to (3.1366, 101.6064).
    #expect(wall == 45 && street > 200 && street < 210 && uriWall == 30)
    let bad = gpx.replacingOccurrences(of: "canyon:45", with: "cave")
    let fd2 = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    _ = Array(bad.utf8).withUnsafeBytes { write(fd2, $0.baseAddress, $0.count) }
    close(fd2)
    #expect(throws: GPXError.self) { try SimulatedBackend.Options.parse("simulate:\(path)").parameters() }
    do {
      _ = try GPXReader.points(contentsOf: path)
      Issue.record("a bad obstruction was accepted")
    } catch {
      #expect(error.description.contains("line 6") && error.description.contains("cave"))
    }
  }
}
