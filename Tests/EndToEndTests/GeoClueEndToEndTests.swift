import Foundation
import Glibc
import LocationTestKit
import Testing

/// The tools the GeoClue2 tests run: a bus daemon, Debian's where-am-i and Python's GObject
/// bindings (the second client). Absent outside CI, the tests are skipped with this message;
/// with CI=true they run and fail.
let geoClueTools = [
  "/usr/bin/dbus-daemon", "/usr/libexec/geoclue-2.0/demos/where-am-i", "/usr/bin/python3",
  "/usr/share/dbus-1/interfaces/org.freedesktop.GeoClue2.Client.xml",
]
let geoClueTestsEnabled =
  geoClueTools.allSatisfy { access($0, R_OK) == 0 }
  || ProcessInfo.processInfo.environment["CI"] == "true"
let geoClueMissingMessage =
  "GeoClue2 tests skipped: dbus-daemon, geoclue-2.0, geoclue-2-demo or python3-gi missing (run scripts/setup)"

extension EndToEnd {
  /// locationd as GeoClue2 on a private bus (`--dbus system`, `DBUS_SYSTEM_BUS_ADDRESS` pointing
  /// at a dbus-daemon of the test's own), with GeoClue's own client and a Python GDBus client.
  @Suite(
    "End to end: the GeoClue2 D-Bus API", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: geoClueTestsEnabled && corpusTestsEnabled, "\(geoClueMissingMessage)"))
  struct GeoClueEndToEndTests {
    /// A bus, a replaying daemon on it and the environment that points clients at the bus.
    final class Setup {
      let scratch: Scratch
      let bus: PrivateBus
      let daemon: DaemonProcess
      let environment: [String: String]

      /// - Parameter config: when given, the group comes from a config file holding
      ///   `group = CONFIG` (``configFile``), which a test may rewrite before a SIGHUP.
      init(speed: Int, group: String = "", config: String? = nil, log: String) async throws {
        scratch = try Scratch()
        bus = try PrivateBus()
        _ = try await bus.start()
        environment = bus.environment()
        let socket = scratch.file("l.sock")
        let state = scratch.file("state")
        var authority = ["--group", group]
        if let config {
          try "group = \(config)\n".write(
            toFile: scratch.file("locationd.conf"), atomically: true, encoding: .utf8)
          authority = ["--config", scratch.file("locationd.conf")]
        }
        daemon = try DaemonProcess(
          executable: try Products.path("locationd"),
          arguments: [
            "--socket", socket, "--state-dir", state,
            "--backend", "replay:\(log)?speed=\(speed)&loop=true", "--dbus", "system",
          ] + authority,
          environment: environment, logPath: scratch.file("locationd.log"), socketPath: socket,
          stateDirectory: state)
        try await daemon.waitForLog("locationd: dbusReady ")
      }

      func finish() async {
        await daemon.stop()
        cleanUp()
      }

      /// For `defer` on a failed test: stops what still runs, removes the files.
      func cleanUp() {
        daemon.cleanUp()
        bus.stop()
        scratch.remove()
      }

      /// Runs the Python client with `arguments` (as uid 65534 when `asNobody`) and parses the
      /// JSON object it prints last.
      func client(_ arguments: [String], asNobody: Bool = false, timeout: Double = 60) async throws
        -> [String: Any]
      {
        let script = scratch.file("geoclue_client.py")
        if !FileManager.default.fileExists(atPath: script) {
          try geoClueClientScript.write(toFile: script, atomically: true, encoding: .utf8)
          chmod(script, 0o644)
          chmod(scratch.path, 0o755)
        }
        let command = ["/usr/bin/python3", script] + arguments
        let run: ToolRun
        if asNobody {
          run = try await runTool(
            "/usr/bin/setpriv", nobodyCredentials + command, environment: environment,
            timeout: timeout)
        } else {
          run = try await runTool(
            command[0], Array(command.dropFirst()), environment: environment, timeout: timeout)
        }
        guard run.status == 0, let line = run.lines.last,
          let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        else {
          throw E2EError(
            "client \(arguments) exited \(run.status): \(run.stdout)\n\(run.stderr)\n\(daemon.log)")
        }
        return object
      }

      /// The daemon's resident set, KiB (VmRSS).
      func residentKiB() throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(daemon.pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        return try #require(Int(line.split(separator: " ").dropFirst().first ?? ""))
      }
    }

    static func log() throws -> String? { try corpusLog("bu353s4.log") }

    @Test("Debian's unmodified where-am-i prints the replayed fix")
    func whereAmI() async throws {
      guard let log = try Self.log() else { return }
      // Every replayed position as where-am-i prints it (%f). The first one it prints is usually
      // the log's first fix; on a loaded machine the bus thread may take a newer one instead (it
      // always sends the newest fix it has), so any fix of the replay is right, a made-up one not.
      let replayed = Set(
        try await decodedFixes(log).compactMap { fix -> String? in
          guard let lat = fix["lat"] as? Double, let lon = fix["lon"] as? Double else { return nil }
          return String(format: "%f %f", lat, lon)
        })
      #expect(!replayed.isEmpty, "no fix with a position in \(log)")
      let setup = try await Setup(speed: 1, log: log)
      defer { setup.cleanUp() }
      let run = try await runTool(
        "/usr/libexec/geoclue-2.0/demos/where-am-i", ["-t", "5"], environment: setup.environment,
        timeout: 30)
      await setup.finish()
      #expect(run.status == 0, "\(run.stderr)")
      // "Latitude:    -37.784788°": where-am-i prints %f.
      func value(_ name: String) -> String? {
        guard let line = run.lines.first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)
          .replacingOccurrences(of: "°", with: "")
      }
      let printed = "\(value("Latitude") ?? "none") \(value("Longitude") ?? "none")"
      #expect(replayed.contains(printed), "where-am-i printed \(printed), not a replayed fix: \(run.stdout)")
      #expect(
        run.stdout.contains("Client object: /org/freedesktop/GeoClue2/Client/1"), "\(run.stdout)")
    }

    @Test(
      "thresholds suppress as GeoClue does; Stop ends updates; PropertiesChanged for each change")
    func thresholdsAndStop() async throws {
      guard let log = try Self.log() else { return }
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      let result = try await setup.client(["thresholds", "30", "30", "1.5"])
      await setup.finish()
      let every = try #require(result["every"] as? [[String]])
      let timed = try #require(result["timed"] as? [[String]])
      let far = try #require(result["far"] as? [[String]])
      // Every fix to the client without thresholds, each a new Location object, old -> new.
      #expect(every.count == 30)
      for (index, pair) in every.enumerated() {
        #expect(pair.count == 2 && pair[1].hasSuffix("/Location/\(index)"), "\(pair)")
        #expect(pair.first == (index == 0 ? "/" : every[index - 1][1]), "\(pair)")
      }
      #expect(result["locationChanges"] as? Int == every.count)
      // TimeThreshold 3 s: GeoClue's rule (|t - t_signalled| < 3 s suppresses) run over the fix
      // times of every fix delivered (the client without thresholds saw them all) picks exactly
      // the fixes the client got.
      let stamps = try #require(result["everyStamps"] as? [Int])
      let timedFixes = try #require(result["timedFixes"] as? [Int])
      #expect(stamps.count == every.count)
      // Its first location is the first fix after its own Start, whatever the threshold.
      let first = try #require(timedFixes.first)
      try #require(first >= 0 && first < stamps.count)
      var expected = [first]
      var last = stamps[first]
      for index in (first + 1)..<stamps.count where abs(stamps[index] - last) >= 3 {
        expected.append(index)
        last = stamps[index]
      }
      #expect(timedFixes == expected, "fix times \(stamps)")
      #expect(timed.count == timedFixes.count && timed.count < every.count)
      // DistanceThreshold 100 km: the first location only; the object takes the new values.
      #expect(far.count == 1)
      #expect((result["farLocationChanges"] as? Int ?? 0) > 0)
      #expect(result["inUse"] as? Bool == true)
      // Stop: Active true -> false (PropertiesChanged), no update after it; the others go on.
      #expect(result["activeEvents"] as? [Bool] == [true, false])
      #expect(result["activeAfterStop"] as? Bool == false)
      #expect(result["updatesAfterStop"] as? Int == 0)
      #expect((result["timedAfterStop"] as? Int ?? 0) >= timed.count)
      let current = try #require(result["current"] as? [String: Any])
      #expect(
        (current["Latitude"] as? Double).map { abs($0 + 37.7848) < 0.01 } == true, "\(current)")
      #expect((current["Accuracy"] as? Double ?? -1) > 0)
    }

    @Test("Start without DesktopId: GeoClue's AccessDenied")
    func startWithoutDesktopID() async throws {
      guard let log = try Self.log() else { return }
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      let result = try await setup.client(["nodesktop"])
      await setup.finish()
      let error = try #require(result["error"] as? [String: String])
      #expect(error["name"] == "org.freedesktop.DBus.Error.AccessDenied")
      #expect(error["message"] == "'DesktopId' property must be set")
      #expect(result["active"] as? Bool == false)
    }

    @Test("introspection of Manager, Client and Location equals geoclue-2.0's interface XML")
    func introspection() async throws {
      guard let log = try Self.log() else { return }
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      let result = try await setup.client(["introspect"])
      await setup.finish()
      let shipped = try #require(result["shipped"] as? [String: [[String]]])
      let served = try #require(result["served"] as? [String: [[String]]])
      #expect(
        shipped.keys.sorted() == [
          "org.freedesktop.GeoClue2.Client", "org.freedesktop.GeoClue2.Location",
          "org.freedesktop.GeoClue2.Manager",
        ])
      #expect(shipped.values.map(\.count).reduce(0, +) == 23)
      for (name, members) in shipped { #expect(served[name] == members, "\(name)") }
    }

    @Test(
      "tracking over D-Bus shows in the socket's status; a client that leaves without Stop is cleaned up"
    )
    func disconnectWithoutStop() async throws {
      guard let log = try Self.log() else { return }
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      let out = setup.scratch.file("held.out")
      let held = try Child(
        "/usr/bin/python3", ["-c", geoClueClientScript, "hold"], environment: setup.environment,
        stdout: out,
        stderr: out)
      defer { kill(held.pid, SIGKILL) }
      let started = await waitUntil(timeout: 30) {
        ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("\"client\"")
      }
      #expect(started, "\((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")")
      let status = try await locationctl(setup.daemon.socketPath, ["status"])
      #expect(status.stdout.contains("\"backendActive\":true"), "\(status.stdout)")
      let during = try await setup.client(["exists"])
      #expect((during["objects"] as? Int ?? 0) >= 3, "\(during)")
      kill(held.pid, SIGKILL)
      _ = await held.waitForExit(timeout: 10)
      let cleaned = await waitUntil(timeout: 15) {
        let status = try? await locationctl(setup.daemon.socketPath, ["status"])
        return status?.stdout.contains("\"backendActive\":false") == true
      }
      #expect(cleaned, "\(setup.daemon.log)")
      let after = try await setup.client(["exists", "/org/freedesktop/GeoClue2/Client/1"])
      #expect(after["objects"] as? Int == 1, "\(after)")
      let gone =
        (after["introspect"] as? [String: Any])?["/org/freedesktop/GeoClue2/Client/1"]
        as? [String: String]
      #expect(gone?["name"] != nil, "\(after)")
      #expect(setup.daemon.log.contains("dbusClientVanished"))
      await setup.finish()
    }

    @Test(
      "another user cannot read a client's Location objects nor hear its location signals"
    )
    func locationsAreTheOwnersAlone() async throws {
      guard let log = try Self.log() else { return }
      try requireNobodyClient(python: true)
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      let out = setup.scratch.file("held.out")
      let held = try Child(
        "/usr/bin/python3", ["-c", geoClueClientScript, "holdtwo"],
        environment: setup.environment, stdout: out, stderr: out)
      defer { kill(held.pid, SIGKILL) }
      let started = await waitUntil(timeout: 30) {
        ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("\"clients\"")
      }
      try #require(started, "\((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")")
      let clients = ["/org/freedesktop/GeoClue2/Client/1", "/org/freedesktop/GeoClue2/Client/2"]
      // uid 65534, refused by the authority (no group configured).
      let result = try await setup.client(["snoop", "3"] + clients, asNobody: true)
      kill(held.pid, SIGKILL)
      await setup.finish()
      let denied = try #require(result["denied"] as? [String: String])
      #expect((result["answered"] as? [String: Any])?.isEmpty == true, "\(result)")
      #expect(denied.count == 4, "\(result)")
      #expect(
        denied.values.allSatisfy { $0 == "org.freedesktop.DBus.Error.AccessDenied" }, "\(result)")
      // The held clients were signalled during those seconds (10 fixes/s), to their owner only.
      #expect((result["leaks"] as? [String])?.isEmpty == true, "\(result)")
    }

    @Test(
      "fixes far faster than the bus drains them: no queue builds up, calls are answered, SIGTERM is prompt"
    )
    func fixFlood() async throws {
      guard let log = try Self.log() else { return }
      // speed 0: the replay emits fixes as fast as it can, far faster than 8 clients' signals
      // go through the bus.
      let setup = try await Setup(speed: 0, log: log)
      defer { setup.cleanUp() }
      var held: [Child] = []
      defer { for child in held { kill(child.pid, SIGKILL) } }
      for index in 0..<8 {
        let out = setup.scratch.file("held\(index).out")
        held.append(
          try Child(
            "/usr/bin/python3", ["-c", geoClueClientScript, "hold"],
            environment: setup.environment, stdout: out, stderr: out))
      }
      let started = await waitUntil(timeout: 60) {
        (0..<8).allSatisfy { index in
          ((try? String(contentsOfFile: setup.scratch.file("held\(index).out"), encoding: .utf8))
            ?? "").contains("\"client\"")
        }
      }
      try #require(started, "\(setup.daemon.log)")
      let before = try setup.residentKiB()
      // A call while the flood goes on is answered (the client's own timeout is 10 s).
      for _ in 0..<5 {
        let answer = try await setup.client(["inuse"], timeout: 30)
        #expect(answer["inUse"] as? Bool == true, "\(answer)")
      }
      let after = try setup.residentKiB()
      // One client leaving is noticed (NameOwnerChanged served during the flood).
      if let first = held.first {
        kill(first.pid, SIGKILL)
        _ = await first.waitForExit(timeout: 10)
      }
      try await setup.daemon.waitForLog("dbusClientVanished", timeout: 30)
      let status = await setup.daemon.stop()
      #expect(status == 0, "SIGTERM did not end the daemon\n\(setup.daemon.log)")
      let line = try #require(
        setup.daemon.log.split(separator: "\n").first { $0.contains("dbusDelivery ") },
        "\(setup.daemon.log)")
      func figure(_ name: String) -> Int? {
        line.split(separator: " ").first { $0.hasPrefix(name + "=") }
          .flatMap { Int($0.dropFirst(name.count + 1)) }
      }
      // Fixes were replaced in the slot rather than queued, and the job queue held only calls'
      // follow-ups (Start answers), never fixes.
      #expect((figure("missed") ?? 0) > 0, "\(line)")
      let mostJobs = try #require(figure("mostJobs"), "\(line)")
      #expect(mostJobs <= 16, "\(line)")
      #expect(after - before < 32 * 1024, "RSS grew from \(before) KiB to \(after) KiB")
      setup.cleanUp()
    }

    @Test("a user's clients are capped per uid; refused Starts are logged at counts 1, 2, 4, 8...")
    func perUserCapAndRefusalLog() async throws {
      guard let log = try Self.log() else { return }
      try requireNobodyClient(python: true)
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      // uid 65534 on 4 connections of 32: 64 clients (the per-user cap), then LimitsExceeded.
      let flood = try await setup.client(["flood", "4", "32"], asNobody: true)
      #expect(flood["created"] as? Int == 64, "\(flood)")
      let errors = try #require(flood["errors"] as? [[String: String]])
      #expect(errors.first?["name"] == "org.freedesktop.DBus.Error.LimitsExceeded", "\(flood)")
      #expect(errors.first?["message"]?.contains("per user") == true, "\(flood)")
      // Root is not locked out, and an authorized user is not capped per uid (96 > 64).
      let root = try await setup.client(["start"])
      #expect(root["error"] is NSNull, "\(root)")
      let rootFlood = try await setup.client(["flood", "3", "32"])
      #expect(rootFlood["created"] as? Int == 96, "\(rootFlood)")
      // 40 refused Starts: logged at 1, 2, 4, 8, 16, 32.
      let refused = try await setup.client(["refused", "40"], asNobody: true)
      #expect(refused["refused"] as? Int == 40, "\(refused)")
      await setup.daemon.stop()
      let lines = setup.daemon.log.split(separator: "\n").filter {
        $0.contains("authorization ") && $0.contains("uid=65534")
      }
      #expect(lines.count == 6, "\(lines)")
      #expect(lines.last?.contains("refusals=32") == true, "\(lines)")
      // Client creations and departures are logged at counts 1, 2, 4, 8... per uid too: nobody
      // created at least 64 clients (7 lines: created=1...64), and at most 128.
      let created = setup.daemon.log.split(separator: "\n").filter {
        ($0.contains("dbusClient ") || $0.contains("dbusClientVanished ")) && $0.contains("uid=65534")
      }
      let counts = created.compactMap { line in line.firstMatch(of: /(created|vanished)=(\d+)/).flatMap { Int($0.output.2) } }
      #expect(counts.count == created.count, "\(created)")
      #expect(counts.allSatisfy { $0 & ($0 - 1) == 0 }, "\(counts)")
      #expect((7...8).contains(created.filter { $0.contains("dbusClient ") }.count), "\(created)")
      #expect(created.count <= 16, "\(created.count) lines for uid 65534")
      setup.cleanUp()
    }

    @Test("at the global cap, root takes the room of a refused user's client")
    func authorizedCallerEvictsAtTheCap() async throws {
      guard let log = try Self.log() else { return }
      try requireNobodyClient(python: true)
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      let script = setup.scratch.file("flood.py")
      try geoClueClientScript.write(toFile: script, atomically: true, encoding: .utf8)
      chmod(script, 0o644)
      chmod(setup.scratch.path, 0o755)
      // 16 refused users with 64 clients each: all 1024 taken. The bus daemon authenticates
      // only uids the system knows: the first 16 of /etc/passwd besides root and nobody.
      let passwd = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
      let uids = passwd.split(separator: "\n").compactMap { line -> Int? in
        let fields = line.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count > 2, let uid = Int(fields[2]), uid != 0, uid != 65534 else { return nil }
        return uid
      }.prefix(16)
      try #require(uids.count == 16, "needs 16 users besides root and nobody in /etc/passwd")
      var floods: [Child] = []
      defer { for child in floods { kill(child.pid, SIGKILL) } }
      for (index, uid) in uids.enumerated() {
        let out = setup.scratch.file("flood\(index).out")
        floods.append(
          try Child(
            "/usr/bin/setpriv",
            [
              "--reuid=\(uid)", "--regid=65534", "--clear-groups", "/usr/bin/python3",
              script, "flood", "2", "32", "600",
            ], environment: setup.environment, stdout: out, stderr: out))
      }
      let full = await waitUntil(timeout: 30) {
        (0..<16).allSatisfy { index in
          ((try? String(contentsOfFile: setup.scratch.file("flood\(index).out"), encoding: .utf8))
            ?? "").contains("\"created\": 64")
        }
      }
      try #require(
        full,
        "\((try? String(contentsOfFile: setup.scratch.file("flood0.out"), encoding: .utf8)) ?? "")\n\(setup.daemon.log.suffix(1500))"
      )
      // uid 65534, refused too, finds no room; root does.
      let refused = try await setup.client(["flood", "1", "1"], asNobody: true)
      let errors = try #require(refused["errors"] as? [[String: String]])
      #expect(errors.first?["message"]?.contains("in all") == true, "\(refused)")
      let root = try await setup.client(["start"])
      #expect(root["error"] is NSNull, "\(root)")
      await setup.daemon.stop()
      #expect(setup.daemon.log.contains("dbusClientEvicted "), "\(setup.daemon.log.suffix(2000))")
      setup.cleanUp()
    }

    @Test(
      "a member of the group (its 101st of UnixGroupIDs) may locate; a reload that drops the group stops it"
    )
    func groupFromTheBusAndRevocation() async throws {
      guard let log = try Self.log() else { return }
      try requireNobodyClient(python: true)
      let setup = try await Setup(speed: 10, config: "nogroup", log: log)
      defer { setup.cleanUp() }
      let script = setup.scratch.file("revocable.py")
      try geoClueClientScript.write(toFile: script, atomically: true, encoding: .utf8)
      chmod(script, 0o644)
      chmod(setup.scratch.path, 0o755)
      let out = setup.scratch.file("revocable.out")
      // uid 65534 in 100 other groups and then nogroup (65534): a member of the configured group
      // whose membership is the 101st gid the bus reports.
      let groups = (1000..<1100).map(String.init).joined(separator: ",") + ",65534"
      let client = try Child(
        "/usr/bin/setpriv",
        [
          "--reuid=65534", "--regid=65534", "--groups=" + groups, "/usr/bin/python3", script,
          "revocable",
        ],
        environment: setup.environment, stdout: out, stderr: out)
      defer { kill(client.pid, SIGKILL) }
      let started = await waitUntil(timeout: 30) {
        ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("\"updates\": 1")
      }
      #expect(
        started, "\((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")\n\(setup.daemon.log)"
      )
      try "group = \n".write(
        toFile: setup.scratch.file("locationd.conf"), atomically: true, encoding: .utf8)
      setup.daemon.signal(SIGHUP)
      let status = await client.waitForExit(timeout: 60)
      #expect(status == 0)
      let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
      let last = try #require(text.split(separator: "\n").last.map(String.init))
      let result = try #require(
        try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
      #expect(result["start"] is NSNull, "\(result)")
      #expect(result["revoked"] as? Bool == true, "\(result)")
      #expect(result["active"] as? Bool == false)
      let again = try #require(result["startAgain"] as? [String: String])
      #expect(again["name"] == "org.freedesktop.DBus.Error.AccessDenied")
      #expect(again["message"]?.hasPrefix("uid 65534 is not authorized") == true, "\(again)")
      await setup.finish()
    }

    @Test("a name already owned or a missing bus stops the start with exit 69 and says why")
    func startFailures() async throws {
      guard let log = try Self.log() else { return }
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      func second(_ environment: [String: String], _ name: String) async throws -> (Int32?, String)
      {
        let daemon = try DaemonProcess(
          executable: try Products.path("locationd"),
          arguments: [
            "--socket", setup.scratch.file(name + ".sock"), "--state-dir",
            setup.scratch.file(name + "-state"),
            "--group", "", "--backend", "replay:\(log)", "--dbus", "system",
          ],
          environment: environment, logPath: setup.scratch.file(name + ".log"),
          socketPath: setup.scratch.file(name + ".sock"),
          stateDirectory: setup.scratch.file(name + "-state"))
        defer { daemon.cleanUp() }
        return (await daemon.waitForExit(timeout: 20), daemon.log)
      }
      let (taken, takenLog) = try await second(setup.environment, "taken")
      #expect(taken == 69, "\(takenLog)")
      // The owner is named as the bus driver reports it: the first daemon's PID and command
      // line, not a guess that GeoClue runs; and the failure is printed once.
      #expect(
        takenLog.contains(
          "org.freedesktop.GeoClue2 is already owned on the system bus by process \(setup.daemon.pid) ("
            + (try Products.path("locationd")) + " --socket "),
        "\(takenLog)")
      #expect(takenLog.components(separatedBy: "already owned").count == 2, "\(takenLog)")
      #expect(!takenLog.contains("startFailed"), "\(takenLog)")
      var missing = setup.environment
      missing["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=" + setup.scratch.file("no-bus")
      let (absent, absentLog) = try await second(missing, "absent")
      #expect(absent == 69, "\(absentLog)")
      #expect(absentLog.contains("cannot connect to the D-Bus system bus"), "\(absentLog)")
      #expect(absentLog.components(separatedBy: "cannot connect").count == 2, "\(absentLog)")
      // The first one still serves.
      let result = try await setup.client(["nodesktop"])
      #expect(
        (result["error"] as? [String: String])?["message"] == "'DesktopId' property must be set")
      await setup.finish()
    }

    @Test(
      "bad input gets D-Bus errors; thousands of CreateClient hit the cap; objects and RSS come back"
    )
    func badInput() async throws {
      guard let log = try Self.log() else { return }
      let setup = try await Setup(speed: 10, log: log)
      defer { setup.cleanUp() }
      // A first round warms up what any first client allocates once (sd-bus tables, caches).
      _ = try await setup.client(["badinput", "3000"])
      let before = try setup.residentKiB()
      let result = try await setup.client(["badinput", "3000"])
      let after = try setup.residentKiB()
      let unauthorized = try await setup.client(["start"], asNobody: true)
      let left = await waitUntil(timeout: 15) {
        ((try? await setup.client(["exists"]))?["objects"] as? Int) == 1
      }
      await setup.finish()
      func error(_ key: String) -> [String: String]? { result[key] as? [String: String] }
      #expect(error("distanceAsString")?["name"] == "org.freedesktop.DBus.Error.InvalidArgs")
      #expect(error("timeNegative")?["name"] == "org.freedesktop.DBus.Error.InvalidArgs")
      #expect(error("accuracy3")?["name"] == "org.freedesktop.DBus.Error.InvalidArgs")
      #expect(error("accuracy9")?["name"] == "org.freedesktop.DBus.Error.InvalidArgs")
      #expect(error("readOnly")?["name"] == "org.freedesktop.DBus.Error.PropertyReadOnly")
      #expect(error("startWithArgs")?["name"] == "org.freedesktop.DBus.Error.InvalidArgs")
      #expect(error("deleteWrongType")?["name"] == "org.freedesktop.DBus.Error.InvalidArgs")
      #expect(error("longDesktopId")?["name"] == "org.freedesktop.DBus.Error.InvalidArgs")
      #expect(result["deleteLongPath"] is NSNull, "\(result)")
      #expect(result["deleteOtherPath"] is NSNull, "\(result)")
      #expect(
        error("addAgent") == [
          "name": "org.freedesktop.DBus.Error.AccessDenied",
          "message": "geoclue-demo-agent not allowed to act as agent",
        ])
      let cap = try #require(result["cap"] as? [String: Any])
      #expect(cap["after"] as? Int == 32)
      #expect(
        (cap["error"] as? [String: String])?["name"] == "org.freedesktop.DBus.Error.LimitsExceeded")
      #expect(result["objectsAtCap"] as? Int == 33)
      #expect(result["objectsAfterDelete"] as? Int == 1)
      #expect(after - before < 512, "RSS grew from \(before) KiB to \(after) KiB")
      // Root only (--group ""): uid 65534 may create a client, not locate.
      let denied = try #require(unauthorized["error"] as? [String: String])
      #expect(denied["name"] == "org.freedesktop.DBus.Error.AccessDenied")
      #expect(denied["message"]?.hasPrefix("uid 65534 is not authorized") == true, "\(denied)")
      #expect(left)
    }
  }
}
