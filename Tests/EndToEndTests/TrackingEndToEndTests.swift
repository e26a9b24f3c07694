import Foundation
import FoundationXML
import Glibc
import LocationTestKit
import Testing
import LocationModel

extension EndToEnd {
  /// Who owns tracking (a user's `start` outlives its connection, a `watch` ends with its
  /// connection), replay control, group authorization and shutdown as clients see them.
  @Suite("End to end: tracking, replay control, shutdown")
  struct TrackingEndToEndTests {
    /// `status` through locationctl as JSON.
    static func status(_ socket: String) async throws -> JSONObject {
      let run = try await locationctl(socket, ["status"])
      guard run.status == 0, let object = parseObject(run.stdout) else {
        throw E2EError("locationctl status failed: \(run.status) \(run.stderr)")
      }
      return object
    }

    @Test(
      "start outlives its connection until stop; watch tracks for its connection only; watchers get SHUTDOWN",
      .timeLimit(.minutes(3)))
    func trackingOwnership() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let socket = daemon.socketPath

      var status = try await Self.status(socket)
      #expect(status["tracking"] as? Bool == false)
      #expect(status["current"] is NSNull, "a location before any tracking: \(encodeLine(status))")
      let center = try await locationctl(socket, ["center"])
      #expect(
        center.status == 1 && center.stderr.contains("noFix"),
        "center without a fix: \(center.stderr)")
      let replay = try await locationctl(socket, ["replay", "pause"])
      #expect(replay.status == 1 && replay.stderr.contains("notReplay"), "\(replay.stderr)")

