import Foundation
import Glibc
import LocationTestKit
import Testing

extension EndToEnd {
  /// A state directory whose disk fails under a running daemon with `--mqtt` and `--track all`:
  /// a 2 MiB tmpfs that fills up, and an ext4 that the kernel remounts read-only after an error
  /// (`errors=remount-ro`, as a flaky SD card or USB disk does; a plain `mount -o remount,ro` is
  /// refused while the daemon has its files open for writing). Each with the broker up, then down,
  /// then up: fixes keep reaching a socket watcher, publishing goes on from memory, every message
  /// arrives (none skipped), the duplicates the daemon announces bound those the subscriber sees,
  /// and each failure is logged once. The daemon reaches the broker through a relay that the test
  /// cuts and restarts (to the daemon, a broker that goes down and comes back): the subscriber's
  /// own connection never breaks, so every duplicate it sees was published twice by the daemon. Needs root, tmpfs and loop devices (CI runs as root);
  /// skipped with a message elsewhere, and with `CI=true` a root that cannot mount fails.
  @Suite("End to end: a full or read-only state directory", .serialized)
  struct FailingDiskEndToEndTests {
    enum Fault: String, CaseIterable, Sendable, CustomStringConvertible {
      /// A 2 MiB tmpfs, filled up.
      case full
      /// An ext4 image the kernel remounts read-only (`trigger_fs_error`).
      case readOnly
      var description: String { rawValue }
    }

    static let start = 1_772_323_200  // 2026-03-01T00:00:00Z, the log's first fix

    /// Mounts what `fault` needs at `directory`: `nil` when done, else why not.
    static func mount(_ fault: Fault, _ scratch: Scratch, at directory: String) async throws -> String? {
      guard geteuid() == 0 else { return "not root" }
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      switch fault {
      case .full:
        let run = try await runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", directory])
        return run.status == 0 ? nil : "mount -t tmpfs: \(run.stderr)"
      case .readOnly:
        let image = scratch.file("disk.img")
        guard try await runTool("/usr/bin/truncate", ["-s", "16M", image]).status == 0 else { return "truncate failed" }
        let mkfs = try await runTool("/sbin/mkfs.ext4", ["-q", "-F", image])
        guard mkfs.status == 0 else { return "mkfs.ext4: \(mkfs.stderr)" }
        let run = try await runTool("/bin/mount", ["-o", "loop,errors=remount-ro", image, directory])
        guard run.status == 0 else { return "mount -o loop: \(run.stderr)" }
        chmod(directory, 0o700)
        return nil
      }
    }

    /// Makes the disk fail: fills the tmpfs, or has ext4 record an error and go read-only.
    static func fail(_ fault: Fault, at directory: String) async throws {
      switch fault {
      case .full:
        // dd stops at ENOSPC (its status is then 1): the disk is full.
        _ = try await runTool("/bin/dd", ["if=/dev/zero", "of=\(directory)/filler", "bs=64k"])
        var info = statvfs()
        #expect(statvfs(directory, &info) == 0 && info.f_bavail == 0, "the tmpfs is not full")
      case .readOnly:
        let source = try await runTool("/bin/findmnt", ["-n", "-o", "SOURCE", directory])
        let device = URL(fileURLWithPath: source.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).lastPathComponent
        try "locationd test\n".write(toFile: "/sys/fs/ext4/\(device)/trigger_fs_error", atomically: false, encoding: .utf8)
        let options = try await runTool("/bin/findmnt", ["-n", "-o", "OPTIONS", directory])
        // ext4 marks the mount `emergency_ro` (writes fail with EROFS) while its options still say rw.
        #expect(options.stdout.contains("emergency_ro"), "not read-only: \(options.stdout)")
      }
    }

    /// The `tst` of each location message in the subscribers' files, in arrival order (the Last
    /// Will, published by the broker when the relay is cut, is left out).
    static func received(_ files: [String]) -> [Int] {
      files.flatMap { MQTTEndToEndTests.lines($0) }.compactMap { line in
        guard let object = parseObject(line), object["_type"] as? String == "location" else { return nil }
        return object["tst"] as? Int
      }
    }

    /// Messages the daemon said it publishes again after a lost connection.
    static func announcedAgain(_ log: String) -> Int {
      log.split(separator: "\n").reduce(0) { total, line in
        guard let range = line.range(of: " messages sent but not all confirmed") else { return total }
        let digits = line[..<range.lowerBound].reversed().prefix { $0.isNumber }
        return total + (Int(String(digits.reversed())) ?? 0)
      }
    }

