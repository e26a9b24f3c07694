import Foundation
import GNSSSky
import LocationCore
import LocationTestKit
import NMEA
import Testing
import LocationModel

/// `locationctl simulate --pty PATH` -> real gpsd (private port) -> `gpspipe -w`.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SimulateCommandTests {
  /// The package root, found from this file's path (Tests/EndToEndTests/...).
  private static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  private func locationctl() throws -> URL {
    let url = Self.packageRoot.appendingPathComponent(".build/debug/locationctl")
    try #require(
      FileManager.default.isExecutableFile(atPath: url.path),
      "build first: swift build --build-tests (looked for \(url.path))")
    return url
  }

  /// The GPS PRN that gpsd 3.22 also counts as used after a GNGSA that carries NMEA 4.10's
  /// system ID (field 18): `processGSA` reads `count - 6` satellite fields from field 3 on, 13 when
  /// the system ID is there, so the PDOP in field 15 is read as a satellite number with `atoi`
  /// (1.28 is satellite 1, a GPS PRN for the GN talker). `nil` when the SKY has no PDOP or its
  /// whole part is not a GPS PRN (1-32).
  static func gpsdPDOPSatellite(sky: [String: Any]) -> Int? {
    guard let pdop = sky["pdop"] as? Double, pdop.isFinite, pdop >= 1, pdop < 33 else { return nil }
    return Int(pdop.rounded(.towardZero))
  }

  /// Whether gpsd's SKY (satellites, used flags, uSat, HDOP) is the sky model's for the TPV's
  /// time, position and height, or for the next 10 Hz epoch's time. A visible satellite is used
  /// when the model uses it, or when it is `gpsdPDOPSatellite` and has a signal (gpsd marks a
  /// satellite used only with a non-zero SNR).
  static func skyMatchesTheModel(sky: [String: Any], satellites: [[String: Any]], tpv: [String: Any]) -> Bool {
    guard let latitude = tpv["lat"] as? Double, let longitude = tpv["lon"] as? Double,
      let height = tpv["altHAE"] as? Double, let time = tpv["time"] as? String,
      let days = CivilDate.days(iso: String(time.prefix(10)))
    else { return false }
    let clock = time.dropFirst(11).dropLast().split(separator: ":")
    guard clock.count == 3, let hours = Int(clock[0]), let minutes = Int(clock[1]), let seconds = Double(clock[2])
    else { return false }
    let utc = Int64(days) * 86_400_000 + Int64(hours * 3_600_000 + minutes * 60_000) + Int64((seconds * 1000).rounded())
    let reported = Set(
      satellites.map {
        "\($0["PRN"] as? Int ?? -1)/\($0["el"] as? Double ?? .nan)/\($0["az"] as? Double ?? .nan)/\($0["used"] as? Bool ?? false)"
      })
    let ghost = gpsdPDOPSatellite(sky: sky)
    var signal: [Int: Double] = [:]
    for satellite in satellites {
      if let prn = satellite["PRN"] as? Int { signal[prn] = satellite["ss"] as? Double ?? 0 }
    }
    for candidate in [utc, utc + 100] {
      let model = SkyModel(systems: [.gps, .glonass]).satellites(
        latitude: latitude, longitude: longitude, height: height, utcMilliseconds: candidate)
      var used = 0
      let expected = Set(
        model.filter(\.visible).map { satellite -> String in
          let prn = satellite.system == .glonass ? 64 + satellite.number : satellite.number
          var azimuth = satellite.azimuth.rounded()
          if azimuth >= 360 { azimuth = 0 }
          let isUsed = satellite.used || (prn == ghost && signal[prn] ?? 0 > 0)
          if isUsed { used += 1 }
          return "\(prn)/\(satellite.elevation.rounded())/\(azimuth)/\(isUsed)"
        })
      if expected == reported && sky["uSat"] as? Int == used { return true }
    }
    return false
  }

  /// A SKY built as gpsd 3.22 reports it at a time when a GPS satellite whose number is the
  /// PDOP's whole part is in view but under the mask: it is reported used.
  @Test func theSkyOracleCountsGPSDsPDOPSatellite() throws {
    let place = Coordinate(latitude: 3.1406, longitude: 101.6024)
    let height = 20.0
    let start: Int64 = 1_796_083_200_000  // 2026-12-01T00:00:00Z
    var found: (utc: Int64, number: Int)?
    for minute in 0..<(24 * 60) where found == nil {
      let utc = start + Int64(minute) * 60_000
      let sky = SkyModel(systems: [.gps, .glonass]).satellites(
        latitude: place.latitude, longitude: place.longitude, height: height, utcMilliseconds: utc)
      if let ghost = sky.first(where: { $0.system == .gps && $0.visible && !$0.used && (1...9).contains($0.number) }) {
        found = (utc, ghost.number)
      }
    }
    let (utc, number) = try #require(found, "a GPS satellite 1-9 in view but unused within a day")
    let model = SkyModel(systems: [.gps, .glonass]).satellites(
      latitude: place.latitude, longitude: place.longitude, height: height, utcMilliseconds: utc)
    let (year, month, day) = CivilDate.civil(milliseconds: utc)
    let secondOfDay = Int(utc % 86_400_000) / 1000
    let time = String(
      format: "%04d-%02d-%02dT%02d:%02d:%02d.000Z", year, month, day, secondOfDay / 3600,
      secondOfDay / 60 % 60, secondOfDay % 60)
    let tpv: [String: Any] = ["lat": place.latitude, "lon": place.longitude, "altHAE": height, "time": time]
    func reported(markingUsed ghostUsed: Bool) -> [[String: Any]] {
      model.filter(\.visible).map { satellite in
        let prn = satellite.system == .glonass ? 64 + satellite.number : satellite.number
        var azimuth = satellite.azimuth.rounded()
        if azimuth >= 360 { azimuth = 0 }
        let ghost = satellite.system == .gps && satellite.number == number
        return [
          "PRN": prn, "el": satellite.elevation.rounded(), "az": azimuth, "ss": 30.0,
          "used": satellite.used || (ghost && ghostUsed),
        ]
      }
    }
    let usedCount = model.filter(\.used).count
    let pdop = Double(number) + 0.28
    let asGPSD = reported(markingUsed: true)
    #expect(Self.skyMatchesTheModel(sky: ["pdop": pdop, "uSat": usedCount + 1], satellites: asGPSD, tpv: tpv))
    // Reported unused, the satellite gpsd marks is missing; with a PDOP whose whole part is
    // another number, the satellite marked is not the one gpsd would mark.
    let asModel = reported(markingUsed: false)
    #expect(Self.skyMatchesTheModel(sky: ["pdop": pdop, "uSat": usedCount], satellites: asModel, tpv: tpv) == false)
    #expect(Self.skyMatchesTheModel(sky: ["pdop": pdop + 1, "uSat": usedCount + 1], satellites: asGPSD, tpv: tpv) == false)
  }

  /// Times of day for the simulated sky, fixed so that a run never depends on the hour it starts:
  /// the first is in a window where gpsd's PDOP satellite (`gpsdPDOPSatellite`) is in view and
  /// unused.
  static let skyTimes = ["2026-12-01T03:00:00Z", "2026-12-01T11:20:00Z", "2026-12-01T19:40:00Z"]

  @Test(arguments: skyTimes)
  func gpsdDecodesTheSimulatedHardwareLikeAReceiver(time: String) async throws {
    let link =
      NSTemporaryDirectory() + "locationd-simulate-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let simulator = Process()
    simulator.executableURL = try locationctl()
    // No range error (fixes on the route) and the two systems whose NMEA 4.11 numbering gpsd
    // 3.22 counts as used from GNGSA (it leaves Galileo and BeiDou 1-36 with system IDs 3 and 4
    // unused): what gpsd reports can then be compared with the sky model exactly.
    simulator.arguments = [
      "simulate", "--pty", link, "--rate", "10", "--talker", "GN", "--zda", "--backend",
      "simulate?rate=10&noise=0&systems=gps,glonass&time=\(time)",
    ]
    let errors = Pipe()
    simulator.standardError = errors
    simulator.standardOutput = FileHandle.nullDevice
    try simulator.run()
    defer { if simulator.isRunning { simulator.terminate() } }
    // The link appears once the pty is open.
    var linked = false
    for _ in 0..<300 where !linked {
      linked =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: link))?.hasPrefix("/dev/pts/")
        == true
      if !linked { try await Task.sleep(for: .milliseconds(10)) }
    }
    try #require(linked, "locationctl simulate linked \(link) to a pty")

    let gpsd = try PrivateGPSD(device: link)
    try await gpsd.start()
    defer { gpsd.stop() }
    // The shell writes gpspipe's output to a file: the test polls for its exit without blocking a
    // thread, and hands no descriptor of its own to the child.
    let outputPath = link + ".json"
    defer { try? FileManager.default.removeItem(atPath: outputPath) }
    let gpspipe = Process()
    gpspipe.executableURL = URL(fileURLWithPath: "/bin/sh")
    gpspipe.arguments = [
      "-c", "exec /usr/bin/gpspipe -w -n 80 \"$1\" > \"$2\"", "sh", "127.0.0.1:\(gpsd.port)",
      outputPath,
    ]
    gpspipe.standardOutput = FileHandle.nullDevice
    gpspipe.standardError = FileHandle.nullDevice
    try gpspipe.run()
    let gpspipeExited = await gpspipe.hasExited()
    if !gpspipeExited { gpspipe.terminate() }
    #expect(gpspipeExited, "gpspipe printed 80 lines within 20 s")
    let data = try Data(contentsOf: URL(fileURLWithPath: outputPath))

    var times: [String] = []
    var skyReports = 0
    var skyMatches = 0
    var lastTPV: [String: Any]?
    for line in data.split(separator: UInt8(ascii: "\n")) {
      guard let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any]
      else {
        continue
      }
      if object["class"] as? String == "SKY" {
        skyReports += 1
        // gpsd 3.22 reports a SKY after each constellation's GSV; the one with GLONASS is the
        // whole sky of the epoch. It must be the model's sky at the last TPV's time and place
        // (or the next epoch's, when the SKY belongs to it).
        if let tpv = lastTPV, let satellites = object["satellites"] as? [[String: Any]],
          satellites.contains(where: { $0["gnssid"] as? Int == 6 })
        {
          #expect(Self.skyMatchesTheModel(sky: object, satellites: satellites, tpv: tpv), "SKY \(object)")
          skyMatches += 1
        }
      }
      guard object["class"] as? String == "TPV", object["mode"] as? Int == 3,
        let time = object["time"] as? String
      else { continue }
      lastTPV = object
      #expect(object["device"] as? String == link)
      let latitude = try #require(object["lat"] as? Double)
      let longitude = try #require(object["lon"] as? Double)
      #expect(abs(latitude) <= 90 && abs(longitude) <= 180)
      // Without range error the fix is the simulated position on the default loop (NMEA's six
      // decimals of minutes: 2 cm).
      #expect(SimulatedRoute.defaultLoop.distance(from: Coordinate(latitude: latitude, longitude: longitude)) < 0.05)
      #expect(object["altMSL"] is Double && object["speed"] is Double)
      // The simulated receiver sends gpsd 3.22's own model values (GPSDEarthModel) for the geoid
      // separation (to 0.1 m) and the variation: gpsd reports them back.
      let here = Coordinate(latitude: latitude, longitude: longitude)
      let separation = try #require(object["geoidSep"] as? Double)
      #expect(abs(separation - GPSDEarthModel.geoidSeparation(at: here)) <= 0.05 + 1e-6)
      let variation = try #require(object["magvar"] as? Double)
      #expect(abs(variation - GPSDEarthModel.magneticVariation(at: here)) <= 0.05 + 1e-6)
      times.append(time)
    }
    // gpsd may report its first epochs more than once (until it learns the receiver's last
    // sentence of an epoch); the epochs themselves arrive in order, 10 per second.
    #expect(Set(times).count >= 15, "distinct 3D epochs from gpsd: \(Set(times).count)")
    #expect(times == times.sorted(), "epochs in order (ISO 8601 UTC sorts as text)")
    #expect(skyReports > 0, "gpsd decoded the GSV/GSA sky view")
    #expect(skyMatches >= 10, "complete skies compared with the model: \(skyMatches)")

    // SIGINT: the simulator stops, removes the link and exits 0.
    simulator.interrupt()
    #expect(await simulator.hasExited(), "locationctl simulate exits after SIGINT")
    #expect(simulator.terminationStatus == 0)
    #expect(
      (try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == nil, "link removed")
    let messages = String(
      decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    #expect(messages.contains("epochs written"))
  }

  @Test func replaysALogAndExitsAtItsEnd() async throws {
    // A five-epoch log written by the encoder, replayed as fast as the 10 Hz pty takes it.
    let log = NSTemporaryDirectory() + "locationd-simulate-\(getpid()).nmea"
    var bytes: [UInt8] = []
    for index in 0..<5 {
      var fix = Fix(mode: .fix3D)
      fix.time = 1_773_489_600_000 + Int64(index) * 1000
      fix.coordinate = Coordinate(latitude: 50 + Double(index) * 1e-4, longitude: -4)
      fix.altitudeMSL = 12
      NMEAEncoder().encode(fix, into: &bytes)
    }
    #expect(FileManager.default.createFile(atPath: log, contents: Data(bytes)))
    defer { try? FileManager.default.removeItem(atPath: log) }
    let link = log + ".pty"
    let simulator = Process()
    simulator.executableURL = try locationctl()
    simulator.arguments = [
      "simulate", "--pty", link, "--rate", "10", "--backend", "replay:\(log)?speed=0",
    ]
    let errors = Pipe()
    simulator.standardError = errors
    try simulator.run()
    #expect(await simulator.hasExited())
    let messages = String(
      decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    #expect(simulator.terminationStatus == 0, "\(messages)")
    #expect(messages.contains("reached the end of its log"))
    // Nobody opened the pty: the five epochs went to no reader, as on an unconnected serial line.
    #expect(messages.contains("0 epochs written, 5 without a reader"))
    #expect(
      (try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == nil, "link removed")
  }

  @Test func refusesToReplaceARegularFile() async throws {
    let path = NSTemporaryDirectory() + "locationd-simulate-file-\(getpid())"
    #expect(FileManager.default.createFile(atPath: path, contents: Data("data".utf8)))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let simulator = Process()
    simulator.executableURL = try locationctl()
    simulator.arguments = ["simulate", "--pty", path]
    let errors = Pipe()
    simulator.standardError = errors
    try simulator.run()
    #expect(await simulator.hasExited())
    #expect(simulator.terminationStatus == 1)
    let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    #expect(message.contains("is not a symbolic link"))
    #expect(try String(contentsOfFile: path, encoding: .utf8) == "data")
  }

  @Test(arguments: [
    ["simulate"], ["simulate", "--pty", "/tmp/x", "--rate", "20"], ["simulate", "--pty"],
    ["simulate", "--pty", "/tmp/x", "--rate", "10", "--baud", "4800"],
    ["simulate", "--pty", "/tmp/x", "--faults", ""],
    ["simulate", "--pty", "/tmp/x", "--faults", "unplug@1-3,unplug@2-4"],
    // An option and the same key in the backend URI: refused, neither silently wins.
    ["simulate", "--pty", "/tmp/x", "--backend", "simulate?baud=4800", "--baud", "115200"],
    ["simulate", "--pty", "/tmp/x", "--backend", "simulate?nmea=2.3", "--nmea", "4.11"],
    ["simulate", "--pty", "/tmp/x", "--backend", "simulate?faults=checksum:0.02", "--faults", "garbage:0.01"],
    // UDP to port 0 reaches no reader.
    ["simulate", "--output", "udp://127.0.0.1:0"],
  ])
  func badUsageExits64(_ arguments: [String]) async throws {
    let simulator = Process()
    simulator.executableURL = try locationctl()
    simulator.arguments = arguments
    simulator.standardError = FileHandle.nullDevice
    try simulator.run()
    #expect(await simulator.hasExited())
    #expect(simulator.terminationStatus == 64)
  }
}
