import Foundation
import Glibc
import SystemIO

/// A gpsd of its own for tests: private TCP port, private control socket, private shared-memory
/// key, never the system gpsd on 2947.
///
/// Runs `gpsd -N -n -b -S PORT -F CONTROL_SOCKET DEVICE` (foreground, poll the device without
/// waiting for clients, read-only: no configuration written to the device). ``stop()`` kills it
/// and removes the shared-memory segments it created (`ipcrm`); ``kill()`` simulates a crash and
/// ``start()`` can run it again on the same port.
public final class PrivateGPSD: @unchecked Sendable {
  // @unchecked: tests drive one instance from one task at a time; `lock` guards `process`.

  /// Why gpsd could not be run.
  public enum Failure: Error, CustomStringConvertible {
    /// `/usr/sbin/gpsd` (or `$GPSD`) is missing.
    case notInstalled(String)
    /// gpsd did not accept connections within the timeout.
    case notListening(port: UInt16, output: String)

    /// A one-line explanation.
    public var description: String {
      switch self {
      case .notInstalled(let path): return "gpsd not found at \(path); install the gpsd package"
      case .notListening(let port, let output):
        return "gpsd did not listen on port \(port): \(output)"
      }
    }
  }

  /// The TCP port gpsd listens on (loopback).
  public let port: UInt16
  /// The device gpsd reads (a pty link from ``SimulatedReceiver`` in tests).
  public let device: String
  /// The control socket path.
  public let controlSocket: String
  /// The `GPSD_SHM_KEY` given to gpsd.
  public let sharedMemoryKey: UInt32
  /// The gpsd executable.
  public let executable: String

  private let directory: String
  private let lock = NSLock()
  private var process: Process?
  private var pids: Set<Int32> = []

  /// Whether gpsd opens the device at start (`-n`) rather than when the first client watches.
  public let pollsWithoutClients: Bool

  /// Prepares (does not start) a gpsd for `device` on a free loopback port.
  ///
  /// - Parameter pollsWithoutClients: `true` (default) runs gpsd with `-n`; `false` lets gpsd open
  ///   the device only while a client watches, and close it when the last watcher leaves.
  public init(device: String, port: UInt16? = nil, pollsWithoutClients: Bool = true) throws {
    self.pollsWithoutClients = pollsWithoutClients
    executable = ProcessInfo.processInfo.environment["GPSD"] ?? "/usr/sbin/gpsd"
    guard FileManager.default.isExecutableFile(atPath: executable) else {
      throw Failure.notInstalled(executable)
    }
    self.device = device
    self.port = try port ?? Self.freePort()
    directory =
      NSTemporaryDirectory() + "locationd-gpsd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    controlSocket = directory + "/control.sock"
    sharedMemoryKey = UInt32.random(in: 0x1000_0000...0x3FFF_FFFF)
  }

  deinit {
    stop()
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// The process id of the running gpsd, if any.
  public var pid: Int32? {
    lock.withLock { process.map(\.processIdentifier).flatMap { Self.isAlive($0) ? $0 : nil } }
  }

  /// Starts gpsd and waits until it accepts TCP connections (at most `timeout` seconds).
  ///
  /// Waits with `Task.sleep`, never blocking a thread of the concurrency pool. The timeout only
  /// ends a wait for a gpsd that will never listen: gpsd listens within milliseconds, but a test
  /// task on a loaded machine may not run again for many seconds, so the port is tried once more
  /// after the deadline before giving up.
  public func start(timeout: Double = 30) async throws {
    let process = try launch()
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while true {
      if Self.canConnect(port: port) { return }
      if !Self.isAlive(process.processIdentifier) || ContinuousClock.now >= deadline { break }
      try await Task.sleep(for: .milliseconds(10))
    }
    kill()
    throw Failure.notListening(
      port: port, output: "exit status \(process.isRunning ? -1 : process.terminationStatus)")
  }

  /// Spawns gpsd (private port, control socket and shared-memory key) without waiting.
  @discardableResult
  private func launch() throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments =
      ["-N"] + (pollsWithoutClients ? ["-n"] : []) + [
        "-b", "-S", String(port), "-F", controlSocket, device,
      ]
    var environment = ProcessInfo.processInfo.environment
    environment["GPSD_SHM_KEY"] = "0x" + String(sharedMemoryKey, radix: 16)
    process.environment = environment
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    unlink(controlSocket)
    try process.run()
    lock.withLock {
      self.process = process
      pids.insert(process.processIdentifier)
    }
    return process
  }

