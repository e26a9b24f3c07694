#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The radius of the circle that holds a given share of a horizontal position error drawn from a
/// zero-mean bivariate normal distribution (the circular error probable at any probability: CEP
/// at 0.5, the 95% radius gpsd calls `eph` at 0.95).
///
/// For the covariance `[[σ_E², c], [c, σ_N²]]` with eigenvalues `λ₁ ≥ λ₂` (variances along the
/// error ellipse's axes), the error is `√λ₁·Z₁` and `√λ₂·Z₂` along the axes with `Z₁`, `Z₂`
/// independent standard normals. In polar form `(Z₁, Z₂) = ρ(cos θ, sin θ)`, `ρ²/2` is
/// exponential with mean 1 and `θ` uniform and independent of it, so
///
///     P(|error| ≤ r) = 1 − (1/2π) ∫₀^2π exp(−r² / (2(λ₁cos²θ + λ₂sin²θ))) dθ
///
/// exactly. The integrand is smooth and periodic (period π), so the trapezoidal rule converges
/// geometrically; ``quadraturePoints(major:minor:)`` sizes it to the axis ratio. `r` is then
/// found by Newton's method, safeguarded by bisection, to a relative 1e-12. Special cases: a circular error gives `σ·√(−2 ln(1 − p))`
/// (2.4477σ at 95%), a degenerate (line) error `√λ₁` times the two-sided normal quantile
/// (1.96·√λ₁ at 95%).
public enum ErrorCircle {
  /// The radius, in the unit of the square root of the variances (metres for variances in m²),
  /// within which a share `probability` of errors falls.
  ///
  /// - Parameters:
  ///   - probability: the share, `0 < p < 1` (0.95 for gpsd's `eph`).
  ///   - eastVariance: `σ_E²`, `>= 0`.
  ///   - northVariance: `σ_N²`, `>= 0`.
  ///   - covariance: the east-north covariance `c`, `c² <= σ_E²·σ_N²` (clamped to a valid matrix).
  /// - Returns: the radius, `>= 0`; 0 when both variances are 0; NaN when an input is not finite,
  ///   a variance is negative or `probability` is outside `(0, 1)`.
  public static func radius(
    probability: Double, eastVariance: Double, northVariance: Double, covariance: Double
  ) -> Double {
    guard probability > 0, probability < 1, eastVariance.isFinite, northVariance.isFinite,
      covariance.isFinite, eastVariance >= 0, northVariance >= 0
    else { return .nan }
    let mean = (eastVariance + northVariance) / 2
    let half = (eastVariance - northVariance) / 2
    let spread = (half * half + covariance * covariance).squareRoot()
    let major = mean + spread
    let minor = max(0, mean - spread)
    return radius(probability: probability, majorVariance: major, minorVariance: minor)
  }

  /// The radius for an error ellipse given by its axis variances `λ₁ >= 0` and `λ₂ >= 0` (in any
  /// order): see ``radius(probability:eastVariance:northVariance:covariance:)``.
  public static func radius(
    probability: Double, majorVariance: Double, minorVariance: Double
  ) -> Double {
    guard probability > 0, probability < 1, majorVariance.isFinite, minorVariance.isFinite,
      majorVariance >= 0, minorVariance >= 0
    else { return .nan }
    let major = max(majorVariance, minorVariance)
    let minor = min(majorVariance, minorVariance)
    guard major > 0 else { return 0 }
    let variances = variances(major: major, minor: minor)
    // Bracket: the circle of radius k·√λ₂ holds at most p, k·√λ₁ at least p (k for a circle).
    let k = (-2 * log(1 - probability)).squareRoot()
    var low = 0.0
    var high = k * major.squareRoot()
    // Safeguarded Newton from the circle of the mean variance.
    var r = k * ((major + minor) / 2).squareRoot()
    for _ in 0..<100 {
      let (p, slope) = share(within: r, variances: variances)
      if p < probability { low = r } else { high = r }
      var next = slope > 0 ? r - (p - probability) / slope : .nan
      if !(next > low && next < high) { next = (low + high) / 2 }
      if abs(next - r) <= 1e-12 * r { return next }
      r = next
    }
    return r
  }

  /// `P(|error| <= r)` for axis variances `major >= minor >= 0`, `major > 0`, by the formula
  /// above (the trapezoidal rule over one period, π, of the integrand).
  public static func share(within r: Double, major: Double, minor: Double) -> Double {
    guard r > 0, major > 0 else { return r > 0 ? 1 : 0 }
    let big = max(major, minor)
    let small = min(major, minor)
    return share(within: r, variances: variances(major: big, minor: small)).share
  }

  /// Points of the trapezoidal rule over `[0, π)`: the integrand's features are about
  /// `√(λ₂/λ₁)` radians wide, so 16 points per unit of the axis ratio (at least 64, at most
  /// 8192) keep the rule's error below 1e-9.
  static func quadraturePoints(major: Double, minor: Double) -> Int {
    guard minor > 0 else { return 8192 }
    let ratio = (major / minor).squareRoot()
    guard ratio.isFinite else { return 8192 }
    return min(8192, max(64, 16 * Int(ratio.rounded(.up))))
  }

  /// The variance along each quadrature direction `θᵢ = πi/n` of `[0, π)`:
  /// `λ₁cos²θᵢ + λ₂sin²θᵢ`, computed once per radius search.
  static func variances(major: Double, minor: Double) -> [Double] {
    let points = quadraturePoints(major: major, minor: minor)
    return (0..<points).map { i in
      let theta = Double.pi * Double(i) / Double(points)
      let c = cos(theta)
      let s = sin(theta)
      return major * c * c + minor * s * s
    }
  }

  /// The share within `r` and its derivative with respect to `r`, by the trapezoidal rule over
  /// the directions' `variances`.
  static func share(within r: Double, variances: [Double]) -> (share: Double, slope: Double) {
    guard r > 0, !variances.isEmpty else { return (0, 0) }
    var sum = 0.0
    var slope = 0.0
    for variance in variances where variance > 0 {
      let term = exp(-r * r / (2 * variance))
      sum += term
      slope += term * r / variance
    }
    let n = Double(variances.count)
    return (1 - sum / n, slope / n)
  }
}
