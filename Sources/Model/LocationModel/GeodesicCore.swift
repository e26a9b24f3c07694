#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// Karney's algorithms for geodesics on an ellipsoid of revolution, for WGS84 only:
//
//   C. F. F. Karney, "Algorithms for geodesics", J. Geodesy 87, 43-55 (2013),
//   https://doi.org/10.1007/s00190-012-0578-z
//
// The series are the paper's, to sixth order in the third flattening n and in eps (eqs. 15-25 and
// the addenda), which makes the round-off of double precision, not the truncation, the error: about
// 15 nm. The structure (canonical ordering of the points, the starting guess from the astroid, the
// bracketed Newton iteration on alpha1, the special cases for meridians and the equator) follows
// the paper's section 4 and GeographicLib's reference implementation. Names follow the paper:
// beta reduced latitude, omega longitude and sigma arc length on the auxiliary sphere, alpha
// azimuth, lambda longitude, s distance; prefixes s and c are sine and cosine; 1 and 2 the ends.
// Only the oblate WGS84 case (f > 0) is kept, which removes the prolate branches.

/// WGS84 and the quantities derived from it once (Karney 2013, section 2).
enum WGS84 {
  /// Semi-major axis a, metres.
  static let a = 6_378_137.0
  /// Flattening f.
  static let f = 1 / 298.257_223_563
  static let f1 = 1 - f
  /// Eccentricity squared.
  static let e2 = f * (2 - f)
  /// Second eccentricity squared.
  static let ep2 = e2 / (f1 * f1)
  /// Third flattening.
  static let n = f / (2 - f)
  /// Semi-minor axis b, metres.
  static let b = a * f1
  /// Below this arc length (radians) a line is "really short": the auxiliary-sphere solution with
  /// the mean dn is exact to round-off (GeographicLib's etol2, with its safety factor 0.1).
  static let etol2 = 0.1 * tol2 / (max(0.001, abs(f)) * min(1, 1 - f / 2) / 2).squareRoot()

  static let tiny = Double.leastNormalMagnitude.squareRoot()
  static let tol0 = Double.ulpOfOne
  static let tol1 = 200 * tol0
  static let tol2 = tol0.squareRoot()
  static let tolb = tol0
  static let xthresh = 1000 * tol2
  /// Newton steps before falling back to bisection, and the bound on all steps.
  static let maxit1 = 20
  static let maxit2 = maxit1 + Double.significandBitCount + 1 + 10

  // A3 (eq. 24) and C3 (eq. 25) have coefficients that are polynomials in n: fixed for WGS84.
  static let a3: (Double, Double, Double, Double, Double) = (
    (n - 1) / 2, (3 * n * n - n - 2) / 8, (-n * n - 3 * n - 1) / 16, (-2 * n - 3) / 64, -3.0 / 128
  )
  static let c31: (Double, Double, Double, Double, Double) = (
    (1 - n) / 4, (1 - n * n) / 8, (-n * n + 3 * n + 3) / 64, (2 * n + 5) / 128, 3.0 / 128
  )
  static let c32: (Double, Double, Double, Double) = (
    (n * n - 3 * n + 2) / 32, (-3 * n * n - 2 * n + 3) / 64, (n + 3) / 128, 5.0 / 256
  )
  static let c33: (Double, Double, Double) = (
    (5 * n * n - 9 * n + 5) / 192, (9 - 10 * n) / 384, 7.0 / 512
  )
  static let c34: (Double, Double) = ((7 - 14 * n) / 512, 7.0 / 512)
  static let c35 = 21.0 / 2560
}

/// Six Fourier coefficients c[1]...c[6] of a sine series sum c[l] sin(2 l sigma).
struct SineSeries {
  var c1 = 0.0, c2 = 0.0, c3 = 0.0, c4 = 0.0, c5 = 0.0, c6 = 0.0

