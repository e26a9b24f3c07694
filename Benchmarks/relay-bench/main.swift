// relay-bench: locationd and gpsd side by side, serving the same 10 Hz stream in one run.
//
// Simulated GPS hardware writes a 10 Hz NMEA stream (RMC, VTG, GGA, GSA, GSV per epoch, one
// write() per epoch) into a pseudo-terminal, read by a private gpsd (own port, control socket and
// shared-memory key; never the system one). For each N of --clients, with a fresh gpsd and a
// fresh release locationd (`--backend gpsd://` pointed at that gpsd, so that it is one more
// client of gpsd):
//   - N clients watch gpsd's own JSON (`?WATCH={"enable":true,"json":true}` on its TCP port);
//   - N clients watch locationd (`request` + `watch` on its Unix socket, docs/PROTOCOL.md).
// At MAX, the most clients gpsd serves (64 in 3.22; measured here by opening connections until
// gpsd refuses one), gpsd's direct clients are one fewer: locationd holds the last slot.
//
// Per daemon and N, over --seconds after a warm-up:
//   - fix to client: the recv that brought a TPV line minus the start of the write() that put the
//     epoch into the pty (CLOCK_MONOTONIC; each epoch has a distinct fix time, which names it);
//     for locationd this is the whole relay, gpsd included; median and p99 over every client;
//   - fixes received / expected: distinct fixes at each client, of those written from the start
//     of the window to 0.5 s before its end, summed over the clients;
//   - CPU of the daemon (utime + stime from /proc/PID/stat over the window; gpsd's includes
//     reading the pty and serving locationd) and its VmRSS at the end.
// One thread of this program reads every client (BenchKit's ClientReader).
//
// With --direct, a second simulated receiver writes the same 10 Hz stream into a pty of its own,
// and locationd reads it itself (`--backend serial:PTY?baud=9600`): gpsd and locationd each read
// their own receiver, and locationd no longer takes one of gpsd's client slots. Fix to client is
// then measured from the write into each daemon's own pty.
//
// Usage: relay-bench [--clients 10,50,MAX] [--seconds S] [--warmup S] [--json] [--direct] [--locationd PATH]

import BenchKit
import Foundation
import Glibc
import LocationCore
import LocationTestKit

let settings = Settings(Array(CommandLine.arguments.dropFirst()))
signal(SIGPIPE, SIG_IGN)

guard access(settings.locationd, X_OK) == 0 else {
  fail(
    "no locationd at \(settings.locationd): build it with `swift build -c release --static-swift-stdlib --product locationd`, or give --locationd PATH"
  )
}

// Descriptors: the probe of gpsd's limit and both groups of clients.
let probeCeiling = 1024
let largestRound = settings.clientCounts.map { $0.resolved(gpsdLimit: probeCeiling) }.max() ?? 0
raiseDescriptorLimit(to: probeCeiling + 2 * largestRound + 256)

let work = NSTemporaryDirectory() + "relay-bench-\(getpid())"
try? FileManager.default.removeItem(atPath: work)
do {
  try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
} catch {
  fail("cannot create \(work): \(error)")
}
cleanup.register("work") {
  do {
    try FileManager.default.removeItem(atPath: work)
  } catch {
    say("cannot remove \(work): \(error)")
  }
}

let writes = WriteLog()
let link = work + "/gps0"
let receiver: SimulatedReceiver
do {
  receiver = try SimulatedReceiver(linkPath: link) { epoch in
    if let time = epoch.fix.time { writes.byFixTime.withLock { $0[time] = epoch.startedAt } }
  }
  try receiver.start(rate: 10) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
} catch {
  fail("cannot start the simulated receiver: \(error)")
}
cleanup.register("receiver") { receiver.stop() }

// --direct: locationd's own receiver, the same fixes on another pty.
let directWrites = WriteLog()
let directLink = work + "/gps1"
let directReceiver: SimulatedReceiver? = settings.direct ? startDirectReceiver() : nil

/// The second receiver of --direct, writing the same fixes to `directLink`.
func startDirectReceiver() -> SimulatedReceiver {
  do {
    let second = try SimulatedReceiver(linkPath: directLink) { epoch in
      if let time = epoch.fix.time {
        directWrites.byFixTime.withLock { $0[time] = epoch.startedAt }
      }
    }
    try second.start(rate: 10) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
    cleanup.register("direct receiver") { second.stop() }
    return second
  } catch {
    fail("cannot start the second simulated receiver: \(error)")
  }
}

let gpsd: PrivateGPSD
do {
  gpsd = try PrivateGPSD(device: link)
} catch {
  fail("\(error)")
}
cleanup.register("gpsd") {
  gpsd.stop()
  // Its private directory (control socket): `deinit` removes it, but globals outlive exit().
  try? FileManager.default.removeItem(
    atPath: URL(fileURLWithPath: gpsd.controlSocket).deletingLastPathComponent().path)
}
say("relay-bench: locationd \(settings.locationd), gpsd \(gpsd.executable) on port \(gpsd.port)")
// Other work on the machine shows in the tails: say how busy it was.
func loadAverage() -> String {
  (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3)
    .joined(separator: " ") ?? "n/a"
}
say("load average at the start: \(loadAverage())")

// gpsd's client limit, with nothing else connected.
do {
  try gpsd.start()
} catch {
  fail("\(error)")
}
let probe = probeGPSDLimit(port: gpsd.port, ceiling: probeCeiling)
gpsd.stop()
say(
  "gpsd client limit: \(probe.served) served, "
    + (probe.refused ? "the next refused" : "none refused up to \(probeCeiling)")
    + " (gpsd 3.22 source: MAX_CLIENTS = max_clients, default \(gpsdSourceLimit))")
guard probe.served >= 2 else { fail("gpsd served \(probe.served) clients; need at least 2") }

let notifyPath = work + "/notify.sock"
let notifyFD = orFail { () throws(BenchError) in try notifySocket(notifyPath) }
let bench = Bench(
  settings: settings, work: work, gpsd: gpsd, writes: writes, notifyFD: notifyFD,
  notifyPath: notifyPath, directLink: settings.direct ? directLink : nil,
  directWrites: directWrites)
var rows: [Row] = []
for count in settings.clientCounts {
  let n = count.resolved(gpsdLimit: probe.served)
  // locationd's own connection takes one of gpsd's slots, unless it reads its own receiver.
  rows += runRound(
    bench, n: n, gpsdClients: min(n, settings.direct ? probe.served : probe.served - 1))
}
close(notifyFD)
let stats = receiver.statistics
say("receiver: \(stats.epochsWritten) epochs written, \(stats.epochsDropped) dropped")
say("load average at the end: \(loadAverage())")
cleanup.runAll()

if settings.json {
  print(jsonReport(rows, limit: probe, seconds: settings.seconds))
} else {
  print(markdownTable(rows))
}
