import Foundation
import Glibc

/// A D-Bus message bus of its own for tests: a `dbus-daemon` with a private configuration and a
/// private Unix socket, never the system or session bus.
///
/// Writes a session-type configuration (D-Bus Specification, "Message Bus Configuration Files")
/// into a fresh temporary directory: it listens on `DIR/bus` only, authenticates with `EXTERNAL`
/// (the peer's uid from the kernel), and its one policy lets every user connect, own any name, send
/// to and receive from any peer: root and the unprivileged uid 65534 (`nobody`) alike, so tests can
/// play a system service and an untrusted client on one bus. ``start(timeout:)`` runs
/// `dbus-daemon --config-file=F --nofork --print-address` and returns the address it prints
/// (`unix:path=DIR/bus,guid=...`); GDBus clients use it as their system bus through
/// `DBUS_SYSTEM_BUS_ADDRESS` (``environment(_:)``). ``stop()`` kills the daemon and removes the
/// directory.
public final class PrivateBus: @unchecked Sendable {
  // @unchecked: tests drive one instance from one task at a time; `lock` guards the mutable state.

  /// Why the bus could not be run.
  public enum Failure: Error, CustomStringConvertible {
    /// `/usr/bin/dbus-daemon` (or `$DBUS_DAEMON`) is missing.
    case notInstalled(String)
    /// dbus-daemon exited or printed no address within the timeout.
    case noAddress(output: String)

    /// A one-line explanation.
    public var description: String {
      switch self {
      case .notInstalled(let path):
        return "dbus-daemon not found at \(path); install the dbus-daemon package (scripts/setup)"
      case .noAddress(let output): return "dbus-daemon printed no address: \(output)"
      }
    }
  }

  /// The dbus-daemon executable.
  public let executable: String
  /// The private directory holding the configuration and the socket (mode 0755: other users may
  /// reach the socket, nobody else may plant files in it).
  public let directory: String
  /// The configuration file given to dbus-daemon.
  public let configFile: String
  /// The Unix socket the bus listens on.
  public let socketPath: String
  /// dbus-daemon's standard error (its warnings), in ``directory``.
  public let logFile: String

  private let lock = NSLock()
  private var process: Process?
  private var printedAddress: String?

  /// Prepares (does not start) a bus: creates the directory and writes the configuration.
  ///
  /// - Throws: ``Failure/notInstalled(_:)`` without dbus-daemon; a POSIX error when the
  ///   directory or file cannot be written.
  public init() throws {
    executable = ProcessInfo.processInfo.environment["DBUS_DAEMON"] ?? "/usr/bin/dbus-daemon"
    guard FileManager.default.isExecutableFile(atPath: executable) else {
      throw Failure.notInstalled(executable)
    }
    // Short, under /tmp: a Unix socket path holds at most 107 bytes.
    var template = Array("/tmp/locationd-bus-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw POSIXError(.EACCES) }
    directory = String(cString: made)
    chmod(directory, 0o755)
    configFile = directory + "/bus.conf"
    socketPath = directory + "/bus"
    logFile = directory + "/dbus-daemon.log"
    try Self.configuration(socketPath: socketPath)
      .write(toFile: configFile, atomically: true, encoding: .utf8)
  }

  deinit {
    stop()
  }

  /// The configuration text for a bus listening on `socketPath` (session type, open policy).
  public static func configuration(socketPath: String) -> String {
    """
    <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
     "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
    <busconfig>
      <type>session</type>
      <listen>unix:path=\(socketPath)</listen>
      <auth>EXTERNAL</auth>
      <policy context="default">
        <allow user="*"/>
        <allow own="*"/>
        <allow send_destination="*" eavesdrop="true"/>
        <allow eavesdrop="true"/>
        <allow receive_sender="*"/>
      </policy>
    </busconfig>

    """
  }

  /// The process id of the running dbus-daemon, if any.
  public var pid: Int32? {
    lock.withLock {
      process.map(\.processIdentifier).flatMap { PrivateGPSD.isAlive($0) ? $0 : nil }
    }
  }

  /// The address dbus-daemon printed, once started.
  public var address: String? { lock.withLock { printedAddress } }

  /// `base` (the current environment by default) with `DBUS_SYSTEM_BUS_ADDRESS` and
  /// `DBUS_SESSION_BUS_ADDRESS` both set to this bus, for client processes.
  ///
  /// - Precondition: the bus has been started (otherwise `base` is returned unchanged).
  public func environment(_ base: [String: String] = ProcessInfo.processInfo.environment)
    -> [String: String]
  {
    var environment = base
    if let address {
      environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
      environment["DBUS_SESSION_BUS_ADDRESS"] = address
    }
    return environment
  }

  /// Starts dbus-daemon and waits until it has printed its address (at most `timeout` seconds),
  /// which it does once it listens. Waits with `Task.sleep`, never blocking a pool thread.
  ///
  /// - Returns: the address, `unix:path=SOCKET,guid=HEX`.
  /// - Throws: ``Failure/noAddress(output:)`` when it exits or stays silent; then it is killed.
  @discardableResult
  public func start(timeout: Double = 30) async throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = ["--config-file=" + configFile, "--nofork", "--print-address"]
    let output = Pipe()
    // Standard error goes to a file: a pipe nobody drains would stop dbus-daemon once full.
    _ = FileManager.default.createFile(atPath: logFile, contents: nil)
    process.standardOutput = output
    process.standardError = FileHandle(forWritingAtPath: logFile)
    unlink(socketPath)
    try process.run()
    lock.withLock { self.process = process }
    let reader = output.fileHandleForReading.fileDescriptor
    _ = fcntl(reader, F_SETFL, fcntl(reader, F_GETFL) | O_NONBLOCK)
    var printed: [UInt8] = []
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while true {
      Self.drain(reader, into: &printed)
      if let newline = printed.firstIndex(of: UInt8(ascii: "\n")) {
        let address = String(decoding: printed[..<newline], as: UTF8.self)
        lock.withLock { printedAddress = address }
        return address
      }
      let alive = PrivateGPSD.isAlive(process.processIdentifier)
      if !alive || ContinuousClock.now >= deadline { break }
      try await Task.sleep(for: .milliseconds(10))
    }
    kill()
    throw Failure.noAddress(output: (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "")
  }

  /// Appends what `fd` (non-blocking) has to `bytes`.
  private static func drain(_ fd: Int32, into bytes: inout [UInt8]) {
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = read(fd, &chunk, chunk.count)
      if count > 0 {
        bytes += chunk[0..<count]
      } else if count < 0 && errno == EINTR {
        continue
      } else {
        return
      }
    }
  }

  /// Kills dbus-daemon with SIGKILL and waits, at most 3 s, until it has died.
  ///
  /// SIGKILL, not SIGTERM: a dbus-daemon started by the test runner did not end on SIGTERM within
  /// 3 s (measured), and a private bus has nothing to save; its socket goes with the directory.
  public func kill() {
    guard let process = lock.withLock({ self.process }) else { return }
    let pid = process.processIdentifier
    if PrivateGPSD.isAlive(pid) {
      Glibc.kill(pid, SIGKILL)
      for _ in 0..<3000 where PrivateGPSD.isAlive(pid) { usleep(1000) }
    }
    lock.withLock {
      self.process = nil
      printedAddress = nil
    }
  }

  /// Kills the bus and removes its directory (configuration and socket). Idempotent; the bus
  /// cannot be started again afterwards (``kill()`` keeps the directory for a restart).
  public func stop() {
    kill()
    try? FileManager.default.removeItem(atPath: directory)
  }
}
