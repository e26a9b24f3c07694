import Foundation
import Glibc
import LocationCore
import LocationModel
import LocationTestKit
import NMEA
import Synchronization
import Testing

extension EndToEnd {
  /// Issue 6: simulated GPS hardware (a pty) -> a real private gpsd -> a real
  /// `locationd --backend gpsd://...` -> `locationctl --json watch`.
  @Suite("End to end: gpsd through locationd", .serialized, .timeLimit(.minutes(3)))
  struct GPSDEndToEndTests {
    @Test(
      "the watching client gets the fixes written to the pty; gpspipe on the same gpsd sees the same"
    )
    func fixesThroughGPSDMatchThePty() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let written = PtyWrites()
      let receiver = try startReceiver(scratch.file("gps0"), written)
      defer { receiver.stop() }
      let gpsd = try PrivateGPSD(device: receiver.linkPath)
      try await gpsd.start()
      defer { gpsd.stop() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "gpsd://127.0.0.1:\(gpsd.port)")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let watch = try WatchProcess(socket: daemon.socketPath, output: scratch.file("watch.out"))
      defer { watch.stop() }

      // gpspipe reads the same gpsd meanwhile (40 lines: VERSION, DEVICES, WATCH, then TPV/SKY).
      let (piped, pipedOutput) = try await gpsdTPVs(port: gpsd.port, count: 40)
      #expect(
        await waitUntil(timeout: 30) { watch.fixes().count >= 30 },
        "30 fixes through locationd; got \(watch.fixes().count):\n\(watch.output)\n\(daemon.log)")

      let fixes = watch.fixes()
      #expect(fixes.count >= 30)
      var previous: Int64 = .min
      for fix in fixes {
        let epoch = await written.epoch(at: fix.time)
        #expect(epoch != nil, "the client's fix at \(fix.time) ms was written to the pty")
        guard let coordinate = epoch?.coordinate else { continue }
        #expect(abs(fix.latitude - coordinate.latitude) < 1e-6, "latitude at \(fix.time)")
        #expect(abs(fix.longitude - coordinate.longitude) < 1e-6, "longitude at \(fix.time)")
        #expect(fix.time > previous, "one fix per epoch, in order (\(fix.time) after \(previous))")
        previous = fix.time
      }
      // Consecutive fixes are consecutive epochs: nothing lost on the way (10 Hz, 100 ms apart).
      let steps = zip(fixes.dropFirst(), fixes).map { $0.time - $1.time }
      #expect(steps.allSatisfy { $0 == 100 }, "epochs 100 ms apart, got steps \(Set(steps))")

      #expect(piped.count >= 10, "gpspipe saw \(piped.count) TPVs with a position:\n\(pipedOutput)")
      for fix in piped {
        let epoch = await written.epoch(at: fix.time)
        #expect(epoch != nil, "gpspipe's fix at \(fix.time) ms was written to the pty")
        guard let coordinate = epoch?.coordinate else { continue }
        #expect(abs(fix.latitude - coordinate.latitude) < 1e-6)
        #expect(abs(fix.longitude - coordinate.longitude) < 1e-6)
      }
      // Both clients saw some of the same epochs, at the same positions.
      let clientTimes = Set(fixes.map(\.time))
      #expect(piped.contains { clientTimes.contains($0.time) }, "gpspipe and the client overlap")
    }

    @Test(
      "gpsd killed and restarted while a client watches: disconnected, connected, fixes again")
    func gpsdRestartIsSeenByTheWatchingClient() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let written = PtyWrites()
      let receiver = try startReceiver(scratch.file("gps0"), written)
      defer { receiver.stop() }
      let gpsd = try PrivateGPSD(device: receiver.linkPath)
      try await gpsd.start()
      defer { gpsd.stop() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "gpsd://127.0.0.1:\(gpsd.port)")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let watch = try WatchProcess(socket: daemon.socketPath, output: scratch.file("watch.out"))
      defer { watch.stop() }
      try #require(
        await waitUntil(timeout: 30) { watch.fixes().count >= 5 },
        "fixes before the restart:\n\(watch.output)")
      let clientPID = watch.pid

      gpsd.kill()
      #expect(
        await waitUntil(timeout: 30) { watch.events().contains { $0.state == "disconnected" } },
        "BACKEND disconnected after gpsd died:\n\(watch.output)")
      let fixesBeforeRestart = watch.fixes().count
      await pause(0.3)
      try await gpsd.start()
      var resumedAt: Double?
      // How soon fixes resume depends on the backoff and the machine's load; only a client that
      // never gets fixes again fails this generous wait.
      _ = await waitUntil(timeout: 30) {
        let events = watch.events()
        guard let lost = events.firstIndex(where: { $0.state == "disconnected" }),
          let back = events[lost...].firstIndex(where: { $0.state == "connected" }),
          events[back...].contains(where: { $0.isFix })
        else { return false }
        resumedAt = now()
        return true
      }
      let events = watch.events()
      let states = events.compactMap(\.state)
      let lost = states.firstIndex(of: "disconnected")
      #expect(lost != nil, "disconnected reported: \(states)")
      if let lost {
        #expect(states[lost...].contains("connected"), "connected after disconnected: \(states)")
      }
      #expect(resumedAt != nil, "fixes resumed after the restart:\n\(watch.output)\n\(daemon.log)")
      #expect(watch.fixes().count > fixesBeforeRestart)
      // The same client process, still connected: it never had to reconnect.
      #expect(watch.isRunning && watch.pid == clientPID, "locationctl watch kept its connection")
      // Fixes after the restart are still the pty's epochs.
      for fix in watch.fixes().suffix(3) {
        let coordinate = await written.epoch(at: fix.time)?.coordinate
        #expect(coordinate != nil, "fix at \(fix.time) after the restart was written to the pty")
        if let coordinate { #expect(abs(fix.latitude - coordinate.latitude) < 1e-6) }
      }
    }

    /// Starts the simulated receiver at 10 Hz on `link`, recording every epoch written.
    private func startReceiver(_ link: String, _ written: PtyWrites) throws -> SimulatedReceiver {
      let receiver = try SimulatedReceiver(linkPath: link, onWrite: { written.record($0.fix) })
      try receiver.start(rate: 10) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
      return receiver
    }
  }
}

