import LocationModel
import Regions

#if canImport(Glibc)
  import Glibc
#endif

/// A fix at `coordinate`, time `time` (ms), with a 95% horizontal error of `error95` metres
/// (stated as a GST one-sigma so that `horizontalAccuracy95` gives it back).
func location(_ coordinate: Coordinate, time: Int64, error95: Double?, mode: FixMode = .fix3D) -> Location {
  var fix = Fix(mode: mode)
  fix.coordinate = coordinate
  fix.time = time
  if let error95 {
    var estimates = ErrorEstimates()
    estimates.latitude = error95 / AccuracyEstimate.horizontal95PerSigma
    estimates.longitude = error95 / AccuracyEstimate.horizontal95PerSigma
    fix.errorEstimates = estimates
  }
  return Location(fix: fix, provenance: Provenance(backend: "test", isSimulated: true))
}

/// The point `distance` metres from `start` at `azimuth` degrees.
func offset(_ start: Coordinate, _ azimuth: Double, _ distance: Double) -> Coordinate {
  var point = Geodesic.direct(from: start, azimuth: azimuth, distance: distance).coordinate
  point.longitude = remainder(point.longitude, 360)
  if point.longitude == -180 { point.longitude = 180 }
  return point
}

/// A small seeded generator (SplitMix64), so every run draws the same noise.
struct SeededGenerator: RandomNumberGenerator {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
  /// A standard normal deviate (Box-Muller).
  mutating func gaussian() -> Double {
    let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
    let u2 = Double.random(in: 0..<1, using: &self)
    return (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
  }
}

/// A ring of `count` vertices at `radius` metres around `center` (a geodesic regular polygon).
func ring(around center: Coordinate, radius: Double, count: Int, clockwise: Bool = false) -> [Coordinate] {
  (0..<count).map { i in
    let azimuth = Double(i) * 360 / Double(count)
    return offset(center, clockwise ? azimuth : -azimuth, radius)
  }
}
