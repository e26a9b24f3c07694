#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Distances on the WGS84 ellipsoid exactly as gpsd 3.22 computes them, for gpsd parity only.
///
/// The NMEA fix assembler uses it where gpsd's own result depends on its distance (the speed
/// gpsd_error_model derives from consecutive positions when a receiver sends none), so that
/// locationd reports what gpsd reports, including no speed where Vincenty fails to converge. Everything else measures with ``Geodesy`` / ``Geodesic``
/// (Karney 2013), which is accurate to nanometres and converges for every pair of points; this
/// type keeps Vincenty's iteration deliberately and must not be "fixed" to it.
public enum WGS84Geodesic {
  /// WGS84 semi-major axis, metres.
  static let a = 6_378_137.0
  /// WGS84 semi-minor axis, metres (as gpsd's `WGS84B`).
  static let b = 6_356_752.314245
  /// WGS84 flattening.
  static let f = 1 / 298.257223563

  /// The geodesic distance in metres between two coordinates (degrees, WGS84), by Vincenty's
  /// inverse formula, iterated to 1e-12 as gpsd 3.22's `earth_distance` (libgps/gpsutils.c) does;
  /// 0 for the same point, `nil` when the iteration does not converge (nearly antipodal points).
  public static func distance(_ p: Coordinate, _ q: Coordinate) -> Double? {
    let radians = Double.pi / 180
    let l = (q.longitude - p.longitude) * radians
    let u1 = atan((1 - f) * tan(p.latitude * radians))
    let u2 = atan((1 - f) * tan(q.latitude * radians))
    let (sinU1, cosU1, sinU2, cosU2) = (sin(u1), cos(u1), sin(u2), cos(u2))
    var lambda = l
    var iterations = 100
    var sinSigma = 0.0
    var cosSigma = 0.0
    var sigma = 0.0
    var cosSqAlpha = 0.0
    var cos2SigmaM = 0.0
    repeat {
      let sinLambda = sin(lambda)
      let cosLambda = cos(lambda)
      let x = cosU2 * sinLambda
      let y = cosU1 * sinU2 - sinU1 * cosU2 * cosLambda
      sinSigma = (x * x + y * y).squareRoot()
      if sinSigma == 0 { return 0 }
      cosSigma = sinU1 * sinU2 + cosU1 * cosU2 * cosLambda
      sigma = atan2(sinSigma, cosSigma)
      let sinAlpha = cosU1 * cosU2 * sinLambda / sinSigma
      cosSqAlpha = 1 - sinAlpha * sinAlpha
      cos2SigmaM = cosSigma - 2 * sinU1 * sinU2 / cosSqAlpha
      if !cos2SigmaM.isFinite { cos2SigmaM = 0 }
      let c = f / 16 * cosSqAlpha * (4 + f * (4 - 3 * cosSqAlpha))
      let previous = lambda
      lambda = l + (1 - c) * f * sinAlpha * (sigma + c * sinSigma * (cos2SigmaM + c * cosSigma * (2 * cos2SigmaM * cos2SigmaM - 1)))
      iterations -= 1
      if abs(lambda - previous) <= 1e-12 { break }
    } while iterations > 0
    guard iterations > 0 else { return nil }
    let uSq = cosSqAlpha * (a * a - b * b) / (b * b)
    let bigA = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
    let bigB = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
    let deltaSigma =
      bigB * sinSigma
      * (cos2SigmaM + bigB / 4
        * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM) - bigB / 6 * cos2SigmaM * (-3 + 4 * sinSigma * sinSigma)
          * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
    return b * bigA * (sigma - deltaSigma)
  }
}