  /// sum c[l] sin(2 l x) for x given by its sine and cosine, by Clenshaw summation (eq. 59).
  func value(sin sx: Double, cos cx: Double) -> Double {
    let ar = 2 * (cx - sx) * (cx + sx)  // 2 cos 2x
    var y0 = 0.0
    var y1 = 0.0
    y1 = ar * y0 - y1 + c6
    y0 = ar * y1 - y0 + c5
    y1 = ar * y0 - y1 + c4
    y0 = ar * y1 - y0 + c3
    y1 = ar * y0 - y1 + c2
    y0 = ar * y1 - y0 + c1
    return 2 * sx * cx * y0
  }

  /// a * self - b * other, coefficient by coefficient.
  func combined(_ a: Double, minus b: Double, times other: SineSeries) -> SineSeries {
    SineSeries(
      c1: a * c1 - b * other.c1, c2: a * c2 - b * other.c2, c3: a * c3 - b * other.c3,
      c4: a * c4 - b * other.c4, c5: a * c5 - b * other.c5, c6: a * c6 - b * other.c6)
  }
}

/// The series of Karney (2013) in eps, the expansion parameter of eq. 16.
enum GeodesicSeries {
  /// A1 - 1 (eq. 17).
  static func a1m1(_ eps: Double) -> Double {
    let e2 = eps * eps
    let t = e2 * (e2 * (e2 + 4) + 64) / 256
    return (t + eps) / (1 - eps)
  }

  /// C1[l] (eq. 18).
  static func c1(_ eps: Double) -> SineSeries {
    let e2 = eps * eps
    var d = eps
    var s = SineSeries()
    s.c1 = d * (e2 * (6 - e2) - 16) / 32
    d *= eps
    s.c2 = d * (e2 * (64 - 9 * e2) - 128) / 2048
    d *= eps
    s.c3 = d * (9 * e2 - 16) / 768
    d *= eps
    s.c4 = d * (3 * e2 - 5) / 512
    d *= eps
    s.c5 = -7 * d / 1280
    d *= eps
    s.c6 = -7 * d / 2048
    return s
  }

  /// C1'[l], the reverted series for the direct problem (eq. 21).
  static func c1p(_ eps: Double) -> SineSeries {
    let e2 = eps * eps
    var d = eps
    var s = SineSeries()
    s.c1 = d * (e2 * (205 * e2 - 432) + 768) / 1536
    d *= eps
    s.c2 = d * (e2 * (4005 * e2 - 4736) + 3840) / 12288
    d *= eps
    s.c3 = d * (116 - 225 * e2) / 384
    d *= eps
    s.c4 = d * (2695 - 7173 * e2) / 7680
    d *= eps
    s.c5 = 3467 * d / 7680
    d *= eps
    s.c6 = 38081 * d / 61440
    return s
  }

  /// A2 - 1 (eq. 42).
  static func a2m1(_ eps: Double) -> Double {
    let e2 = eps * eps
    let t = e2 * (e2 * (-11 * e2 - 28) - 192) / 256
    return (t - eps) / (1 + eps)
  }

  /// C2[l] (eq. 43).
  static func c2(_ eps: Double) -> SineSeries {
    let e2 = eps * eps
    var d = eps
    var s = SineSeries()
    s.c1 = d * (e2 * (e2 + 2) + 16) / 32
    d *= eps
    s.c2 = d * (e2 * (35 * e2 + 64) + 384) / 2048
    d *= eps
    s.c3 = d * (15 * e2 + 80) / 768
    d *= eps
    s.c4 = d * (7 * e2 + 35) / 512
    d *= eps
    s.c5 = 63 * d / 1280
    d *= eps
    s.c6 = 77 * d / 2048
    return s
  }

  /// A3 (eq. 24).
  static func a3(_ eps: Double) -> Double {
    let k = WGS84.a3
    return 1 + eps * (k.0 + eps * (k.1 + eps * (k.2 + eps * (k.3 + eps * k.4))))
  }

