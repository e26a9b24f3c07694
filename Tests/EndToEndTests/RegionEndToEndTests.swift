import Foundation
import Glibc
import Testing

extension EndToEnd {
  /// Region monitoring through the real binaries: `locationctl region` against `locationd` on
  /// the simulated route, `locationctl watch` seeing the transitions, bad input refused.
  @Suite("End to end: region monitoring")
  struct RegionEndToEndTests {
    /// The ids `region list` shows.
    static func regionIDs(_ socket: String) async throws -> [String] {
      let run = try await locationctl(socket, ["region", "list"])
      guard run.status == 0, let reply = parseObject(run.stdout),
        let regions = reply["regions"] as? [JSONObject]
      else { throw E2EError("region list failed: \(run.status) \(run.stdout) \(run.stderr)") }
      return regions.compactMap { $0["id"] as? String }
    }

    /// A closed GeoJSON ring of `count` vertices on a circle of `radius` metres around 3.14 N
    /// 101.60 E, as a Polygon geometry.
    static func ringPolygon(count: Int, radius: Double) -> String {
      var positions: [String] = []
      for index in 0...count {
        let angle = Double(index % count) * 2 * .pi / Double(count)
        let latitude = 3.14 + radius * sin(angle) / 111_000
        let longitude = 101.60 + radius * cos(angle) / 111_000
        positions.append("[\(longitude),\(latitude)]")
      }
      return #"{"type":"Polygon","coordinates":[["# + positions.joined(separator: ",") + "]]}"
    }

