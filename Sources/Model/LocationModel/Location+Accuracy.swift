import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The confidence level an accuracy figure is stated at.
public enum ConfidenceLevel: String, Sendable, Hashable, Codable {
  /// One standard deviation (68.3% in one dimension, 39.3% for a circular 2D error).
  case oneSigma
  /// 95% of errors are smaller (gpsd's `eph`/`epv` convention).
  case percent95
}

/// Where an accuracy figure comes from.
public enum AccuracySource: String, Sendable, Hashable, Codable {
  /// NMEA 0183 GST pseudorange error statistics (one-sigma, per axis).
  case gst
  /// A dilution of precision times gpsd's user equivalent range error (gpsd `eph`/`epv`).
  case dilutionOfPrecision
}

/// An accuracy figure with its confidence level stated, and the matching 95% figure.
public struct AccuracyEstimate: Sendable, Hashable, Codable {
  /// The figure as the source states it, metres (or m/s, degrees for velocity), `>= 0`.
  public var value: Double
  /// The confidence level `value` is stated at.
  public var confidence: ConfidenceLevel
  /// Where the figure came from.
  public var source: AccuracySource
  /// The radius (horizontal) or half-interval (vertical) containing 95% of errors, same unit as
  /// `value`.
  public var radius95: Double

  /// Creates an estimate; `radius95` must already be converted to 95%.
  public init(value: Double, confidence: ConfidenceLevel, source: AccuracySource, radius95: Double)
  {
    self.value = value
    self.confidence = confidence
    self.source = source
    self.radius95 = radius95
  }

  /// Ratio of the 95% radius to the one-sigma per-axis error of a circular bivariate normal
  /// distribution: `sqrt(-2 ln 0.05)`.
  public static let horizontal95PerSigma = 2.447_746_830_680_816
  /// Ratio of the 95% half-interval to one sigma of a normal distribution.
  public static let vertical95PerSigma = 1.959_963_984_540_054
}

extension Location {
  /// Position in WGS84 degrees; `nil` when the fix has no position ("no fix").
  public var coordinate: Coordinate? {
    guard fix.mode.hasPosition, let coordinate = fix.coordinate, coordinate.isValid else {
      return nil
    }
    return coordinate
  }

  /// Whether this location carries a usable position: a 2D or 3D fix with a valid coordinate.
  public var hasPosition: Bool { coordinate != nil }

  /// Altitude above mean sea level (geoid), metres; `nil` without a 3D fix.
  public var altitudeMSL: Double? { fix.mode == .fix3D ? fix.altitudeMSL : nil }

  /// Altitude above the WGS84 ellipsoid (HAE), metres; `nil` without a 3D fix or geoid separation.
  public var altitudeHAE: Double? { fix.mode == .fix3D ? fix.altitudeHAE : nil }

  /// Horizontal position error with its confidence level.
  ///
  /// From NMEA GST when the receiver sent it (one sigma: the larger of the latitude and longitude
  /// standard deviations; the 95% radius is that times 2.4477, exact for a circular error), else
  /// gpsd's `eph` (HDOP times the user equivalent range error, stated at 95%). `nil` when neither
  /// is known or the fix has no position.
  public var horizontalAccuracy: AccuracyEstimate? {
    guard hasPosition else { return nil }
    if let gst = fix.errorEstimates, let lat = gst.latitude, let lon = gst.longitude,
      lat.isFinite, lon.isFinite, lat >= 0, lon >= 0
    {
      let sigma = max(lat, lon)
      return AccuracyEstimate(
        value: sigma, confidence: .oneSigma, source: .gst,
        radius95: sigma * AccuracyEstimate.horizontal95PerSigma)
    }
    if let eph = fix.eph, eph.isFinite, eph >= 0 {
      return AccuracyEstimate(
        value: eph, confidence: .percent95, source: .dilutionOfPrecision, radius95: eph)
    }
    return nil
  }

  /// Vertical position error with its confidence level: GST altitude sigma (one sigma; 95% is
  /// 1.96 sigma) or gpsd's `epv` (VDOP times the user equivalent range error, 95%). `nil` without a
  /// 3D fix or without either source.
  public var verticalAccuracy: AccuracyEstimate? {
    guard hasPosition, fix.mode == .fix3D else { return nil }
    if let sigma = fix.errorEstimates?.altitude, sigma.isFinite, sigma >= 0 {
      return AccuracyEstimate(
        value: sigma, confidence: .oneSigma, source: .gst,
        radius95: sigma * AccuracyEstimate.vertical95PerSigma)
    }
    if let epv = fix.epv, epv.isFinite, epv >= 0 {
      return AccuracyEstimate(
        value: epv, confidence: .percent95, source: .dilutionOfPrecision, radius95: epv)
    }
    return nil
  }

