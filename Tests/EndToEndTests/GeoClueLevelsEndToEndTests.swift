import Foundation
import Glibc
import Testing

extension EndToEnd.GeoClueEndToEndTests {
  /// The grid scale of each level (docs/geoclue.md), metres.
  static let levelScales: [Int: Double] = [6: 1_000, 5: 3_000, 4: 15_000, 1: 300_000]

  /// Haversine distance on GeoClue's sphere, metres.
  static func distance(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
    let radians = Double.pi / 180
    let dLat = (b.0 - a.0) * radians
    let dLon = (b.1 - a.1) * radians
    let h =
      sin(dLat / 2) * sin(dLat / 2) + cos(a.0 * radians) * cos(b.0 * radians) * sin(dLon / 2)
      * sin(dLon / 2)
    return 2 * 6_372_795 * asin(min(1, sqrt(h)))
  }

  @Test(
    "a client gets the accuracy it asked for: a cell centre of the level's grid, Accuracy to match; EXACT stays exact"
  )
  func accuracyLevels() async throws {
    guard let log = try Self.log() else { return }
    let setup = try await Setup(speed: 1, log: log)
    defer { setup.cleanUp() }
    let result = try await setup.client(["levels", "30"])
    await setup.finish()
    let levels = try #require(result["levels"] as? [Any])
    let requested = try #require(result["requested"] as? [Int])
    let locations = try #require(result["locations"] as? [Any])
    #expect(requested == [8, 6, 5, 4, 1, 4], "the default is CITY, as in GeoClue: \(requested)")
    #expect(locations.count == levels.count)
    let exact = try #require(locations.first as? [String: Any], "no location for EXACT: \(result)")
    let exactPosition = (
      exact["Latitude"] as? Double ?? .nan, exact["Longitude"] as? Double ?? .nan
    )
    let exactAccuracy = try #require(exact["Accuracy"] as? Double)
    #expect(exactAccuracy < 100, "EXACT has the fix's own accuracy: \(exact)")
    #expect((exact["Altitude"] as? Double ?? 0) > -1e300, "EXACT keeps the altitude: \(exact)")
    for (index, level) in requested.enumerated().dropFirst() {
      let location = try #require(
        locations[index] as? [String: Any], "no location for level \(level): \(result)")
      let scale = try #require(Self.levelScales[level])
      let latitude = try #require(location["Latitude"] as? Double)
      let longitude = try #require(location["Longitude"] as? Double)
      let accuracy = try #require(location["Accuracy"] as? Double)
      // A cell centre: latitude bands of 180/n degrees.
      let bands = (180 / (scale / (6_372_795 * Double.pi / 180))).rounded()
      let band = (latitude + 90) / (180 / bands) - 0.5
      #expect(abs(band - band.rounded()) < 1e-6, "level \(level): \(latitude) is not a band centre")
      #expect(
        accuracy >= scale / 2 && accuracy <= scale * 0.75 + 100,
        "level \(level): Accuracy \(accuracy)")
      // The receiver's position is within Accuracy (the exact client may have seen a fix a few
      // seconds apart: a walking pace's margin).
      let away = Self.distance((latitude, longitude), exactPosition)
      #expect(
        away <= accuracy + 200, "level \(level): \(away) m from the fix, Accuracy \(accuracy)")
      #expect(away > 1 || scale >= 300_000, "level \(level): the exact position was handed out")
      #expect(
        location["Altitude"] as? Double ?? 0 < -1e300, "level \(level): altitude given: \(location)"
      )
      #expect(
        location["Speed"] as? Double == -1 && location["Heading"] as? Double == -1, "\(location)")
    }
  }

  @Test(
    "scripts/try-geoclue: a private bus by dbus-run-session, locationd --dbus session, where-am-i on it"
  )
  func tryGeoClue() async throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent()
      .deletingLastPathComponent().path
    var environment = ProcessInfo.processInfo.environment
    environment["LOCATIOND"] = try Products.path("locationd")
    // A system bus address that must not be used: the script gives where-am-i its own.
    environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=/nonexistent/system_bus_socket"
    // Its scratch directory goes where TMPDIR says, and is gone when the command ends.
    let scratch = FileManager.default.temporaryDirectory
      .appendingPathComponent("try-geoclue-test-\(getpid())-\(UInt64.random(in: 0...UInt64.max))").path
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    environment["TMPDIR"] = scratch
    let exact = try await runTool(
      root + "/scripts/try-geoclue", [], environment: environment, timeout: 60)
    #expect(exact.status == 0, "\(exact.stdout) \(exact.stderr)")
    #expect(exact.stdout.contains("Latitude:"), "\(exact.stdout) \(exact.stderr)")
    #expect(exact.stderr.contains("serves org.freedesktop.GeoClue2 on unix:"), "\(exact.stderr)")
    let city = try await runTool(
      root + "/scripts/try-geoclue",
      ["--", "/usr/libexec/geoclue-2.0/demos/where-am-i", "-t", "5", "-a", "4"],
      environment: environment,
      timeout: 60)
    #expect(city.status == 0, "\(city.stdout) \(city.stderr)")
    // "Accuracy:    10607.xx meters": a city-level cell, not a receiver's few metres.
    let line = city.lines.first { $0.hasPrefix("Accuracy:") } ?? ""
    let metres = Double(
      line.dropFirst("Accuracy:".count).trimmingCharacters(in: .whitespaces).split(separator: " ")
        .first ?? "")
    #expect((metres ?? 0) >= 7_500, "\(city.stdout)")
    // The command's exit status is the script's, and nothing is left behind either way.
    let failing = try await runTool(
      root + "/scripts/try-geoclue", ["--", "/bin/sh", "-c", "exit 3"], environment: environment, timeout: 60)
    #expect(failing.status == 3, "\(failing.stdout) \(failing.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: scratch) == [], "scratch left in \(scratch)")
  }
}
