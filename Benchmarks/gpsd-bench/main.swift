// gpsd-bench: latency and idle cost of the gpsd path, on simulated GPS hardware.
//
// 1. Latency: the simulated receiver writes an epoch (RMC, VTG, GGA, GSA, GSV) into a pty at
//    RATE Hz; a private gpsd reads the pty; GPSDBackend delivers the fix. For each fix, latency is
//    the time from the write() call that puts the epoch's sentences into the pty to the location
//    event received from `GPSDBackend.events`. Median, p90, p99 and maximum over FIXES fixes
//    (after a warm-up).
// 2. Idle: GPSDBackend connected and watching, gpsd's device silent (no fixes) for IDLE seconds:
//    CPU time of this process and of gpsd over that time.
//
// Usage: gpsd-bench [--fixes N] [--rate HZ] [--idle SECONDS] [--warmup N]
// Needs /usr/sbin/gpsd (or $GPSD). Never touches the system gpsd: private port and socket.

import Foundation
import GPSDBackend
import Glibc
import LocationCore
import LocationTestKit
import NMEA
import Synchronization
import SystemIO
import LocationModel

struct Arguments {
  var fixes = 1000
  var rate = 10.0
  var idleSeconds = 10.0
  var warmup = 20

  init(_ arguments: [String]) throws {
    var scanner = ArgumentScanner(arguments)
    while let word = scanner.next() {
      guard case .option(let argument) = word else {
        throw UsageError(message: "unknown argument \(scanner.lastWord ?? "")")
      }
      guard let value = try? scanner.value() else {
        throw UsageError(message: "\(argument) needs a value")
      }
      switch argument {
      case "--fixes": fixes = try Self.positive(Int(value), argument)
      case "--warmup": warmup = try Self.positive(Int(value), argument)
      case "--rate":
        guard let rate = Double(value), (1...10).contains(rate) else {
          throw UsageError(message: "--rate must be 1...10")
        }
        self.rate = rate
      case "--idle":
        guard let seconds = Double(value), seconds > 0 else {
          throw UsageError(message: "--idle must be > 0")
        }
        idleSeconds = seconds
      default: throw UsageError(message: "unknown argument \(argument)")
      }
    }
  }

  static func positive(_ value: Int?, _ name: String) throws -> Int {
    guard let value, value > 0 else {
      throw UsageError(message: "\(name) must be a positive integer")
    }
    return value
  }
}

struct UsageError: Error { var message: String }

