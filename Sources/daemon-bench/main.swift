// daemon-bench: the release locationd under load, measured from outside.
//
// 1. Start to READY: locationd spawned with NOTIFY_SOCKET pointing at this program's datagram
//    socket; time from posix_spawn to the READY=1 datagram; median of 10.
// 2. Idle: locationd with a replay backend and no client; CPU (utime+stime from /proc/PID/stat)
//    over IDLE seconds and RSS (VmRSS, VmHWM from /proc/PID/status).
// 3. N clients (100, 1000): each connects, sends `request` and `watch`; the replay (a generated
//    10 Hz log, timestamps=shifted so that fix times are the wall time of emission) runs for
//    RUN seconds. Per received TPV:
//    - fix time -> client: receive wall time (CLOCK_REALTIME) minus the TPV `time` (ms
//      resolution; includes the replay's timer wake-up, so it is an upper bound);
//    - fan-out spread: arrival at a client minus the earliest arrival of the same fix at any
//      client (the daemon's cost of serving many clients, independent of clock resolution).
//    Daemon CPU over the run, RSS at the end; then CPU over IDLE seconds after every client left.
// 4. Issue 6 (optional, --gpsd-fixes 0 skips): simulated GPS hardware (pty) -> private gpsd ->
//    locationd --backend gpsd://... -> one watching client: pty write() -> TPV at the client, over
//    FIXES fixes at 10 Hz; then locationd's CPU over IDLE seconds with gpsd connected but no fixes.
//
// The clients' reader is one thread with edge-triggered epoll; it notes the receive time of each
// recv and parses after the run. It sleeps in epoll_wait between fixes, as a client would; on a
// virtual machine the first fix of a round then waits for the reader's vCPU to wake (seen here:
// up to 3.5 ms in a few rounds out of 150). --spin makes it poll instead, which shows the
// daemon's own latency without that wake-up.
//
// Usage: daemon-bench [--clients 100,1000] [--run SECONDS] [--idle SECONDS] [--gpsd-fixes N]
//                     [--spin] [--slowest N] [--locationd PATH]
// The locationd used is the one beside this executable (build with swift build -c release).

import CLinux
import Foundation
import Glibc
import LocationCore
import LocationTestKit
import NMEA
import Synchronization
import LocationModel

// MARK: Arguments

struct Settings {
  var clientCounts = [100, 1000]
  var runSeconds = 15.0
  var idleSeconds = 10.0
  var gpsdFixes = 1000
  /// The clients' reader polls instead of sleeping in epoll_wait (see the header).
  var spin = false
  /// Print the N fixes whose last client waited longest.
  var slowest = 0
  var locationd = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("locationd").path

  init(_ arguments: [String]) {
    var index = 0
    func value() -> String {
      index += 1
      guard index < arguments.count else { fail("\(arguments[index - 1]) needs a value") }
      return arguments[index]
    }
    while index < arguments.count {
      switch arguments[index] {
      case "--clients":
        clientCounts = value().split(separator: ",").compactMap { Int($0) }.filter {
          $0 > 0 && $0 <= 4096
        }
        if clientCounts.isEmpty { fail("--clients takes counts within 1...4096, e.g. 100,1000") }
      case "--run": runSeconds = positive(value(), "--run")
      case "--idle": idleSeconds = positive(value(), "--idle")
      case "--gpsd-fixes":
        guard let count = Int(value()), count >= 0 else { fail("--gpsd-fixes takes a count >= 0") }
        gpsdFixes = count
      case "--locationd": locationd = value()
      case "--spin": spin = true
      case "--slowest":
        guard let count = Int(value()), count >= 0 else { fail("--slowest takes a count >= 0") }
        slowest = count
      case "-h", "--help":
        say(
          "usage: daemon-bench [--clients 100,1000] [--run S] [--idle S] [--gpsd-fixes N] [--spin] [--slowest N] [--locationd PATH]"
        )
        exit(0)
      default: fail("unknown argument \(arguments[index])")
      }
      index += 1
    }
  }

