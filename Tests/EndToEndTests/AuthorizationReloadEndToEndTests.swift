import Foundation
import Glibc
import Testing

extension EndToEnd {
  /// SIGHUP changing the service's group, seen by one client of uid 65534 (nobody, in nogroup):
  /// every command answers from the same rule, before and after the reload.
  @Suite("End to end: authorization across a reload", .serialized)
  struct AuthorizationReloadEndToEndTests {
    /// A client as uid 65534 that sends `request` and `watch`, creates `READY`, waits for `GO`,
    /// then sends `start`, `location`, `watch` and `request` (ids 3 to 6) and prints every line
    /// it received, replies and events, in order.
    static let script =
      pythonClientPrelude + """
        ready, go = sys.argv[2:4]
        s.sendall(b'{"cmd":"request","id":1}\\n{"cmd":"watch","id":2}\\n')
        pump(lambda: b'"id":2' in data and data.count(b'"class":"TPV"') >= 2, 10)
        open(ready, "w").close()
        pump(lambda: os.path.exists(go), 30)
        s.sendall(b'{"cmd":"start","id":3}\\n{"cmd":"location","id":4}\\n{"cmd":"watch","id":5}\\n{"cmd":"request","id":6}\\n')
        pump(lambda: b'"id":6' in data, 10)
        pump(lambda: False, 0.5)
        sys.stdout.write(data.decode())
        """

    /// Starts the daemon (simulated 10 Hz fixes) with `group` from the config file it returns,
    /// waits until it is ready and opens its socket file to everyone.
    static func startDaemon(_ scratch: Scratch, group: String) async throws -> (
      daemon: DaemonProcess, config: String
    ) {
      let config = scratch.file("locationd.conf")
      try "group = \(group)\n".write(toFile: config, atomically: true, encoding: .utf8)
      let daemon = try DaemonProcess(scratch: scratch, config: config, backend: "simulate?rate=10")
      do {
        try await daemon.waitUntilReady()
      } catch {
        daemon.cleanUp()
        throw error
      }
      // Authorization is by SO_PEERCRED; the file mode only decides who can connect at all.
      chmod(daemon.socketPath, 0o666)
      return (daemon, config)
    }

    /// Runs the daemon with `group` from a config file; `reloadTo` is written to the file and
    /// SIGHUP sent either while the client is between its two batches (`beforeClient` false) or
    /// before it connects. Returns the client's lines, parsed, and the daemon's log.
    static func run(group: String, reloadTo: String, beforeClient: Bool) async throws -> (
      messages: [[String: Any]], log: String
    ) {
      let scratch = try Scratch(mode: 0o755)
      defer { scratch.remove() }
      let (daemon, config) = try await startDaemon(scratch, group: group)
      defer { daemon.cleanUp() }
      let socket = daemon.socketPath
      func reload() async throws {
        try "group = \(reloadTo)\n".write(toFile: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        try await daemon.waitForLog("reloaded group=\(reloadTo)")
        chmod(socket, 0o666)  // the reload gave the socket file the new group, mode 0660
      }
      if beforeClient { try await reload() }
      // The client (uid 65534) creates READY, so the two flags live in a directory it may write.
      let flags = scratch.file("flags")
      mkdir(flags, 0o755)
      chmod(flags, 0o777)
      let ready = flags + "/ready"
      let go = flags + "/go"
      if beforeClient { FileManager.default.createFile(atPath: go, contents: nil) }
      let client = Task {
        try await runAsNobody(["/usr/bin/python3", "-c", script, socket, ready, go])
      }
      if !beforeClient {
        #expect(await waitUntil(timeout: 20) { access(ready, F_OK) == 0 }, "\(daemon.log)")
        try await reload()
        FileManager.default.createFile(atPath: go, contents: nil)
      }
      let output = try await client.value
      #expect(await daemon.stop() == 0, "\(daemon.log)")
      return (output.lines.compactMap(parseObject), daemon.log)
    }

    static func reply(_ messages: [[String: Any]], _ id: Int) -> [String: Any]? {
      messages.first { $0["id"] as? Int == id }
    }

    @Test(
      "a reload that drops the client's group: start, location, watch and request all refused; watch ended, client told",
      .timeLimit(.minutes(1)))
    func reloadRevokes() async throws {
      try requireNobodyClient(python: true)
      let (messages, log) = try await Self.run(
        group: "nogroup", reloadTo: "daemon", beforeClient: false)
      let text = messages.map(encodeLine).joined(separator: "\n")
      #expect(Self.reply(messages, 1)?["authorization"] as? String == "authorized", "\(text)")
      #expect(Self.reply(messages, 2)?["class"] as? String == "WATCH", "\(text)")
      for id in 3...6 {
        #expect(
          Self.reply(messages, id)?["code"] as? String == "notAuthorized", "id \(id): \(text)")
      }
      let told = messages.firstIndex {
        $0["class"] as? String == "AUTHORIZATION" && $0["id"] == nil
          && $0["authorization"] as? String == "denied"
      }
      #expect(told != nil, "\(text)")
      if let told {
        let later = messages[(told + 1)...].filter { $0["class"] as? String == "TPV" }
        #expect(later.isEmpty, "fixes after the client lost its authorization: \(text)")
      }
      #expect(log.contains("authorizationChanged"), "\(log)")
    }