  /// The 95% horizontal error radius in metres (``horizontalAccuracy``'s `radius95`), the figure
  /// ``LocationFilter/desiredAccuracy`` is compared with; `nil` when unknown.
  public var horizontalAccuracy95: Double? { horizontalAccuracy?.radius95 }

  /// Speed over ground, m/s; `nil` when unknown or without a position.
  public var speed: Double? { hasPosition ? fix.speedOverGround : nil }

  /// Course over ground, degrees true, `0..<360`; `nil` when unknown or without a position.
  public var course: Double? { hasPosition ? fix.courseOverGround : nil }

  /// Accuracy of ``speed``, m/s. NMEA 0183 sentences carry no speed error, so this is known only
  /// when the producer states it: the simulated backend, whose speed is exact (noise is added to
  /// the position only), reports zero at one sigma. `nil` otherwise.
  public var speedAccuracy: AccuracyEstimate? {
    guard hasPosition, speed != nil, provenance.isSimulated, provenance.line == nil else {
      return nil
    }
    return AccuracyEstimate(value: 0, confidence: .oneSigma, source: .gst, radius95: 0)
  }

  /// Accuracy of ``course``, degrees. As for ``speedAccuracy``: known (zero) only for the
  /// simulated backend, `nil` for fixes decoded from NMEA.
  public var courseAccuracy: AccuracyEstimate? {
    guard hasPosition, course != nil, provenance.isSimulated, provenance.line == nil else {
      return nil
    }
    return AccuracyEstimate(value: 0, confidence: .oneSigma, source: .gst, radius95: 0)
  }

  /// UTC time of the fix as a `Date`; `nil` until the log or receiver supplied a date.
  public var timestamp: Date? {
    guard let time = fix.time else { return nil }
    return Date(timeIntervalSince1970: Double(time) / 1000)
  }

  /// Fix mode (gpsd TPV `mode`).
  public var mode: FixMode { fix.mode }

  /// Fix quality (GGA quality indicator); `nil` when unknown.
  public var quality: FixQuality? { fix.quality }

  /// Satellites used in the solution; `nil` when unknown.
  public var satellitesUsed: Int? { fix.satellitesUsed }

  /// Satellites in view (the sky view's size).
  public var satellitesVisible: Int { fix.satellitesInView }

  /// Whether the location was simulated or replayed rather than measured live.
  public var isSimulated: Bool { provenance.isSimulated }

  /// Distance to `other` in metres along the geodesic on the WGS84 ellipsoid (Karney 2013, via
  /// ``Geodesy/distance(_:_:)``); `nil` when either has no position.
  public func distance(from other: Location) -> Double? {
    guard let a = coordinate, let b = other.coordinate else { return nil }
    return Geodesy.distance(a, b)
  }
}

/// Distance and bearing between WGS84 coordinates, measured along geodesics on the WGS84
/// ellipsoid by Karney's algorithms (``Geodesic``): accurate to about 15 nm, where the haversine
/// formula on a sphere errs by up to 0.5%.
public enum Geodesy {
  /// Mean Earth radius, metres (IUGG R1 = (2a + b) / 3 of WGS84): the sphere of simulated motion
  /// (`SimulatedRoute` moves along great circles of this sphere), not used for measuring.
  public static let earthRadius = 6_371_008.8

  /// Length of the shortest path between two coordinates on the WGS84 ellipsoid, metres, `>= 0`.
  ///
  /// Coordinates in degrees, latitudes in `[-90, 90]`, longitudes any value. NaN when a latitude
  /// is outside `[-90, 90]` or a value is not finite. Karney (2013); agrees with GeographicLib.
  public static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
    Geodesic.distance(a, b)
  }

  /// Initial azimuth of the geodesic from `a` to `b` on the WGS84 ellipsoid, degrees clockwise
  /// from true north, `0..<360`.
  ///
  /// Coincident points have no direction: a meridian is taken, 0 or 180 as GeographicLib reports
  /// (180 on and north of the equator). For exactly antipodal points, where many shortest paths
  /// start, the one ``Geodesic/inverse(_:_:)`` picks. NaN under the conditions
  /// ``distance(_:_:)`` states.
  public static func bearing(_ a: Coordinate, _ b: Coordinate) -> Double {
    let azimuth = Geodesic.inverse(a, b).initialAzimuth
    let normalised = (azimuth < 0 ? azimuth + 360 : azimuth) + 0  // + 0 turns -0 into 0
    return normalised >= 360 ? 0 : normalised
  }
}
