import Foundation
import Glibc

/// A Mosquitto broker of its own for tests: a private loopback port and a private config
/// (`listener PORT 127.0.0.1`, `allow_anonymous true`, or a password file), never a system broker.
///
/// With `persistent: true` it keeps sessions and queued QoS 1 messages across ``stop()`` and
/// ``start()`` (`persistence true` in its directory), so a subscriber with a persistent session
/// (`mosquitto_sub -c -i ID`) gets what was published while it was away.
public final class PrivateMosquitto: @unchecked Sendable {
  // @unchecked: tests drive one instance from one task at a time; `lock` guards `process`.

  /// Why the broker could not run.
  public enum Failure: Error, CustomStringConvertible {
    /// `/usr/sbin/mosquitto` is missing.
    case notInstalled(String)
    /// The broker did not accept connections in time.
    case notListening(port: UInt16, log: String)

    /// A one-line explanation.
    public var description: String {
      switch self {
      case .notInstalled(let path): return "mosquitto not found at \(path); install the mosquitto package"
      case .notListening(let port, let log): return "mosquitto did not listen on port \(port): \(log)"
      }
    }
  }

  /// The TCP port (127.0.0.1).
  public let port: UInt16
  /// The broker's working directory (config, log, persistence).
  public let directory: String
  private let executable = "/usr/sbin/mosquitto"
  private let lock = NSLock()
  private var process: Process?

  /// Prepares (does not start) a broker on a free port.
  ///
  /// - Parameters:
  ///   - users: when given, `USER:PASSWORD` pairs: anonymous clients are refused and these
  ///     accepted (a password file made with `mosquitto_passwd -b`).
  ///   - persistent: keep sessions and queued messages across restarts.
  public init(users: [(String, String)]? = nil, persistent: Bool = false) throws {
    guard FileManager.default.isExecutableFile(atPath: executable) else { throw Failure.notInstalled(executable) }
    port = try PrivateGPSD.freePort()
    directory = NSTemporaryDirectory() + "locationd-mosquitto-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    // Run as root keeps root (mosquitto otherwise switches to the user mosquitto, who cannot
    // write this directory).
    var config = "user root\nlistener \(port) 127.0.0.1\nlog_dest file \(directory)/mosquitto.log\nmax_queued_messages 0\n"
    config += "max_inflight_messages 0\n"
    if persistent {
      config += "persistence true\npersistence_location \(directory)/\nautosave_interval 1\n"
    } else {
      config += "persistence false\n"
    }
    if let users {
      let passwords = directory + "/passwords"
      _ = FileManager.default.createFile(atPath: passwords, contents: nil)
      for (user, password) in users {
        let tool = Process()
        tool.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_passwd")
        tool.arguments = ["-b", passwords, user, password]
        try tool.run()
        tool.waitUntilExit()
      }
      config += "allow_anonymous false\npassword_file \(passwords)\n"
    } else {
      config += "allow_anonymous true\n"
    }
    try config.write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
  }

  deinit {
    stop()
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// The broker's log so far.
  public var log: String { (try? String(contentsOfFile: directory + "/mosquitto.log", encoding: .utf8)) ?? "" }

  /// Starts the broker and waits until it accepts connections (at most `timeout` seconds).
  public func start(timeout: Double = 30) async throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = ["-c", directory + "/mosquitto.conf"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    lock.withLock { self.process = process }
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while true {
      if PrivateGPSD.canConnect(port: port) { return }
      if !PrivateGPSD.isAlive(process.processIdentifier) || ContinuousClock.now >= deadline { break }
      try await Task.sleep(for: .milliseconds(10))
    }
    stop()
    throw Failure.notListening(port: port, log: log)
  }

  /// Stops the broker with `signal` (SIGTERM: it saves its persistence file first) and waits, at
  /// most 5 s, until it is gone.
  public func stop(signal: Int32 = SIGTERM) {
    guard let process = lock.withLock({ self.process }) else { return }
    let pid = process.processIdentifier
    if PrivateGPSD.isAlive(pid) {
      Glibc.kill(pid, signal)
      for _ in 0..<5000 where PrivateGPSD.isAlive(pid) { usleep(1000) }
      if PrivateGPSD.isAlive(pid) { Glibc.kill(pid, SIGKILL) }
    }
    lock.withLock { self.process = nil }
  }
}
