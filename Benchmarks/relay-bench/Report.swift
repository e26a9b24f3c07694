// The figures of one daemon in one round, and how they are printed.

import BenchKit
import Foundation

/// One daemon's figures for one N.
struct Row {
  /// The N of the round (both daemons get N watching clients, gpsd one fewer at its limit).
  var round: Int
  /// "gpsd" or "locationd".
  var daemon: String
  /// Clients that watched this daemon.
  var clients: Int
  /// Pty write -> TPV at a client, ms, sorted.
  var latencies: [Double]
  /// Per fix, the first of the clients to get it: pty write -> TPV, ms, sorted. The relay's own
  /// latency, without the cost of serving the other clients.
  var firstArrivals: [Double]
  /// Distinct fixes received, summed over the clients.
  var received: Int
  /// Fixes written in the window times the clients.
  var expected: Int
  /// TPVs that repeated a fix time a client had already received (not counted above).
  var repeats: Int
  /// Daemon CPU over the window, percent of one core.
  var cpuPercent: Double
  /// Daemon VmRSS at the end of the window, MiB.
  var rssMegabytes: Double
}

/// The value at percentile `p` (0...100) of `sorted`, nearest rank; NaN when empty.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
  guard !sorted.isEmpty else { return .nan }
  let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
  return sorted[min(max(rank, 0), sorted.count - 1)]
}

/// The markdown table, one line per daemon and N.
func markdownTable(_ rows: [Row]) -> String {
  var lines = [
    "| N | daemon | clients | fix to first client, median | fix to client, median | p99 | fixes received / expected | CPU, % of one core | RSS |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for row in rows {
    lines.append(
      "| \(row.round) | \(row.daemon) | \(row.clients)"
        + " | \(format(percentile(row.firstArrivals, 50))) ms | \(format(percentile(row.latencies, 50))) ms"
        + " | \(format(percentile(row.latencies, 99))) ms | \(row.received) / \(row.expected)"
        + " | \(format(row.cpuPercent, 1)) | \(format(row.rssMegabytes, 1)) MB |")
  }
  return lines.joined(separator: "\n")
}

/// The same figures as one JSON object (numbers in ms, %, MiB; null where nothing was measured).
func jsonReport(_ rows: [Row], limit: GPSDLimitProbe, seconds: Double) -> String {
  func number(_ value: Double) -> String { value.isFinite ? String(format: "%.3f", value) : "null" }
  let items = rows.map { row in
    "{\"n\":\(row.round),\"daemon\":\"\(row.daemon)\",\"clients\":\(row.clients),"
      + "\"firstClientMedianMs\":\(number(percentile(row.firstArrivals, 50))),"
      + "\"latencyMedianMs\":\(number(percentile(row.latencies, 50))),"
      + "\"latencyP99Ms\":\(number(percentile(row.latencies, 99))),"
      + "\"fixesReceived\":\(row.received),\"fixesExpected\":\(row.expected),"
      + "\"repeatedFixes\":\(row.repeats),"
      + "\"cpuPercent\":\(number(row.cpuPercent)),\"rssMB\":\(number(row.rssMegabytes))}"
  }
  return "{\"seconds\":\(number(seconds)),\"gpsdMaxClients\":{\"source\":\(gpsdSourceLimit),"
    + "\"measured\":\(limit.served),\"refusedNext\":\(limit.refused)},"
    + "\"rows\":[\(items.joined(separator: ","))]}"
}