    @Test(
      "locationctl watch run by a user the reload takes out of the group says so and exits 1",
      .timeLimit(.minutes(1)))
    func watchExitsWhenRevoked() async throws {
      try requireNobodyClient(python: false)
      let scratch = try Scratch(mode: 0o755)
      defer { scratch.remove() }
      let (daemon, config) = try await Self.startDaemon(scratch, group: "nogroup")
      defer { daemon.cleanUp() }
      let socket = daemon.socketPath
      let out = scratch.file("watch.out")
      let err = scratch.file("watch.err")
      let watch = try Child(
        "/usr/bin/setpriv",
        nobodyCredentials + [try Products.path("locationctl"), "--socket", socket, "watch"],
        stdout: out, stderr: err)
      defer { if watch.isRunning { kill(watch.pid, SIGKILL) } }
      let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
      #expect(
        await waitUntil(timeout: 20) { read(out).contains(" N ") || read(out).contains(" S ") },
        "\(read(out))")
      try "group = daemon\n".write(toFile: config, atomically: true, encoding: .utf8)
      daemon.signal(SIGHUP)
      #expect(await watch.waitForExit(timeout: 20) == 1, "\(read(out))\(read(err))")
      #expect(read(out).contains("authorization: denied"), "\(read(out))")
      #expect(read(err).contains("withdrew this client's authorization"), "\(read(err))")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "a reload that adds the client's group: request, start, location and watch all granted",
      .timeLimit(.minutes(1)))
    func reloadGrants() async throws {
      try requireNobodyClient(python: true)
      let (messages, log) = try await Self.run(
        group: "daemon", reloadTo: "nogroup", beforeClient: true)
      let text = messages.map(encodeLine).joined(separator: "\n")
      #expect(
        Self.reply(messages, 1)?["authorization"] as? String == "authorized", "\(text)\n\(log)")
      #expect(Self.reply(messages, 2)?["class"] as? String == "WATCH", "\(text)")
      #expect(Self.reply(messages, 3)?["class"] as? String == "TRACKING", "\(text)")
      #expect(Self.reply(messages, 4)?["class"] as? String == "LOCATION", "\(text)")
      #expect(Self.reply(messages, 5)?["class"] as? String == "WATCH", "\(text)")
      #expect(Self.reply(messages, 6)?["authorization"] as? String == "authorized", "\(text)")
      #expect(messages.contains { $0["class"] as? String == "TPV" }, "\(text)")
    }
  }
}
