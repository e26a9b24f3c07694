import LocationModel
// Throughput of the replay backend through LocationManager to 1 and 100 subscribers at speed 0.
//
// Usage: core-bench [EPOCHS] [LOG]
//   EPOCHS  epochs to replay (default 1,000,000); a synthetic RMC+GGA log of that many epochs is
//           written to /tmp/core-bench-EPOCHS.nmea unless LOG is given.
// Prints fixes per second for: decoding alone; the replay backend alone; decoding + delivery
// from the log file through LocationManager; and delivery alone from epochs decoded beforehand;
// with the peak RSS (getrusage ru_maxrss). CORE_BENCH_SUBSCRIBERS=1,100 (the default) sets the
// subscriber counts. Build with -c release.
//
// Usage: core-bench sky [SECONDS] [RECEIVERS]
//   Simulated receiver: generator epochs per second, CPU per receiver at 10 Hz (see Sky.swift).
// Usage: core-bench simulator [EPOCHS]
//   The simulated receiver's output: see Simulator.swift in this folder.
//
// Usage: core-bench geodesic
//   Geodesic inverse and direct solutions per second, and the largest differences from
//   GeographicLib's GeodSolve (see Geodesic.swift in this folder).
#if canImport(Glibc)
  import Glibc
#endif
import FoundationEssentials
import LocationCore
import NMEA
import SystemIO

func checksum(_ body: String) -> String {
  var sum: UInt8 = 0
  for byte in body.utf8 { sum ^= byte }
  let hex = String(sum, radix: 16, uppercase: true)
  return hex.count == 1 ? "0" + hex : hex
}

func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

/// Writes `epochs` one-second epochs (RMC + GGA) moving around 3.1386 N 101.6044 E.
func writeSyntheticLog(path: String, epochs: Int) -> Bool {
  guard let file = fopen(path, "w") else { return false }
  defer { fclose(file) }
  var text = ""
  text.reserveCapacity(1 << 20)
  for index in 0..<epochs {
    let seconds = index % 86_400
    let day = 1 + (index / 86_400) % 28
    let time =
      twoDigits(seconds / 3600) + twoDigits(seconds / 60 % 60) + twoDigits(seconds % 60) + ".00"
    let date = twoDigits(day) + "0124"
    let minutesLat = 8.316 + Double(index % 1000) * 0.0001
    let lat = "03" + String(format7(minutesLat))
    let lon = "101" + String(format7(36.264))
    let rmc = "GPRMC,\(time),A,\(lat),N,\(lon),E,0.5,54.7,\(date),,,A"
    let gga = "GPGGA,\(time),\(lat),N,\(lon),E,1,08,0.9,60.0,M,7.0,M,,"
    text += "$\(rmc)*\(checksum(rmc))\r\n$\(gga)*\(checksum(gga))\r\n"
    if text.utf8.count > (1 << 20) - 256 {
      fputs(text, file)
      text.removeAll(keepingCapacity: true)
    }
  }
  fputs(text, file)
  return true
}

/// `mm.mmmm` with two integer digits and four decimals.
func format7(_ minutes: Double) -> String {
  let scaled = Int((minutes * 10_000).rounded())
  let whole = scaled / 10_000
  let fraction = scaled % 10_000
  var fractionText = "\(fraction)"
  while fractionText.count < 4 { fractionText = "0" + fractionText }
  return twoDigits(whole) + "." + fractionText
}

func peakRSSMegabytes() -> Double {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return Double(usage.ru_maxrss) / 1024
}

struct Result {
  var fixes: Int
  var seconds: Double
  var delivered: Int
  var missed: Int
}

/// Replays `backend` through a manager to `subscribers` coalescing subscribers until the end.
func run(backend: ReplayBackend, subscribers: Int) async throws -> Result {
  let manager = LocationManager(backend: backend)
  var consumers: [Task<(Int, Int), Never>] = []
  for index in 0..<subscribers {
    let client = ClientID(UInt64(index + 1))
    await manager.setAuthorization(.authorized, for: client)
    let stream = await manager.subscribe(client: client)
    consumers.append(
      Task {
        var delivered = 0
        var missed = 0
        loop: for await event in stream {
          switch event {
          case .location(_, let skipped):
            delivered += 1
            missed += skipped
          case .status(.endOfData, _): break loop
          default: continue
          }
        }
        return (delivered, missed)
      })
  }
  let clock = ContinuousClock()
  let start = clock.now
  for index in 0..<subscribers {
    try await manager.startUpdating(client: ClientID(UInt64(index + 1)))
  }
  var delivered = 0
  var missed = 0
  for consumer in consumers {
    let (d, m) = await consumer.value
    delivered += d
    missed += m
  }
  let elapsed = clock.now - start
  let fixes = await manager.statistics.fixesWithPosition
  await manager.shutdown()
  let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
  return Result(fixes: fixes, seconds: seconds, delivered: delivered, missed: missed)
}