extension EndToEnd {
  /// Issue 28: the simulated receiver read directly by `locationd --backend serial:PATH`, with
  /// an unplug window: `deviceRemoved` through the protocol and in locationctl's words, then the
  /// device back and fixes again, without any command.
  @Suite("End to end: a serial receiver read directly", .serialized, .timeLimit(.minutes(3)))
  struct DirectReceiverEndToEndTests {
    @Test("unplugged: deviceRemoved in watch and status; plugged back: connected and fixes")
    func unplugIsDeviceRemovedAndTheReceiverComesBack() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let written = PtyWrites()
      let faults = try NMEAFaultSchedule.parse("unplug@3-13")
      let receiver = try SimulatedReceiver(
        linkPath: scratch.file("gps0"), encoder: NMEAEncoder(version: .v4_11),
        output: try SimulatedOutput(faults: faults), onWrite: { written.record($0.fix) })
      try receiver.start(rate: 10) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
      defer { receiver.stop() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "serial:" + receiver.linkPath)
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let watch = try WatchProcess(socket: daemon.socketPath, output: scratch.file("watch.out"))
      defer { watch.stop() }
      #expect(
        await waitUntil(timeout: 60) { watch.events().contains { $0.state == "deviceRemoved" } },
        "deviceRemoved while unplugged:\n\(watch.output)\n\(daemon.log)")
      // Said in people's words by status, while the device is away (the window lasts 10 s; a
      // status that a loaded machine answers after the return is not judged).
      let status = try await locationctl(daemon.socketPath, ["status"], json: false)
      if watch.events().last(where: { $0.state != nil })?.state == "deviceRemoved" {
        #expect(status.stdout.contains("(device removed)"), "\(status.stdout)")
      }
      #expect(
        await waitUntil(timeout: 60) {
          let events = watch.events()
          guard let removed = events.firstIndex(where: { $0.state == "deviceRemoved" }),
            let back = events[removed...].firstIndex(where: { $0.state == "connected" })
          else { return false }
          return events[back...].contains { $0.isFix }
        }, "connected and fixes after the device returned:\n\(watch.output)\n\(daemon.log)")
      // The fixes are the pty's epochs.
      for fix in watch.fixes().suffix(3) {
        let coordinate = await written.epoch(at: fix.time)?.coordinate
        #expect(
          coordinate.map { abs(fix.latitude - $0.latitude) < 1e-6 } == true, "fix at \(fix.time)")
      }
      #expect(
        daemon.log.contains("deviceRemoved") && daemon.log.contains("deviceReturned"),
        "logged:\n\(daemon.log)")
    }
  }
}

