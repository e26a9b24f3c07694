// Process control: the replay log, starting locationd up to its READY=1, its CPU and memory.

import BenchKit
import Foundation
import Glibc
import LocationTestKit
import NMEA
import SystemIO

/// Where locationd runs: its executable, socket, state directory, log and the notify socket
/// that stands in for systemd's.
struct Daemons {
  let locationd: String
  let work: String
  let notifyPath: String
  let notifyFD: Int32
  var socketPath: String { work + "/l.sock" }
  var daemonLog: String { work + "/locationd.log" }

  /// Starts locationd and waits for READY=1; (pid, seconds from spawn to READY).
  func start(backend: String, maxClients: Int = 4096) -> (pid: pid_t, ready: Double) {
    unlink(socketPath)
    let arguments = [
      "--socket", socketPath, "--state-dir", work + "/state", "--group", "", "--backend", backend,
      "--max-clients", String(maxClients),
    ]
    let started = MonotonicClock.seconds()
    let pid = orFail { () throws(BenchError) in
      try spawn(
        locationd, arguments,
        environment: ["NOTIFY_SOCKET": notifyPath, "PATH": "/usr/bin:/bin"],
        log: daemonLog)
    }
    guard let ready = waitForReady(notifyFD, timeout: 10) else {
      terminate(pid)
      fail(
        "locationd did not send READY=1 within 10 s; log: \((try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "")"
      )
    }
    return (pid, ready - started)
  }
}

/// utime + stime of a process from /proc/PID/stat, seconds; NaN when it cannot be read.
func cpuSeconds(_ pid: pid_t) -> Double {
  ProcessSample.cpuSeconds(pid: pid) ?? .nan
}

/// CPU seconds process `pid` uses over `seconds` of idling, measured after a settling second.
func cpuWhileIdle(_ pid: pid_t, seconds: Double) -> Double {
  sleepSeconds(1)
  let before = cpuSeconds(pid)
  sleepSeconds(seconds)
  return cpuSeconds(pid) - before
}

/// VmRSS, VmHWM and RssAnon (private heap and stacks, without shared library pages) of a
/// process, MB.
func memory(_ pid: pid_t) -> (rss: Double, hwm: Double, anonymous: Double) {
  guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
    return (.nan, .nan, .nan)
  }
  func megabytes(_ field: String) -> Double {
    ProcessSample.kilobytes(status: text, field: field).map { Double($0) / 1024 } ?? .nan
  }
  return (megabytes("VmRSS"), megabytes("VmHWM"), megabytes("RssAnon"))
}

/// Wall time of a receive (ns since 1970, ``WallClock/nanoseconds()``) in milliseconds, with a
/// fraction.
func milliseconds(_ nanoseconds: UInt64) -> Double {
  Double(nanoseconds / 1_000_000) + Double(nanoseconds % 1_000_000) / 1e6
}

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