func report(_ label: String, _ result: Result, subscribers: Int) {
  let rate = Double(result.fixes) / result.seconds
  let perSubscriber = Double(result.delivered) / Double(subscribers)
  print(
    "\(label): \(subscribers) subscriber(s): \(result.fixes) fixes in \(String(result.seconds.rounded(toPlaces: 3))) s"
      + " = \(Int(rate)) fixes/s; per subscriber delivered \(Int(perSubscriber)),"
      + " coalesced \(result.missed / max(1, subscribers))")
}

extension Double {
  func rounded(toPlaces places: Int) -> Double {
    var factor = 1.0
    for _ in 0..<places { factor *= 10 }
    return (self * factor).rounded() / factor
  }
}

// Operands only: [sky ARGS | simulator [EPOCHS] | geodesic | EPOCHS [FILE]]; `--` may come first.
let operands = (try? ArgumentScanner.parse(Array(CommandLine.arguments.dropFirst())).operands) ?? []
let arguments = [CommandLine.arguments.first ?? "core-bench"] + operands
if arguments.count > 1 && arguments[1] == "sky" {
  exit(skyBenchmark(arguments: Array(arguments.dropFirst(2))))
}
if arguments.count > 1 && arguments[1] == "simulator" {
  exit(await simulatorBenchmark(epochs: arguments.count > 2 ? Int(arguments[2]) ?? 200_000 : 200_000))
}
if arguments.count > 1 && arguments[1] == "geodesic" {
  exit(geodesicBenchmark())
}
let epochs = arguments.count > 1 ? Int(arguments[1]) ?? 1_000_000 : 1_000_000
var path = "/tmp/core-bench-\(epochs).nmea"
if arguments.count > 2 {
  path = arguments[2]
} else if access(path, R_OK) != 0 {
  print("writing \(epochs) synthetic epochs to \(path)")
  guard writeSyntheticLog(path: path, epochs: epochs) else {
    print("core-bench: cannot write \(path)")
    exit(1)
  }
}

func seconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
}

/// Decoding alone, and the replay backend's event stream alone (no manager), for comparison.
func baselines(path: String) async throws {
  let clock = ContinuousClock()
  var start = clock.now
  var count = 0
  let cursor = try NMEAFileSource(path: path).open()
  while try cursor.next() != nil { count += 1 }
  var elapsed = seconds(clock.now - start)
  print(
    "decode only: \(count) fixes in \(elapsed.rounded(toPlaces: 3)) s = \(Int(Double(count) / elapsed)) fixes/s"
  )

  let backend = ReplayBackend(options: .init(path: path, speed: 0), clock: SystemClock())
  start = clock.now
  count = 0
  let events = backend.events
  try await backend.start()
  loop: while let batch = await events.nextBatch(upTo: 256) {
    for event in batch {
      switch event {
      case .location: count += 1
      case .status(.endOfData, _): break loop
      default: continue
      }
    }
  }
  elapsed = seconds(clock.now - start)
  await backend.stop()
  print(
    "backend only (batches, no manager): \(count) fixes in \(elapsed.rounded(toPlaces: 3)) s = \(Int(Double(count) / elapsed)) fixes/s"
  )
}

let subscriberCounts =
  ProcessInfo.processInfo.environment["CORE_BENCH_SUBSCRIBERS"].map {
    $0.split(separator: ",").compactMap { Int($0) }
  } ?? [1, 100]

do {
  try await baselines(path: path)
  for subscribers in subscriberCounts {
    let backend = ReplayBackend(options: .init(path: path, speed: 0), clock: SystemClock())
    report(
      "decode+deliver (file)", try await run(backend: backend, subscribers: subscribers),
      subscribers: subscribers)
  }
  print(
    "peak RSS after the file runs (the log is streamed, 64 KiB at a time): \(String(peakRSSMegabytes().rounded(toPlaces: 1))) MB"
  )
  var decoded: [DecodedFix] = []
  let cursor = try NMEAFileSource(path: path).open()
  while let fix = try cursor.next() { decoded.append(fix) }
  for subscribers in subscriberCounts {
    let backend = ReplayBackend(
      source: DecodedFixesSource(name: path, fixes: decoded), options: .init(path: path, speed: 0),
      clock: SystemClock(), uri: "replay:\(path)")
    report(
      "deliver only (pre-decoded)", try await run(backend: backend, subscribers: subscribers),
      subscribers: subscribers)
  }
  print("peak RSS after loading every decoded epoch into memory: \(String(peakRSSMegabytes().rounded(toPlaces: 1))) MB")
} catch {
  print("core-bench: \(error)")
  exit(1)
}
