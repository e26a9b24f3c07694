import LocationModel
import LocationProtocol
import ServiceCore
import Glibc
import SystemIO

/// Notifies the service manager of state changes with the `sd_notify(3)` protocol, without libsystemd.
///
/// Each notification is one datagram of newline-separated `KEY=VALUE` assignments sent to the
/// Unix socket named by `$NOTIFY_SOCKET` (a leading `@` names a socket in the abstract
/// namespace). systemd documents this protocol as stable. Without `$NOTIFY_SOCKET` (not started
/// by systemd with `Type=notify`) every call does nothing.
public struct SystemdNotifier: Sendable {
  /// The socket path from `$NOTIFY_SOCKET`, `nil` when unset or empty.
  public let socketPath: String?
  /// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, or `nil` when the watchdog is off
  /// or `$WATCHDOG_PID` names another process.
  public let watchdogInterval: Duration?

  /// Reads `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and `$WATCHDOG_PID` from `environment`.
  ///
  /// - Parameters:
  ///   - environment: the process environment (tests pass their own).
  ///   - pid: this process's id, compared with `$WATCHDOG_PID`.
  public init(environment: [String: String], pid: Int32 = getpid()) {
    let path = environment["NOTIFY_SOCKET"] ?? ""
    socketPath = path.isEmpty ? nil : path
    watchdogInterval = Self.watchdogInterval(environment: environment, pid: pid)
  }

  /// Half of `$WATCHDOG_USEC` (microseconds, `> 0`) when `$WATCHDOG_PID` is unset or equals `pid`;
  /// otherwise `nil`.
  public static func watchdogInterval(environment: [String: String], pid: Int32) -> Duration? {
    guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else {
      return nil
    }
    if let owner = environment["WATCHDOG_PID"], !owner.isEmpty {
      guard let ownerPID = Int32(owner), ownerPID == pid else { return nil }
    }
    return .microseconds(Int64(clamping: usec / 2))
  }

  /// Whether notifications are sent anywhere.
  public var isEnabled: Bool { socketPath != nil }

  /// `READY=1`: start-up finished (the socket is listening).
  @discardableResult public func ready(status: String? = nil) -> Bool {
    notify(["READY=1"] + (status.map { ["STATUS=" + $0] } ?? []))
  }

  /// `STATUS=...`: a one-line human-readable status shown by `systemctl status`.
  @discardableResult public func status(_ text: String) -> Bool {
    notify(["STATUS=" + text.replacing("\n", with: " ")])
  }

  /// `WATCHDOG=1`: the service is alive; send at least every ``watchdogInterval``.
  @discardableResult public func watchdog() -> Bool { notify(["WATCHDOG=1"]) }

  /// `STOPPING=1`: shutdown began.
  @discardableResult public func stopping() -> Bool { notify(["STOPPING=1"]) }

  /// `RELOADING=1` plus `MONOTONIC_USEC` (required by `Type=notify-reload`): reload began; send
  /// ``ready(status:)`` when it finished.
  @discardableResult public func reloading() -> Bool {
    notify(["RELOADING=1", "MONOTONIC_USEC=\(MonotonicClock.microseconds())"])
  }

  /// Sends `WATCHDOG=1` every ``watchdogInterval`` until the task is cancelled; returns at once
  /// when the watchdog is off.
  public func runWatchdog() async {
    guard let interval = watchdogInterval, isEnabled else { return }
    while !Task.isCancelled {
      watchdog()
      do { try await Task.sleep(for: interval) } catch { return }
    }
  }

  /// Sends the assignments as one datagram.
  ///
  /// - Returns: `true` when the datagram was sent, `false` when notifications are off or sending
  ///   failed (the failure is logged; the daemon keeps running).
  @discardableResult public func notify(_ assignments: [String]) -> Bool {
    guard let socketPath else { return false }
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else {
      Log.event("notifyFailed", ["error": String(cString: strerror(errno))])
      return false
    }
    defer { close(fd) }
    guard var address = UnixAddress(path: socketPath) else {
      Log.event("notifyFailed", ["error": "NOTIFY_SOCKET is too long", "path": socketPath])
      return false
    }
    let message = Array(assignments.joined(separator: "\n").utf8)
    let sent = address.withSockaddr { pointer, length in
      message.withUnsafeBytes { buffer in
        sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), pointer, length)
      }
    }
    if sent < 0 {
      Log.event("notifyFailed", ["error": String(cString: strerror(errno)), "path": socketPath])
      return false
    }
    return true
  }
}
