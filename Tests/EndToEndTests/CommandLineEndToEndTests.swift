import Foundation
import Glibc
import LocationTestKit
import NMEA
import Testing

extension EndToEnd {
  /// The command line as a person meets it: option values, start failures, the human `watch`,
  /// `status` and the one-shot `location --wait`.
  @Suite("End to end: the command line", .serialized, .timeLimit(.minutes(3)))
  struct CommandLineEndToEndTests {
    /// A generated NMEA log of `epochs` epochs at 1 Hz (RMC, GGA, GSA, GSV, VTG).
    /// From epoch `lostFrom` on, the receiver has no position (mode no fix).
    static func writeLog(_ path: String, epochs: Int = 600, lostFrom: Int? = nil) throws {
      let encoder = NMEAEncoder()
      var text = ""
      for index in 0..<epochs {
        var fix = TestRoute.fix(index, periodMilliseconds: 1000)
        if let lostFrom, index >= lostFrom { fix.mode = .noFix }
        for sentence in encoder.encode(fix) {
          text += sentence.hasSuffix("\r\n") ? sentence : sentence + "\r\n"
        }
      }
      try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test(
      "an option's value never starts with --: both programs name the option and the joined form")
    func optionValues() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let locationctl = try Products.path("locationctl")
      // Before: --socket took --json as its path, and --min-interval took --accuracy.
      for (arguments, message) in [
        (
          ["--socket", "--json", "status"],
          "option --socket needs a value, but --json follows it; write --socket=--json"
        ),
        (["--timeout", "--json", "status"], "write --timeout=--json"),
        (
          ["start", "--min-interval", "--accuracy", "5"],
          "option --min-interval needs a value, but --accuracy follows it"
        ),
        (["annotate", "a", "1", "2", "--subtitle", "--kind", "x"], "write --subtitle=--kind"),
        (["simulate", "--pty", "--rate", "1"], "write --pty=--rate"),
        (
          ["decode", "--rollover-floor", "--sky"],
          "option --rollover-floor needs a value, but --sky follows it"
        ),
      ] {
        let run = try await runTool(locationctl, arguments)
        #expect(run.status == 64, "\(arguments): \(run.status) \(run.stderr)")
        #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
      }
      // locationd: --group --backend simulate is a missing group, not an unknown option "simulate".
      let daemon = try await runTool(
        try Products.path("locationd"),
        [
          "--socket", scratch.file("l.sock"), "--state-dir", scratch.file("state"), "--group",
          "--backend", "simulate",
        ])
      #expect(daemon.status == 64, "\(daemon.stderr)")
      #expect(daemon.stderr.contains("write --group=--backend"), "\(daemon.stderr)")
      #expect(!daemon.stderr.contains("unknown option simulate"), "\(daemon.stderr)")
      // Joined, a value may start with --: here a socket path that does not exist.
      let joined = try await runTool(locationctl, ["--socket=/tmp/--none/x.sock", "status"])
      #expect(joined.status == 1, "\(joined.stderr)")
      #expect(
        joined.stderr.contains("socket /tmp/--none/x.sock does not exist"), "\(joined.stderr)")
    }