      // locationctl start: its connection ends at once, tracking goes on.
      let start = try await locationctl(socket, ["start"])
      #expect(
        start.status == 0 && parseObject(start.stdout)?["tracking"] as? Bool == true,
        "\(start.stderr)")
      #expect(
        try await waitUntil(timeout: 30) { try await Self.status(socket)["current"] is JSONObject },
        "no current location while tracking")
      status = try await Self.status(socket)
      #expect(status["tracking"] as? Bool == true)
      #expect((status["backend"] as? JSONObject)?["state"] as? String == "connected")
      let stop = try await locationctl(socket, ["stop"])
      #expect(
        stop.status == 0 && parseObject(stop.stdout)?["tracking"] as? Bool == false,
        "\(stop.stderr)")
      #expect(
        try await waitUntil(timeout: 30) {
          try await Self.status(socket)["tracking"] as? Bool == false
        })

      // A watch tracks while its connection lasts.
      var watcher: LineClient? = try LineClient(path: socket)
      try await watcher?.authorizeAndWatch(coalesce: true)
      // Another connection's watch is not this caller's tracking, but the backend runs for it.
      status = try await Self.status(socket)
      #expect(status["tracking"] as? Bool == false && status["backendActive"] as? Bool == true)
      watcher?.close()
      watcher = nil
      #expect(
        try await waitUntil(timeout: 30) {
          try await Self.status(socket)["backendActive"] as? Bool == false
        },
        "tracking outlived the watching connection")

      // watch enable:false ends the stream on a connection that stays open.
      let client = try LineClient(path: socket)
      try await client.authorizeAndWatch(coalesce: true)
      var fixes = 0
      while fixes < 3, let event = try await client.nextEvent(timeout: 5) {
        if event["class"] as? String == "TPV" { fixes += 1 }
      }
      #expect(fixes == 3)
      let off = try await client.require("watch", ["enable": false], class: "WATCH")
      #expect(off["enable"] as? Bool == false)
      client.stashed.removeAll()
      // Let the backend produce fixes after the watch ended (another connection watches and
      // receives three), then ask for status: replies and events leave in order, so a fix still
      // sent to this connection would come before the reply.
      let other = try LineClient(path: socket)
      try await other.authorizeAndWatch(coalesce: false)
      var otherFixes = 0
      while otherFixes < 3, let event = try await other.nextEvent(timeout: 30) {
        if event["class"] as? String == "TPV" { otherFixes += 1 }
      }
      #expect(otherFixes == 3, "the other watcher got no fixes")
      let afterOff = try await client.require("status", class: "STATUS")
      #expect(afterOff["tracking"] as? Bool == false)
      #expect(
        !client.stashed.contains { $0["class"] as? String == "TPV" },
        "fixes after watch enable:false: \(client.stashed.prefix(2).map(encodeLine))")
      other.close()

      // SIGTERM: a watcher is told, then the connection closes.
      let last = try LineClient(path: socket)
      try await last.authorizeAndWatch(coalesce: true)
      daemon.signal(SIGTERM)
      var shutdown: JSONObject?
      while let event = try await last.nextEvent(timeout: 5) {
        if event["class"] as? String == "SHUTDOWN" { shutdown = event }
      }
      #expect(shutdown?["reason"] as? String == "SIGTERM", "no SHUTDOWN event")
      #expect(last.closedByPeer)
      #expect(await daemon.waitForExit() == 0, "\(daemon.log)")
    }

    @Test(
      "replay control: step emits exactly N epochs, seek moves, resume plays the rest to endOfData",
      .timeLimit(.minutes(3)), .enabled(if: corpusTestsEnabled, "\(NMEACorpus.missingMessage)"))
    func replayControl() async throws {
      guard let log = try corpusLog("mt3339.log") else { return }
      let expected = try await decodedFixes(log)
      let times = expected.compactMap(tpvMilliseconds)
      try #require(times.count == expected.count && expected.count == 30)
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=0&paused=true")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      // While nothing tracks, every control is refused and nothing is kept.
      for control in [["pause"], ["resume"], ["speed", "5"], ["seek", "3"], ["step"]] {
        let refused = try await locationctl(daemon.socketPath, ["replay"] + control)
        #expect(
          refused.status == 1 && refused.stderr.contains("unavailable"),
          "\(control): \(refused.status) \(refused.stderr)")
      }
      let watcher = try LineClient(path: daemon.socketPath)
      try await watcher.authorizeAndWatch(coalesce: false)
      var sawPaused = false
      while !sawPaused, let event = try await watcher.nextEvent(timeout: 5) {
        sawPaused = event["class"] as? String == "BACKEND" && event["state"] as? String == "paused"
      }
      #expect(sawPaused, "a paused replay did not report the state paused")
      let status = try await Self.status(daemon.socketPath)
      #expect((status["backend"] as? JSONObject)?["state"] as? String == "paused", "\(status)")

      /// The next `count` TPVs (fewer only when none comes for 30 s: a failure, not a timing).
      /// Whether exactly that many were emitted is checked by what comes next: an extra or a
      /// missing fix shifts every later comparison with the decoded log.
      func nextFixes(_ count: Int) async throws -> [JSONObject] {
        var fixes: [JSONObject] = []
        while fixes.count < count, let event = try await watcher.nextEvent(timeout: 30) {
          if event["class"] as? String == "TPV" { fixes.append(event) }
        }
        return fixes
      }

      var run = try await locationctl(daemon.socketPath, ["replay", "step", "5"])
      #expect(run.status == 0, "\(run.stderr)")
      #expect(parseObject(run.stdout)?["state"] as? String == "paused", "\(run.stdout)")
      // A paused replay emits nothing of its own: the five fixes are the log's first five, and
      // the position after the step is the fifth epoch's.
      let stepped = try await nextFixes(5)
      #expect(
        firstDifference(received: stepped, expected: Array(expected.prefix(5))) == nil,
        "\(firstDifference(received: stepped, expected: Array(expected.prefix(5))) ?? "")")

      let fifth = Double(times[4] - times[0]) / 1000
      #expect(parseObject(run.stdout)?["position"] as? Double == fifth, "\(run.stdout)")
      run = try await locationctl(daemon.socketPath, ["replay", "seek", "20"])
      #expect(run.status == 0, "\(run.stderr)")
      let target = try #require(times.firstIndex { $0 - times[0] >= 20_000 })
      let targetPosition = Double(times[target] - times[0]) / 1000
      #expect(parseObject(run.stdout)?["position"] as? Double == targetPosition, "\(run.stdout)")
      run = try await locationctl(daemon.socketPath, ["replay", "step"])
      #expect(run.status == 0, "\(run.stderr)")
      #expect(parseObject(run.stdout)?["position"] as? Double == targetPosition, "\(run.stdout)")
      let afterSeek = try await nextFixes(1)
      #expect(
        firstDifference(received: afterSeek, expected: [expected[target]]) == nil,
        "\(firstDifference(received: afterSeek, expected: [expected[target]]) ?? "")")

      run = try await locationctl(daemon.socketPath, ["replay", "resume"])
      #expect(
        run.status == 0 && parseObject(run.stdout)?["state"] as? String != "paused", "\(run.stdout)"
      )
      let (rest, _) = try await watcher.collectUntilEndOfData(timeout: 10)
      let remaining = Array(expected[(target + 1)...])
      #expect(
        firstDifference(received: rest, expected: remaining) == nil,
        "\(firstDifference(received: rest, expected: remaining) ?? "")")
      let final = try await locationctl(daemon.socketPath, ["replay", "pause"])
      #expect(
        parseObject(final.stdout)?["state"] as? String == "endOfData",
        "\(final.stdout) \(final.stderr)")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "a member of the configured group (uid 65534 in nogroup) is authorized and gets fixes",
      .timeLimit(.minutes(3)))
    func groupMemberIsAuthorized() async throws {
      try requireNobodyClient(python: true)
      let scratch = try Scratch(mode: 0o755)
      defer { scratch.remove() }
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "simulate?rate=10", group: "nogroup")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      // Authorization is by SO_PEERCRED; the file mode only decides who can connect at all.
      chmod(daemon.socketPath, 0o666)
      // Reads until three fixes came.
      let script = pythonReadingClient(
        sending: [#"{"cmd":"request","id":1}"#, #"{"cmd":"watch","id":2}"#],
        until: #""class":"TPV""#, count: 3)
      let run = try await runAsNobody(["/usr/bin/python3", "-c", script, daemon.socketPath])
      let messages = run.lines.compactMap(parseObject)
      #expect(
        messages.first { $0["id"] as? Int == 1 }?["authorization"] as? String == "authorized",
        "\(run.stdout)")
      #expect(
        messages.first { $0["id"] as? Int == 2 }?["class"] as? String == "WATCH", "\(run.stdout)")
      #expect(
        messages.filter { $0["class"] as? String == "TPV" }.count >= 3, "\(run.stdout.prefix(500))")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }
  }
}

