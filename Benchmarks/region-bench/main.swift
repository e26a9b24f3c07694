// region-bench: the cost of region monitoring per fix at 10, 1,000 and 100,000 regions, and the
// memory each region takes. A benchmark, not a test: it prints figures.
//
//   swift build -c release --product region-bench && .build/release/region-bench [--fixes N] [--counts 10,1000,100000] [--seed S]
//
// Regions: half geodesic circles (radius 20 m to 2 km, log-uniform), half star-shaped polygons
// (5 to 12 vertices, 50 m to 3 km across, a hole in every tenth), scattered uniformly over a
// country-sized area (latitude 47 to 55 N, longitude 6 to 15 E, about 900 x 680 km). The device
// drives at 30 m/s, turning now and then, with 1 Hz fixes reporting a 5 m 95% error (Gaussian
// noise to match); each run feeds the same route. Printed per region count: the time to add every
// region (validation included), the cost of RegionMonitor.update per fix (mean, median, 99th
// percentile, maximum; the first 10 fixes, which settle every new region from unknown to
// outside, are reported apart), the transitions seen, and the resident memory the monitor added
// (VmRSS from /proc/self/statm before and after, divided by the region count). Ends with the
// check that 100,000 regions cost less than 1 ms per fix on average (exit 1 when they do not),
// after timing the validation of a 100,000-vertex polygon and signedDistance on it.
#if canImport(Glibc)
  import Glibc
#endif
import BenchKit
import LocationModel
import Regions
import SystemIO

struct Options {
  var fixes = 20_000
  var counts = [10, 1_000, 100_000]
  var seed: UInt64 = 2026
}

func usage() -> Never {
  print("usage: region-bench [--fixes N] [--counts N,N,...] [--seed S]")
  exit(64)
}

var options = Options()
var arguments = ArgumentScanner(Array(CommandLine.arguments.dropFirst()))
while let word = arguments.next() {
  switch word {
  case .option("--fixes"): options.fixes = (try? arguments.value()).flatMap { Int($0) }.flatMap { $0 > 10 ? $0 : nil } ?? { usage() }()
  case .option("--counts"):
    let counts = ((try? arguments.value()) ?? "").split(separator: ",").compactMap { Int($0) }
    guard !counts.isEmpty, counts.allSatisfy({ $0 > 0 }) else { usage() }
    options.counts = counts
  case .option("--seed"): options.seed = (try? arguments.value()).flatMap { UInt64($0) } ?? { usage() }()
  default: usage()
  }
}