  private func positive(_ text: String, _ name: String) -> Double {
    guard let number = Double(text), number > 0, number.isFinite else {
      fail("\(name) takes seconds > 0")
    }
    return number
  }
}

/// Prints a line and flushes, so that progress shows when the output is a file or a pipe.
func say(_ line: String) {
  print(line)
  fflush(nil)
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("daemon-bench: \(message)\n".utf8))
  exit(64)
}

// MARK: Clocks, processes, /proc

func monotonic() -> Double {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// Wall time in milliseconds since 1970, with a fraction.
func wallMilliseconds() -> Double {
  var spec = timespec()
  clock_gettime(CLOCK_REALTIME, &spec)
  return Double(spec.tv_sec) * 1000 + Double(spec.tv_nsec) / 1e6
}

func sleepSeconds(_ seconds: Double) {
  var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
  var remaining = timespec()
  while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}

/// utime + stime of a process from /proc/PID/stat, seconds.
func cpuSeconds(_ pid: pid_t) -> Double {
  guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
    let close = text.lastIndex(of: ")")
  else { return .nan }
  let fields = text[text.index(after: close)...].split(separator: " ")
  guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else {
    return .nan
  }
  return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// VmRSS, VmHWM and RssAnon (private heap and stacks, without shared library pages) of a
/// process, MB.
func memory(_ pid: pid_t) -> (rss: Double, hwm: Double, anonymous: Double) {
  guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
    return (.nan, .nan, .nan)
  }
  var rss = Double.nan
  var hwm = Double.nan
  var anonymous = Double.nan
  for line in text.split(separator: "\n") {
    let parts = line.split(separator: " ", omittingEmptySubsequences: true)
    guard parts.count >= 2, let kb = Double(parts[1]) else { continue }
    if line.hasPrefix("VmRSS:") { rss = kb / 1024 }
    if line.hasPrefix("VmHWM:") { hwm = kb / 1024 }
    if line.hasPrefix("RssAnon:") { anonymous = kb / 1024 }
  }
  return (rss, hwm, anonymous)
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
  let deadline = monotonic() + 5
  var status: Int32 = 0
  while monotonic() < deadline {
    if waitpid(pid, &status, WNOHANG) == pid { return }
    usleep(5_000)
  }
  kill(pid, SIGKILL)
  waitpid(pid, &status, 0)
}

// MARK: Sockets

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

/// Waits for a datagram containing READY=1; the monotonic time it arrived, or nil after `timeout`.
func waitForReady(_ fd: Int32, timeout: Double) -> Double? {
  let deadline = monotonic() + timeout
  var buffer = [UInt8](repeating: 0, count: 4096)
  while monotonic() < deadline {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let milliseconds = Int32(max(1, (deadline - monotonic()) * 1000))
    guard poll(&descriptor, 1, milliseconds) > 0 else { continue }
    let count = recv(fd, &buffer, buffer.count, 0)
    let at = monotonic()
    if count > 0,
      String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").contains("READY=1")
    {
      return at
    }
  }
  return nil
}

/// A blocking connection to the daemon's socket; nil when it fails.
func connectClient(_ path: String) -> Int32? {
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

func sendLine(_ fd: Int32, _ text: String) -> Bool {
  let bytes = Array(text.utf8)
  return bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    == bytes.count
}

// MARK: TPV parsing (bytes, no JSONDecoder on the hot path)

/// The `"time":"..."` of a TPV line, as milliseconds since 1970.
func tpvTime(_ line: ArraySlice<UInt8>) -> Int64? {
  let key = Array(#""time":""#.utf8)
  guard line.count > key.count else { return nil }
  var index = line.startIndex
  while index + key.count + 23 <= line.endIndex {
    if line[index] == key[0], line[index..<(index + key.count)].elementsEqual(key) {
      let start = index + key.count
      guard let end = line[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
      return TestRoute.milliseconds(iso8601: String(decoding: line[start..<end], as: UTF8.self))
    }
    index += 1
  }
  return nil
}

func isTPV(_ line: ArraySlice<UInt8>) -> Bool {
  let prefix = Array(#"{"class":"TPV""#.utf8)
  return line.count >= prefix.count && line.prefix(prefix.count).elementsEqual(prefix)
}

// MARK: Statistics

func percentile(_ sorted: [Double], _ p: Double) -> Double {
  guard !sorted.isEmpty else { return .nan }
  let rank = Int((p / 100 * Double(sorted.count - 1)).rounded())
  return sorted[min(max(rank, 0), sorted.count - 1)]
}

func format(_ value: Double, _ digits: Int = 2) -> String {
  value.isFinite ? String(format: "%.\(digits)f", value) : "n/a"
}

// MARK: The log

/// Writes a 10 Hz NMEA log of `seconds` seconds (RMC, VTG, GGA, GSA, GSV per epoch) to `path`.
func writeLog(_ path: String, seconds: Int) {
  let encoder = NMEAEncoder()
  var bytes: [UInt8] = []
  for index in 0..<(seconds * 10) {
    let fix = TestRoute.fix(index)  // 10 Hz epochs from 2026-03-14T12:00:00Z
    encoder.encode(fix, into: &bytes)
  }
  guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
    fail("cannot write \(path)")
  }
}

// MARK: Main

let settings = Settings(Array(CommandLine.arguments.dropFirst()))

signal(SIGPIPE, SIG_IGN)
guard access(settings.locationd, X_OK) == 0 else {
  fail(
    "no locationd at \(settings.locationd): swift build -c release first, or give --locationd PATH")
}
var limit = rlimit()
getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
let wantedFiles = rlim_t((settings.clientCounts.max() ?? 0) + 256)
if limit.rlim_cur < wantedFiles {
  limit.rlim_cur = min(max(wantedFiles, limit.rlim_cur), limit.rlim_max)
  setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

let work = "/tmp/daemon-bench-\(getpid())"
try? FileManager.default.removeItem(atPath: work)
try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: work) }
let logPath = work + "/drive.nmea"
writeLog(logPath, seconds: 60)
let replayURI = "replay:\(logPath)?speed=1&loop=true&timestamps=shifted"
let socketPath = work + "/l.sock"
let notifyPath = work + "/notify.sock"
let notifyFD = notifySocket(notifyPath)
let daemonLog = work + "/locationd.log"

say("daemon-bench: \(settings.locationd)")
say("replay: 10 Hz generated log (600 epochs, looped), \(replayURI)")

/// Starts locationd and waits for READY=1; (pid, seconds from spawn to READY).
func startDaemon(backend: String, maxClients: Int = 4096) -> (pid: pid_t, ready: Double) {
  unlink(socketPath)
  let arguments = [
    "--socket", socketPath, "--state-dir", work + "/state", "--group", "", "--backend", backend,
    "--max-clients", String(maxClients),
  ]
  let started = monotonic()
  let pid = spawn(
    settings.locationd, arguments,
    environment: ["NOTIFY_SOCKET": notifyPath, "PATH": "/usr/bin:/bin"],
    log: daemonLog)
  guard let ready = waitForReady(notifyFD, timeout: 10) else {
    terminate(pid)
    fail(
      "locationd did not send READY=1 within 10 s; log: \((try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "")"
    )
  }
  return (pid, ready - started)
}

var table: [(String, String, String)] = []  // (figure, measured, target)

// 1. Start to READY.
var readyTimes: [Double] = []
for _ in 0..<10 {
  let (pid, ready) = startDaemon(backend: replayURI)
  readyTimes.append(ready * 1000)
  terminate(pid)
}
readyTimes.sort()
say("start -> READY=1 (ms, 10 runs): \(readyTimes.map { format($0, 1) }.joined(separator: " "))")
table.append(
  ("start -> READY=1, median of 10", "\(format(percentile(readyTimes, 50), 1)) ms", "< 50 ms"))

// 2. Idle, fresh daemon, no client.
do {
  let (pid, _) = startDaemon(backend: replayURI)
  sleepSeconds(1)
  let before = cpuSeconds(pid)
  sleepSeconds(settings.idleSeconds)
  let used = cpuSeconds(pid) - before
  let idleMemory = memory(pid)
  terminate(pid)
  table.append(
    (
      "CPU over \(Int(settings.idleSeconds)) s idle, no client (fresh)",
      "\(format(used * 1000, 0)) ms", "0 (no CPU)"
    ))
  table.append(
    (
      "RSS idle (VmRSS / VmHWM; RssAnon)",
      "\(format(idleMemory.rss, 1)) / \(format(idleMemory.hwm, 1)) MB; \(format(idleMemory.anonymous, 1)) MB",
      "< 12 MB"
    ))
}

// 3. N watching clients.
for count in settings.clientCounts {
  let (pid, _) = startDaemon(backend: replayURI)
  var fds: [Int32] = []
  for _ in 0..<count {
    guard let fd = connectClient(socketPath) else { break }
    guard sendLine(fd, "{\"cmd\":\"request\",\"id\":1}\n{\"cmd\":\"watch\",\"id\":2}\n") else {
      break
    }
    fds.append(fd)
  }
  guard fds.count == count else {
    terminate(pid)
    fail("only \(fds.count) of \(count) clients connected (descriptor limit \(limit.rlim_cur))")
  }
  // The reader does as little as it can while fixes arrive: edge-triggered epoll (no scan of
  // every descriptor, no re-polling of idle ones), one recv per readiness straight into the
  // client's preallocated buffer, the receive time noted with the byte count. Lines are split
  // and parsed only after the run, so that parsing one client's TPV does not delay the receive
  // time of the next.
  let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
  guard epoll >= 0 else { fail("epoll_create1: \(String(cString: strerror(errno)))") }
  for (index, fd) in fds.enumerated() {
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    var event = epoll_event()
    event.events = EPOLLIN.rawValue | EPOLLET.rawValue
    event.data.u64 = UInt64(index)
    guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else {
      fail("epoll_ctl: \(String(cString: strerror(errno)))")
    }
  }
  // Room for every line of the warm-up and the run (about 400 bytes a fix, 10 Hz), per client.
  let capacity = Int(settings.runSeconds + 4) * 10 * 1024
  let storage = UnsafeMutableRawBufferPointer.allocate(
    byteCount: capacity * count, alignment: 16)
  defer { storage.deallocate() }
  // Touched now, so that no page fault lands in the middle of a fix's arrivals.
  storage.initializeMemory(as: UInt8.self, repeating: 0)
  var filled = [Int](repeating: 0, count: count)
  var overflowed = 0
  // Every recv: (client, end offset in its buffer, wall time in ms).
  var receipts: [(client: Int32, end: Int32, at: Double)] = []
  receipts.reserveCapacity(count * Int(settings.runSeconds * 10) * 2 + 4096)
  var events = [epoll_event](repeating: epoll_event(), count: 256)

  let spin = settings.spin
  func pump(until deadline: Double) {
    while monotonic() < deadline {
      let ready = epoll_wait(epoll, &events, Int32(events.count), spin ? 0 : 20)
      guard ready > 0 else { continue }
      for event in events[0..<Int(ready)] {
        let index = Int(event.data.u64)
        while true {
          let room = capacity - filled[index]
          guard room > 0, let base = storage.baseAddress else {
            overflowed += 1
            // Drop what does not fit; the client's count then shows fewer fixes.
            var sink = [UInt8](repeating: 0, count: 65_536)
            while recv(fds[index], &sink, sink.count, 0) > 0 {}
            break
          }
          let bytes = recv(fds[index], base + index * capacity + filled[index], room, 0)
          guard bytes > 0 else { break }
          let at = wallMilliseconds()
          filled[index] += bytes
          receipts.append((Int32(index), Int32(filled[index]), at))
          // Less than asked for: the socket is drained (the next data is a new edge).
          if bytes < room { break }
        }
      }
    }
  }

  /// The bytes client `index` received.
  func received(_ index: Int) -> UnsafeMutableRawBufferPointer {
    UnsafeMutableRawBufferPointer(rebasing: storage[(index * capacity)..<(index * capacity + filled[index])])
  }

  /// Clears what the clients received so far (the warm-up), keeping an incomplete last line.
  func forget() {
    for index in 0..<count {
      let bytes = received(index)
      var keep = bytes.count
      if let lastNewline = bytes.lastIndex(of: 0x0A) { keep = bytes.count - (lastNewline + 1) }
      if keep > 0, let base = bytes.baseAddress {
        memmove(base, base + (bytes.count - keep), keep)
      }
      filled[index] = keep
    }
    receipts.removeAll(keepingCapacity: true)
  }

  var latencies: [Double] = []
  latencies.reserveCapacity(count * Int(settings.runSeconds * 10) + 1024)
  var arrivals: [Int64: [Double]] = [:]  // fix time -> arrival wall times (ms)
  var fixesPerClient = [Int](repeating: 0, count: count)
  var errors = 0

  /// Splits and parses what every client received; a line arrived with the recv that brought
  /// its newline.
  func analyse() {
    var receiptsOf = [[(end: Int, at: Double)]](repeating: [], count: count)
    for receipt in receipts { receiptsOf[Int(receipt.client)].append((Int(receipt.end), receipt.at)) }
    for index in 0..<count {
      let bytes = Array(received(index))
      let times = receiptsOf[index]
      var receipt = 0
      var start = 0
      while let newline = bytes[start...].firstIndex(of: 0x0A) {
        let line = bytes[start..<newline]
        start = newline + 1
        while receipt < times.count && times[receipt].end < start { receipt += 1 }
        guard receipt < times.count else { break }
        let at = times[receipt].at
        if isTPV(line) {
          if let time = tpvTime(line) {
            latencies.append(at - Double(time))
            arrivals[time, default: []].append(at)
            fixesPerClient[index] += 1
          }
        } else if line.starts(with: Array(#"{"class":"ERROR""#.utf8)) {
          errors += 1
        }
      }
    }
    if overflowed > 0 { say("  (\(overflowed) receive buffers full: some fixes were not counted)") }
  }

  // Warm-up: authorizations, first fixes.
  pump(until: monotonic() + 2)
  forget()
  let cpuBefore = cpuSeconds(pid)
  let clientsBefore = cpuSeconds(getpid())
  let started = monotonic()
  pump(until: started + settings.runSeconds)
  let cpuUsed = cpuSeconds(pid) - cpuBefore
  let clientsUsed = cpuSeconds(getpid()) - clientsBefore
  let elapsed = monotonic() - started
  let loaded = memory(pid)
  for fd in fds { close(fd) }
  close(epoll)
  analyse()
  // Idle again: no client tracking, the backend stopped.
  sleepSeconds(1)
  let idleBefore = cpuSeconds(pid)
  sleepSeconds(settings.idleSeconds)
  let idleUsed = cpuSeconds(pid) - idleBefore
  let afterMemory = memory(pid)
  terminate(pid)

  latencies.sort()
  var spreads: [Double] = []
  spreads.reserveCapacity(latencies.count)
  var firsts: [Double] = []  // per fix: first arrival after the fix time
  var rounds: [Double] = []  // per fix: last arrival after the first
  for (fixTime, times) in arrivals {
    guard let first = times.min(), let last = times.max() else { continue }
    for time in times { spreads.append(time - first) }
    firsts.append(first - Double(fixTime))
    rounds.append(last - first)
  }
  if settings.slowest > 0, let minimum = arrivals.keys.min() {
    let slowest = arrivals.map { fix, times in
      (fix, (times.min() ?? .nan) - Double(fix), (times.max() ?? .nan) - Double(fix))
    }.sorted { $0.2 > $1.2 }.prefix(settings.slowest)
    for (fix, first, last) in slowest {
      say("  slow fix at +\(fix - minimum) ms: first client \(format(first)) ms, last \(format(last)) ms")
    }
  }
  spreads.sort()
  firsts.sort()
  rounds.sort()
  let perClient = Double(fixesPerClient.reduce(0, +)) / Double(count)
  say(
    "\(count) clients: \(latencies.count) TPVs in \(format(elapsed, 1)) s, \(format(perClient, 1)) per client (10 Hz: \(format(elapsed * 10, 0)) expected), \(errors) errors"
  )
  say(
    "  per fix, ms: first client after the fix time median \(format(percentile(firsts, 50))) p90 \(format(percentile(firsts, 90))) max \(format(firsts.last ?? .nan)); last client after the first median \(format(percentile(rounds, 50))) p90 \(format(percentile(rounds, 90))) max \(format(rounds.last ?? .nan))"
  )
  say(
    "  fix time -> client ms: median \(format(percentile(latencies, 50))) p90 \(format(percentile(latencies, 90))) p99 \(format(percentile(latencies, 99))) max \(format(latencies.last ?? .nan))"
  )
  say(
    "  spread after first client ms: median \(format(percentile(spreads, 50))) p90 \(format(percentile(spreads, 90))) p99 \(format(percentile(spreads, 99))) max \(format(spreads.last ?? .nan))"
  )
  table.append(
    (
      "\(count) clients: fix time -> client (reader \(settings.spin ? "polling" : "sleeping")), median / p99",
      "\(format(percentile(latencies, 50))) / \(format(percentile(latencies, 99))) ms",
      count >= 1000 ? "p99 < 5 ms" : ""
    ))
  table.append(
    (
      "\(count) clients: arrival after the first client, median / p99",
      "\(format(percentile(spreads, 50))) / \(format(percentile(spreads, 99))) ms", ""
    ))
  table.append(
    (
      "\(count) clients: CPU during the run, daemon (the clients' reader in this program)",
      "\(format(cpuUsed / elapsed * 100, 1)) % (\(format(clientsUsed / elapsed * 100, 1)) %) of one core",
      ""
    ))
  table.append(
    (
      "\(count) clients: RSS (VmRSS / VmHWM; RssAnon)",
      "\(format(loaded.rss, 1)) / \(format(loaded.hwm, 1)) MB; \(format(loaded.anonymous, 1)) MB",
      count >= 1000 ? "< 30 MB" : ""
    ))
  table.append(
    (
      "after \(count) clients left: CPU over \(Int(settings.idleSeconds)) s idle / RSS",
      "\(format(idleUsed * 1000, 0)) ms / \(format(afterMemory.rss, 1)) MB", "0 (no CPU)"
    ))
}

// 4. Issue 6: pty -> gpsd -> locationd -> client.
if settings.gpsdFixes > 0 {
  final class Writes: Sendable {
    let byTime = Mutex<[Int64: UInt64]>([:])
    let limit: Int
    init(limit: Int) { self.limit = limit }
  }
  let writes = Writes(limit: settings.gpsdFixes + 40)
  let link = work + "/gps0"
  let receiver = try SimulatedReceiver(
    linkPath: link,
    onWrite: { epoch in
      if let time = epoch.fix.time { writes.byTime.withLock { $0[time] = epoch.startedAt } }
    })
  let origin: Int64 = 1_773_489_600_000
  try receiver.start(rate: 10) { elapsed in
    let index = Int((elapsed * 10).rounded())
    guard index < writes.limit else { return nil }  // then silent: no fixes
    var fix = Fix(mode: .fix3D)
    fix.time = origin + Int64(index) * 100
    fix.quality = .gps
    fix.coordinate = Coordinate(
      latitude: 48.137_154 + Double(index) * 8.1e-6, longitude: 11.576_124 + Double(index) * 1.21e-5
    )
    fix.altitudeMSL = 519.5
    fix.speedOverGround = 12.5
    fix.courseOverGround = 45
    fix.hdop = 0.9
    fix.satellitesUsed = 4
    return fix
  }
  let gpsd = try PrivateGPSD(device: link)
  try gpsd.start()
  let (pid, _) = startDaemon(backend: "gpsd://127.0.0.1:\(gpsd.port)")
  guard let fd = connectClient(socketPath),
    sendLine(
      fd, "{\"cmd\":\"request\",\"id\":1}\n{\"cmd\":\"watch\",\"id\":2,\"coalesce\":false}\n")
  else { fail("cannot connect to locationd") }
  var latencies: [Double] = []
  var buffer: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 65_536)
  var received = 0
  let deadline = monotonic() + Double(settings.gpsdFixes + 40) / 10 + 10
  var lastFixAt = monotonic()
  while monotonic() < deadline {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    if poll(&descriptor, 1, 100) <= 0 {
      if received > 0 && monotonic() - lastFixAt > 2 { break }  // the receiver went silent
      continue
    }
    let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    guard count > 0 else { break }
    let at = SimulatedReceiver.monotonicNanoseconds()
    buffer.append(contentsOf: chunk[0..<count])
    while let newline = buffer.firstIndex(of: 0x0A) {
      let line = buffer[..<newline]
      if isTPV(line), let time = tpvTime(line) {
        received += 1
        lastFixAt = monotonic()
        // Skip the first 20 (gpsd learning the receiver's cycle); then 1000 fixes.
        if received > 20, latencies.count < settings.gpsdFixes,
          let written = writes.byTime.withLock({ $0[time] })
        {
          latencies.append(Double(at - written) / 1e6)
        }
      }
      buffer.removeSubrange(...newline)
    }
  }
  // The receiver is silent now; gpsd and the watch stay connected.
  sleepSeconds(1)
  let idleBefore = cpuSeconds(pid)
  let gpsdBefore = gpsd.pid.map(cpuSeconds) ?? .nan
  sleepSeconds(settings.idleSeconds)
  let idleUsed = cpuSeconds(pid) - idleBefore
  let gpsdUsed = (gpsd.pid.map(cpuSeconds) ?? .nan) - gpsdBefore
  close(fd)
  terminate(pid)
  receiver.stop()
  gpsd.stop()
  latencies.sort()
  say(
    "issue 6: pty write -> TPV at a watching client through gpsd and locationd, \(latencies.count) fixes at 10 Hz: median \(format(percentile(latencies, 50))) p90 \(format(percentile(latencies, 90))) p99 \(format(percentile(latencies, 99))) max \(format(latencies.last ?? .nan)) ms"
  )
  table.append(
    (
      "pty write -> client via gpsd + locationd (\(latencies.count) fixes, 10 Hz), median / p99",
      "\(format(percentile(latencies, 50))) / \(format(percentile(latencies, 99))) ms", ""
    ))
  table.append(
    (
      "locationd CPU over \(Int(settings.idleSeconds)) s, gpsd connected, no fixes (gpsd itself)",
      "\(format(idleUsed * 1000, 0)) ms (\(format(gpsdUsed * 1000, 0)) ms)", "0 (no CPU)"
    ))
}

close(notifyFD)
say("")
say("| figure | measured | target |")
say("|---|---|---|")
for (figure, measured, target) in table { say("| \(figure) | \(measured) | \(target) |") }
