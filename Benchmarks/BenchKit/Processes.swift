// Clocks and child processes for the benchmarks that measure locationd and gpsd from outside.

import Foundation
import Glibc
import SystemIO

/// Why a benchmark's process or socket helper could not do its work; `description` is a
/// one-line message for the benchmark to print before it exits.
public struct BenchError: Error, CustomStringConvertible {
  /// A one-line explanation, such as `cannot run /x/locationd: No such file or directory`.
  public var description: String

  /// Creates an error with its message.
  public init(_ description: String) { self.description = description }
}

/// Sleeps `seconds` (>= 0), resuming after signals until the whole time has passed.
public func sleepSeconds(_ seconds: Double) {
  var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
  var remaining = timespec()
  while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}

/// The path of the executable `name` in the directory of this program (argv[0]): where
/// `swift build` puts locationd beside the benchmarks. Without an argv[0] (a caller may pass
/// none), the path Foundation finds for this program (`Bundle.main.executablePath`).
public func executableBesideThisProgram(_ name: String) -> String {
  let program = CommandLine.arguments.first ?? Bundle.main.executablePath ?? "./\(name)"
  return URL(fileURLWithPath: program).deletingLastPathComponent().appendingPathComponent(name).path
}

/// Raises the soft limit of open descriptors (RLIMIT_NOFILE) to `wanted`, or as far as the hard
/// limit allows, when it is lower; returns the soft limit in force afterwards.
@discardableResult
public func raiseDescriptorLimit(to wanted: Int) -> rlim_t {
  var limit = rlimit()
  getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
  let wantedFiles = rlim_t(max(wanted, 0))
  if limit.rlim_cur < wantedFiles {
    limit.rlim_cur = min(wantedFiles, limit.rlim_max)
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
  }
  return limit.rlim_cur
}

/// Spawns the executable at `path` with `arguments` (without argv[0]) and exactly
/// `environment`; standard input is /dev/null, standard output and error are appended to the
/// file `log` (created 0644 when missing). Returns the child's pid; throws ``BenchError`` when
/// posix_spawn(3) fails.
public func spawn(_ path: String, _ arguments: [String], environment: [String: String], log: String)
  throws(BenchError) -> pid_t
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
  guard result == 0 else {
    throw BenchError("cannot run \(path): \(String(cString: strerror(result)))")
  }
  return pid
}

/// Sends SIGTERM to child `pid`, then SIGKILL if it has not exited after 5 s; reaps it. A child
/// that was reaped already (by Foundation's child reaper, when the program also runs a
/// `Process`) counts as gone.
public func terminate(_ pid: pid_t) {
  kill(pid, SIGTERM)
  let deadline = MonotonicClock.seconds() + 5
  var status: Int32 = 0
  while MonotonicClock.seconds() < deadline {
    // -1 (ECHILD): reaped already, by Foundation's child reaper (PrivateGPSD runs a Process).
    let reaped = waitpid(pid, &status, WNOHANG)
    if reaped == pid || (reaped == -1 && errno == ECHILD) { return }
    usleep(5_000)
  }
  kill(pid, SIGKILL)
  waitpid(pid, &status, 0)
}

/// `value` with `digits` digits after the point (printf's `%.Nf`), or `n/a` when it is NaN or
/// infinite (nothing measured).
public func format(_ value: Double, _ digits: Int = 2) -> String {
  value.isFinite ? String(format: "%.\(digits)f", value) : "n/a"
}
