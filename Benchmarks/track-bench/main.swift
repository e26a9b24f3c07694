import Dispatch
import Glibc
import LocationModel
import SystemIO
import TrackStore

// track-bench: the track store's figures, and the writer the crash test kills.
//
//   track-bench fill DB N            N fixes into DB: batches of 1,000 (append) and through the
//                                    recorder's queue; prints fixes/s for each
//   track-bench export DB FORMAT     DB exported (gpx|geojson|csv) to /dev/null; prints fixes/s,
//                                    bytes/s and the peak RSS (VmHWM) of this process
//   track-bench writer DB            records fixes through the recorder until killed; prints
//                                    "committed COUNT" whenever the committed count grows
//   track-bench                      fill 1,000,000 into a temporary store, then export each format

func now() -> Double { MonotonicClock.seconds() }

/// CPU time (user plus system) of this process so far, seconds: on a loaded machine the wall
/// clock also counts other processes' turns, so rates are given per CPU second too.
func cpu() -> Double {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Peak resident set size of this process, kB (VmHWM in /proc/self/status).
func peakRSS() -> Int {
  guard let fd = Optional(open("/proc/self/status", O_RDONLY | O_CLOEXEC)), fd >= 0 else { return -1 }
  defer { close(fd) }
  guard let bytes = try? SystemIO.readToEnd(fd, limit: 1 << 16) else { return -1 }
  for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("VmHWM:") {
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
  }
  return -1
}

func point(_ index: Int, start: Int64 = 1_556_712_000_000) -> TrackPoint {
  var point = TrackPoint(
    time: start + Int64(index) * 1000,
    coordinate: Coordinate(latitude: 49.27 + Double(index % 10_000) * 1e-6, longitude: -123.18 + Double(index % 7_000) * 1e-6),
    mode: .fix3D, backend: "replay:/bench.nmea", source: nil, isSimulated: true)
  point.altitudeMSL = 12.5 + Double(index % 100) / 10
  point.geoidSeparation = -16.7
  point.speed = 1.5
  point.course = Double(index % 360)
  point.hdop = 0.9
  point.vdop = 1.3
  point.pdop = 1.6
  point.eph = 4.3
  point.epv = 7.1
  point.satellitesUsed = 9
  point.quality = .gps
  return point
}

func fail(_ message: String) -> Never {
  try? SystemIO.writeAll(2, "track-bench: \(message)\n")
  exit(1)
}

func unlimited() -> TrackStoreConfiguration {
  var configuration = TrackStoreConfiguration()
  configuration.maxAge = 0
  configuration.maxBytes = 0
  return configuration
}

func fill(_ path: String, _ count: Int) {
  do {
    let store = try TrackStore(path: path, configuration: unlimited())
    let half = count / 2
    var started = now()
    var startedCPU = cpu()
    var batch: [TrackPoint] = []
    batch.reserveCapacity(1000)
    for index in 0..<half {
      batch.append(point(index))
      if batch.count == 1000 {
        try store.append(batch)
        batch.removeAll(keepingCapacity: true)
      }
    }
    try store.append(batch)
    var elapsed = now() - started
    var elapsedCPU = cpu() - startedCPU
    print(
      "store append, batches of 1000: \(half) fixes in \(fixed(elapsed))s = \(Int(Double(half) / elapsed)) fixes/s; "
        + "\(fixed(elapsedCPU)) CPU s = \(Int(Double(half) / elapsedCPU)) fixes per CPU s")
    // One transaction per fix, as the recorder commits at 1 Hz: what durability per fix costs.
    let single = min(20_000, half)
    started = now()
    startedCPU = cpu()
    for index in 0..<single {
      try store.append([point(count + index)])
    }
    elapsed = now() - started
    elapsedCPU = cpu() - startedCPU
    print(
      "store append, one transaction per fix: \(single) fixes in \(fixed(elapsed))s = \(Int(Double(single) / elapsed)) fixes/s; "
        + "\(fixed(elapsedCPU)) CPU s = \(Int(Double(single) / elapsedCPU)) fixes per CPU s")
    let recorder = TrackRecorder(store: store, capacity: 100_000)
    started = now()
    startedCPU = cpu()
    var waits = 0
    for index in half..<count {
      // The bench pushes as fast as it can: when the queue is full it waits for the store rather
      // than dropping, so the figure is the store's rate through the queue.
      while !recorder.record(point(index)) {
        waits += 1
        recorder.flush()
      }
    }
    recorder.flush()
    elapsed = now() - started
    elapsedCPU = cpu() - startedCPU
    let recorded = recorder.counters.recorded
    print(
      "store through the recorder queue: \(recorded) fixes in \(fixed(elapsed))s = \(Int(Double(recorded) / elapsed)) fixes/s; "
        + "\(fixed(elapsedCPU)) CPU s = \(Int(Double(recorded) / elapsedCPU)) fixes per CPU s (queue full \(waits) times)")
    store.close()
  } catch {
    fail("\(error)")
  }
}

func export(_ path: String, _ formatName: String) {
  guard let format = TrackFormat(rawValue: formatName) else { fail("unknown format \(formatName)") }
  do {
    let store = try TrackStore(readingAt: path)
    let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
    var bytes = 0
    let started = now()
    let startedCPU = cpu()
    let count = try TrackExporter.export(from: store, options: TrackExportOptions(format: format)) {
      (chunk: [UInt8]) throws(TrackExportError) in
      bytes += chunk.count
      do throws(SystemError) { try SystemIO.writeAll(null, chunk) } catch { throw .output(error) }
    }
    let elapsed = now() - started
    let elapsedCPU = cpu() - startedCPU
    print(
      "export \(formatName): \(count) fixes, \(bytes / 1_000_000) MB in \(fixed(elapsed))s = \(Int(Double(count) / elapsed)) fixes/s; "
        + "\(fixed(elapsedCPU)) CPU s = \(Int(Double(count) / elapsedCPU)) fixes per CPU s; peak RSS \(peakRSS() / 1024) MB")
  } catch {
    fail("\(error)")
  }
}

/// Records a fix every millisecond or so until killed; a monitor prints the committed count
/// each time it grows (the crash test checks that the store holds at least that many).
func writer(_ path: String) -> Never {
  let store: TrackStore
  do { store = try TrackStore(path: path, configuration: unlimited()) } catch { fail("\(error)") }
  let recorder = TrackRecorder(store: store, capacity: 100_000)
  say("started")
  let monitor = DispatchQueue(label: "monitor")
  monitor.async {
    var last = -1
    while true {
      let committed = recorder.counters.recorded
      if committed != last {
        say("committed \(committed)")
        last = committed
      }
      usleep(500)
    }
  }
  var index = 0
  while true {
    // Bursts of up to 50 fixes, so commits happen both singly and in batches.
    for _ in 0..<(1 + index % 50) {
      recorder.record(point(index))
      index += 1
    }
    usleep(1000)
  }
}

/// One line to standard output, unbuffered (the crash test reads it while the writer runs).
func say(_ line: String) {
  try? SystemIO.writeAll(1, line + "\n")
}

func fixed(_ value: Double) -> String { DecimalText.fixed(value, places: 2) ?? String(value) }

let usage = "usage: track-bench [fill DB N | export DB gpx|geojson|csv | writer DB]"
// Operands only (`--` allowed before them); any option is a usage error.
guard let arguments = try? ArgumentScanner.parse(Array(CommandLine.arguments.dropFirst())).operands else {
  fail(usage)
}
switch arguments.first {
case "fill" where arguments.count == 3:
  guard let count = Int(arguments[2]), count > 0 else { fail("N must be a positive number") }
  fill(arguments[1], count)
case "export" where arguments.count == 3:
  export(arguments[1], arguments[2])
case "writer" where arguments.count == 2:
  writer(arguments[1])
case nil:
  var template = Array("/tmp/track-bench-XXXXXX".utf8CString)
  guard let directory = mkdtemp(&template).map({ String(cString: $0) }) else { fail("mkdtemp failed") }
  let path = directory + "/track.sqlite"
  fill(path, 1_000_000)
  for format in TrackFormat.allCases { export(path, format.rawValue) }
  print("store file: \(path) (remove \(directory) when done)")
default:
  fail(usage)
}