  /// C3[l] (eq. 25); c6 is zero.
  static func c3(_ eps: Double) -> SineSeries {
    var s = SineSeries()
    let k1 = WGS84.c31
    let k2 = WGS84.c32
    let k3 = WGS84.c33
    let k4 = WGS84.c34
    var d = eps
    s.c1 = d * (k1.0 + eps * (k1.1 + eps * (k1.2 + eps * (k1.3 + eps * k1.4))))
    d *= eps
    s.c2 = d * (k2.0 + eps * (k2.1 + eps * (k2.2 + eps * k2.3)))
    d *= eps
    s.c3 = d * (k3.0 + eps * (k3.1 + eps * k3.2))
    d *= eps
    s.c4 = d * (k4.0 + eps * k4.1)
    d *= eps
    s.c5 = d * WGS84.c35
    return s
  }

  /// eps from k^2 (eq. 16), written to avoid cancellation.
  static func eps(k2: Double) -> Double {
    k2 / (2 * (1 + (1 + k2).squareRoot()) + k2)
  }
}

/// Angles in degrees, reduced exactly before conversion to radians so that round-off stays small.
enum Degrees {
  static let radian = Double.pi / 180

  /// x reduced to [-180, 180]; -180 only for x = -180 (mod 360) given as negative.
  static func normalized(_ x: Double) -> Double {
    let y = x.remainder(dividingBy: 360)
    return abs(y) == 180 ? (x < 0 ? -180 : 180) : y
  }

  /// x when it is a latitude (|x| <= 90), else NaN.
  static func latitude(_ x: Double) -> Double { abs(x) > 90 ? .nan : x }

  /// y - x reduced to [-180, 180] with the rounding error of the subtraction in `error`.
  static func difference(_ x: Double, _ y: Double) -> (Double, error: Double) {
    var (d, t) = exactSum((-x).remainder(dividingBy: 360), y.remainder(dividingBy: 360))
    (d, t) = exactSum(d.remainder(dividingBy: 360), t)
    if d == 0 || abs(d) == 180 {
      d = Double(signOf: t == 0 ? y - x : -t, magnitudeOf: d)
    }
    return (d, t)
  }

  /// u + v = s + t exactly, s the rounded sum (Knuth's TwoSum).
  static func exactSum(_ u: Double, _ v: Double) -> (Double, Double) {
    let s = u + v
    var up = s - v
    var vpp = s - up
    up -= u
    vpp -= v
    return (s, s != 0 ? 0 - (up + vpp) : s)
  }

  /// Rounds tiny values to a multiple of 1/2^57, so that numbers near the equator and near a
  /// meridian behave as on it (Karney 2013, section 4 end).
  static func rounded(_ x: Double) -> Double {
    let z = 1.0 / 16
    var y = abs(x)
    let w = z - y
    y = w > 0 ? z - w : y
    return Double(signOf: x, magnitudeOf: y)
  }

  /// sin and cos of x degrees, with exact quadrant reduction: x is reduced exactly to `[-45, 45]`
  /// and a quarter-turn count before conversion to radians. With a correction `t` (the rounding
  /// error of a longitude difference), the reduced angle plus t is also ``rounded(_:)``, so that
  /// tiny differences count as none.
  static func sinCos(_ x: Double, plus t: Double? = nil) -> (sin: Double, cos: Double) {
    var r = x.truncatingRemainder(dividingBy: 360)  // exact, |r| < 360
    guard r.isFinite else { return (.nan, .nan) }
    let quarters = (r / 90).rounded()  // -4...4
    r -= 90 * quarters  // exact, |r| <= 45
    if let t { r = rounded(r + t) }
    r *= radian
    let s = sin(r)
    let c = cos(r)
    var result: (sin: Double, cos: Double)
    switch Int(quarters) & 3 {
    case 0: result = (s, c)
    case 1: result = (c, -s)
    case 2: result = (-s, -c)
    default: result = (-c, s)
    }
    result.cos += 0
    if result.sin == 0 { result.sin = Double(signOf: x, magnitudeOf: 0) }
    return result
  }

  /// atan2(y, x) in degrees, `[-180, 180]`.
  static func atan2d(_ y: Double, _ x: Double) -> Double {
    var x = x
    var y = y
    var q = 0
    if abs(y) > abs(x) {
      swap(&x, &y)
      q = 2
    }
    if x.sign == .minus {
      x = -x
      q += 1
    }
    var angle = atan2(y, x) / radian
    switch q {
    case 1: angle = Double(signOf: y, magnitudeOf: 180) - angle
    case 2: angle = 90 - angle
    case 3: angle = -90 + angle
    default: break
    }
    return angle
  }
}

