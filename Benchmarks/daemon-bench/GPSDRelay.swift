// Simulated GPS hardware (pty) -> private gpsd -> locationd --backend gpsd://... -> one watching
// client: pty write() -> TPV at the client, then locationd's CPU with gpsd connected and silent.

import BenchKit
import Foundation
import Glibc
import LocationCore
import LocationModel
import LocationTestKit
import Synchronization
import SystemIO

/// Runs `settings.gpsdFixes` fixes at 10 Hz through a private gpsd and a fresh locationd to one
/// client; prints the latencies and returns the round's lines of the table. Throws when the
/// simulated receiver or gpsd cannot start.
func measureGPSDRelay(daemons: Daemons, settings: Settings) throws -> [Figure] {
  final class Writes: Sendable {
    let byTime = Mutex<[Int64: UInt64]>([:])
    let limit: Int
    init(limit: Int) { self.limit = limit }
  }
  let writes = Writes(limit: settings.gpsdFixes + 40)
  let link = daemons.work + "/gps0"
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
  let (pid, _) = daemons.start(backend: "gpsd://127.0.0.1:\(gpsd.port)")
  guard let fd = connectUnix(daemons.socketPath),
    sendLine(
      fd, "{\"cmd\":\"request\",\"id\":1}\n{\"cmd\":\"watch\",\"id\":2,\"coalesce\":false}\n")
  else { fail("cannot connect to locationd") }
  var latencies: [Double] = []
  var buffer: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 65_536)
  var received = 0
  let deadline = MonotonicClock.seconds() + Double(settings.gpsdFixes + 40) / 10 + 10
  var lastFixAt = MonotonicClock.seconds()
  while MonotonicClock.seconds() < deadline {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    if poll(&descriptor, 1, 100) <= 0 {
      if received > 0 && MonotonicClock.seconds() - lastFixAt > 2 { break }  // the receiver went silent
      continue
    }
    let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    guard count > 0 else { break }
    let at = MonotonicClock.nanoseconds()
    buffer.append(contentsOf: chunk[0..<count])
    while let newline = buffer.firstIndex(of: 0x0A) {
      let line = buffer[..<newline]
      if TPVLine.isTPV(line), let time = TPVLine.time(line) {
        received += 1
        lastFixAt = MonotonicClock.seconds()
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
  var table: [Figure] = []
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
  return table
}
