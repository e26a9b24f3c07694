import Foundation
import Glibc
import SystemIO
import Testing

extension EndToEnd {
  /// A running daemon attacked from outside: planted links and FIFOs in its state directory, a
  /// pipelining slow reader, a full disk, too few descriptors, a bad reload, a denied user.
  @Suite("End to end: an attacked daemon", .serialized)
  struct AttackedDaemonEndToEndTests {
    @Test(
      "5,000 pipelined status requests read 4 KiB at a time all get their reply",
      .timeLimit(.minutes(3)))
    func pipelinedSlowReader() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let client = try LineClient(path: daemon.socketPath)
      // Tracking, so that each status carries the initial and current fix (about 750 bytes):
      // 5,000 replies are then several times what the socket and the backlog bound hold.
      #expect(try await client.call("request")["class"] as? String == "AUTHORIZATION")
      #expect(try await client.call("start")["class"] as? String == "TRACKING")
      #expect(
        try await waitUntil(timeout: 30) {
          try await client.call("status")["current"] is [String: Any]
        })
      _ = fcntl(client.fd, F_SETFL, fcntl(client.fd, F_GETFL) | O_NONBLOCK)
      let count = 5000
      var pending = Array((1...count).map { #"{"cmd":"status","id":\#($0)}"# + "\n" }.joined().utf8)
      var received: [UInt8] = []
      var ids: [Int] = []
      var errors: [String] = []
      var closed = false
      var rounds = 0
      // Bounded: 4 KiB per round, so 5,000 replies of a few hundred bytes need a few thousand.
      while ids.count + errors.count < count && !closed && rounds < 300_000 {
        rounds += 1
        if !pending.isEmpty {
          let written = pending.withUnsafeBytes {
            Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
          }
          if written > 0 { pending.removeFirst(written) }
        }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let read = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
        if read == 0 { closed = true }
        if read > 0 {
          received.append(contentsOf: chunk[0..<read])
          while let newline = received.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: received[..<newline], as: UTF8.self)
            received.removeSubrange(...newline)
            if let object = parseObject(line), object["class"] as? String == "STATUS",
              let id = object["id"] as? Int
            {
              ids.append(id)
            } else {
              errors.append(line)
            }
          }
        }
        await pause(0.001)
      }
      #expect(!closed, "disconnected after \(ids.count) replies:\n\(daemon.log)")
      #expect(errors.isEmpty, "\(errors.prefix(3))")
      #expect(ids == Array(1...count))
      #expect(!daemon.log.contains("slowClient"))
      #expect(await daemon.stop() == 0)
    }

    @Test(
      "links planted at the temporary names and a FIFO in place of the state file change nothing",
      .timeLimit(.minutes(3)))
    func plantedLinksAndFIFO() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let state = scratch.file("state")
      #expect(mkdir(state, 0o700) == 0)
      // A crash left temporary files; someone made the state file a FIFO.
      for index in 0..<20 {
        try "{".write(toFile: state + "/.mapstate.json.tmp-\(index)", atomically: false, encoding: .utf8)
      }
      #expect(mkfifo(state + "/mapstate.json", 0o600) == 0)
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate", stateDirectory: state)
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      #expect(daemon.log.contains("not a regular file"), "\(daemon.log)")
      #expect(daemon.log.contains("count=20"), "\(daemon.log)")
      // A FIFO at the name derived from the process id (opening it for writing would wait for a
      // reader), links at the names around it.
      let victim = scratch.file("victim")
      try "precious\n".write(toFile: victim, atomically: false, encoding: .utf8)
      #expect(mkfifo(state + "/.mapstate.json.tmp-\(daemon.pid)", 0o600) == 0)
      for pid in (daemon.pid - 3)...(daemon.pid + 3) where pid != daemon.pid {
        symlink(victim, state + "/.mapstate.json.tmp-\(pid)")
      }
      let zoom = try await runTool(
        try Products.path("locationctl"), ["--socket", daemon.socketPath, "--json", "zoom", "9"],
        timeout: 10)
      #expect(zoom.status == 0, "\(zoom.stdout)\(zoom.stderr)")
      let map = try await locationctl(daemon.socketPath, ["map"])
      #expect(map.status == 0)
      #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n")
      var info = stat()
      #expect(lstat(state + "/mapstate.json", &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
      #expect(await daemon.stop() == 0)
    }

    @Test("a state directory others may write, or owned by another user, is refused at start")
    func unsafeStateDirectory() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let state = scratch.file("state")
      #expect(mkdir(state, 0o700) == 0)
      chmod(state, 0o777)
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate", stateDirectory: state)
      defer { daemon.cleanUp() }
      #expect(await daemon.waitForExit(timeout: 15) == 78)  // EX_CONFIG: the environment, not the command line, is wrong
      #expect(daemon.log.contains("writable by group or others"), "\(daemon.log)")
      if geteuid() == 0 {
        chmod(state, 0o755)
        #expect(chown(state, 65534, 65534) == 0)
        let other = try DaemonProcess(
          scratch: scratch, backend: "simulate", name: "other", stateDirectory: state)
        defer { other.cleanUp() }
        #expect(await other.waitForExit(timeout: 15) == 78)
        #expect(other.log.contains("owned by uid 65534"), "\(other.log)")
      }
    }

    @Test(
      "on a full filesystem a change is answered notSaved, then saved once there is room",
      .timeLimit(.minutes(3)))
    func fullFilesystem() async throws {
      try #require(geteuid() == 0, "needs root to mount a small tmpfs")
      let scratch = try Scratch()
      defer { scratch.remove() }
      let state = scratch.file("state")
      #expect(mkdir(state, 0o700) == 0)
      let mount = try await runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", state])
      try #require(mount.status == 0, "mount failed: \(mount.stderr)")
      defer { _ = umount2(state, 2) }  // MNT_DETACH
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate", stateDirectory: state)
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      #expect(try await locationctl(daemon.socketPath, ["annotate", "first", "1", "2", "First"]).status == 0)
      // Fill the filesystem.
      let filler = state + "/filler"
      let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
      try #require(fd >= 0)
      let block = [UInt8](repeating: 0x61, count: 4096)
      var writes = 0
      while writes < 1000, (block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }) > 0 { writes += 1 }
      close(fd)
      let annotate = try await locationctl(daemon.socketPath, ["annotate", "second", "3", "4", "Second"])
      #expect(annotate.status == 1)
      #expect(annotate.stdout.contains("\"code\":\"notSaved\""), "\(annotate.stdout)\(annotate.stderr)")
      #expect(annotate.stdout.contains("No space left on device"), "\(annotate.stdout)")
      // There is room again: the next change saves both.
      unlink(filler)
      #expect(try await locationctl(daemon.socketPath, ["zoom", "6"]).status == 0)
      #expect(await daemon.stop() == 0)
      let restarted = try DaemonProcess(
        scratch: scratch, backend: "simulate", name: "restarted", stateDirectory: state)
      defer { restarted.cleanUp() }
      try await restarted.waitUntilReady()
      let map = try await locationctl(restarted.socketPath, ["map"])
      let ids = ((parseObject(map.stdout)?["annotations"] as? [Any]) ?? []).compactMap {
        ($0 as? [String: Any])?["id"] as? String
      }
      #expect(ids == ["first", "second"], "\(map.stdout)")
      #expect(await restarted.stop() == 0)
    }

    @Test(
      "clients cannot take the daemon's last descriptors: beyond its reserve they are refused, changes are still saved, tracking goes on",
      .timeLimit(.minutes(3)))
    func outOfDescriptors() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let socket = scratch.file("l.sock")
      let state = scratch.file("state")
      let limit = 56
      let daemon = try DaemonProcess(
        executable: "/usr/bin/prlimit",
        arguments: [
          "--nofile=\(limit):\(limit)", try Products.path("locationd"), "--socket", socket, "--state-dir",
          state, "--group", "", "--backend", "simulate",
        ],
        environment: nil, logPath: scratch.file("locationd.log"), socketPath: socket,
        stateDirectory: state)
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let first = try LineClient(path: socket)
      // A generous wait (a parallel run beside the corpus replays has kept a reply from this
      // daemon for over 10 s once); the daemon's log comes with a failure.
      do {
        #expect(try await first.call("request", timeout: 60)["class"] as? String == "AUTHORIZATION")
      } catch {
        Issue.record("\(error)\n\(daemon.log)")
        return
      }
      // Connect until the daemon refuses: every one beyond its reserve is told so and closed.
      var others: [LineClient] = []
      while others.count < limit {
        let client = try LineClient(path: socket)
        // Each connection is either admitted (logged clientConnected) or refused.
        let connected = others.count + 2
        #expect(
          await waitUntil(timeout: 30) {
            daemon.log.contains("acceptFailed")
              || daemon.log.components(separatedBy: "clientConnected").count > connected
          }, "\(daemon.log)")
        if !daemon.log.contains("acceptFailed") {
          others.append(client)
          continue
        }
        let refusal = try await client.readObject()
        #expect(refusal?["code"] as? String == "unavailable", "\(refusal.map(encodeLine) ?? "no reply")")
        break
      }
      #expect(daemon.log.contains("keeping \(Int(DescriptorReserve.count)) descriptors free below the limit of \(limit)"), "\(daemon.log)")
      let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/fd").count) ?? limit
      #expect(open <= limit - Int(DescriptorReserve.count), "\(open) descriptors open, limit \(limit)")
      // A client beyond the reserve is answered, not left waiting; the shortage is logged once.
      let late = try LineClient(path: socket)
      let refusal = try await late.readObject()
      #expect(refusal?["code"] as? String == "unavailable", "\(refusal.map(encodeLine) ?? "no reply")")
      #expect(daemon.log.components(separatedBy: "acceptFailed").count == 2, "\(daemon.log)")
      // The reserve is the daemon's own: a change is saved, and fixes flow for longer than the
      // one second after which Dispatch's thread-pool monitor opens /proc files.
      _ = try await first.require(
        "annotate", ["annotation": ["id": "kept", "lat": 1.0, "lon": 2.0, "title": "Kept"]], class: "MAP")
      _ = try await first.call("start")
      var fixTimes: Set<String> = []
      #expect(
        try await waitUntil(timeout: 30) {
          let current = try await first.call("status")["current"] as? JSONObject
          if let time = current?["time"] as? String { fixTimes.insert(time) }
          return fixTimes.count >= 3
        }, "\(fixTimes) \(daemon.log)")
      // With the descriptors back, a new client is served again.
      for client in others { client.close() }
      others.removeAll()
      #expect(
        try await waitUntil(timeout: 30) {
          try await first.call("status")["clients"] as? Int == 1
        }, "\(daemon.log)")
      let again = try LineClient(path: socket)
      #expect(try await again.call("request", timeout: 60)["class"] as? String == "AUTHORIZATION", "\(daemon.log)")
      #expect(daemon.log.contains("acceptRecovered"), "\(daemon.log)")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
      let restarted = try DaemonProcess(
        scratch: scratch, backend: "simulate", name: "restarted", socketPath: scratch.file("r.sock"),
        stateDirectory: state)
      defer { restarted.cleanUp() }
      try await restarted.waitUntilReady()
      let map = try await locationctl(restarted.socketPath, ["map"])
      #expect(map.stdout.contains("\"id\":\"kept\""), "\(map.stdout)")
      #expect(await restarted.stop() == 0)
    }

    @Test(
      "descriptors a parent left open at high numbers count too: clients cannot take the reserve from under them",
      .timeLimit(.minutes(3)))
    func inheritedHighDescriptors() async throws {
      try #require(access("/usr/bin/python3", X_OK) == 0)
      let scratch = try Scratch()
      defer { scratch.remove() }
      let socket = scratch.file("l.sock")
      let limit = 100
      // 40 descriptors at 60...99, then the limit, then the daemon: the numbers clients get stay
      // low, so only a count of what is open shows how few are free.
      let daemon = try DaemonProcess.startedByPython(
        """
        fd = os.open("/dev/null", os.O_RDONLY)
        for n in range(60, 100): os.dup2(fd, n, inheritable=True)
        resource.setrlimit(resource.RLIMIT_NOFILE, (\(limit), \(limit)))
        """, scratch: scratch, socket: socket)
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      var held: [LineClient] = []
      var refused = 0
      for _ in 0..<limit {
        let client = try LineClient(path: socket)
        // A refused client may find the connection closed before its request goes out: the
        // refusal is read all the same.
        let reply: JSONObject?
        do { reply = try await client.call("request", timeout: 60) } catch { reply = try await client.readObject() }
        if reply?["code"] as? String == "unavailable" { refused += 1 } else { held.append(client) }
        if refused == 3 { break }
      }
      #expect(refused == 3, "\(held.count) clients held")
      let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/fd").count) ?? limit
      #expect(open <= limit - Int(DescriptorReserve.count), "\(open) descriptors open, limit \(limit)")
      _ = try await held[0].require(
        "annotate", ["annotation": ["id": "kept", "lat": 1.0, "lon": 2.0, "title": "Kept"]], class: "MAP")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test("a descriptor limit that leaves no room for the reserve is refused at start, with what to do")
    func descriptorLimitTooLow() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let run = try await runTool(
        "/usr/bin/prlimit",
        [
          "--nofile=24:24", try Products.path("locationd"), "--socket", scratch.file("l.sock"), "--state-dir",
          scratch.file("state"), "--group", "", "--backend", "simulate",
        ])
      #expect(run.status == 71, "\(run.stderr)")
      #expect(run.stderr.contains("under the limit of 24); locationd needs 32 free: raise the limit"), "\(run.stderr)")
      #expect(!FileManager.default.fileExists(atPath: scratch.file("state")), "nothing created")
    }

    @Test("SIGHUP with a group that does not exist is refused and the old group stays", .timeLimit(.minutes(3)))
    func reloadWithUnknownGroup() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let config = scratch.file("locationd.conf")
      try "group = daemon\n".write(toFile: config, atomically: true, encoding: .utf8)
      let daemon = try DaemonProcess(scratch: scratch, config: config, backend: "simulate")
      defer { daemon.cleanUp() }
      let socket = daemon.socketPath
      try await daemon.waitUntilReady()
      try "group = no-such-group-l5\nmax-clients = 3\n".write(
        toFile: config, atomically: true, encoding: .utf8)
      daemon.signal(SIGHUP)
      try await daemon.waitForLog("reloadFailed")
      #expect(daemon.log.contains("no-such-group-l5 does not exist"), "\(daemon.log)")
      #expect(!daemon.log.contains("reloaded"), "\(daemon.log)")
      // Members of the old group are still told to be members of it.
      if geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 {
        chmod(socket, 0o666)
        let denied = try await runAsNobody([try Products.path("locationctl"), "--socket", socket, "request"])
        #expect(denied.stderr.contains("member of group daemon"), "\(denied.stdout)\(denied.stderr)")
      }
      #expect(await daemon.stop() == 0)
    }

    @Test("locationctl's permission hint names the socket's group", .timeLimit(.minutes(3)))
    func permissionHintNamesTheGroup() async throws {
      try requireNobodyClient(python: false)
      let scratch = try Scratch(mode: 0o755)
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate", group: "daemon")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let run = try await runAsNobody([try Products.path("locationctl"), "--socket", daemon.socketPath, "status"])
      #expect(run.status == 1)
      #expect(run.stderr.contains("permission denied"), "\(run.stderr)")
      #expect(run.stderr.contains("member of group daemon"), "\(run.stderr)")
      #expect(!run.stderr.contains("locationd"), "\(run.stderr)")
      #expect(await daemon.stop() == 0)
    }
  }
}
