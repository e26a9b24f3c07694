import SystemIO
import Foundation
import Glibc
import LocationTestKit
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel

/// A datagram socket standing in for systemd's notification socket.
final class DatagramListener {
  let fd: Int32
  let name: String

  /// Binds at `path`, or in the abstract namespace when it starts with `@`.
  init(path: String) throws {
    // Every stored property set before the first throw: deinit then closes `fd`.
    name = path
    fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0, var address = UnixAddress(path: path) else { throw TestError("socket") }
    guard address.withSockaddr({ bind(fd, $0, $1) }) == 0 else {
      throw TestError("bind \(path): \(String(cString: strerror(errno)))")
    }
  }

  deinit { if fd >= 0 { Glibc.close(fd) } }

  /// The next datagram, waiting up to 30 s without blocking a thread. The socket is looked at
  /// once more after the deadline: on a loaded machine this task may first run again after it.
  func receive() async -> String? {
    let deadline = ContinuousClock.now + .seconds(30)
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = buffer.withUnsafeMutableBytes {
        recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
      }
      if count >= 0 { return String(decoding: buffer[0..<count], as: UTF8.self) }
      if ContinuousClock.now >= deadline { return nil }
      try? await Task.sleep(for: .milliseconds(2))
    }
  }
}

@Suite("sd_notify")
struct NotifierTests {
  @Test(
    "READY, STATUS, WATCHDOG, STOPPING and RELOADING reach a path socket", arguments: [false, true])
  func notifications(abstract: Bool) async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path =
      abstract
      ? "@locationd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
      : directory.path + "/notify"
    let listener = try DatagramListener(path: path)
    let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": path])
    #expect(notifier.isEnabled)
    #expect(notifier.ready(status: "listening on /run/locationd/locationd.sock"))
    #expect(
      await listener.receive() == "READY=1\nSTATUS=listening on /run/locationd/locationd.sock")
    #expect(notifier.status("3 clients\nnew line"))
    #expect(await listener.receive() == "STATUS=3 clients new line")
    #expect(notifier.watchdog())
    #expect(await listener.receive() == "WATCHDOG=1")
    #expect(notifier.stopping())
    #expect(await listener.receive() == "STOPPING=1")
    #expect(notifier.reloading())
    let reloading = await listener.receive() ?? ""
    #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
    #expect(UInt64(reloading.split(separator: "=").last ?? "") ?? 0 > 0)
  }

  @Test("without NOTIFY_SOCKET nothing is sent")
  func disabled() {
    let notifier = SystemdNotifier(environment: [:])
    #expect(!notifier.isEnabled)
    #expect(!notifier.ready())
    #expect(notifier.watchdogInterval == nil)
  }

  @Test(
    "watchdog interval is half of WATCHDOG_USEC for this pid",
    arguments: [
      (["WATCHDOG_USEC": "30000000"], Duration?.some(.seconds(15))),
      (["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"], .seconds(15)),
      (["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "41"], nil),
      (["WATCHDOG_USEC": "0"], nil),
      (["WATCHDOG_USEC": "abc"], nil),
      ([:], nil),
    ] as [([String: String], Duration?)])
  func watchdogInterval(environment: [String: String], expected: Duration?) {
    #expect(SystemdNotifier.watchdogInterval(environment: environment, pid: 42) == expected)
  }

  @Test("runWatchdog pings at the interval until cancelled")
  func watchdogLoop() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let listener = try DatagramListener(path: directory.path + "/notify")
    let notifier = SystemdNotifier(
      environment: ["NOTIFY_SOCKET": directory.path + "/notify", "WATCHDOG_USEC": "40000"],
      pid: getpid())
    #expect(notifier.watchdogInterval == .milliseconds(20))
    let task = Task { await notifier.runWatchdog() }
    #expect(await listener.receive() == "WATCHDOG=1")
    #expect(await listener.receive() == "WATCHDOG=1")
    task.cancel()
    await task.value
  }
}

@Suite("Signals")
struct SignalTests {
  @Test("SIGHUP sent to this process arrives on the stream")
  func sighup() async throws {
    let signals = SignalSequence.stream([SIGHUP])
    // The source is installed synchronously; raise after the stream exists.
    kill(getpid(), SIGHUP)
    var iterator = signals.makeAsyncIterator()
    let received = await iterator.next()
    #expect(received == SIGHUP)
    #expect(SignalSequence.name(SIGHUP) == "SIGHUP")
  }
}