    @Test("a start failure is printed once, as one line that says what to do")
    func startFailureOnce() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let run = try await runTool(
        try Products.path("locationd"),
        [
          "--socket", scratch.file("l.sock"), "--state-dir", scratch.file("no/such/dir"), "--group",
          "",
        ])
      #expect(run.status == 73, "\(run.stderr)")
      let lines = run.stderr.split(separator: "\n")
      #expect(lines.count == 1, "\(run.stderr)")
      #expect(
        run.stderr.contains("--state-dir \(scratch.file("no/such/dir")) cannot be used"),
        "\(run.stderr)")
      #expect(!run.stderr.contains("startFailed"), "\(run.stderr)")
    }

    @Test(
      "the human watch prints map changes a person cares about, and a shutdown as a sentence with exit 0"
    )
    func humanWatch() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.writeLog(log)
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=20")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let out = scratch.file("watch.out")
      let watch = try Child(
        try Products.path("locationctl"), ["--socket", daemon.socketPath, "watch"], stdout: out,
        stderr: scratch.file("watch.err"))
      func lines() -> [String] {
        ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n").map(
          String.init)
      }
      func fixLines() -> Int { lines().filter { $0.contains(" N ") || $0.contains(" S ") }.count }
      #expect(await waitUntil(timeout: 60) { fixLines() >= 30 }, "\(lines())")
      // Two changes a person sees: a zoom and an annotation.
      #expect(try await locationctl(daemon.socketPath, ["zoom", "12"]).status == 0)
      #expect(
        try await locationctl(
          daemon.socketPath, ["annotate", "home", "49.2827", "-123.1207", "Home"]
        ).status == 0)
      let fixesBefore = fixLines()
      #expect(await waitUntil(timeout: 60) { fixLines() >= fixesBefore + 20 }, "\(lines())")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
      let status = await watch.waitForExit(timeout: 30)
      let printed = lines()
      #expect(
        status == 0, "watch exited \(status.map(String.init) ?? "never"): \(printed.suffix(3))")
      #expect(
        printed.last
          == "locationd is shutting down (SIGTERM): watch ends; run it again once locationd is back",
        "\(printed.suffix(3))")
      #expect(!printed.contains { $0.contains("{\"class\":\"SHUTDOWN\"") }, "\(printed.suffix(3))")
      // MAP lines: the first, the one of the first fix (the center moves to it), the zoom, the
      // annotation; never one per fix (before: one after every fix).
      let mapLines = printed.filter { $0.hasPrefix("center: ") }
      #expect(
        (2...5).contains(mapLines.count),
        "\(mapLines.count) MAP lines for \(fixLines()) fixes: \(mapLines)")
      #expect(mapLines.contains { $0.contains("zoom: 12.00") }, "\(mapLines)")
      #expect(mapLines.contains { $0.contains("home") && $0.contains("Home") }, "\(mapLines)")
    }

    @Test(
      "status says what tracks for this user and why: a watch of the same user in another terminal")
    func statusNamesTheUsersTracking() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.writeLog(log)
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=1&loop=true")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let idle = try await locationctl(daemon.socketPath, ["status"], json: false)
      #expect(idle.status == 0, "\(idle.stderr)")
      #expect(
        idle.stdout.contains(
          "tracking: off for uid \(getuid()): no locationctl start in force and no watch"),
        "\(idle.stdout)")
      // Another terminal of the same user watches.
      let watcher = try LineClient(path: daemon.socketPath)
      try await watcher.authorizeAndWatch(coalesce: true)
      let watched = try await locationctl(daemon.socketPath, ["status"], json: false)
      #expect(
        watched.stdout.contains("tracking: on for uid \(getuid()): 1 watch on another connection"),
        "\(watched.stdout)")
      let json = try await locationctl(daemon.socketPath, ["status"])
      let object = try #require(
        parseObject(json.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
      let user = try #require(object["userTracking"] as? JSONObject, "\(json.stdout)")
      #expect(user["uid"] as? Int == Int(getuid()))
      #expect(user["start"] as? Bool == false)
      #expect(user["watches"] as? Int == 1)
      #expect(user["thisConnection"] as? Bool == false)
      #expect(object["tracking"] as? Bool == false, "the caller's own tracking stays its own")
      #expect(try await locationctl(daemon.socketPath, ["start"]).status == 0)
      let started = try await locationctl(daemon.socketPath, ["status"], json: false)
      #expect(
        started.stdout.contains(
          "tracking: on for uid \(getuid()): started with locationctl start (until locationctl stop); 1 watch"
        ),
        "\(started.stdout)")
      watcher.close()
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test("watch | head -1: the watch ends by SIGPIPE once its reader has gone, without a message")
    func watchIntoAClosedPipe() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.writeLog(log)
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=10&loop=true")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      // The watch's standard output is a FIFO this test reads, as head reads a pipe.
      // Its read end is opened first: posix_spawn waits for the child's open of the write end.
      let fifo = scratch.file("out")
      try #require(mkfifo(fifo, 0o600) == 0)
      let reader = open(fifo, O_RDONLY | O_NONBLOCK)
      try #require(reader >= 0)
      let watch = try Child(
        try Products.path("locationctl"), ["--socket", daemon.socketPath, "watch"], stdout: fifo,
        stderr: scratch.file("err"))
      var buffer = [UInt8](repeating: 0, count: 4096)
      var received = 0
      #expect(
        await waitUntil(timeout: 30) {
          let count = read(reader, &buffer, buffer.count)
          if count > 0 { received += count }
          return received > 0
        })
      close(reader)
      let status = await watch.waitForExit(timeout: 30)
      #expect(status == SIGPIPE, "\(String(describing: status))")
      let message = (try? String(contentsOfFile: scratch.file("err"), encoding: .utf8)) ?? "?"
      #expect(message.isEmpty, "\(message)")

      // Output that cannot be written (a full disk) is an error, for a watch (which used to go
      // on for ever) and for a one-reply command (which used to exit 0).
      for (arguments, name) in [(["watch"], "watch"), (["status"], "status"), (["--json", "status"], "json")] {
        let full = try Child(
          try Products.path("locationctl"), ["--socket", daemon.socketPath] + arguments, stdout: "/dev/full",
          stderr: scratch.file("full-\(name).err"))
        let status = await full.waitForExit(timeout: 30)
        let error = (try? String(contentsOfFile: scratch.file("full-\(name).err"), encoding: .utf8)) ?? "?"
        #expect(status == 1, "\(arguments): \(String(describing: status)) \(error)")
        #expect(error == "locationctl: cannot write the output: No space left on device\n", "\(arguments): \(error)")
      }
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "after epochs without a position, location and status print the last fix with its age, marked stale"
    )
    func staleLocationText() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      // Three epochs with a position, then the receiver loses it.
      let log = scratch.file("lost.nmea")
      try Self.writeLog(log, lostFrom: 3)
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=10")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      #expect(try await locationctl(daemon.socketPath, ["start"]).status == 0)
      var location = try await locationctl(daemon.socketPath, ["location"], json: false)
      #expect(
        await waitUntil(timeout: 30) {
          location = (try? await locationctl(daemon.socketPath, ["location"], json: false)) ?? location
          return location.stdout.contains("(stale)")
        }, "\(location.stdout)")
      // The last position, never a made-up one, and how old it is.
      let lines = location.lines
      #expect(lines.count == 3, "\(location.stdout)")
      #expect(lines.first { $0.hasPrefix("current: ") }?.contains(" N ") == true, "\(location.stdout)")
      let age = lines.first { $0.hasPrefix("age: ") }
      #expect(age?.hasSuffix(" s since the current fix arrived (stale)") == true, "\(location.stdout)")
      let status = try await locationctl(daemon.socketPath, ["status"], json: false)
      #expect(
        status.lines.contains { $0.hasPrefix("age: ") && $0.hasSuffix(" s since the current fix arrived (stale)") },
        "\(status.stdout)")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "location --wait S: tracks for one fix, prints it and stops; exit 1 when none comes in time")
    func oneShotLocation() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.writeLog(log)
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=1&loop=true")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      // Nobody tracks: plain location has nothing (before, the only answer).
      let none = try await locationctl(daemon.socketPath, ["location"], json: false)
      #expect(none.stdout.contains("current: none"), "\(none.stdout)")
      let text = try await locationctl(
        daemon.socketPath, ["location", "--wait", "30"], json: false)
      #expect(text.status == 0, "\(text.stderr)")
      #expect(text.lines.count == 1, "\(text.stdout)")
      #expect(
        text.stdout.contains(" N ") && text.stdout.contains(" E ") && text.stdout.contains("3D"),
        "\(text.stdout)")
      let json = try await locationctl(daemon.socketPath, ["location", "--wait", "30"])
      #expect(json.status == 0, "\(json.stderr)")
      let fix = try #require(
        parseObject(json.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(json.stdout)")
      #expect(fix["class"] as? String == "TPV")
      #expect(fix["lat"] is Double && fix["lon"] is Double, "\(json.stdout)")
      // The tracking ended with the command.
      #expect(
        await waitUntil(timeout: 30) {
          let status = try? await locationctl(daemon.socketPath, ["status"])
          return parseObject(status?.stdout.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")?[
            "backendActive"]
            as? Bool == false
        })
      #expect(await daemon.stop() == 0, "\(daemon.log)")

      // A backend that never gives a fix (no gpsd listens there): exit 1 after the wait.
      let silent = try DaemonProcess(
        scratch: scratch, backend: "gpsd://127.0.0.1:1", name: "silent",
        socketPath: scratch.file("s.sock"),
        stateDirectory: scratch.file("silent-state"))
      defer { silent.cleanUp() }
      try await silent.waitUntilReady()
      let started = now()
      let timedOut = try await locationctl(
        silent.socketPath, ["location", "--wait", "2"], json: false)
      #expect(timedOut.status == 1, "\(timedOut.stdout) \(timedOut.stderr)")
      #expect(timedOut.stderr.contains("no fix within 2 s"), "\(timedOut.stderr)")
      #expect(now() - started >= 2)
      let bad = try await locationctl(silent.socketPath, ["location", "--wait", "0"], json: false)
      #expect(bad.status == 64, "\(bad.stderr)")
      #expect(await silent.stop() == 0, "\(silent.log)")
    }
  }
}
