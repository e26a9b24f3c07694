import Foundation
import GNSSSky
import Glibc
import LocationCore
import LocationModel
import LocationTestKit
import Testing

/// The simulated sky checked from outside: `locationctl simulate` writes a pty, the test reads
/// it, and an independent Python implementation (Tests/Oracles/sky_oracle.py, standard library
/// only) recomputes the GPS look angles from the same YUMA almanac and the DOPs from GSV/GSA.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SimulatedSkyTests {
  private static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  private func locationctl() throws -> URL {
    let url = Self.packageRoot.appendingPathComponent(".build/debug/locationctl")
    try #require(
      FileManager.default.isExecutableFile(atPath: url.path),
      "build first: swift build --build-tests (looked for \(url.path))")
    return url
  }

  /// Runs `locationctl simulate --pty LINK --rate 10 --zda --backend BACKEND`, reads the pty for
  /// `seconds` and returns what was read.
  private func capture(backend: String, seconds: Double) async throws -> [UInt8] {
    let link = "/tmp/l5sky-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let simulator = Process()
    simulator.executableURL = try locationctl()
    simulator.arguments = ["simulate", "--pty", link, "--rate", "10", "--zda", "--backend", backend]
    simulator.standardOutput = FileHandle.nullDevice
    simulator.standardError = FileHandle.nullDevice
    try simulator.run()
    defer { if simulator.isRunning { simulator.terminate() } }
    var fd: Int32 = -1
    // A bound on start-up only (a loaded machine can take many seconds), not a timing check.
    let deadline = now() + 60
    while fd < 0 && now() < deadline && simulator.isRunning {
      if (try? FileManager.default.destinationOfSymbolicLink(atPath: link))?.hasPrefix("/dev/pts/") == true {
        fd = open(link, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
      }
      if fd < 0 { await pause(0.01) }
    }
    try #require(fd >= 0, "the simulator linked \(link) to a pty")
    // Closed once the reader has returned; after a timeout its thread may still read `fd`, so it
    // stays open rather than let that thread read a reused number.
    var readerReturned = false
    defer { if readerReturned { close(fd) } }
    // `seconds` of simulated output at 10 Hz, counted in epochs (each ends with its ZDA), not in
    // wall time: a loaded machine may run the simulator or this reader late. Read on a thread of
    // its own so that a busy concurrency pool cannot starve the reader; 60 s bounds a hang.
    let wanted = max(1, Int((seconds * 10).rounded(.up)))
    let reader = fd
    let result =
      await resultOnItsOwnThread(within: 60) { () -> [UInt8] in
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
          let count = read(reader, &buffer, buffer.count)
          if count > 0 {
            bytes += buffer[0..<count]
            if Self.epochEnds(bytes) >= wanted { return bytes }
          } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
            return bytes
          } else {
            usleep(10_000)
          }
        }
      }
    readerReturned = result != nil
    simulator.interrupt()
    return result ?? []
  }

  /// How many epochs `bytes` holds whole: the ZDA sentences that end them.
  static func epochEnds(_ bytes: [UInt8]) -> Int {
    let marker = Array("ZDA,".utf8)
    guard bytes.count >= marker.count else { return 0 }
    var count = 0
    for start in 0...(bytes.count - marker.count) where bytes[start] == marker[0] {
      if Array(bytes[start..<start + marker.count]) == marker { count += 1 }
    }
    return count
  }

  /// One epoch as read back from the sentences: from an RMC to the ZDA that ends it.
  struct Epoch {
    var utcMilliseconds: Int64 = 0
    var latitude = 0.0
    var longitude = 0.0
    var heightAboveEllipsoid = 0.0
    /// GSV satellites by talker ("GP", "GL", "GA", "GB") and number: (elevation, azimuth).
    var inView: [String: [Int: (Double, Double)]] = [:]
    /// GSA used numbers by NMEA system ID, and the DOPs (PDOP, HDOP, VDOP).
    var used: [Int: [Int]] = [:]
    var dops: (Double, Double, Double)?
  }

  /// The complete epochs of a capture (the first, possibly cut, is skipped).
  static func epochs(_ bytes: [UInt8]) -> [Epoch] {
    let text = String(decoding: bytes, as: UTF8.self)
    var epochs: [Epoch] = []
    var current: Epoch?
    func angle(_ value: Substring, _ hemisphere: Substring, degreeDigits: Int) -> Double {
      let degrees = Double(value.prefix(degreeDigits)) ?? 0
      let minutes = Double(value.dropFirst(degreeDigits)) ?? 0
      let sign: Double = hemisphere == "S" || hemisphere == "W" ? -1 : 1
      return sign * (degrees + minutes / 60)
    }
    // "\r\n" is one Character: split on it as well as on "\n".
    for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
      guard line.hasPrefix("$"), let star = line.firstIndex(of: "*") else { continue }
      let fields = line[line.index(after: line.startIndex)..<star].split(
        separator: ",", omittingEmptySubsequences: false)
      guard let head = fields.first, head.count == 5 else { continue }
      let talker = String(head.prefix(2))
      switch head.suffix(3) {
      case "RMC": current = Epoch()
      case "GGA":
        guard fields.count > 11, !fields[2].isEmpty else { continue }
        current?.latitude = angle(fields[2], fields[3], degreeDigits: 2)
        current?.longitude = angle(fields[4], fields[5], degreeDigits: 3)
        current?.heightAboveEllipsoid = (Double(fields[9]) ?? 0) + (Double(fields[11]) ?? 0)
      case "GSA":
        guard fields.count >= 18 else { continue }
        let system = fields.count > 18 ? Int(fields[18], radix: 16) ?? 1 : 1
        current?.used[system, default: []] += fields[3...14].compactMap { Int($0) }
        if let p = Double(fields[15]), let h = Double(fields[16]), let v = Double(fields[17]) {
          current?.dops = (p, h, v)
        }
      case "GSV":
        var index = 4
        while index + 3 < fields.count {
          if let number = Int(fields[index]), let el = Double(fields[index + 1]), let az = Double(fields[index + 2]) {
            current?.inView[talker, default: [:]][number] = (el, az)
          }
          index += 4
        }
      case "ZDA":
        guard fields.count >= 5, var epoch = current else { continue }
        let time = fields[1]
        let hours = Int(time.prefix(2)) ?? 0
        let minutes = Int(time.dropFirst(2).prefix(2)) ?? 0
        let seconds = Double(time.dropFirst(4)) ?? 0
        let days = CivilDate.days(
          year: Int(fields[4]) ?? 0, month: Int(fields[3]) ?? 0, day: Int(fields[2]) ?? 0)
        epoch.utcMilliseconds =
          Int64(days) * 86_400_000 + Int64(hours * 3_600_000 + minutes * 60_000)
          + Int64((seconds * 1000).rounded())
        epochs.append(epoch)
        current = nil
      default: break
      }
    }
    return epochs
  }

  /// Runs the Python oracle on `queries` with the almanac at `almanacPath`.
  private func oracle(almanacPath: String, queries: [[String: Any]]) throws -> [[String: Any]] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
      "python3", Self.packageRoot.appendingPathComponent("Tests/Oracles/sky_oracle.py").path, almanacPath,
    ]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: queries))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    try #require(process.terminationStatus == 0, "the oracle ran")
    return try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
  }

  private func almanacFile() throws -> String {
    let path = "/tmp/l5sky-\(getpid()).yuma"
    try BundledAlmanac.yuma.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  private func pointRoute(latitude: Double, longitude: Double, elevation: Double) throws -> String {
    let path = "/tmp/l5sky-\(getpid())-\(latitude)-\(longitude).gpx"
    let gpx = """
      <?xml version="1.0"?><gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">\
      <wpt lat="\(latitude)" lon="\(longitude)"><ele>\(elevation)</ele></wpt></gpx>
      """
    try gpx.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  /// Places and times: Kuala Lumpur at the almanac's week, Greenwich 19 months later, Sydney,
  /// and Tromsø (high latitude) at midnight.
  static let places: [(Double, Double, Double, String)] = [
    (3.1386, 101.6044, 60, "2025-04-16T12:00:00Z"),
    (51.4779, -0.0015, 45, "2026-11-30T06:30:00Z"),
    (-33.8568, 151.2153, 10, "2025-12-01T18:45:00Z"),
    (69.6492, 18.9553, 20, "2025-06-21T00:00:00Z"),
  ]

  /// GSV elevations and azimuths of GPS agree with the independent oracle within 0.5° (GSV's
  /// whole degrees round by up to 0.5°; the models themselves agree within 0.01°, checked on the
  /// unrounded values), and the satellites in view are the ones the oracle puts above the horizon.
  @Test(arguments: places)
  func gsvAgreesWithTheIndependentOracle(place: (Double, Double, Double, String)) async throws {
    let (latitude, longitude, elevation, time) = place
    let almanac = try almanacFile()
    let route = try pointRoute(latitude: latitude, longitude: longitude, elevation: elevation)
    let bytes = try await capture(
      backend: "simulate:\(route)?speed=0&noise=0&rate=10&systems=gps&time=\(time)&almanac=\(almanac)",
      seconds: 0.8)
    let epochs = Self.epochs(bytes)
    let epoch = try #require(epochs.first, "an epoch was read")
    let answer = try oracle(
      almanacPath: almanac,
      queries: [
        [
          "utc_ms": epoch.utcMilliseconds, "lat": epoch.latitude, "lon": epoch.longitude,
          "h": epoch.heightAboveEllipsoid,
        ]
      ])
    let expected = try #require(answer.first?["gps"] as? [String: [Double]])
    let sent = epoch.inView["GP"] ?? [:]
    #expect(sent.count >= 6, "GPS satellites in view: \(sent.count)")
    // Same set, apart from satellites within 0.05° of the horizon (the simulator lists above 0°).
    let expectedSet = Set(expected.filter { $0.value[0] > 0.05 }.keys.compactMap(Int.init))
    #expect(expectedSet.isSubset(of: Set(sent.keys)))
    #expect(Set(sent.keys).isSubset(of: Set(expected.keys.compactMap(Int.init))))
    for (prn, angles) in sent {
      guard let reference = expected[String(prn)] else { continue }
      var azimuthError = abs(angles.1 - reference[1]).truncatingRemainder(dividingBy: 360)
      if azimuthError > 180 { azimuthError = 360 - azimuthError }
      #expect(abs(angles.0 - reference[0]) <= 0.5 + 0.01, "PRN \(prn) elevation \(angles.0) vs \(reference[0])")
      #expect(azimuthError <= 0.5 + 0.01 || reference[0] > 89.5, "PRN \(prn) azimuth \(angles.1) vs \(reference[1])")
    }
    // The unrounded model against the oracle, for the same instant and position.
    let sky = SkyModel(systems: [.gps]).satellites(
      latitude: epoch.latitude, longitude: epoch.longitude, height: epoch.heightAboveEllipsoid,
      utcMilliseconds: epoch.utcMilliseconds)
    for satellite in sky {
      let reference = try #require(expected[String(satellite.number)])
      #expect(abs(satellite.elevation - reference[0]) < 0.01)
      var azimuthError = abs(satellite.azimuth - reference[1])
      if azimuthError > 180 { azimuthError = 360 - azimuthError }
      #expect(azimuthError < 0.01 || satellite.elevation > 89.9)
    }
  }

  /// GSA's DOPs equal the ones the oracle recomputes from the GSV angles of the satellites GSA
  /// lists (all four systems, one clock term). Tolerance: the largest change of each DOP over
  /// 200 draws of angles within ±0.5° of GSV's whole degrees, plus 0.005 for GSA's two decimals.
  @Test(arguments: places)
  func gsaDOPsFollowFromTheGSVGeometry(place: (Double, Double, Double, String)) async throws {
    let (latitude, longitude, elevation, time) = place
    let route = try pointRoute(latitude: latitude, longitude: longitude, elevation: elevation)
    let bytes = try await capture(
      backend: "simulate:\(route)?speed=0&rate=10&mask=10&time=\(time)", seconds: 0.8)
    let epoch = try #require(Self.epochs(bytes).first, "an epoch was read")
    let talkers = [1: "GP", 2: "GL", 3: "GA", 4: "GB"]
    var angles: [[Double]] = []
    for (system, numbers) in epoch.used {
      let talker = try #require(talkers[system])
      for number in numbers {
        let angle = try #require(epoch.inView[talker]?[number], "used \(talker) \(number) is in GSV")
        #expect(angle.0 >= 10, "used satellites are above the 10° mask")
        angles.append([angle.0, angle.1])
      }
    }
    #expect(angles.count >= 4)
    let dops = try #require(epoch.dops)
    let answer = try oracle(
      almanacPath: try almanacFile(),
      queries: [["utc_ms": 0, "lat": 0, "lon": 0, "h": 0, "dop": ["satellites": angles]]])
    let reference = try #require(answer.first?["dop"] as? [String: Any])
    let spread = try #require(reference["spread"] as? [String: Double])
    for (name, sent) in [("pdop", dops.0), ("hdop", dops.1), ("vdop", dops.2)] {
      let value = try #require(reference[name] as? Double)
      let tolerance = (spread[name] ?? 0) + 0.005
      #expect(abs(sent - value) <= tolerance, "\(name): GSA \(sent), oracle \(value) ± \(tolerance)")
    }
  }

  /// `locationctl decode` of the simulator's output gives back the simulated fixes: the same
  /// generator run in-process (same URI, same start time) predicts every epoch read.
  @Test func decodeReproducesTheSimulatedFixes() async throws {
    let uri = "simulate?rate=10&seed=5&time=2026-03-01T08:00:00Z"
    let bytes = try await capture(backend: uri, seconds: 1.5)
    let path = "/tmp/l5sky-\(getpid()).nmea"
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let process = Process()
    process.executableURL = try locationctl()
    process.arguments = ["decode", "--sky", path]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()

    let options = try SimulatedBackend.Options.parse(uri)
    let parameters = try options.parameters()
    let start = try #require(parameters.startTime)
    var generator = SimulatedFixGenerator(parameters: parameters, startTime: start)
    var predicted: [Int64: Fix] = [:]
    for _ in 0..<100 {
      guard let epoch = generator.next(), let time = epoch.fix.time else { continue }
      predicted[time] = epoch.fix
    }
    var checked = 0
    var lastTPV: [String: Any]?
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
      guard let object = parseObject(String(line)) else { continue }
      if object["class"] as? String == "TPV" {
        lastTPV = object
        continue
      }
      guard object["class"] as? String == "SKY", let tpv = lastTPV, let time = tpv["time"] as? String else {
        continue
      }
      // ISO 8601 with milliseconds, UTC.
      let date = try #require(CivilDate.days(iso: String(time.prefix(10))))
      let clock = time.dropFirst(11).dropLast().split(separator: ":")
      let milliseconds =
        Int64(date) * 86_400_000 + Int64((Int(clock[0]) ?? 0) * 3_600_000 + (Int(clock[1]) ?? 0) * 60_000)
        + Int64(((Double(clock[2]) ?? 0) * 1000).rounded())
      let fix = try #require(predicted[milliseconds], "epoch \(time) was simulated")
      let coordinate = try #require(fix.coordinate)
      // NMEA carries six decimals of minutes (1/60,000,000 degree) and two of metres and DOPs.
      #expect(abs((tpv["lat"] as? Double ?? 0) - coordinate.latitude) < 1e-8)
      #expect(abs((tpv["lon"] as? Double ?? 0) - coordinate.longitude) < 1e-8)
      #expect(abs((tpv["altMSL"] as? Double ?? 0) - (fix.altitudeMSL ?? .nan)) <= 0.005 + 1e-9)
      #expect(tpv["mode"] as? Int == fix.mode.rawValue)
      #expect(abs((object["hdop"] as? Double ?? 0) - (fix.hdop ?? .nan)) <= 0.005 + 1e-9)
      #expect(abs((object["vdop"] as? Double ?? 0) - (fix.vdop ?? .nan)) <= 0.005 + 1e-9)
      #expect(abs((object["pdop"] as? Double ?? 0) - (fix.pdop ?? .nan)) <= 0.005 + 1e-9)
      #expect(object["uSat"] as? Int == fix.satellitesUsed)
      let satellites = try #require(object["satellites"] as? [[String: Any]])
      let decoded = Set(
        satellites.map {
          "\($0["PRN"] as? Int ?? -1)/\($0["el"] as? Double ?? .nan)/\($0["az"] as? Double ?? .nan)/\($0["used"] as? Bool ?? false)"
        })
      let simulated = Set(
        fix.satellites.map {
          "\($0.gpsdPRN)/\($0.elevation ?? .nan)/\($0.azimuth ?? .nan)/\($0.used)"
        })
      #expect(decoded == simulated)
      checked += 1
    }
    #expect(checked >= 5, "epochs checked: \(checked)")
  }

  /// A tunnel on a route, through the pty and locationctl decode: no position inside, and the fix
  /// back within the configured reacquisition delay after the exit (0.5-1 s here; the epochs are
  /// 0.1 s apart, so a fix is seen at most 0.1 s after the delay).
  @Test func aTunnelOnTheRouteLosesTheFixAndReacquires() async throws {
    let path = "/tmp/l5sky-\(getpid())-tunnel.gpx"
    let gpx = """
      <?xml version="1.0"?><gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1" \
      xmlns:l="https://example.org/locationd"><rte>\
      <rtept lat="10.0" lon="20.0"/>\
      <rtept lat="10.00045" lon="20.0"><extensions><l:obstruction>tunnel</l:obstruction></extensions></rtept>\
      <rtept lat="10.0009" lon="20.0"/><rtept lat="10.00135" lon="20.0"/></rte></gpx>
      """
    try gpx.write(toFile: path, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(atPath: path) }
    let uri = "simulate:\(path)?rate=10&speed=25&reacquire=0.5-1&seed=9&time=2025-05-01T10:00:00Z"
    let bytes = try await capture(backend: uri, seconds: 6.5)
    let log = path + ".nmea"
    try Data(bytes).write(to: URL(fileURLWithPath: log))
    defer { try? FileManager.default.removeItem(atPath: log) }
    let process = Process()
    process.executableURL = try locationctl()
    process.arguments = ["decode", log]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()

    // The generator, in-process, says when the receiver is in the tunnel.
    let parameters = try SimulatedBackend.Options.parse(uri).parameters()
    let start = try #require(parameters.startTime)
    var generator = SimulatedFixGenerator(parameters: parameters, startTime: start)
    var inTunnel: [Int64: Bool] = [:]
    var exit: Int64?
    for _ in 0..<80 {
      guard let epoch = generator.next() else { break }
      let time = start + Int64(epoch.index) * 100
      inTunnel[time] = epoch.obstruction == .tunnel
      if exit == nil, epoch.obstruction != .tunnel, inTunnel[time - 100] == true { exit = time }
    }
    let exitTime = try #require(exit, "the route leaves the tunnel within 8 s")

    var tunnelEpochs = 0
    var firstFixAfterExit: Int64?
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
      guard let object = parseObject(String(line)), object["class"] as? String == "TPV",
        let time = object["time"] as? String, let days = CivilDate.days(iso: String(time.prefix(10)))
      else { continue }
      let clock = time.dropFirst(11).dropLast().split(separator: ":")
      let milliseconds =
        Int64(days) * 86_400_000 + Int64((Int(clock[0]) ?? 0) * 3_600_000 + (Int(clock[1]) ?? 0) * 60_000)
        + Int64(((Double(clock[2]) ?? 0) * 1000).rounded())
      let mode = object["mode"] as? Int ?? 0
      if inTunnel[milliseconds] == true {
        tunnelEpochs += 1
        #expect(mode == 1 && object["lat"] == nil, "no position in the tunnel at \(time)")
      }
      if milliseconds >= exitTime, mode >= 2, firstFixAfterExit == nil { firstFixAfterExit = milliseconds }
    }
    #expect(tunnelEpochs >= 10, "epochs read in the tunnel: \(tunnelEpochs)")
    let back = try #require(firstFixAfterExit, "a fix after the tunnel")
    #expect(back - exitTime >= 500 && back - exitTime <= 1100, "fix \(back - exitTime) ms after the exit")
  }
}