/// 2026-03-14T12:00:00Z in milliseconds since 1970: the first epoch written to the pty.

/// The fixes the simulated receiver wrote, by fix time (milliseconds since 1970).
private final class PtyWrites: Sendable {
  private let fixes = Mutex<[Int64: Fix]>([:])

  func record(_ fix: Fix) {
    guard let time = fix.time else { return }
    fixes.withLock { $0[time] = fix }
  }

  /// The fix written for `time`; waits for it (without holding a thread of the concurrency
  /// pool), since gpsd may report an epoch before the writer thread has recorded it. The 10 s
  /// limit only ends the wait for an epoch that was never written.
  func epoch(at time: Int64) async -> Fix? {
    let deadline = now() + 10
    while true {
      if let fix = fixes.withLock({ $0[time] }) { return fix }
      if now() >= deadline { return nil }
      await pause(0.01)
    }
  }
}

/// A fix as a client printed it: time (ms since 1970) and position (degrees).
private struct ClientFix {
  var time: Int64
  var latitude: Double
  var longitude: Double
}

/// One line of `locationctl --json watch`: a TPV with a position, or a BACKEND state.
private struct WatchLine {
  var state: String?
  var isFix: Bool
}

/// `locationctl --json watch` as a child process, its output in a file.
private final class WatchProcess {
  private let process = Process()
  private let outputPath: String

  init(socket: String, output: String) throws {
    outputPath = output
    _ = FileManager.default.createFile(atPath: output, contents: nil)
    process.executableURL = URL(fileURLWithPath: try Products.path("locationctl"))
    process.arguments = ["--socket", socket, "--json", "watch", "--every"]
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle(forWritingAtPath: output)
    process.standardError = FileHandle(forWritingAtPath: output)
    try process.run()
  }

  deinit { stop() }

  var pid: Int32 { process.processIdentifier }
  var isRunning: Bool { process.isRunning }

  /// Everything printed so far.
  var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

  private func objects() -> [[String: Any]] {
    output.split(separator: "\n").compactMap { line in
      (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }
  }

  /// The TPVs with a position, in order.
  func fixes() -> [ClientFix] {
    objects().compactMap(Self.fix)
  }

  /// TPVs with a position and BACKEND states, in order.
  func events() -> [WatchLine] {
    objects().compactMap { object in
      if Self.fix(object) != nil { return WatchLine(state: nil, isFix: true) }
      if object["class"] as? String == "BACKEND", let state = object["state"] as? String {
        return WatchLine(state: state, isFix: false)
      }
      return nil
    }
  }

  private static func fix(_ object: [String: Any]) -> ClientFix? {
    guard object["class"] as? String == "TPV", let latitude = object["lat"] as? Double,
      let longitude = object["lon"] as? Double, let text = object["time"] as? String,
      let time = TestRoute.milliseconds(iso8601: text)
    else { return nil }
    return ClientFix(time: time, latitude: latitude, longitude: longitude)
  }

  func stop() {
    guard process.isRunning else { return }
    kill(process.processIdentifier, SIGTERM)
    if !waitUntilBlocking(timeout: 5, { !process.isRunning }) {
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
    }
  }
}

/// `gpspipe -w -n COUNT 127.0.0.1:PORT`: the TPVs with a position (killed after 15 s).
private func gpsdTPVs(port: UInt16, count: Int) async throws -> (fixes: [ClientFix], output: String)
{
  let run = try await runTool(
    "/usr/bin/gpspipe", ["-w", "-n", String(count), "127.0.0.1:\(port)"], timeout: 15)
  // gpsd ends its lines with CRLF, which is one Character: split the bytes.
  let lines = Array(run.stdout.utf8).split(separator: UInt8(ascii: "\n"))
  let fixes: [ClientFix] = lines.compactMap { line in
    guard let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any],
      object["class"] as? String == "TPV", let latitude = object["lat"] as? Double,
      let longitude = object["lon"] as? Double, let text = object["time"] as? String,
      let time = TestRoute.milliseconds(iso8601: text)
    else { return nil }
    return ClientFix(time: time, latitude: latitude, longitude: longitude)
  }
  return (fixes, String((run.stdout + run.stderr).prefix(600)))
}

/// Polls `condition` every 10 ms for at most `timeout` seconds, blocking the calling thread.
private func waitUntilBlocking(timeout: Double, _ condition: () -> Bool) -> Bool {
  let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
  while ContinuousClock.now < deadline {
    if condition() { return true }
    usleep(10_000)
  }
  return condition()
}
