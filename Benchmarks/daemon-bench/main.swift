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
//
// Files: Settings (flags), Daemon (process control), Clients (the N-client rounds), GPSDRelay
// (the round through gpsd), Report (percentiles, the table); the clients' reader, processes and
// sockets are BenchKit's.

import BenchKit
import Foundation
import Glibc

let settings = Settings(Array(CommandLine.arguments.dropFirst()))

signal(SIGPIPE, SIG_IGN)
guard access(settings.locationd, X_OK) == 0 else {
  fail(
    "no locationd at \(settings.locationd): swift build -c release first, or give --locationd PATH")
}
let descriptorLimit = raiseDescriptorLimit(to: (settings.clientCounts.max() ?? 0) + 256)

let work = "/tmp/daemon-bench-\(getpid())"
try? FileManager.default.removeItem(atPath: work)
try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: work) }
let logPath = work + "/drive.nmea"
writeLog(logPath, seconds: 60)
let replayURI = "replay:\(logPath)?speed=1&loop=true&timestamps=shifted"
let notifyPath = work + "/notify.sock"
let notifyFD = orFail { () throws(BenchError) in try notifySocket(notifyPath) }
let daemons = Daemons(
  locationd: settings.locationd, work: work, notifyPath: notifyPath, notifyFD: notifyFD)

say("daemon-bench: \(settings.locationd)")
say("replay: 10 Hz generated log (600 epochs, looped), \(replayURI)")

var table: [Figure] = []

// 1. Start to READY.
var readyTimes: [Double] = []
for _ in 0..<10 {
  let (pid, ready) = daemons.start(backend: replayURI)
  readyTimes.append(ready * 1000)
  terminate(pid)
}
readyTimes.sort()
say("start -> READY=1 (ms, 10 runs): \(readyTimes.map { format($0, 1) }.joined(separator: " "))")
table.append(
  ("start -> READY=1, median of 10", "\(format(percentile(readyTimes, 50), 1)) ms", "< 50 ms"))

// 2. Idle, fresh daemon, no client.
do {
  let (pid, _) = daemons.start(backend: replayURI)
  let used = cpuWhileIdle(pid, seconds: settings.idleSeconds)
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
  table += measureClients(
    count, daemons: daemons, settings: settings, replayURI: replayURI,
    descriptorLimit: descriptorLimit)
}

// 4. Issue 6: pty -> gpsd -> locationd -> client.
if settings.gpsdFixes > 0 {
  table += try measureGPSDRelay(daemons: daemons, settings: settings)
}

close(notifyFD)
printTable(table)