    @Test(
      "region add, then watch sees enter and then exit as the simulated route crosses the circle",
      .timeLimit(.minutes(3)))
    func crossing() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      // The default loop's first leg runs east along 3.1406 N from 101.6024 E at 30 m/s; the
      // circle of 100 m lies across it, 222 m ahead.
      // A fix may be 60 s late and still decide: a test task starved for seconds on a loaded
      // machine does not turn the route's fixes stale (and the flag is exercised).
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "simulate?rate=10&speed=30", extra: ["--region-maximum-fix-age", "60"])
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let socket = daemon.socketPath
      let added = try await locationctl(
        socket,
        ["region", "add", "crossing", "circle", "3.1406", "101.6044", "100", "--title", "Crossing"])
      #expect(added.status == 0, "\(added.stderr)")
      let reply = try #require(parseObject(added.stdout))
      #expect(reply["class"] as? String == "REGION")
      #expect((reply["region"] as? JSONObject)?["state"] as? String == "unknown")
      let text = try await locationctl(socket, ["region", "state", "crossing"], json: false)
      #expect(
        text.status == 0
          && text.stdout.hasPrefix("crossing  unknown  circle 3.1406, 101.6044 radius 100.0 m"),
        "\(text.stdout)")

      let out = scratch.file("watch.out")
      let watch = try Child(
        try Products.path("locationctl"), ["--socket", socket, "--json", "watch"], stdout: out,
        stderr: scratch.file("watch.err"))
      defer {
        kill(watch.pid, SIGTERM)
        _ = watch.waitForExitBlocking(timeout: 5)
      }
      func events() -> [JSONObject] {
        ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n")
          .compactMap { parseObject(String($0)) }.filter { $0["class"] as? String == "REGION" }
      }
      #expect(await waitUntil(timeout: 90) { events().count >= 2 }, "\(events())")
      // (The loop comes back to the circle after about a minute: only the first crossing counts.)
      let seen = Array(events().prefix(2))
      #expect(seen.map { $0["event"] as? String } == ["enter", "exit"], "\(seen)")
      for event in seen {
        #expect(event["region"] as? String == "crossing")
        #expect((event["time"] as? String)?.hasSuffix("Z") == true)
        #expect((event["fix"] as? JSONObject)?["class"] as? String == "TPV")
      }
      let enterLongitude = try #require((seen.first?["fix"] as? JSONObject)?["lon"] as? Double)
      let exitLongitude = try #require((seen.last?["fix"] as? JSONObject)?["lon"] as? Double)
      // Entered west of the center, left east of it.
      #expect(enterLongitude < 101.6044 && exitLongitude > 101.6044, "\(seen)")
      let state = try await locationctl(socket, ["region", "state", "crossing"])
      #expect(
        ((parseObject(state.stdout)?["region"] as? JSONObject)?["state"] as? String) == "outside")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
      // The state survived the shutdown in regions.json.
      let saved = try String(
        contentsOfFile: daemon.stateDirectory + "/regions.json", encoding: .utf8)
      #expect(saved.contains("\"crossing\"") && saved.contains("\"outside\""), "\(saved)")
    }

    @Test("region list without --after or --limit lists every region, however many, in pages", .timeLimit(.minutes(3)))
    func listPagesByItself() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let client = try LineClient(path: daemon.socketPath)
      defer { client.close() }
      _ = try await client.require("request", class: "AUTHORIZATION")
      // 450 regions: more than one page of the command (200).
      for index in 0..<450 {
        let id: String = "r" + String(1000 + index)
        let circle: JSONObject = ["lat": 1, "lon": 1, "radius": 100]
        let region: JSONObject = ["id": id, "circle": circle]
        _ = try await client.require("region", ["action": "add", "region": region], class: "REGION")
      }
      let text = try await locationctl(daemon.socketPath, ["region", "list"], json: false)
      #expect(text.status == 0, "\(text.stderr)")
      #expect(text.lines.count == 450)
      #expect(!text.stdout.contains("more:"))
      let json = try await locationctl(daemon.socketPath, ["region", "list"])
      let object = try #require(parseObject(json.stdout))
      #expect((object["regions"] as? [JSONObject])?.count == 450)
      #expect(object["more"] as? Bool == false)
      let ids = ((object["regions"] as? [JSONObject]) ?? []).compactMap { $0["id"] as? String }
      let expected: [String] = (0..<450).map { (index: Int) -> String in "r" + String(1000 + index) }
      #expect(ids == expected)
    }

    @Test(
      "bad region input gives a clear error, a failing exit status, and changes nothing",
      .timeLimit(.minutes(3)))
    func badInput() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let socket = daemon.socketPath
      #expect(
        try await locationctl(socket, ["region", "add", "kept", "circle", "3.14", "101.6", "50"])
          .status == 0)
      #expect(try await Self.regionIDs(socket) == ["kept"])

      let good = scratch.file("park.geojson")
      try Self.ringPolygon(count: 12, radius: 300).write(
        toFile: good, atomically: true, encoding: .utf8)
      let bowTie = scratch.file("bowtie.geojson")
      try
        #"{"type":"Polygon","coordinates":[[[101.60,3.14],[101.61,3.15],[101.61,3.14],[101.60,3.15],[101.60,3.14]]]}"#
        .write(toFile: bowTie, atomically: true, encoding: .utf8)
      let notJSON = scratch.file("broken.geojson")
      try #"{"type":"Polygon","coordinates":[[[101.60,3.14],"#.write(
        toFile: notJSON, atomically: true, encoding: .utf8)
      let huge = scratch.file("huge.geojson")
      try String(repeating: " ", count: 10 * 1024 * 1024 + 1).write(
        toFile: huge, atomically: true, encoding: .utf8)
      let long = scratch.file("long.geojson")
      try Self.ringPolygon(count: 5000, radius: 5000).write(
        toFile: long, atomically: true, encoding: .utf8)

      let cases: [(arguments: [String], status: Int32, message: String)] = [
        (["circle", "3.14", "101.6", "0"], 1, "invalid radius 0.0 m"),
        (["circle", "3.14", "101.6", "-10"], 1, "invalid radius -10.0 m"),
        (["circle", "nan", "101.6", "10"], 64, "LAT must be a number"),
        (["circle", "3.14", "101.6", "nan"], 64, "RADIUS must be a number"),
        (["circle", "95", "101.6", "10"], 1, "\"region.circle.lat\" must be within"),
        (["circle", "3.14", "101.6", "10", "--dwell", "-1"], 1, "invalid dwell time"),
        (["polygon", bowTie], 1, "intersects itself"),
        (["polygon", notJSON], 1, "invalid GeoJSON"),
        (["polygon", scratch.file("missing.geojson")], 66, "No such file or directory"),
        (["polygon", scratch.path], 66, "not a regular file"),
        (["polygon", huge], 1, "at most 10485760 bytes"),
        (["polygon", long], 1, "locationd reads request lines of at most 65536 bytes"),
        (["triangle", "1", "2"], 64, "region takes add ID circle"),
      ]
      for (arguments, status, message) in cases {
        let run = try await locationctl(socket, ["region", "add", "kept"] + arguments)
        #expect(run.status == status, "\(arguments): \(run.status) \(run.stderr)")
        #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
        #expect(try await Self.regionIDs(socket) == ["kept"], "\(arguments) changed the regions")
      }
      // An id too long for one request line is never sent: a usage error.
      let longID = try await locationctl(socket, ["region", "state", String(repeating: "i", count: 70_000)])
      #expect(longID.status == 64, "\(longID.status) \(longID.stderr)")
      #expect(longID.stderr.contains("nothing was sent"), "\(longID.stderr)")
      let state = try await locationctl(socket, ["region", "state", "kept"])
      #expect(
        (((parseObject(state.stdout)?["region"] as? JSONObject)?["circle"]) as? JSONObject)?[
          "radius"] as? Double == 50)

      // A valid polygon, from a file and from standard input; removing an unknown id is notFound.
      #expect(
        try await locationctl(socket, ["region", "add", "park", "polygon", good]).status == 0)
      let piped = try await runTool(
        "/bin/sh",
        [
          "-c",
          "\(try Products.path("locationctl")) --socket \(socket) region add lake polygon - < \(good)",
        ])
      #expect(piped.status == 0, "\(piped.stderr)")
      #expect(try await Self.regionIDs(socket) == ["kept", "lake", "park"])
      let missing = try await locationctl(socket, ["region", "remove", "nowhere"])
      #expect(missing.status == 1 && missing.stderr.contains("notFound"), "\(missing.stderr)")
      #expect(try await locationctl(socket, ["region", "remove", "lake"]).status == 0)
      #expect(try await Self.regionIDs(socket) == ["kept", "park"])
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }
  }
}