extension EndToEnd.TrackingEndToEndTests {
  @Test(
    "status gives the caller's own tracking and the backend's separately: B's stop leaves A's tracking",
    .timeLimit(.minutes(3)))
  func ownTrackingAndBackendActiveAreSeparate() async throws {
    try requireNobodyClient(python: false)
    let scratch = try Scratch(mode: 0o755)
    defer { scratch.remove() }
    let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10", group: "nogroup")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    chmod(daemon.socketPath, 0o666)
    let tool = try Products.path("locationctl")
    func asNobody(_ arguments: [String]) async throws -> ToolRun {
      try await runAsNobody([tool, "--socket", daemon.socketPath] + arguments)
    }
    // A (root) starts; B (uid 65534, in the group) stops: B's own tracking is off, A's goes on.
    #expect(try await locationctl(daemon.socketPath, ["start"]).status == 0)
    let stop = try await asNobody(["--json", "stop"])
    let stopped = try #require(parseObject(stop.stdout), "\(stop.stderr)")
    #expect(stopped["tracking"] as? Bool == false && stopped["backendActive"] as? Bool == true)
    let human = try await asNobody(["stop"])
    #expect(
      human.stdout == "tracking: off (the backend still runs for other clients)\n",
      "\(human.stdout)")
    let statusB = try #require(parseObject(try await asNobody(["--json", "status"]).stdout))
    #expect(statusB["tracking"] as? Bool == false && statusB["backendActive"] as? Bool == true)
    let humanB = try await asNobody(["status"]).stdout
    #expect(
      humanB.contains("tracking: off for uid 65534: no locationctl start in force and no watch")
        && humanB.contains("backend active: yes"), "\(humanB)"
    )
    let statusA = try await Self.status(daemon.socketPath)
    #expect(statusA["tracking"] as? Bool == true && statusA["backendActive"] as? Bool == true)
    #expect(try await locationctl(daemon.socketPath, ["stop"]).status == 0)
    let after = try await Self.status(daemon.socketPath)
    #expect(after["tracking"] as? Bool == false && after["backendActive"] as? Bool == false)
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }

  @Test(
    "annotation text with quotes, markup and emoji survives map, GeoJSON, SVG and a restart; control characters are refused",
    .timeLimit(.minutes(3)))
  func annotationTextRoundTrips() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    var daemon = try DaemonProcess(scratch: scratch, backend: "simulate", name: "first")
    try await daemon.waitUntilReady()
    let title = "He said \"hi\" <b>&amp;</b> \\ back ✓ 😀"
    let subtitle = "]]></text><script>alert(1)</script>"
    var client = try LineClient(path: daemon.socketPath)
    _ = try await client.require("request", class: "AUTHORIZATION")
    _ = try await client.require(
      "annotate",
      [
        "annotation": [
          "id": "ü \"id\"", "lat": 10.5, "lon": -20.25, "title": title, "subtitle": subtitle,
          "kind": "<poi>",
        ]
      ],
      class: "MAP")
    func checkMap(_ map: JSONObject, sourceLocation: SourceLocation = #_sourceLocation) async {
      let annotation = (map["annotations"] as? [JSONObject])?.first {
        $0["id"] as? String == "ü \"id\""
      }
      #expect(annotation?["title"] as? String == title, sourceLocation: sourceLocation)
      #expect(annotation?["subtitle"] as? String == subtitle, sourceLocation: sourceLocation)
      #expect(annotation?["kind"] as? String == "<poi>", sourceLocation: sourceLocation)
    }
    await checkMap(try await client.require("map", class: "MAP"))
    // Escape sequences and newlines would reach other users' terminals: refused.
    let refused = try await client.call(
      "annotate",
      ["annotation": ["id": "esc", "lat": 1, "lon": 2, "title": "\u{1B}[31mred\u{1B}[0m\n"]])
    #expect(refused["code"] as? String == "invalidArgument", "\(encodeLine(refused))")

    let geo = try await client.require("map", ["format": "geojson"], class: "MAP")
    let features = (geo["geojson"] as? JSONObject)?["features"] as? [JSONObject] ?? []
    let properties = features.compactMap { $0["properties"] as? JSONObject }
    #expect(properties.contains { $0["title"] as? String == title }, "geojson: \(encodeLine(geo))")

    let svg = try #require(
      try await client.require("map", ["format": "svg"], class: "MAP")["svg"] as? String)
    #expect(
      !svg.contains("<script>") && !svg.contains("<b>") && !svg.contains("<poi>"),
      "unescaped markup in the SVG")
    #expect(svg.contains("&lt;b&gt;") || svg.contains("&#60;b&#62;"), "the title is not in the SVG")
    // The SVG must be well-formed XML.
    let parser = XMLParser(data: Data(svg.utf8))
    #expect(
      parser.parse(), "SVG is not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "")")

    #expect(await daemon.stop() == 0)
    daemon = try DaemonProcess(scratch: scratch, backend: "simulate", name: "second")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    client = try LineClient(path: daemon.socketPath)
    _ = try await client.require("request", class: "AUTHORIZATION")
    await checkMap(try await client.require("map", class: "MAP"))
    #expect(await daemon.stop() == 0)
  }
}