/// SplitMix64: the same regions and route on every run.
struct Generator: RandomNumberGenerator {
  var state: UInt64
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
  mutating func gaussian() -> Double {
    let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
    let u2 = Double.random(in: 0..<1, using: &self)
    return (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
  }
}

let south = 47.0, north = 55.0, west = 6.0, east = 15.0

func residentBytes() -> Int {
  guard let file = fopen("/proc/self/statm", "r") else { return 0 }
  defer { fclose(file) }
  var line = [CChar](repeating: 0, count: 256)
  guard fgets(&line, Int32(line.count), file) != nil else { return 0 }
  // "size resident shared text lib data dt", in pages.
  let fields = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    .split(separator: " ")
  guard fields.count > 1, let resident = Int(fields[1]) else { return 0 }
  return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func makeRegion(_ index: Int, using generator: inout Generator) -> Region? {
  let center = Coordinate(
    latitude: Double.random(in: south...north, using: &generator),
    longitude: Double.random(in: west...east, using: &generator))
  if index % 2 == 0 {
    let radius = exp(Double.random(in: log(20.0)...log(2_000.0), using: &generator))
    return try? Region(id: "c\(index)", shape: .circle(center: center, radius: radius), dwell: index % 4 == 0 ? 300 : nil)
  }
  let count = Int.random(in: 5...12, using: &generator)
  let size = exp(Double.random(in: log(25.0)...log(1_500.0), using: &generator))
  var exterior: [Coordinate] = []
  for k in 0..<count {
    let azimuth = (Double(k) + Double.random(in: 0.1...0.9, using: &generator)) * 360 / Double(count)
    let distance = size * Double.random(in: 0.6...1.0, using: &generator)
    exterior.append(Geodesic.direct(from: center, azimuth: -azimuth, distance: distance).coordinate)
  }
  var holes: [[Coordinate]] = []
  if index % 10 == 1 {
    holes.append((0..<4).map { k in
      Geodesic.direct(from: center, azimuth: Double(k) * 90, distance: size * 0.3).coordinate
    })
  }
  return try? Region(id: "p\(index)", shape: .polygon(exterior: exterior, holes: holes))
}

/// The drive: 30 m/s from the middle of the area, turning by up to 30 degrees every minute and
/// back towards the middle when near the edge; fixes with 5 m (95%) Gaussian noise.
func route(fixes: Int, seed: UInt64) -> [Location] {
  var generator = Generator(state: seed ^ 0xA5A5)
  var position = Coordinate(latitude: (south + north) / 2, longitude: (west + east) / 2)
  var heading = 30.0
  let t0: Int64 = 1_764_500_000_000
  let sigma = 5 / AccuracyEstimate.horizontal95PerSigma
  var result: [Location] = []
  result.reserveCapacity(fixes)
  for k in 0..<fixes {
    if k % 60 == 0 { heading += Double.random(in: -30...30, using: &generator) }
    if position.latitude < south + 0.5 || position.latitude > north - 0.5 || position.longitude < west + 0.5
      || position.longitude > east - 0.5
    {
      let middle = Coordinate(latitude: (south + north) / 2, longitude: (west + east) / 2)
      heading = Geodesic.inverse(position, middle).initialAzimuth
    }
    position = Geodesic.direct(from: position, azimuth: heading, distance: 30).coordinate
    let noisy = Geodesic.direct(
      from: position, azimuth: Double.random(in: 0..<360, using: &generator),
      distance: abs(sigma * generator.gaussian()) * 1.18
    ).coordinate
    var fix = Fix(mode: .fix3D)
    fix.coordinate = noisy
    fix.time = t0 + Int64(k) * 1000
    var estimates = ErrorEstimates()
    estimates.latitude = sigma
    estimates.longitude = sigma
    fix.errorEstimates = estimates
    result.append(Location(fix: fix, provenance: Provenance(backend: "bench", isSimulated: true)))
  }
  return result
}

func format(_ value: Double, _ decimals: Int) -> String {
  let scale = pow(10.0, Double(decimals))
  let rounded = (value * scale).rounded() / scale
  var text = "\(rounded)"
  if let dot = text.firstIndex(of: ".") {
    let places = text.distance(from: dot, to: text.endIndex) - 1
    if places < decimals { text += String(repeating: "0", count: decimals - places) }
  } else if decimals > 0 {
    text += "." + String(repeating: "0", count: decimals)
  }
  return text
}

let fixes = route(fixes: options.fixes, seed: options.seed)
print("region-bench: \(options.fixes) fixes at 1 Hz, 30 m/s, 5 m (95%) error; regions over 47-55 N, 6-15 E")
print("regions  | add (s) | first 10 fixes (ms) | per fix mean / median / p99 / max (us) | transitions | bytes per region")
var checkMean: Double? = nil
for count in options.counts {
  var generator = Generator(state: options.seed &+ UInt64(count))
  let rssBefore = residentBytes()
  var monitor = RegionMonitor()
  let addStart = MonotonicClock.nanoseconds()
  var index = 0
  while monitor.count < count {
    if let region = makeRegion(index, using: &generator) { monitor.add(region) }
    index += 1
  }
  let addSeconds = Double(MonotonicClock.nanoseconds() - addStart) / 1e9
  let rssAfter = residentBytes()
  var transitions = 0
  var durations: [Double] = []
  durations.reserveCapacity(fixes.count)
  var warmup = 0.0
  for (k, fix) in fixes.enumerated() {
    let start = MonotonicClock.nanoseconds()
    let events = monitor.update(with: fix, now: fix.fix.time ?? 0)
    let elapsed = Double(MonotonicClock.nanoseconds() - start) / 1e3
    transitions += events.count
    if k < 10 { warmup += elapsed } else { durations.append(elapsed) }
  }
  durations.sort()
  let mean = durations.reduce(0, +) / Double(durations.count)
  let median = durations[durations.count / 2]
  let p99 = durations[min(durations.count - 1, durations.count * 99 / 100)]
  let maximum = durations.last ?? 0
  // Below 1,000 regions the difference is within a page or two of allocator noise.
  let perRegion = count >= 1_000 ? format(Double(rssAfter - rssBefore) / Double(count), 0) : "-"
  print(
    "\(count) | \(format(addSeconds, 3)) | \(format(warmup / 1000, 2)) | \(format(mean, 2)) / \(format(median, 2)) / \(format(p99, 2)) / \(format(maximum, 1)) | \(transitions) | \(perRegion)"
  )
  if count == 100_000 { checkMean = mean }
  withExtendedLifetime(monitor) {}
}
// The largest polygon: 100,000 vertices on a 100 km circle (validation, self-intersection test
// included), then signedDistance at points near its edge and deep inside.
do {
  let center = Coordinate(latitude: 51, longitude: 10)
  let vertices = (0..<RegionShape.maxVertexCount).map { k in
    Geodesic.direct(from: center, azimuth: -Double(k) * 360 / Double(RegionShape.maxVertexCount), distance: 100_000).coordinate
  }
  let start = MonotonicClock.nanoseconds()
  let region = try? Region(id: "fine", shape: .polygon(exterior: vertices, holes: []))
  let validation = Double(MonotonicClock.nanoseconds() - start) / 1e9
  if let region {
    var generator = Generator(state: options.seed)
    var near = 0.0
    var deep = 0.0
    let samples = 2_000
    for _ in 0..<samples {
      let azimuth = Double.random(in: 0..<360, using: &generator)
      let edgePoint = Geodesic.direct(from: center, azimuth: azimuth, distance: 100_000 + Double.random(in: -50...50, using: &generator)).coordinate
      let inner = Geodesic.direct(from: center, azimuth: azimuth, distance: Double.random(in: 0...90_000, using: &generator)).coordinate
      var t = MonotonicClock.nanoseconds()
      _ = region.signedDistance(to: edgePoint)
      near += Double(MonotonicClock.nanoseconds() - t) / 1e3
      t = MonotonicClock.nanoseconds()
      _ = region.signedDistance(to: inner)
      deep += Double(MonotonicClock.nanoseconds() - t) / 1e3
    }
    print(
      "100,000-vertex polygon: validated in \(format(validation, 3)) s; signedDistance \(format(near / Double(samples), 1)) us within 50 m of the edge, \(format(deep / Double(samples), 1)) us deep inside"
    )
  } else {
    print("100,000-vertex polygon: refused")
  }
}
if let checkMean {
  let ok = checkMean < 1_000
  print("check: 100,000 regions cost \(format(checkMean, 2)) us per fix on average: \(ok ? "under" : "NOT under") 1 ms")
  if !ok { exit(1) }
}
