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

/// Geodesics on the WGS84 ellipsoid (a = 6,378,137 m, f = 1/298.257223563), by the algorithms of
/// C. F. F. Karney, "Algorithms for geodesics", J. Geodesy 87, 43-55 (2013): series to sixth order,
/// accurate to about 15 nanometres for any pair of points, antipodal ones included.
///
/// Angles are degrees: latitudes in `[-90, 90]` (outside, or not finite: every result is NaN),
/// longitudes and azimuths any value (reduced modulo 360), azimuths clockwise from true north.
/// Distances are metres. Results agree with GeographicLib's `GeodSolve`.
public enum Geodesic {
  /// Karney (2013) inverse problem; total for all finite inputs (lat in [-90, 90], any lon).
  ///
  /// The shortest path from `a` to `b`: its length, the azimuths at both ends, m12, M12 and M21.
  /// For coincident points the distance is 0 and the azimuths are those of a meridian (180 on
  /// and north of the equator, 0 south of it, as GeodSolve prints); for antipodal points, where
  /// many shortest paths exist, one of them. A latitude outside `[-90, 90]` or a non-finite input
  /// gives NaN in every field.
  public static func inverse(_ a: Coordinate, _ b: Coordinate) -> GeodesicInverse {
    guard isValid(a), isValid(b) else {
      return GeodesicInverse(
        distance: .nan, initialAzimuth: .nan, finalAzimuth: .nan, reducedLength: .nan,
        geodesicScale12: .nan, geodesicScale21: .nan)
    }
    let solution = InverseSolution(
      lat1: a.latitude, lon1: a.longitude, lat2: b.latitude, lon2: b.longitude)
    return GeodesicInverse(
      distance: solution.s12,
      initialAzimuth: azimuth(solution.salp1, solution.calp1),
      finalAzimuth: azimuth(solution.salp2, solution.calp2),
      reducedLength: solution.m12,
      geodesicScale12: solution.scale12,
      geodesicScale21: solution.scale21)
  }

  /// Karney (2013) direct problem: destination and azimuth there (degrees), plus m12, M12, M21.
  ///
  /// `azimuth` is degrees clockwise from true north (any value), `distance` metres (negative
  /// goes backwards along the geodesic). The destination's longitude is in `[-180, 180]`. A
  /// latitude outside `[-90, 90]` or a non-finite input gives NaN in every field.
  public static func direct(from start: Coordinate, azimuth: Double, distance: Double)
    -> GeodesicDirect
  {
    guard isValid(start), azimuth.isFinite, distance.isFinite else {
      return GeodesicDirect(
        coordinate: Coordinate(latitude: .nan, longitude: .nan), finalAzimuth: .nan,
        reducedLength: .nan, geodesicScale12: .nan, geodesicScale21: .nan)
    }
    let line = GeodesicLine(lat1: start.latitude, lon1: start.longitude, azi1: azimuth)
    let p = line.position(distance: distance)
    return GeodesicDirect(
      coordinate: Coordinate(latitude: p.lat2, longitude: p.lon2),
      finalAzimuth: p.azi2 == -180 ? 180 : p.azi2 + 0,
      reducedLength: p.m12, geodesicScale12: p.scale12, geodesicScale21: p.scale21)
  }

  /// The azimuth with the given sine and cosine, degrees in `(-180, 180]`: due south is 180 (where
  /// GeodSolve may print -180 for a south-going line with a longitude difference of -0), and due
  /// north 0, never -0.
  static func azimuth(_ sine: Double, _ cosine: Double) -> Double {
    let degrees = Degrees.atan2d(sine, cosine)
    return degrees == -180 ? 180 : degrees + 0
  }

  /// Whether the algorithms accept `point`: finite, latitude in `[-90, 90]`, any longitude.
  static func isValid(_ point: Coordinate) -> Bool {
    point.latitude.isFinite && abs(point.latitude) <= 90 && point.longitude.isFinite
  }

  /// Convenience: inverse(a, b).distance
  ///
  /// Metres, `>= 0`; NaN under the conditions ``inverse(_:_:)`` states.
  public static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
    inverse(a, b).distance
  }
}

/// Karney (2013) §8 ellipsoidal gnomonic projection centred on `center`: geodesics through the
/// center are straight lines, and all geodesics are very nearly straight within a few hundred km.
///
/// A point at azimuth azi0 from the center, with reduced length m and geodesic scale M of the
/// geodesic from the center, maps to rho = m / M along azi0 (Karney 2013, eq. 57), as
/// GeographicLib's `Gnomonic` class does. On a sphere it is the exact gnomonic projection. On
/// WGS84, for geodesics within 150 km of the center, the midpoint's image lies within 3.2e-9 of
/// the chord's length of the chord between the ends' images (measured; 1 mm on 300 km), so
/// straight-line tests in the plane (point in polygon, segment crossing) are geodesic tests to
/// that accuracy. x and y are metres; the scale is 1 at the center.
public struct Gnomonic: Sendable {
  /// The projection's center, degrees (WGS84).
  public let center: Coordinate

  /// A projection centred on `center` (degrees, WGS84; latitude in `[-90, 90]`).
  public init(center: Coordinate) {
    self.center = center
  }

  /// x (east), y (north) in metres; nil when the point is 90 degrees or more from the center (M12 <= 0).
  ///
  /// Also nil when either coordinate is not finite or its latitude is outside `[-90, 90]`.
  public func forward(_ point: Coordinate) -> (x: Double, y: Double)? {
    guard Geodesic.isValid(center), Geodesic.isValid(point) else { return nil }
    let solution = InverseSolution(
      lat1: center.latitude, lon1: center.longitude, lat2: point.latitude, lon2: point.longitude)
    guard solution.scale12 > 0, solution.m12.isFinite else { return nil }
    let rho = solution.m12 / solution.scale12
    let azi0 = Degrees.atan2d(solution.salp1, solution.calp1)
    let (sinAzi, cosAzi) = Degrees.sinCos(azi0)
    return (rho * sinAzi, rho * cosAzi)
  }

  /// Inverse by Newton's method as in GeographicLib's Gnomonic::Reverse; nil when it does not converge.
  ///
  /// `x` (east) and `y` (north) in metres; at most 10 Newton steps on the distance along the
  /// geodesic from the center at azimuth atan2(x, y). nil for non-finite input.
  public func reverse(x: Double, y: Double) -> Coordinate? {
    guard x.isFinite, y.isFinite, Geodesic.isValid(center) else { return nil }
    let azi0 = Degrees.atan2d(x, y)
    var rho = hypot(x, y)
    var s = WGS84.a * atan(rho / WGS84.a)
    let little = rho <= WGS84.a
    if !little { rho = 1 / rho }
    let line = GeodesicLine(lat1: center.latitude, lon1: center.longitude, azi1: azi0)
    let tolerance = 0.01 * Double.ulpOfOne.squareRoot() * WGS84.a
    for _ in 0..<10 {
      let p = line.position(distance: s)
      // Near the center solve rho(s) = rho, d rho/ds = 1/M^2; far out 1/rho(s) = 1/rho,
      // d(1/rho)/ds = -1/m^2.
      let ds = little ? (p.m12 - rho * p.scale12) * p.scale12 : (rho * p.m12 - p.scale12) * p.m12
      s -= ds
      // Reversed test: NaN never converges.
      if !(abs(ds) >= tolerance) {
        let q = line.position(distance: s)
        guard q.lat2.isFinite, q.lon2.isFinite else { return nil }
        return Coordinate(latitude: q.lat2, longitude: q.lon2)
      }
    }
    return nil
  }
}
