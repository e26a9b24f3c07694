import CLinux
import Foundation
import Glibc
import LocationTestKit
import Testing
import LocationModel

/// A test failure with a message.
struct E2EError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// A decoded JSON object (JSONSerialization's shapes).
typealias JSONObject = [String: Any]

/// Parses one line as a JSON object, or `nil`.
func parseObject(_ line: String) -> JSONObject? {
  guard let data = line.data(using: .utf8),
    let value = try? JSONSerialization.jsonObject(with: data, options: [])
  else { return nil }
  return value as? JSONObject
}

/// Encodes a request object as one line (without newline).
func encodeLine(_ object: JSONObject) -> String {
  guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
  else { return "{}" }
  return String(decoding: data, as: UTF8.self)
}

/// Whether two decoded JSON values are equal (numbers compared as numbers).
func jsonEqual(_ lhs: Any?, _ rhs: Any?) -> Bool {
  switch (lhs, rhs) {
  case (nil, nil): return true
  case (let left?, let right?): return encodeLine(["v": left]) == encodeLine(["v": right])
  default: return false
  }
}

/// Sleeps without holding a thread of the cooperative pool (other suites' tasks keep running).
func pause(_ seconds: Double) async {
  try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
}

/// Seconds since an arbitrary start (monotonic).
func now() -> Double {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// A temporary directory under /tmp (short, for socket paths), removed by `remove()`.
final class Scratch {
  let path: String

  /// Creates the directory with `mode` (0755 lets an unprivileged peer reach a socket inside).
  init(mode: mode_t = 0o755) throws {
    var template = Array("/tmp/l5e2e-XXXXXX".utf8CString)
    guard let result = mkdtemp(&template) else { throw E2EError("mkdtemp failed") }
    path = String(cString: result)
    chmod(path, mode)
  }

  /// A path inside the directory.
  func file(_ name: String) -> String { path + "/" + name }

  func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// The built executables (`swift build --build-tests` puts them beside the test binary).
enum Products {
  static func path(_ name: String) throws -> String {
    let path = BuiltProducts.path(name)
    guard access(path, X_OK) == 0 else {
      throw E2EError("\(name) is not built at \(path): run swift build --build-tests")
    }
    return path
  }
}

/// Whether tests that need the NMEA corpus run: it is present, or CI=true makes its absence a
/// failure (``corpusLog(_:)`` throws then); otherwise they are skipped with a message.
let corpusTestsEnabled = NMEACorpus.isAvailable || NMEACorpus.isRequired

/// The corpus log `name`, or `nil` (skip) when the corpus is absent outside CI.
func corpusLog(_ name: String) throws -> String? {
  let path = NMEACorpus.directory.appendingPathComponent(name).path
  if FileManager.default.fileExists(atPath: path) { return path }
  if NMEACorpus.isRequired { throw E2EError("\(NMEACorpus.missingMessage) (\(name))") }
  print(NMEACorpus.missingMessage)
  return nil
}

/// The result of a finished child process.
struct ToolRun {
  var status: Int32
  var stdout: String
  var stderr: String
  var lines: [String] { stdout.split(separator: "\n").map(String.init) }
}

/// A child process started with `posix_spawn` and reaped with `waitpid` on its own pid.
///
/// Foundation's `Process` is not used: its one process monitor per test process blocks in
/// `waitpid` for a child that closed its inherited descriptors while still running (as
/// `systemd-socket-activate` does), and then no `Process` in the whole test process is seen to
/// exit any more. Spawning and reaping by pid keeps these tests independent of other suites.
final class Child: @unchecked Sendable {
  let pid: pid_t
  private let lock = NSLock()
  private var exitStatus: Int32?

  /// Starts `executable` with `arguments`, standard input from `stdin` (/dev/null by default,
  /// read-only; another path, such as a FIFO the test writes keys into, is opened read-write so
  /// that the open does not wait for a writer while `posix_spawn` waits for the child), standard
  /// output to `stdout` and standard error to `stderr` (files, created or truncated), no other
  /// descriptor of this process, signal mask empty and SIGPIPE, SIGTERM, SIGINT, SIGHUP at their
  /// defaults.
  init(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    stdin: String = "/dev/null", stdout: String, stderr: String
  ) throws {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdin, stdin == "/dev/null" ? O_RDONLY : O_RDWR, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    if stderr == stdout {
      posix_spawn_file_actions_adddup2(&actions, 1, 2)
    } else {
      posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    }
    // Nothing else of this test process: descriptors other suites hold open without
    // close-on-exec would count against a daemon's descriptor limit.
    _ = locationd_spawn_close_from(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var emptyMask = sigset_t()
    sigemptyset(&emptyMask)
    posix_spawnattr_setsigmask(&attributes, &emptyMask)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for number in [SIGPIPE, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, number) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    let environmentLines = (environment ?? ProcessInfo.processInfo.environment).map {
      "\($0.key)=\($0.value)"
    }
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = environmentLines.map { strdup($0) } + [nil]
    defer {
      for pointer in argv { free(pointer) }
      for pointer in envp { free(pointer) }
    }
    var child = pid_t()
    let result = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
    guard result == 0 else {
      throw E2EError("cannot start \(executable): \(String(cString: strerror(result)))")
    }
    pid = child
  }

  deinit {
    if isRunning {
      kill(pid, SIGKILL)
      _ = waitForExitBlocking(timeout: 10)
    }
  }

  /// Whether the child has not exited yet (reaps it when it has).
  var isRunning: Bool {
    lock.withLock {
      if exitStatus != nil { return false }
      var status: Int32 = 0
      let result = waitpid(pid, &status, WNOHANG)
      guard result == pid else { return result == 0 }
      // Exit code, or the number of the signal that ended it.
      exitStatus = status & 0x7F == 0 ? (status >> 8) & 0xFF : status & 0x7F
      return false
    }
  }

  /// The exit code (or ending signal number); `nil` while running.
  var terminationStatus: Int32? {
    _ = isRunning
    return lock.withLock { exitStatus }
  }

  /// Waits up to `timeout` seconds; the exit code (or signal number), `nil` when still running.
  func waitForExit(timeout: Double) async -> Int32? {
    let deadline = now() + timeout
    while isRunning {
      if now() > deadline { return nil }
      await pause(0.002)
    }
    return terminationStatus
  }

  /// ``waitForExit(timeout:)`` blocking the calling thread (for `deinit` and `defer`).
  func waitForExitBlocking(timeout: Double) -> Int32? {
    let deadline = now() + timeout
    while isRunning {
      if now() > deadline { return nil }
      usleep(2_000)
    }
    return terminationStatus
  }
}

/// Runs a program to completion (output through files, so any size works); kills it after `timeout`.
func runTool(
  _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
  timeout: Double = 30
) async throws -> ToolRun {
  let scratch = try Scratch()
  defer { scratch.remove() }
  let child = try Child(
    executable, arguments, environment: environment, stdout: scratch.file("out"),
    stderr: scratch.file("err"))
  guard let status = await child.waitForExit(timeout: timeout) else {
    kill(child.pid, SIGKILL)
    _ = await child.waitForExit(timeout: 10)
    throw E2EError("\(executable) \(arguments) did not finish within \(timeout) s")
  }
  let out = (try? String(contentsOfFile: scratch.file("out"), encoding: .utf8)) ?? ""
  let err = (try? String(contentsOfFile: scratch.file("err"), encoding: .utf8)) ?? ""
  return ToolRun(status: status, stdout: out, stderr: err)
}

/// setpriv(1)'s options that run a command as uid 65534 (nobody) in gid 65534 (nogroup) with no
/// supplementary groups: an unprivileged peer, authorized by the daemon only through its group.
let nobodyCredentials = ["--reuid=65534", "--regid=65534", "--clear-groups"]

/// Runs `arguments` (the executable first) as uid 65534 through /usr/bin/setpriv; needs root.
func runAsNobody(_ arguments: [String]) async throws -> ToolRun {
  try await runTool("/usr/bin/setpriv", nobodyCredentials + arguments)
}

/// Requires what a client as uid 65534 needs: root and /usr/bin/setpriv, and /usr/bin/python3
/// when the client is a Python script. Throws (a recorded failure) when one is missing.
func requireNobodyClient(python: Bool, sourceLocation: SourceLocation = #_sourceLocation) throws {
  try #require(
    getuid() == 0, "needs root to run a client as uid 65534", sourceLocation: sourceLocation)
  try #require(access("/usr/bin/setpriv", X_OK) == 0, sourceLocation: sourceLocation)
  if python { try #require(access("/usr/bin/python3", X_OK) == 0, sourceLocation: sourceLocation) }
}

/// The start of a Python client script: `s`, a stream socket connected to the Unix socket named
/// by the script's first argument; `data`, the bytes received so far; `pump(until, seconds)`,
/// which receives into `data` until `until()` holds, `seconds` pass or the daemon closes.
let pythonClientPrelude = """
  import os, socket, sys, time
  s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  s.connect(sys.argv[1])
  data = b""
  def pump(until, seconds):
      global data
      s.settimeout(0.05)
      end = time.time() + seconds
      while time.time() < end and not until():
          try:
              chunk = s.recv(65536)
          except socket.timeout:
              continue
          if not chunk:
              break
          data += chunk

  """

/// A Python client script that sends `requests` (JSON commands without quotes `'` or
/// backslashes, one line each) at once to the Unix socket named by its first argument, receives
/// until `marker` has arrived `count` times (or the daemon closes; 30 s only guards against a
/// hang), then `linger` seconds more so that anything sent by mistake shows up too, and prints the
/// complete lines it received.
func pythonReadingClient(
  sending requests: [String], until marker: String, count: Int, linger: Double = 0
) -> String {
  let lines = requests.map { "'" + $0 + "'" }.joined(separator: ", ")
  return pythonClientPrelude + """
    requests = [\(lines)]
    s.sendall(("\\n".join(requests) + "\\n").encode())
    pump(lambda: data.count(b'\(marker)') >= \(count), 30.0)
    pump(lambda: False, \(linger))
    text = data.decode()
    sys.stdout.write(text[:text.rfind("\\n") + 1])
    """
}

/// `locationctl ARGS` against `socket`.
func locationctl(_ socket: String, _ arguments: [String], json: Bool = true) async throws -> ToolRun
{
  try await runTool(
    try Products.path("locationctl"), ["--socket", socket] + (json ? ["--json"] : []) + arguments)
}

/// The TPV objects `locationctl decode` prints for a log (the reference the daemon must match).
func decodedFixes(_ log: String) async throws -> [JSONObject] {
  let run = try await runTool(try Products.path("locationctl"), ["decode", log])
  guard run.status == 0 else {
    throw E2EError("locationctl decode \(log) exited \(run.status): \(run.stderr)")
  }
  var fixes: [JSONObject] = []
  for (index, line) in run.lines.enumerated() {
    guard let object = parseObject(line), object["class"] as? String == "TPV" else {
      throw E2EError("decode printed a line that is not a TPV: \(line)")
    }
    fixes.append(object)
    // Parsing thousands of lines takes a while in a debug build: let other tasks run.
    if index % 100 == 99 { await Task.yield() }
  }
  return fixes
}

/// The members locationd adds to gpsd's TPV (provenance); not part of the comparison.
let provenanceKeys: Set<String> = ["backend", "source", "line", "simulated"]

/// The TPV without the daemon's provenance members.
func gpsdFields(_ tpv: JSONObject) -> JSONObject {
  tpv.filter { !provenanceKeys.contains($0.key) }
}

/// Compares received TPVs with the decoded reference; returns a description of the first
/// difference, or `nil` when they are equal (every gpsd member, in number and value).
func firstDifference(received: [JSONObject], expected: [JSONObject]) -> String? {
  for (index, (got, want)) in zip(received, expected).enumerated() {
    let fields = gpsdFields(got)
    if !NSDictionary(dictionary: fields).isEqual(to: want) {
      return "fix \(index) differs:\n  daemon: \(encodeLine(fields))\n  decode: \(encodeLine(want))"
    }
  }
  if received.count != expected.count {
    return "the daemon delivered \(received.count) fixes, decode printed \(expected.count)"
  }
  return nil
}

/// A running `locationd` (or a launcher that execs it), killed when the test ends.
final class DaemonProcess {
  let process: Child
  let socketPath: String
  let stateDirectory: String
  let logPath: String

  /// Starts `locationd --socket SOCK --state-dir DIR --group GROUP [--backend URI] EXTRA` with its
  /// standard error in `scratch/NAME.log`.
  convenience init(
    scratch: Scratch, backend: String?, group: String = "", extra: [String] = [],
    name: String = "locationd",
    socketPath: String? = nil, stateDirectory: String? = nil
  ) throws {
    let socket = socketPath ?? scratch.file("l.sock")
    let state = stateDirectory ?? scratch.file("state")
    var arguments = ["--socket", socket, "--state-dir", state, "--group", group]
    if let backend { arguments += ["--backend", backend] }
    arguments += extra
    try self.init(
      executable: try Products.path("locationd"), arguments: arguments, environment: nil,
      logPath: scratch.file(name + ".log"), socketPath: socket, stateDirectory: state)
  }

  /// Starts `locationd --config CONFIG --socket SOCK --state-dir scratch/state [--group GROUP]
  /// --backend URI` with its standard error in `scratch/locationd.log`: a daemon that takes its
  /// settings (the group, unless `group` is given) from the file `config`, written by the caller
  /// and rewritten before a SIGHUP.
  convenience init(
    scratch: Scratch, config: String, backend: String, group: String? = nil,
    socketPath: String? = nil, environment: [String: String]? = nil
  ) throws {
    let socket = socketPath ?? scratch.file("l.sock")
    let state = scratch.file("state")
    var arguments = ["--config", config, "--socket", socket, "--state-dir", state]
    if let group { arguments += ["--group", group] }
    arguments += ["--backend", backend]
    try self.init(
      executable: try Products.path("locationd"), arguments: arguments, environment: environment,
      logPath: scratch.file("locationd.log"), socketPath: socket, stateDirectory: state)
  }

  init(
    executable: String, arguments: [String], environment: [String: String]?, logPath: String,
    socketPath: String,
    stateDirectory: String
  ) throws {
    self.socketPath = socketPath
    self.stateDirectory = stateDirectory
    self.logPath = logPath
    _ = FileManager.default.createFile(atPath: logPath, contents: nil)
    process = try Child(
      executable, arguments, environment: environment, stdout: logPath, stderr: logPath)
  }

  var pid: Int32 { process.pid }

  /// Everything the daemon logged so far.
  var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

  /// Waits until the log contains `text` (e.g. the `ready` event). The log is read once more
  /// after the deadline: on a loaded machine this task may first run again after it.
  func waitForLog(_ text: String, timeout: Double = 30) async throws {
    let deadline = now() + timeout
    while true {
      if log.contains(text) { return }
      if !process.isRunning {
        throw E2EError(
          "locationd exited (\(process.terminationStatus ?? -1)) before logging \(text):\n\(log)")
      }
      if now() >= deadline { break }
      await pause(0.005)
    }
    throw E2EError("locationd did not log \(text) within \(timeout) s:\n\(log)")
  }

  /// Waits for the `ready` event: the socket accepts clients.
  func waitUntilReady() async throws { try await waitForLog("locationd: ready ") }

  func signal(_ number: Int32) { kill(process.pid, number) }

  /// Waits for the process to exit; its status (exit code or signal number), or `nil` on timeout.
  func waitForExit(timeout: Double = 15) async -> Int32? {
    await process.waitForExit(timeout: timeout)
  }

  /// SIGTERM and wait; SIGKILL when it does not stop. Returns the exit status after SIGTERM.
  /// A daemon that does not stop is an issue of the test, recorded with its descriptors, its
  /// threads' kernel waits and its log.
  @discardableResult func stop() async -> Int32? {
    guard process.isRunning else { return process.terminationStatus }
    signal(SIGTERM)
    if let status = await waitForExit(timeout: 10) { return status }
    Issue.record("locationd (pid \(process.pid)) did not stop within 10 s of SIGTERM\n\(processDiagnosis(process.pid))\n\(log)")
    signal(SIGKILL)
    _ = await waitForExit(timeout: 10)
    return nil
  }

  /// Cleanup for `defer` (which cannot wait asynchronously): SIGTERM, a short blocking wait, then
  /// SIGKILL. Tests stop their daemon with ``stop()`` first, so this usually finds it gone.
  func cleanUp() {
    guard process.isRunning else { return }
    signal(SIGTERM)
    if process.waitForExitBlocking(timeout: 5) != nil { return }
    signal(SIGKILL)
    _ = process.waitForExitBlocking(timeout: 5)
  }
}

extension DaemonProcess {
  /// A daemon (`--backend simulate`, the socket `socket`, the state directory `state` in
  /// `scratch`) started by a Python parent that runs `setUp` first (with `os`, `resource`,
  /// `signal` imported) and then execs it: a parent that leaves descriptors open, sets a limit or
  /// blocks signals, as some programs that start daemons do.
  static func startedByPython(_ setUp: String, scratch: Scratch, socket: String) throws -> DaemonProcess {
    let script = "import os, resource, signal, sys\n" + setUp + "\nos.execv(sys.argv[1], sys.argv[1:])\n"
    return try DaemonProcess(
      executable: "/usr/bin/python3",
      arguments: [
        "-c", script, try Products.path("locationd"), "--socket", socket, "--state-dir", scratch.file("state"),
        "--group", "", "--backend", "simulate",
      ],
      environment: nil, logPath: scratch.file("locationd.log"), socketPath: socket,
      stateDirectory: scratch.file("state"))
  }
}

/// What `/proc` tells of a process that does not respond: each descriptor's target and each
/// thread's name, state and kernel wait (`wchan`).
func processDiagnosis(_ pid: pid_t) -> String {
  let files = FileManager.default
  func read(_ path: String) -> String {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
  }
  var lines: [String] = []
  let descriptors = (try? files.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
  for fd in descriptors.sorted(by: { (Int($0) ?? 0) < (Int($1) ?? 0) }) {
    lines.append("fd \(fd) -> " + ((try? files.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? "?"))
  }
  for task in ((try? files.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).sorted() {
    let stat = read("/proc/\(pid)/task/\(task)/stat")
    let state = stat.split(separator: ")").last?.split(separator: " ").first.map(String.init) ?? "?"
    lines.append(
      "thread \(task) \(read("/proc/\(pid)/task/\(task)/comm")) state \(state) wchan \(read("/proc/\(pid)/task/\(task)/wchan"))")
  }
  return lines.joined(separator: "\n")
}

/// A blocking client of the daemon's socket, one JSON object per line; reads wait with poll(2).
/// Not thread-safe: one thread uses it at a time (handed over, never shared).
final class LineClient: @unchecked Sendable {
  let fd: Int32
  private var buffer: [UInt8] = []
  private(set) var closedByPeer = false
  private var nextID = 1
  /// Messages read while waiting for a reply (events), in order.
  var stashed: [JSONObject] = []

  /// Connects to `path`; `receiveBuffer` shrinks SO_RCVBUF before connecting.
  init(path: String, receiveBuffer: Int32? = nil) throws {
    fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw E2EError("socket failed") }
    if var size = receiveBuffer {
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    // No close before a throw below: every stored property is set, so a throwing init still runs
    // deinit, which closes `fd`; a second close would hit a number another thread reopened.
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
      throw E2EError("socket path too long: \(path)")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard result == 0 else {
      throw E2EError("connect \(path) failed: \(String(cString: strerror(errno)))")
    }
  }

  deinit { if fd >= 0 { Glibc.close(fd) } }

  /// Closes the connection (both directions).
  func close() { shutdown(fd, Int32(SHUT_RDWR)) }

  /// Closes the write side only (the daemon sees end of input).
  func closeWrite() { shutdown(fd, Int32(SHUT_WR)) }

  func send(_ text: String) throws { try send(Array(text.utf8)) }

  func send(_ bytes: [UInt8]) throws {
    var offset = 0
    while offset < bytes.count {
      let written = bytes.withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress.map { $0 + offset }, $0.count - offset, Int32(MSG_NOSIGNAL))
      }
      if written < 0 {
        if errno == EINTR { continue }
        throw E2EError("send failed: \(String(cString: strerror(errno)))")
      }
      offset += written
    }
  }

  /// Reads what is available now (without waiting); `false` at end of stream.
  @discardableResult func drainAvailable() -> Bool {
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
      let count = chunk.withUnsafeMutableBytes {
        recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
      }
      if count > 0 {
        buffer.append(contentsOf: chunk[0..<count])
        continue
      }
      if count < 0 && errno == EINTR { continue }
      if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return true }
      closedByPeer = true
      return false
    }
  }

  /// Takes one complete line from the buffer, if any.
  func takeLine() -> String? {
    guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
    let line = String(decoding: buffer[..<newline], as: UTF8.self)
    buffer.removeSubrange(...newline)
    return line
  }

  /// The next line, or `nil` at end of stream or after `timeout` seconds; polls every
  /// millisecond without holding a thread of the cooperative pool.
  func readLine(timeout: Double = 10) async -> String? {
    let deadline = now() + timeout
    // A stream that never runs dry never suspends below: give other tasks their turn first.
    await Task.yield()
    while true {
      if let line = takeLine() { return line }
      if closedByPeer { return nil }
      drainAvailable()
      if let line = takeLine() { return line }
      if closedByPeer || now() >= deadline { return nil }
      await pause(0.001)
    }
  }

  /// ``readLine(timeout:)`` blocking the calling thread in poll(2) (for reader threads).
  func readLineBlocking(timeout: Double = 10) -> String? {
    let deadline = now() + timeout
    while true {
      if let line = takeLine() { return line }
      if closedByPeer { return nil }
      let remaining = deadline - now()
      if remaining <= 0 { return nil }
      var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      _ = poll(&descriptor, 1, Int32(min(remaining * 1000, 1000)) + 1)
      drainAvailable()
    }
  }

  /// The next line as a JSON object; `nil` at end of stream or timeout; throws on a line that is not JSON.
  func readObject(timeout: Double = 10) async throws -> JSONObject? {
    guard let line = await readLine(timeout: timeout) else { return nil }
    guard let object = parseObject(line) else {
      throw E2EError("not a JSON object: \(line.prefix(300))")
    }
    return object
  }

  /// Sends `{"cmd":CMD,"id":N,MEMBERS}` and returns the reply with that id (or an id-less ERROR
  /// about the connection); other messages are stashed as events.
  func call(_ command: String, _ members: JSONObject = [:], timeout: Double = 10) async throws
    -> JSONObject
  {
    let id = nextID
    nextID += 1
    var request = members
    request["cmd"] = command
    request["id"] = id
    try send(encodeLine(request) + "\n")
    let deadline = now() + timeout
    while true {
      guard let message = try await readObject(timeout: max(0.01, deadline - now())) else {
        throw E2EError(
          closedByPeer
            ? "locationd closed the connection before answering \(command)"
            : "no reply to \(command) within \(timeout) s")
      }
      if let replyID = message["id"] as? Int, replyID == id { return message }
      if message["id"] == nil, message["class"] as? String == "ERROR" { return message }
      stashed.append(message)
    }
  }

  /// ``call(_:_:timeout:)`` blocking the calling thread (for worker threads); `nil` when the
  /// connection closed or no reply came within `timeout`.
  func callBlocking(_ command: String, _ members: JSONObject = [:], timeout: Double = 10)
    -> JSONObject?
  {
    let id = nextID
    nextID += 1
    var request = members
    request["cmd"] = command
    request["id"] = id
    guard (try? send(encodeLine(request) + "\n")) != nil else { return nil }
    let deadline = now() + timeout
    while let line = readLineBlocking(timeout: max(0.01, deadline - now())) {
      guard let message = parseObject(line) else { return nil }
      if let replyID = message["id"] as? Int, replyID == id { return message }
      stashed.append(message)
    }
    return nil
  }

  /// `call` that requires a reply of `class` (not an ERROR).
  func require(_ command: String, _ members: JSONObject = [:], class expected: String) async throws
    -> JSONObject
  {
    let reply = try await call(command, members)
    guard reply["class"] as? String == expected else {
      throw E2EError("\(command) answered \(encodeLine(reply)), expected class \(expected)")
    }
    return reply
  }

  /// The next event: a stashed one first, then from the socket.
  func nextEvent(timeout: Double = 10) async throws -> JSONObject? {
    if !stashed.isEmpty { return stashed.removeFirst() }
    return try await readObject(timeout: timeout)
  }

  /// `request` then `watch` (`coalesce` as given): the client is authorized and watching.
  func authorizeAndWatch(coalesce: Bool) async throws {
    _ = try await require("request", class: "AUTHORIZATION")
    _ = try await require("watch", ["coalesce": coalesce], class: "WATCH")
  }

  /// Reads events until `BACKEND` `endOfData`; returns the TPVs in order and every event.
  func collectUntilEndOfData(timeout: Double = 30) async throws -> (
    tpvs: [JSONObject], events: [JSONObject]
  ) {
    var tpvs: [JSONObject] = []
    var events: [JSONObject] = []
    let deadline = now() + timeout
    while true {
      guard let event = try await nextEvent(timeout: max(0.01, deadline - now())) else {
        throw E2EError(
          "no endOfData: \(closedByPeer ? "connection closed" : "timeout") after \(tpvs.count) fixes; last events: \(events.suffix(3).map(encodeLine))"
        )
      }
      events.append(event)
      if event["class"] as? String == "TPV" { tpvs.append(event) }
      if event["class"] as? String == "BACKEND", event["state"] as? String == "endOfData" {
        return (tpvs, events)
      }
    }
  }
}

/// A watching client read on its own thread, recording each TPV with its arrival time.
final class WatchRecorder: @unchecked Sendable {
  private let lock = NSLock()
  private var arrivals: [(time: Double, tpv: JSONObject)] = []
  private var others: [JSONObject] = []
  private var stopped = false
  private var closed = false
  private let finished = DispatchSemaphore(value: 0)
  let client: LineClient

  /// Connects, authorizes and watches (`coalesce` as given), then reads on a new thread.
  static func start(path: String, coalesce: Bool) async throws -> WatchRecorder {
    let client = try LineClient(path: path)
    try await client.authorizeAndWatch(coalesce: coalesce)
    return WatchRecorder(client: client)
  }

  private init(client: LineClient) {
    self.client = client
    let thread = Thread { [self] in
      for event in client.stashed { record(event) }
      client.stashed.removeAll()
      while !isStopped {
        guard let line = client.readLineBlocking(timeout: 0.05) else {
          if client.closedByPeer {
            lock.withLock { closed = true }
            break
          }
          continue
        }
        if let event = parseObject(line) { record(event) }
      }
      finished.signal()
    }
    thread.start()
  }

  private var isStopped: Bool { lock.withLock { stopped } }

  private func record(_ event: JSONObject) {
    let time = now()
    lock.withLock {
      if event["class"] as? String == "TPV" {
        arrivals.append((time, event))
      } else {
        others.append(event)
      }
    }
  }

  /// The TPVs received so far with their arrival times.
  var fixes: [(time: Double, tpv: JSONObject)] { lock.withLock { arrivals } }
  /// Non-TPV events received so far.
  var otherEvents: [JSONObject] { lock.withLock { others } }
  /// Whether the daemon closed the connection.
  var wasClosed: Bool { lock.withLock { closed } }

  /// Stops the reader thread (within 50 ms).
  func stop() {
    lock.withLock { stopped = true }
    finished.wait()
  }
}

/// Runs `body` until it returns true or `timeout` passes (sleeping 10 ms between tries), and once
/// more after the deadline. The timeout only ends a wait for what never happens: a test task on a
/// loaded 2-core machine may not run for many seconds.
func waitUntil(timeout: Double = 30, _ body: () async throws -> Bool) async rethrows -> Bool {
  let deadline = now() + timeout
  while now() < deadline {
    if try await body() { return true }
    await pause(0.01)
  }
  return try await body()
}