extension EndToEnd.TrackingEndToEndTests {
  @Test(
    "seek, speed and resume given while paused play from the seek position at the new speed, without a burst",
    .timeLimit(.minutes(3)))
  func seekSpeedResumeWhilePaused() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let log = scratch.file("drive.nmea")
    try EndToEnd.DocsExamplesTests.writeLog(log)  // 600 epochs, one per second
    let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=1&paused=true")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    let watcher = try LineClient(path: daemon.socketPath)
    try await watcher.authorizeAndWatch(coalesce: false)
    var run = try await locationctl(daemon.socketPath, ["replay", "step", "11"])
    #expect(parseObject(run.stdout)?["position"] as? Double == 10, "\(run.stdout) \(run.stderr)")
    for control in [["seek", "1"], ["speed", "2"], ["resume"]] {
      run = try await locationctl(daemon.socketPath, ["replay"] + control)
      #expect(run.status == 0, "\(control): \(run.stderr)")
    }
    #expect(parseObject(run.stdout)?["position"] as? Double == 1, "\(run.stdout)")
    // The eleven stepped fixes (0 ... 10 s), then the replay goes on from the seek position:
    // the epochs at 1 s and 2 s, in order. (Pacing at the new speed without a burst is checked
    // on the virtual clock: ReplayControlTests.theRawControlsInTheReportedOrderDoNotReplayABurst.)
    var lines: [Int] = []
    while lines.count < 13, let event = try await watcher.nextEvent(timeout: 30) {
      if event["class"] as? String == "TPV", let line = event["line"] as? Int { lines.append(line) }
    }
    try #require(lines.count == 13, "\(lines)")
    let afterResume = Array(lines.dropFirst(11))
    #expect(afterResume == Array(lines[1...2]), "replay did not restart at 1 s: \(lines)")
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }
}
