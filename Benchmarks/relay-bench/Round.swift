// One round: a fresh gpsd and locationd, N clients on each, the same 10 Hz stream.

import BenchKit
import Foundation
import Glibc
import LocationTestKit
import Synchronization
import SystemIO

/// Pty write times (CLOCK_MONOTONIC ns, just before the epoch's write() call) by fix time (ms
/// since 1970), filled by the simulated receiver's writer thread. Every epoch carries a distinct
/// fix time, so a TPV's `time` names the write it came from.
final class WriteLog: Sendable {
  let byFixTime = Mutex<[Int64: UInt64]>([:])
}

/// What every round shares.
struct Bench {
  let settings: Settings
  let work: String
  let gpsd: PrivateGPSD
  let writes: WriteLog
  let notifyFD: Int32
  let notifyPath: String
  /// With --direct: the pty of locationd's own receiver, and its write times.
  let directLink: String?
  let directWrites: WriteLog
}

/// The contents of a file, or "" (for error messages).
func contents(_ path: String) -> String {
  (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
}

/// The BACKEND lines a locationd client has been sent so far (left unread), for a failure message.
func backendEvents(_ fd: Int32) -> String {
  var buffer = [UInt8](repeating: 0, count: 65_536)
  let count = buffer.withUnsafeMutableBytes {
    recv(fd, $0.baseAddress, $0.count, Int32(MSG_PEEK | MSG_DONTWAIT))
  }
  guard count > 0 else { return "" }
  return buffer[0..<count].split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
    .filter { $0.contains(#""class":"BACKEND""#) }.map { $0 + "\n" }.joined()
}

/// Waits until the data waiting on locationd client `fd` holds a BACKEND event in state
/// `connected` (peeked: left for the reader); false after `timeout` seconds.
func waitForBackendConnected(_ fd: Int32, timeout: Double) -> Bool {
  let deadline = MonotonicClock.seconds() + timeout
  while MonotonicClock.seconds() < deadline {
    if backendEvents(fd).contains(#""state":"connected""#) { return true }
    usleep(10_000)
  }
  return false
}

/// Runs round `n`: `gpsdClients` clients watching gpsd's JSON and `n` clients watching locationd,
/// whose gpsd backend is the one more client of that gpsd. Returns gpsd's row, then locationd's.
func runRound(_ bench: Bench, n: Int, gpsdClients: Int) -> [Row] {
  let settings = bench.settings
  let gpsd = bench.gpsd
  do {
    try gpsd.start()
  } catch {
    fail("\(error)")
  }
  let socketPath = bench.work + "/locationd.sock"
  let daemonLog = bench.work + "/locationd-\(n).log"
  unlink(socketPath)
  let arguments = [
    "--socket", socketPath, "--state-dir", bench.work + "/state-\(n)", "--group", "",
    "--backend",
    bench.directLink.map { "serial:\($0)?baud=9600" } ?? "gpsd://127.0.0.1:\(gpsd.port)",
    "--max-clients", String(n + 16),
  ]
  let pid = orFail { () throws(BenchError) in
    try spawn(
      settings.locationd, arguments,
      environment: ["NOTIFY_SOCKET": bench.notifyPath, "PATH": "/usr/bin:/bin"], log: daemonLog)
  }
  cleanup.register("locationd") { kill(pid, SIGKILL) }
  guard waitForReady(bench.notifyFD, timeout: 10) != nil else {
    fail("locationd did not send READY=1 within 10 s; its log:\n\(contents(daemonLog))")
  }

  // locationd's clients first: their watch starts its gpsd backend, which takes one of gpsd's
  // client slots before gpsd's own clients take the rest (with --direct, its serial backend).
  var locationdFDs: [Int32] = []
  for _ in 0..<n {
    guard let fd = connectUnix(socketPath),
      sendLine(fd, "{\"cmd\":\"request\",\"id\":1}\n{\"cmd\":\"watch\",\"id\":2}\n")
    else {
      fail("only \(locationdFDs.count) of \(n) clients could connect to locationd")
    }
    locationdFDs.append(fd)
  }
  // Its BACKEND event says so: libgps has connected, and gpsd accepts connections in the order
  // they came, so locationd's comes before those of gpsd's own clients below.
  guard let first = locationdFDs.first, waitForBackendConnected(first, timeout: 20) else {
    fail(
      "locationd's backend did not connect within 20 s; its BACKEND events:\n\(locationdFDs.first.map(backendEvents) ?? "")its log:\n\(contents(daemonLog))"
    )
  }

  var gpsdFDs: [Int32] = []
  for _ in 0..<gpsdClients {
    guard let fd = connectTCP(port: gpsd.port) else {
      fail("gpsd refused connection \(gpsdFDs.count + 1) of \(gpsdClients) (plus locationd's)")
    }
    guard let banner = readFirstLine(fd, timeout: 3), banner.hasPrefix(#"{"class":"VERSION""#),
      sendLine(fd, "?WATCH={\"enable\":true,\"json\":true}\n")
    else {
      fail(
        "gpsd served only \(gpsdFDs.count) of \(gpsdClients) clients (plus locationd's): no VERSION banner"
      )
    }
    gpsdFDs.append(fd)
  }
  say("N=\(n): \(gpsdFDs.count) clients on gpsd (+ locationd), \(locationdFDs.count) on locationd")

  // About 1.3 KB a fix for a gpsd client (TPV and SKY) and 0.7 KB for locationd's (TPV and MAP).
  let capacity = Int((settings.warmup + settings.seconds + 2) * 10) * 2048
  let reader = orFail { () throws(BenchError) in
    try ClientReader(fds: gpsdFDs + locationdFDs, capacity: capacity)
  }
  reader.pump(until: MonotonicClock.nanoseconds() + UInt64(settings.warmup * 1e9))
  reader.forget()
  guard let gpsdPID = gpsd.pid else { fail("gpsd exited during the warm-up") }
  let gpsdBefore = ProcessSample.read(pid: gpsdPID)
  let locationdBefore = ProcessSample.read(pid: pid)
  let start = MonotonicClock.nanoseconds()
  reader.pump(until: start + UInt64(settings.seconds * 1e9))
  let end = MonotonicClock.nanoseconds()
  let gpsdAfter = ProcessSample.read(pid: gpsdPID)
  let locationdAfter = ProcessSample.read(pid: pid)
  if reader.overflowed > 0 {
    say("  (\(reader.overflowed) receive buffers full: some fixes were not counted)")
  }

  // Fixes written from the start of the window to 0.5 s before its end: every one of them had
  // time to reach every client.
  let windowEnd = end - 500_000_000
  let written = bench.writes.byFixTime.withLock { $0 }.filter {
    $0.value >= start && $0.value <= windowEnd
  }
  // locationd's own receiver with --direct: the same fix times, its own write times.
  let writtenDirect =
    bench.directLink == nil
    ? written
    : bench.directWrites.byFixTime.withLock { $0 }.filter {
      $0.value >= start && $0.value <= windowEnd
    }
  let elapsed = Double(end - start) / 1e9
  func row(
    _ name: String, clients: Range<Int>, before: ProcessSample?, after: ProcessSample?,
    written: [Int64: UInt64]
  ) -> Row {
    var latencies: [Double] = []
    latencies.reserveCapacity(clients.count * written.count)
    var received = 0
    var repeats = 0
    var firstByFix: [Int64: Double] = [:]
    for index in clients {
      var seen = Set<Int64>()
      reader.forEachLine(ofClient: index) { line, at in
        guard TPVLine.isTPV(line), let time = TPVLine.time(line), let write = written[time] else {
          return
        }
        if seen.insert(time).inserted {
          let latency = Double(Int64(at) - Int64(write)) / 1e6
          latencies.append(latency)
          firstByFix[time] = min(latency, firstByFix[time] ?? latency)
          received += 1
        } else {
          repeats += 1
        }
      }
    }
    latencies.sort()
    var cpu = Double.nan
    if let before, let after { cpu = (after.cpuSeconds - before.cpuSeconds) / elapsed * 100 }
    return Row(
      round: n, daemon: name, clients: clients.count, latencies: latencies,
      firstArrivals: firstByFix.values.sorted(), received: received,
      expected: written.count * clients.count, repeats: repeats, cpuPercent: cpu,
      rssMegabytes: after?.residentMegabytes ?? .nan)
  }
  let rows = [
    row("gpsd", clients: 0..<gpsdFDs.count, before: gpsdBefore, after: gpsdAfter, written: written),
    row(
      "locationd", clients: gpsdFDs.count..<(gpsdFDs.count + locationdFDs.count),
      before: locationdBefore, after: locationdAfter, written: writtenDirect),
  ]
  withExtendedLifetime(reader) {}
  for row in rows {
    say(
      "  \(row.daemon): \(row.received) / \(row.expected) fixes, first client median \(format(percentile(row.firstArrivals, 50))) ms; all clients median \(format(percentile(row.latencies, 50))) ms, p90 \(format(percentile(row.latencies, 90))) ms, p99 \(format(percentile(row.latencies, 99))) ms, max \(format(row.latencies.last ?? .nan)) ms; CPU \(format(row.cpuPercent, 1)) %, RSS \(format(row.rssMegabytes, 1)) MB"
        + (row.repeats > 0 ? "; \(row.repeats) repeated TPVs" : ""))
  }
  terminate(pid)
  cleanup.remove("locationd")
  gpsd.stop()
  return rows
}
