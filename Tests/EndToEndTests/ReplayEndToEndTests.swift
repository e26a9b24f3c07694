import Foundation
import Glibc
import LocationTestKit
import Testing
import LocationModel

extension EndToEnd {
  /// Issue 5, test 1: a corpus log replayed through locationd reaches a client exactly as
  /// `locationctl decode` decodes it; initial/current location, `center` and annotations follow.
  @Suite("End to end: replay through locationd", .serialized)
  struct ReplayEndToEndTests {
    @Test(
      "a lossless watcher gets exactly the decoded fixes; status, center and annotations follow",
      .timeLimit(.minutes(3)), .enabled(if: corpusTestsEnabled, "\(NMEACorpus.missingMessage)"),
      arguments: ["mt3339.log", "quectel-l76k-nmea.log"])
    func replayMatchesDecode(logName: String) async throws {
      guard let log = try corpusLog(logName) else { return }
      let expected = try await decodedFixes(log)
      try #require(expected.count > 10, "decode found only \(expected.count) fixes in \(logName)")
      let withPosition = expected.filter { ($0["mode"] as? Int ?? 0) >= 2 }
      try #require(!withPosition.isEmpty)

      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=0")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()

      let watcher = try LineClient(path: daemon.socketPath)
      try await watcher.authorizeAndWatch(coalesce: false)
      let (received, events) = try await watcher.collectUntilEndOfData()
      #expect(
        firstDifference(received: received, expected: expected) == nil,
        "\(firstDifference(received: received, expected: expected) ?? "")")
      #expect(
        received.allSatisfy { $0["missed"] == nil }, "a lossless watcher was sent coalesced fixes")
      #expect(
        received.allSatisfy {
          $0["simulated"] as? Bool == true && $0["backend"] as? String == "replay:\(log)?speed=0"
        })
      // Provenance: every fix names a log line, in increasing order.
      let lines = received.compactMap { $0["line"] as? Int }
      #expect(
        lines.count == received.count && lines == lines.sorted() && Set(lines).count == lines.count)
      #expect(
        !events.contains { $0["class"] as? String == "WARNING" },
        "warnings: \(events.filter { $0["class"] as? String == "WARNING" }.map(encodeLine))")

      // Initial and current location: the first and last fixes with a position.
      let status = try await watcher.require("status", class: "STATUS")
      let initial = try #require(status["initial"] as? JSONObject, "status: \(encodeLine(status))")
      let current = try #require(status["current"] as? JSONObject, "status: \(encodeLine(status))")
      #expect(
        NSDictionary(dictionary: gpsdFields(initial)).isEqual(to: withPosition[0]),
        "initial \(encodeLine(initial))")
      #expect(
        NSDictionary(dictionary: gpsdFields(current)).isEqual(
          to: withPosition[withPosition.count - 1]),
        "current \(encodeLine(current))")
      let location = try await watcher.require("location", class: "LOCATION")
      #expect(jsonEqual(location["initial"], status["initial"]))
      #expect(jsonEqual(location["current"], status["current"]))
      #expect((status["backend"] as? JSONObject)?["state"] as? String == "endOfData")

      // center: the map center moves to the current location.
      let last = withPosition[withPosition.count - 1]
      let centered = try await watcher.require("center", class: "MAP")
      let center = try #require(centered["center"] as? JSONObject)
      #expect(abs((center["lat"] as? Double ?? 0) - (last["lat"] as? Double ?? 999)) < 1e-8)
      #expect(abs((center["lon"] as? Double ?? 0) - (last["lon"] as? Double ?? 999)) < 1e-8)

      // Annotations through locationctl: add, replace by id (not duplicated), add another, remove.
      let socket = daemon.socketPath
      var run = try await locationctl(socket, ["annotate", "camp", "44.0688", "-121.3142", "Camp"])
      #expect(run.status == 0, "\(run.stderr)")
      run = try await locationctl(
        socket, ["annotate", "camp", "44.5", "-121.5", "Moved camp", "--kind", "waypoint"])
      #expect(run.status == 0, "\(run.stderr)")
      run = try await locationctl(socket, ["annotate", "peak", "44.1", "-121.7", "Peak"])
      #expect(run.status == 0, "\(run.stderr)")
      var map = try #require(
        parseObject(try await locationctl(socket, ["map"]).stdout), "map output")
      // The map shows the current location as the reserved annotation "location"; clients' follow.
      let userLocation = (map["annotations"] as? [JSONObject] ?? []).first {
        $0["id"] as? String == "location"
      }
      // TPVs print 9 decimals (gpsd); the map keeps the full value: agree within 1e-8 degrees (1 mm).
      #expect(
        abs((userLocation?["lat"] as? Double ?? 0) - (last["lat"] as? Double ?? 999)) < 1e-8
          && abs((userLocation?["lon"] as? Double ?? 0) - (last["lon"] as? Double ?? 999)) < 1e-8,
        "location annotation: \(userLocation.map(encodeLine) ?? "none"), last fix \(encodeLine(last))"
      )
      var annotations = (map["annotations"] as? [JSONObject] ?? []).filter {
        $0["id"] as? String != "location"
      }
      #expect(annotations.map { $0["id"] as? String } == ["camp", "peak"])
      #expect(annotations.first?["title"] as? String == "Moved camp")
      #expect(annotations.first?["lat"] as? Double == 44.5)
      #expect(annotations.first?["lon"] as? Double == -121.5)
      #expect(annotations.first?["kind"] as? String == "waypoint")
      let mapCenter = map["center"] as? JSONObject
      #expect(
        jsonEqual(mapCenter?["lat"], center["lat"]) && jsonEqual(mapCenter?["lon"], center["lon"]))

      run = try await locationctl(socket, ["remove", "camp"])
      #expect(run.status == 0, "\(run.stderr)")
      run = try await locationctl(socket, ["remove", "camp"])
      #expect(run.status == 1)
      #expect(run.stderr.contains("notFound"), "\(run.stderr)")
      map = try #require(parseObject(try await locationctl(socket, ["map"]).stdout), "map output")
      annotations = (map["annotations"] as? [JSONObject] ?? []).filter {
        $0["id"] as? String != "location"
      }
      #expect(annotations.map { $0["id"] as? String } == ["peak"])

      // The GeoJSON view shows the same annotation.
      let geo = try #require(
        parseObject(try await locationctl(socket, ["map", "--geojson"]).stdout))
      let collection = try #require(geo["geojson"] as? JSONObject)
      let features = collection["features"] as? [JSONObject] ?? []
      #expect(
        features.contains {
          ($0["properties"] as? JSONObject)?["title"] as? String == "Peak"
            || $0["id"] as? String == "peak"
        },
        "geojson: \(encodeLine(collection))")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "locationctl --json watch --every prints exactly the decoded fixes and exits at endOfData",
      .timeLimit(.minutes(3)), .enabled(if: corpusTestsEnabled, "\(NMEACorpus.missingMessage)"))
    func locationctlWatchEvery() async throws {
      guard let log = try corpusLog("mt3339.log") else { return }
      let expected = try await decodedFixes(log)
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=0")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let run = try await locationctl(daemon.socketPath, ["watch", "--every"])
      #expect(run.status == 0, "\(run.stderr)")
      let objects = run.lines.compactMap(parseObject)
      #expect(objects.count == run.lines.count, "locationctl printed lines that are not JSON")
      let received = objects.filter { $0["class"] as? String == "TPV" }
      #expect(
        firstDifference(received: received, expected: expected) == nil,
        "\(firstDifference(received: received, expected: expected) ?? "")")
      #expect(
        objects.last?["class"] as? String == "BACKEND"
          && objects.last?["state"] as? String == "endOfData")
    }
  }
}
