// Processes and sockets: spawning locationd, its READY=1, connecting clients to both daemons.

import Foundation
import Glibc
import Synchronization

/// What to undo when the run stops early (a failure exits the process): the private gpsd, the
/// simulated receiver, locationd. Each action is keyed so that it can be dropped once done.
final class Cleanup: Sendable {
  private let actions = Mutex<[String: @Sendable () -> Void]>([:])

  func register(_ key: String, _ action: @escaping @Sendable () -> Void) {
    actions.withLock { $0[key] = action }
  }

  func remove(_ key: String) { _ = actions.withLock { $0.removeValue(forKey: key) } }

  /// Runs and drops every registered action.
  func runAll() {
    let pending = actions.withLock { actions in
      defer { actions.removeAll() }
      return actions
    }
    for action in pending.values { action() }
  }
}

let cleanup = Cleanup()

/// Progress, on standard error: standard output carries only the result (table or JSON).
func say(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Standard error, then exit: 64 for bad usage, 1 for a failure of the run.
func fail(_ message: String, status: Int32 = 1) -> Never {
  FileHandle.standardError.write(Data("relay-bench: \(message)\n".utf8))
  cleanup.runAll()
  exit(status)
}

/// CLOCK_MONOTONIC, nanoseconds: the clock of `SimulatedReceiver`'s write times.
func monotonicNanoseconds() -> UInt64 {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

func monotonicSeconds() -> Double { Double(monotonicNanoseconds()) / 1e9 }

func sleepSeconds(_ seconds: Double) {
  var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
  var remaining = timespec()
  while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}

/// Spawns `path` with `arguments`, standard output and error appended to `log`.
func spawn(_ path: String, _ arguments: [String], environment: [String: String], log: String)
  -> pid_t
{
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
  posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
  posix_spawn_file_actions_adddup2(&actions, 1, 2)
  let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
  let envp: [UnsafeMutablePointer<CChar>?] =
    environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
  defer {
    for pointer in argv { free(pointer) }
    for pointer in envp { free(pointer) }
  }
  var pid: pid_t = 0
  let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
  guard result == 0 else { fail("cannot run \(path): \(String(cString: strerror(result)))") }
  return pid
}

/// SIGTERM, then SIGKILL after 5 s; reaps the process.
func terminate(_ pid: pid_t) {
  kill(pid, SIGTERM)
  let deadline = monotonicSeconds() + 5
  var status: Int32 = 0
  while monotonicSeconds() < deadline {
    // -1 (ECHILD): reaped already, by Foundation's child reaper (PrivateGPSD runs a Process).
    let reaped = waitpid(pid, &status, WNOHANG)
    if reaped == pid || (reaped == -1 && errno == ECHILD) { return }
    usleep(5_000)
  }
  kill(pid, SIGKILL)
  waitpid(pid, &status, 0)
}

func unixAddress(_ path: String) -> sockaddr_un {
  var address = sockaddr_un()
  address.sun_family = sa_family_t(AF_UNIX)
  withUnsafeMutableBytes(of: &address.sun_path) { raw in
    for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
  }
  return address
}

/// A bound datagram socket that stands in for systemd's notify socket.
func notifySocket(_ path: String) -> Int32 {
  unlink(path)
  let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
  var address = unixAddress(path)
  let bound = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
    }
  }
  guard fd >= 0, bound == 0 else { fail("cannot bind the notify socket \(path)") }
  return fd
}

/// Waits for a datagram containing READY=1; false after `timeout` seconds.
func waitForReady(_ fd: Int32, timeout: Double) -> Bool {
  let deadline = monotonicSeconds() + timeout
  var buffer = [UInt8](repeating: 0, count: 4096)
  while monotonicSeconds() < deadline {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let milliseconds = Int32(max(1, (deadline - monotonicSeconds()) * 1000))
    guard poll(&descriptor, 1, milliseconds) > 0 else { continue }
    let count = recv(fd, &buffer, buffer.count, 0)
    if count > 0,
      String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").contains("READY=1")
    {
      return true
    }
  }
  return false
}

/// A blocking connection to a Unix stream socket (locationd's); nil when it fails.
func connectUnix(_ path: String) -> Int32? {
  let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return nil }
  var address = unixAddress(path)
  let result = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
    }
  }
  guard result == 0 else {
    close(fd)
    return nil
  }
  return fd
}

/// A blocking TCP connection to 127.0.0.1:`port` (gpsd's); nil when it fails.
func connectTCP(port: UInt16) -> Int32? {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return nil }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  address.sin_port = port.bigEndian
  let result = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
  }
  guard result == 0 else {
    close(fd)
    return nil
  }
  var on: Int32 = 1
  setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
  return fd
}

/// Writes all of `text`; false when the peer is gone.
func sendLine(_ fd: Int32, _ text: String) -> Bool {
  let bytes = Array(text.utf8)
  return bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    == bytes.count
}

/// Reads from a blocking socket until a newline arrives (the first line), at most `timeout`
/// seconds; nil on end of file, error or timeout.
func readFirstLine(_ fd: Int32, timeout: Double) -> String? {
  let deadline = monotonicSeconds() + timeout
  var line: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 4096)
  while monotonicSeconds() < deadline {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let milliseconds = Int32(max(1, (deadline - monotonicSeconds()) * 1000))
    guard poll(&descriptor, 1, milliseconds) > 0 else { continue }
    // MSG_PEEK: leave the bytes for the reader that takes the socket over.
    let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_PEEK)) }
    guard count > 0 else { return nil }
    if let newline = chunk[0..<count].firstIndex(of: 0x0A) {
      line = Array(chunk[0..<newline])
      return String(decoding: line, as: UTF8.self)
    }
    if count == chunk.count { return nil }  // a first line over 4 KiB: not gpsd's banner
    usleep(1_000)
  }
  return nil
}
