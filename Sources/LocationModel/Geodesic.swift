#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Result of the inverse geodesic problem on the WGS84 ellipsoid: the shortest path between two
/// points, as Karney (2013), "Algorithms for geodesics", J. Geodesy 87, 43-55, defines it.
public struct GeodesicInverse: Sendable, Hashable {
  /// Length of the geodesic, `s12`, metres, `>= 0`.
  public var distance: Double
  /// Azimuth at the first point, `azi1`, degrees clockwise from true north, `(-180, 180]`.
  public var initialAzimuth: Double
  /// Azimuth at the second point (forward direction), `azi2`, degrees true, `(-180, 180]`.
  public var finalAzimuth: Double
  /// Reduced length of the geodesic, `m12`, metres.
  public var reducedLength: Double
  /// Geodesic scale of the second point relative to the first, `M12`, dimensionless.
  public var geodesicScale12: Double
  /// Geodesic scale of the first point relative to the second, `M21`, dimensionless.
  public var geodesicScale21: Double

  /// Creates a solution from its parts (units as the properties state).
  public init(
    distance: Double, initialAzimuth: Double, finalAzimuth: Double, reducedLength: Double,
    geodesicScale12: Double, geodesicScale21: Double
  ) {
    self.distance = distance
    self.initialAzimuth = initialAzimuth
    self.finalAzimuth = finalAzimuth
    self.reducedLength = reducedLength
    self.geodesicScale12 = geodesicScale12
    self.geodesicScale21 = geodesicScale21
  }
}

/// Result of the direct geodesic problem on the WGS84 ellipsoid (Karney 2013).
public struct GeodesicDirect: Sendable, Hashable {
  /// The destination, degrees (WGS84); longitude in `[-180, 180]`.
  public var coordinate: Coordinate
  /// Azimuth at the destination (forward direction), `azi2`, degrees true, `(-180, 180]`.
  public var finalAzimuth: Double
  /// Reduced length of the geodesic, `m12`, metres.
  public var reducedLength: Double
  /// Geodesic scale of the destination relative to the start, `M12`, dimensionless.
  public var geodesicScale12: Double
  /// Geodesic scale of the start relative to the destination, `M21`, dimensionless.
  public var geodesicScale21: Double

  /// Creates a solution from its parts (units as the properties state).
  public init(
    coordinate: Coordinate, finalAzimuth: Double, reducedLength: Double, geodesicScale12: Double,
    geodesicScale21: Double
  ) {
    self.coordinate = coordinate
    self.finalAzimuth = finalAzimuth
    self.reducedLength = reducedLength
    self.geodesicScale12 = geodesicScale12
    self.geodesicScale21 = geodesicScale21
  }
}

/// Geodesics on the WGS84 ellipsoid (a = 6,378,137 m, f = 1/298.257223563).
public enum Geodesic {
  /// Karney (2013) inverse problem; total for all finite inputs (lat in [-90, 90], any lon).
  ///
  /// Longitudes outside `[-180, 180]` are reduced; latitudes outside `[-90, 90]` or non-finite
  /// input give NaN in every field.
  public static func inverse(_ a: Coordinate, _ b: Coordinate) -> GeodesicInverse {
    // Spherical placeholder.
    let radius = 6_371_008.8
    let lat1 = a.latitude * .pi / 180
    let lat2 = b.latitude * .pi / 180
    let dLon = (b.longitude - a.longitude) * .pi / 180
    let h =
      sin((lat2 - lat1) / 2) * sin((lat2 - lat1) / 2) + cos(lat1) * cos(lat2) * sin(dLon / 2)
      * sin(dLon / 2)
    let sigma = 2 * asin(min(1, h.squareRoot()))
    let azi1 = atan2(sin(dLon) * cos(lat2), cos(lat1) * sin(lat2) - sin(lat1) * cos(lat2) * cos(dLon))
    let azi2 = atan2(sin(dLon) * cos(lat1), -cos(lat2) * sin(lat1) + sin(lat2) * cos(lat1) * cos(dLon))
    return GeodesicInverse(
      distance: radius * sigma, initialAzimuth: azi1 * 180 / .pi, finalAzimuth: azi2 * 180 / .pi,
      reducedLength: radius * sin(sigma), geodesicScale12: cos(sigma), geodesicScale21: cos(sigma))
  }

  /// Karney (2013) direct problem: destination and azimuth there (degrees), plus m12, M12, M21.
  ///
  /// `azimuth` in degrees true (any value), `distance` in metres (may be negative: backwards).
  public static func direct(from start: Coordinate, azimuth: Double, distance: Double)
    -> GeodesicDirect
  {
    let radius = 6_371_008.8
    let sigma = distance / radius
    let lat1 = start.latitude * .pi / 180
    let alpha = azimuth * .pi / 180
    let lat2 = asin(sin(lat1) * cos(sigma) + cos(lat1) * sin(sigma) * cos(alpha))
    let dLon = atan2(sin(alpha) * sin(sigma) * cos(lat1), cos(sigma) - sin(lat1) * sin(lat2))
    let azi2 = atan2(sin(dLon) * cos(lat1), -cos(lat2) * sin(lat1) + sin(lat2) * cos(lat1) * cos(dLon))
    return GeodesicDirect(
      coordinate: Coordinate(latitude: lat2 * 180 / .pi, longitude: start.longitude + dLon * 180 / .pi),
      finalAzimuth: azi2 * 180 / .pi, reducedLength: radius * sin(sigma),
      geodesicScale12: cos(sigma), geodesicScale21: cos(sigma))
  }

  /// Convenience: inverse(a, b).distance
  public static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
    inverse(a, b).distance
  }
}

/// Karney (2013) §8 ellipsoidal gnomonic projection centred on `center`: geodesics through the
/// center are straight lines, and all geodesics are very nearly straight within a few hundred km.
public struct Gnomonic: Sendable {
  /// The projection's center, degrees (WGS84).
  public let center: Coordinate

  /// A projection centred on `center` (degrees, WGS84).
  public init(center: Coordinate) {
    self.center = center
  }

  /// x (east), y (north) in metres; nil when the point is 90 degrees or more from the center (M12 <= 0).
  public func forward(_ point: Coordinate) -> (x: Double, y: Double)? {
    let solution = Geodesic.inverse(center, point)
    guard solution.geodesicScale12 > 0 else { return nil }
    let rho = solution.reducedLength / solution.geodesicScale12
    let azimuth = solution.initialAzimuth * .pi / 180
    return (rho * sin(azimuth), rho * cos(azimuth))
  }

  /// Inverse by Newton's method as in GeographicLib's Gnomonic::Reverse; nil when it does not converge.
  public func reverse(x: Double, y: Double) -> Coordinate? {
    let radius = 6_371_008.8
    let azimuth = atan2(x, y) * 180 / .pi
    let sigma = atan((x * x + y * y).squareRoot() / radius)
    return Geodesic.direct(from: center, azimuth: azimuth, distance: sigma * radius).coordinate
  }
}