func processCPUSeconds() -> Double {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// utime + stime of another process from /proc/PID/stat, seconds.
func otherProcessCPUSeconds(_ pid: Int32) -> Double? {
  guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
    let close = text.lastIndex(of: ")")
  else { return nil }
  let fields = text[text.index(after: close)...].split(separator: " ")
  // After "pid (comm)": field 3 is state; utime and stime are fields 14 and 15 (1-based).
  guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else {
    return nil
  }
  return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
  guard !sorted.isEmpty else { return .nan }
  let index = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
  return sorted[index]
}

func format(_ value: Double, _ places: Int = 2) -> String {
  String(format: "%.\(places)f", value)
}

/// Epoch `index` of the shared test route at `rate` Hz.
func benchFix(_ index: Int, rate: Double) -> Fix {
  TestRoute.fix(index, periodMilliseconds: Int64((1000 / rate).rounded()))
}

func temporaryLink(_ name: String) -> String {
  NSTemporaryDirectory() + "gpsd-bench-\(name)-\(getpid())"
}

func runLatency(_ arguments: Arguments) async throws {
  let written = Mutex<[Int64: (start: UInt64, end: UInt64)]>([:])
  let receiver = try SimulatedReceiver(linkPath: temporaryLink("latency")) { epoch in
    guard let time = epoch.fix.time else { return }
    written.withLock { $0[time] = (epoch.startedAt, epoch.finishedAt) }
  }
  defer { receiver.stop() }
  let rate = arguments.rate
  try receiver.start(rate: rate) { elapsed in benchFix(Int((elapsed * rate).rounded()), rate: rate)
  }
  let gpsd = try PrivateGPSD(device: receiver.linkPath)
  try await gpsd.start()
  defer { gpsd.stop() }
  let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
  try await backend.start()

  var fromWriteCall: [Double] = []
  var seen = 0
  var missing = 0
  var missingExamples: [String] = []
  var modes: [FixMode: Int] = [:]
  let wanted = arguments.fixes + arguments.warmup
  print(
    "latency: \(arguments.fixes) fixes at \(format(rate, 0)) Hz after \(arguments.warmup) warm-up fixes (about \(Int(Double(wanted) / rate)) s)"
  )
  for await event in backend.events {
    guard case .location(let location) = event else { continue }
    let receivedAt = MonotonicClock.nanoseconds()
    seen += 1
    if seen <= arguments.warmup { continue }
    modes[location.fix.mode, default: 0] += 1
    // The writer thread records an epoch just after write() returns; the fix can overtake that
    // record (gpsd answers in a fraction of a millisecond), so give it a moment.
    var record = location.fix.time.flatMap { time in written.withLock { $0[time] } }
    var attempts = 0
    while record == nil, let time = location.fix.time, attempts < 100 {
      try await Task.sleep(for: .milliseconds(1))
      record = written.withLock { $0[time] }
      attempts += 1
    }
    guard let write = record else {
      missing += 1
      if let time = location.fix.time, missingExamples.count < 5 {
        let nearest = written.withLock { $0.keys.min { abs($0 - time) < abs($1 - time) } }
        missingExamples.append(
          "time \(time) (nearest written \(nearest.map { String($0 - time) } ?? "-") ms away)")
      }
      continue
    }
    // The epoch's sentences go into the pty in one write() call; time from just before it.
    // (The clock read after write() returns can come later than the fix itself, when the writer
    // thread is descheduled, so it is not a usable reference.)
    fromWriteCall.append(Double(Int64(receivedAt) - Int64(write.start)) / 1e6)
    if fromWriteCall.count >= arguments.fixes { break }
  }
  await backend.stop()
  fromWriteCall.sort()
  let stats = receiver.statistics
  print(
    "  epochs written \(stats.epochsWritten), dropped \(stats.epochsDropped); fixes without a matching epoch: \(missing)"
  )
  print(
    "  fixes by mode: "
      + modes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
  for example in missingExamples { print("  unmatched fix: \(example)") }
  let values = fromWriteCall
  print(
    "  epoch write() -> fix delivered by GPSDBackend: n=\(values.count) median \(format(percentile(values, 50))) ms, "
      + "p90 \(format(percentile(values, 90))) ms, p99 \(format(percentile(values, 99))) ms, "
      + "max \(format(values.last ?? .nan)) ms")

}

func runIdle(_ arguments: Arguments) async throws {
  // A receiver that is never started: gpsd has the device open, nothing arrives.
  let receiver = try SimulatedReceiver(linkPath: temporaryLink("idle"))
  defer { receiver.stop() }
  let gpsd = try PrivateGPSD(device: receiver.linkPath)
  try await gpsd.start()
  defer { gpsd.stop() }
  var options = GPSDBackend.Options()
  options.noFixTimeout = .seconds(5)
  let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)", options: options)
  let statuses = Task {
    var list: [String] = []
    for await event in backend.events {
      if case .status(let status, _) = event { list.append(status.rawValue) }
    }
    return list
  }
  try await backend.start()
  try await Task.sleep(for: .milliseconds(500))
  let cpuBefore = processCPUSeconds()
  let gpsdBefore = gpsd.pid.flatMap(otherProcessCPUSeconds)
  let wallBefore = MonotonicClock.nanoseconds()
  try await Task.sleep(for: .milliseconds(Int(arguments.idleSeconds * 1000)))
  let wall = Double(MonotonicClock.nanoseconds() - wallBefore) / 1e9
  let cpu = processCPUSeconds() - cpuBefore
  var gpsdCPU: Double?
  if let before = gpsdBefore, let after = gpsd.pid.flatMap(otherProcessCPUSeconds) {
    gpsdCPU = after - before
  }
  let clients = gpsd.clientConnectionCount()
  await backend.stop()
  statuses.cancel()
  print(
    "idle: GPSDBackend watching gpsd (\(clients) client connection), no fixes, \(format(wall, 1)) s"
  )
  print(
    "  this process: \(format(cpu * 1000, 1)) ms CPU = \(format(cpu / wall * 100, 3)) % of one core"
  )
  if let gpsdCPU {
    print(
      "  gpsd:         \(format(gpsdCPU * 1000, 1)) ms CPU = \(format(gpsdCPU / wall * 100, 3)) % of one core"
    )
  }
}

do {
  let arguments = try Arguments(Array(CommandLine.arguments.dropFirst()))
  try await runLatency(arguments)
  try await runIdle(arguments)
} catch let error as UsageError {
  FileHandle.standardError.write(
    Data(
      "gpsd-bench: \(error.message)\nusage: gpsd-bench [--fixes N] [--rate HZ] [--idle SECONDS] [--warmup N]\n"
        .utf8))
  exit(64)
} catch {
  FileHandle.standardError.write(Data("gpsd-bench: \(error)\n".utf8))
  exit(1)
}