    static func count(_ text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

    /// A TCP relay from `port` to the broker's port (Python, one thread per direction); killing it
    /// closes every connection through it and refuses new ones, as a broker that went down. After
    /// SIGUSR1 it holds what the broker sends (its acknowledgements) and forwards the rest, as a
    /// link that stalls on the way back.
    static func relay(_ scratch: Scratch, port: UInt16, to broker: UInt16) async throws -> Child {
      let script = """
        import signal, socket, sys, threading, time
        hold = threading.Event()
        signal.signal(signal.SIGUSR1, lambda *_: hold.set())
        def pipe(a, b, held):
            try:
                while True:
                    data = a.recv(65536)
                    if not data: break
                    while held and hold.is_set(): time.sleep(0.01)
                    b.sendall(data)
            except OSError: pass
            for s in (a, b):
                try: s.shutdown(socket.SHUT_RDWR)
                except OSError: pass
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(('127.0.0.1', int(sys.argv[1])))
        server.listen(16)
        while True:
            client, _ = server.accept()
            try: upstream = socket.create_connection(('127.0.0.1', int(sys.argv[2])))
            except OSError:
                client.close()
                continue
            threading.Thread(target=pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client, True), daemon=True).start()
        """
      let child = try Child(
        "/usr/bin/python3", ["-c", script, String(port), String(broker)], stdout: scratch.file("relay.out"),
        stderr: scratch.file("relay.err"))
      #expect(await waitUntil(timeout: 30) { PrivateGPSD.canConnect(port: port) }, "the relay did not listen")
      return child
    }

    @Test(
      "a failing state directory under a replay with MQTT: fixes flow, publishing goes on through a broker outage, nothing is skipped, duplicates are counted",
      .timeLimit(.minutes(4)), arguments: Fault.allCases)
    func failingStateDirectory(_ fault: Fault) async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let mount = scratch.file("mnt")
      if let reason = try await Self.mount(fault, scratch, at: mount) {
        let onCI = ProcessInfo.processInfo.environment["CI"] == "true"
        if onCI && geteuid() == 0 {
          Issue.record("CI=true and root, but the \(fault) disk cannot be made: \(reason)")
        } else {
          print("failing disk test (\(fault)) skipped: \(reason); it needs root with tmpfs and loop mounts")
        }
        return
      }
      defer { _ = try? runToolBlocking("/bin/umount", ["-l", mount]) }
      let broker = try PrivateMosquitto()
      try await broker.start()
      defer { broker.stop() }
      let relayPort = try PrivateGPSD.freePort()
      var relay = try await Self.relay(scratch, port: relayPort, to: broker.port)
      defer { kill(relay.pid, SIGKILL) }
      let topic = "owntracks/test/\(fault)"
      let name = "disk-\(fault)"
      let (subscriber, out) = try await MQTTEndToEndTests.subscriber(broker, scratch, name: name, topic: topic)
      defer { kill(subscriber.pid, SIGKILL) }
      let log = scratch.file("drive.nmea")
      try MQTTEndToEndTests.writeLog(log, count: 3_000)
      let state = mount + "/state"
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "replay:\(log)?speed=20",
        extra: [
          "--mqtt", "mqtt://127.0.0.1:\(relayPort)", "--mqtt-topic", topic, "--track", "all",
          "--mqtt-catch-up-rate", "100000",
        ],
        stateDirectory: state)
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      try await daemon.waitForLog("state=connected")
      let watcher = try await WatchRecorder.start(path: daemon.socketPath, coalesce: false)
      defer { watcher.stop() }
      func fixCount() -> Int { watcher.fixes.count }
      func latestFix() -> Int? {
        guard let time = watcher.fixes.last?.tpv["time"] as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: time).map { Int($0.timeIntervalSince1970.rounded(.down)) }
      }
      #expect(await waitUntil(timeout: 60) { Self.received([out]).count >= 20 }, "no messages before the fault:\n\(daemon.log)")

