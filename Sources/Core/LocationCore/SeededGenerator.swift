#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A deterministic pseudo-random generator: xoshiro256** (Blackman and Vigna, 2018) seeded through
/// SplitMix64, so one 64-bit seed gives the same sequence on every platform and run.
public struct SeededGenerator: RandomNumberGenerator, Sendable, Hashable {
  private var state: (UInt64, UInt64, UInt64, UInt64)

  /// Creates a generator from `seed` (any value, zero included).
  public init(seed: UInt64) {
    var splitMix = seed
    func nextSplitMix() -> UInt64 {
      splitMix &+= 0x9E37_79B9_7F4A_7C15
      var z = splitMix
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    state = (nextSplitMix(), nextSplitMix(), nextSplitMix(), nextSplitMix())
  }

  /// The next 64 random bits.
  public mutating func next() -> UInt64 {
    let result = ((state.1 &* 5) << 7 | (state.1 &* 5) >> 57) &* 9
    let t = state.1 << 17
    state.2 ^= state.0
    state.3 ^= state.1
    state.1 ^= state.2
    state.0 ^= state.3
    state.2 ^= t
    state.3 = state.3 << 45 | state.3 >> 19
    return result
  }

  /// A uniform value in `(0, 1]` (53 bits).
  public mutating func nextUnitInterval() -> Double {
    Double((next() >> 11) + 1) * 0x1p-53
  }

  /// Two independent standard normal values (Box-Muller transform).
  public mutating func nextGaussianPair() -> (Double, Double) {
    let u1 = nextUnitInterval()
    let u2 = nextUnitInterval()
    let radius = (-2 * log(u1)).squareRoot()
    let angle = 2 * Double.pi * u2
    return (radius * cos(angle), radius * sin(angle))
  }

  /// Equality compares the internal state.
  public static func == (lhs: SeededGenerator, rhs: SeededGenerator) -> Bool {
    lhs.state == rhs.state
  }

  /// Hashes the internal state.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(state.0)
    hasher.combine(state.1)
    hasher.combine(state.2)
    hasher.combine(state.3)
  }
}