/// sin and cos scaled so that sin^2 + cos^2 = 1.
@inline(__always)
func normalize(_ s: inout Double, _ c: inout Double) {
  let r = hypot(s, c)
  s /= r
  c /= r
}

/// Distance, reduced length and geodesic scales of Karney (2013) eqs. 7, 38, 39, in units of b.
struct Lengths {
  var s12b = 0.0, m12b = 0.0, m0 = 0.0, scale12 = 0.0, scale21 = 0.0

  /// All of s12/b, m12/b, M12 and M21 between sigma1 and sigma2 on the geodesic with parameter eps.
  init(
    eps: Double, sig12: Double, ssig1: Double, csig1: Double, dn1: Double, ssig2: Double,
    csig2: Double, dn2: Double, cbet1: Double, cbet2: Double
  ) {
    var a1 = GeodesicSeries.a1m1(eps)
    let c1 = GeodesicSeries.c1(eps)
    var a2 = GeodesicSeries.a2m1(eps)
    let c2 = GeodesicSeries.c2(eps)
    m0 = a1 - a2
    a2 += 1
    a1 += 1
    let b1 = c1.value(sin: ssig2, cos: csig2) - c1.value(sin: ssig1, cos: csig1)
    s12b = a1 * (sig12 + b1)
    let b2 = c2.value(sin: ssig2, cos: csig2) - c2.value(sin: ssig1, cos: csig1)
    let j12 = m0 * sig12 + (a1 * b1 - a2 * b2)
    m12b = dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2) - csig1 * csig2 * j12
    let csig12 = csig1 * csig2 + ssig1 * ssig2
    let t = WGS84.ep2 * (cbet1 - cbet2) * (cbet1 + cbet2) / (dn1 + dn2)
    scale12 = csig12 + (t * ssig2 - csig2 * j12) * ssig1 / dn1
    scale21 = csig12 - (t * ssig1 - csig1 * j12) * ssig2 / dn2
  }

  /// m12/b alone (the derivative of lambda12 with respect to alpha1 needs only it).
  static func reducedLength(
    eps: Double, sig12: Double, ssig1: Double, csig1: Double, dn1: Double, ssig2: Double,
    csig2: Double, dn2: Double
  ) -> Double {
    let a1m1 = GeodesicSeries.a1m1(eps)
    let a2m1 = GeodesicSeries.a2m1(eps)
    let m0 = a1m1 - a2m1
    let cb = GeodesicSeries.c1(eps).combined(
      1 + a1m1, minus: 1 + a2m1, times: GeodesicSeries.c2(eps))
    let j12 = m0 * sig12 + (cb.value(sin: ssig2, cos: csig2) - cb.value(sin: ssig1, cos: csig1))
    return dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2) - csig1 * csig2 * j12
  }
}

/// The solution of Karney's cubic (eq. 55) for the astroid: the positive root k of
/// k^4 + 2 k^3 - (x^2 + y^2 - 1) k^2 - 2 y^2 k - y^2 = 0.
func astroid(_ x: Double, _ y: Double) -> Double {
  let p = x * x
  let q = y * y
  let r = (p + q - 1) / 6
  guard !(q == 0 && r <= 0) else { return 0 }
  let s = p * q / 4
  let r2 = r * r
  let r3 = r * r2
  let disc = s * (s + 2 * r3)
  var u = r
  if disc >= 0 {
    var t3 = s + r3
    t3 += t3 < 0 ? -disc.squareRoot() : disc.squareRoot()
    let t = cbrt(t3)
    u += t + (t != 0 ? r2 / t : 0)
  } else {
    let angle = atan2((-disc).squareRoot(), -(s + r3))
    u += 2 * r * cos(angle / 3)
  }
  let v = (u * u + q).squareRoot()
  let uv = u < 0 ? q / (v - u) : u + v
  let w = (uv - q) / (2 * v)
  return uv / ((uv + w * w).squareRoot() + w)
}