      // The disk fails with the broker up: the queue moves to memory and publishing goes on.
      try await Self.fail(fault, at: mount)
      try await daemon.waitForLog("mqttQueueInMemory", timeout: 60)
      var mark = (fixes: fixCount(), messages: Self.received([out]).count)
      await pause(2)
      #expect(fixCount() - mark.fixes >= 10, "fixes while the disk fails: \(fixCount() - mark.fixes)")
      #expect(
        await waitUntil(timeout: 60) { Self.received([out]).count - mark.messages >= 10 },
        "publishing stopped with the disk failing:\n\(daemon.log)")

      // The link stalls on the way back (the broker gets every message, the daemon no
      // acknowledgement) until the daemon's window of 64 unconfirmed messages is full, then the
      // broker goes away; fixes keep flowing.
      kill(relay.pid, SIGUSR1)
      await pause(4.5)
      kill(relay.pid, SIGKILL)
      _ = await relay.waitForExit(timeout: 10)
      try await daemon.waitForLog("state=failed")
      mark.fixes = fixCount()
      await pause(2)
      #expect(fixCount() - mark.fixes >= 10, "fixes with the disk failing and the broker down: \(fixCount() - mark.fixes)")

      // The broker returns: what was queued in memory meanwhile arrives, and publishing goes on.
      relay = try await Self.relay(scratch, port: relayPort, to: broker.port)
      let target = try #require(latestFix(), "the watcher has no fix")
      #expect(
        await waitUntil(timeout: 90) { Set(Self.received([out])).contains(target + 2) },
        "the fixes of the outage did not arrive:\n\(daemon.log)")
      #expect(Self.count("mqtt uri=mqtt://127.0.0.1:\(relayPort) state=connected", in: daemon.log) == 2, "\(daemon.log)")

      // Nothing skipped: every fix from the first message to the newest arrived.
      let arrivals = Self.received([out])
      let distinct = Set(arrivals)
      let low = try #require(distinct.min())
      let high = try #require(distinct.max())
      let missing = (low...high).filter { !distinct.contains($0) }
      #expect(missing.count == 0, "\(missing.count) fixes missing, first \(missing.prefix(5).map { $0 - Self.start }):\n\(daemon.log)")
      // Duplicates: the daemon said it publishes its full window of 64 again; the broker had
      // those libmosquitto had sent (20 in flight at most by its default), and the subscriber saw
      // each of them twice, never three times (libmosquitto's own resend after a reconnect
      // doubled them before each connection got a new client).
      let duplicates = arrivals.count - distinct.count
      let announced = Self.announcedAgain(daemon.log)
      #expect(announced == 64, "\(daemon.log)")
      #expect(duplicates > 0 && duplicates <= announced, "\(duplicates) duplicates, \(announced) announced:\n\(daemon.log)")
      #expect(distinct.allSatisfy { tst in arrivals.count { $0 == tst } <= 2 }, "a message arrived three times")
      print("failing disk (\(fault)): \(distinct.count) fixes published, \(duplicates) duplicates, \(announced) announced")

      // Logs: one line per failure streak, and no failed publish (the queue went to memory).
      let text = daemon.log
      #expect(Self.count("mqttQueueInMemory", in: text) == 1, "\(text)")
      #expect(Self.count("trackStoreFailed", in: text) == 1, "\(text)")
      #expect(Self.count("mqttQueueFailed", in: text) == 0, "\(text)")
      #expect(Self.count("mqttQueueBehind", in: text) == 0, "\(text)")

      // At shutdown the store still fails: what was delivered but is still in it is announced as
      // duplicates of the next start. A next start on a copy of the state proves the count.
      #expect(await daemon.stop() == 0, "\(daemon.log)")
      let stopped = daemon.log
      let shutdownDuplicates = Self.number(after: "mqttQueueDuplicates messages=", in: stopped)
      let copy = scratch.file("state-copy")
      #expect(try await runTool("/bin/cp", ["-a", state, copy]).status == 0)
      let before = Self.received([out])
      let next = try DaemonProcess(
        scratch: scratch, backend: "replay:\(log)?speed=0&paused=true",
        extra: ["--mqtt", "mqtt://127.0.0.1:\(relayPort)", "--mqtt-topic", topic, "--mqtt-catch-up-rate", "100000"],
        name: "next", socketPath: scratch.file("next.sock"), stateDirectory: copy)
      defer { next.cleanUp() }
      try await next.waitUntilReady()
      try await next.waitForLog("state=connected")
      _ = await waitUntil(timeout: 5) { Self.received([out]).count >= before.count + shutdownDuplicates }
      await pause(1)
      let republished = Array(Self.received([out]).dropFirst(before.count))
      #expect(republished.count == shutdownDuplicates, "\(republished.count) published again, \(shutdownDuplicates) announced:\n\(stopped)")
      #expect(republished.allSatisfy { distinct.contains($0) }, "a message of the next start was new: \(republished)")
      print("failing disk (\(fault)): \(shutdownDuplicates) duplicates announced at shutdown, \(republished.count) published again")
      #expect(await next.stop() == 0, "\(next.log)")
    }

    /// The number logged right after `prefix` (0 when absent).
    static func number(after prefix: String, in log: String) -> Int {
      guard let range = log.range(of: prefix) else { return 0 }
      return Int(String(log[range.upperBound...].prefix { $0.isNumber })) ?? 0
    }
  }
}

/// Runs a tool and waits (for `defer`, which cannot await).
private func runToolBlocking(_ executable: String, _ arguments: [String]) throws -> Int32 {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  process.standardOutput = FileHandle.nullDevice
  process.standardError = FileHandle.nullDevice
  try process.run()
  process.waitUntilExit()
  return process.terminationStatus
}