  /// Starts gpsd and waits until it accepts TCP connections (at most `timeout` seconds), for
  /// synchronous callers: it sleeps the calling thread. Async code gets the overload above, which
  /// does not block a thread of the concurrency pool.
  public func start(timeout: Double = 30) throws {
    try launch()
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while true {
      if Self.canConnect(port: port) { return }
      if let pid = lock.withLock({ process?.processIdentifier }), !Self.isAlive(pid) { break }
      if ContinuousClock.now >= deadline { break }
      usleep(10_000)
    }
    kill()
    throw Failure.notListening(port: port, output: "gpsd exited or did not listen in time")
  }

  /// Kills gpsd with `signal` (SIGKILL by default: a crash) and waits, at most 3 s, until it has
  /// died (gone, or a zombie: its port and device are released then).
  ///
  /// It watches `/proc/PID/stat` rather than calling `waitUntilExit`: Foundation reaps children
  /// from a dispatch queue, and on a 2-core machine a test run whose pool threads are all blocked
  /// can starve that queue, so `waitUntilExit` may never return.
  public func kill(signal: Int32 = SIGKILL) {
    guard let process = lock.withLock({ self.process }) else { return }
    let pid = process.processIdentifier
    if process.isRunning {
      Glibc.kill(pid, signal)
      for _ in 0..<3000 where Self.isAlive(pid) { usleep(1000) }
    }
    lock.withLock { self.process = nil }
  }

  /// Whether `pid` exists and is not a zombie, from `/proc/PID/stat` (state after the `)`).
  static func isAlive(_ pid: Int32) -> Bool {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = text.lastIndex(of: ")")
    else { return false }
    let state = text[text.index(after: close)...].drop { $0 == " " }.first
    return state != "Z" && state != "X"
  }

  /// Kills gpsd and removes the shared-memory segments it created. Idempotent.
  public func stop() {
    kill()
    removeSharedMemory()
  }

  /// Number of established TCP client connections gpsd holds on its port (from `/proc/net/tcp*`).
  /// Only connections whose local end is a loopback address count: gpsd listens there, and a
  /// connection of another program may have the same port number on another address.
  public func clientConnectionCount() -> Int {
    // 127.0.0.1, ::1 and ::ffff:127.0.0.1 as the tables write them (32-bit words, host order).
    let loopback: Set<Substring> = [
      "0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F",
    ]
    var count = 0
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
      guard let text = Self.procText(table) else { continue }
      for line in text.split(separator: "\n").dropFirst() {
        let columns = line.split(separator: " ", omittingEmptySubsequences: true)
        guard columns.count > 3 else { continue }
        // local_address is HEXADDR:HEXPORT; state 01 is ESTABLISHED.
        let local = columns[1].split(separator: ":")
        guard local.count == 2, let localPort = UInt16(local[1], radix: 16) else { continue }
        if localPort == port && columns[3] == "01" && loopback.contains(local[0]) { count += 1 }
      }
    }
    return count
  }

  /// Removes the System V shared-memory segments our gpsd processes created (gpsd leaves its
  /// export and NTP segments behind) and the one at our private key, from `/proc/sysvipc/shm`.
  private func removeSharedMemory() {
    let created = lock.withLock { pids }
    guard let table = Self.procText("/proc/sysvipc/shm") else {
      return
    }
    for line in table.split(separator: "\n").dropFirst() {
      // key shmid perms size cpid lpid nattch ...
      let columns = line.split(separator: " ", omittingEmptySubsequences: true)
      guard columns.count > 4, let key = Int64(columns[0]), let shmid = Int32(columns[1]),
        let creator = Int32(columns[4])
      else { continue }
      if created.contains(creator) || key == Int64(sharedMemoryKey) {
        _ = shmctl(shmid, IPC_RMID, nil)
      }
    }
  }

  /// A TCP port that was free on 127.0.0.1 a moment ago.
  public static func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EMFILE) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
        bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
      }
    }
    guard bound else { throw POSIXError(.EADDRINUSE) }
    return UInt16(bigEndian: address.sin_port)
  }

  /// The whole text of a file under `/proc`, read with read(2) until end of file; `nil` when it
  /// cannot be opened or read (or is over 64 MiB).
  ///
  /// `String(contentsOfFile:)` is not enough here: procfs reports a size of 0 and Foundation then
  /// returns only the first 4 KiB, about 27 lines of `/proc/net/tcp`. With the sockets of a
  /// parallel test run the connections counted by ``clientConnectionCount()`` were beyond that.
  public static func procText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    guard let bytes = try? SystemIO.readToEnd(fd, limit: 64 << 20) else { return nil }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Whether something accepts TCP connections on 127.0.0.1:`port`.
  public static func canConnect(port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    return withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
      }
    }
  }
}

extension Process {
  /// Waits until the process has exited, at most `timeout`, polling with `Task.sleep` so no thread
  /// of the concurrency pool blocks (tests run in parallel on as many threads as cores). Returns
  /// whether it exited.
  public func hasExited(within timeout: Duration = .seconds(20)) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while isRunning && ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(10))
    }
    return !isRunning
  }
}
