// N watching clients on one locationd with a replay backend: fix time -> client, the fan-out
// spread, CPU and memory under load and after.

import BenchKit
import Foundation
import Glibc
import LocationTestKit
import SystemIO

/// Runs the round of `count` clients (each sends `request` and `watch`) against a fresh
/// locationd replaying `replayURI`; prints its progress and returns its lines of the table.
/// `descriptorLimit` is named when not every client could connect.
func measureClients(
  _ count: Int, daemons: Daemons, settings: Settings, replayURI: String, descriptorLimit: rlim_t
) -> [Figure] {
  let (pid, _) = daemons.start(backend: replayURI)
  var fds: [Int32] = []
  for _ in 0..<count {
    guard let fd = connectUnix(daemons.socketPath) else { break }
    guard sendLine(fd, "{\"cmd\":\"request\",\"id\":1}\n{\"cmd\":\"watch\",\"id\":2}\n") else {
      break
    }
    fds.append(fd)
  }
  guard fds.count == count else {
    terminate(pid)
    fail("only \(fds.count) of \(count) clients connected (descriptor limit \(descriptorLimit))")
  }
  // The reader does as little as it can while fixes arrive (see BenchKit's ClientReader); it
  // notes wall-clock receive times, the clock of the shifted replay's fix times. Room for every
  // line of the warm-up and the run (about 400 bytes a fix, 10 Hz), per client.
  let capacity = Int(settings.runSeconds + 4) * 10 * 1024
  let reader = orFail { () throws(BenchError) in
    try ClientReader(
      fds: fds, capacity: capacity, clock: .realtime, spin: settings.spin,
      expectedReceipts: count * Int(settings.runSeconds * 10) * 2 + 4096)
  }

  var latencies: [Double] = []
  latencies.reserveCapacity(count * Int(settings.runSeconds * 10) + 1024)
  var arrivals: [Int64: [Double]] = [:]  // fix time -> arrival wall times (ms)
  var fixesPerClient = [Int](repeating: 0, count: count)
  var errors = 0
  let errorPrefix = Array(#"{"class":"ERROR""#.utf8)

  /// Splits and parses what every client received; a line arrived with the recv that brought
  /// its newline.
  func analyse() {
    for index in 0..<count {
      reader.forEachLine(ofClient: index) { line, received in
        let at = milliseconds(received)
        if TPVLine.isTPV(line) {
          if let time = TPVLine.time(line) {
            latencies.append(at - Double(time))
            arrivals[time, default: []].append(at)
            fixesPerClient[index] += 1
          }
        } else if line.starts(with: errorPrefix) {
          errors += 1
        }
      }
    }
    if reader.overflowed > 0 {
      say("  (\(reader.overflowed) receive buffers full: some fixes were not counted)")
    }
  }

  // Warm-up: authorizations, first fixes.
  reader.pump(until: MonotonicClock.nanoseconds() + 2_000_000_000)
  reader.forget()
  let cpuBefore = cpuSeconds(pid)
  let clientsBefore = cpuSeconds(getpid())
  let started = MonotonicClock.nanoseconds()
  reader.pump(until: started + UInt64(settings.runSeconds * 1e9))
  let cpuUsed = cpuSeconds(pid) - cpuBefore
  let clientsUsed = cpuSeconds(getpid()) - clientsBefore
  let elapsed = Double(MonotonicClock.nanoseconds() - started) / 1e9
  let loaded = memory(pid)
  reader.closeConnections()
  analyse()
  // Idle again: no client tracking, the backend stopped.
  let idleUsed = cpuWhileIdle(pid, seconds: settings.idleSeconds)
  let afterMemory = memory(pid)
  terminate(pid)

  var table: [Figure] = []
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
      say(
        "  slow fix at +\(fix - minimum) ms: first client \(format(first)) ms, last \(format(last)) ms"
      )
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
  return table
}
