import Glibc
import LocationModel

/// The property values of one `org.freedesktop.GeoClue2.Location` object, as GeoClue 2.6 gives
/// them (`gclue-service-location.c`, `gclue-location.c`).
///
/// Units: degrees (WGS84) for `latitude`/`longitude`, metres for `accuracy` and `altitude`, m/s
/// for `speed`, degrees clockwise from true north for `heading`. Unknown values are GeoClue's
/// own markers: `altitude` `-Double.greatestFiniteMagnitude` (geocode-glib's
/// `GEOCODE_LOCATION_ALTITUDE_UNKNOWN`, `-G_MAXDOUBLE`), `speed` and `heading` `-1`
/// (`GCLUE_LOCATION_SPEED_UNKNOWN`, `GCLUE_LOCATION_HEADING_UNKNOWN`), `accuracy` `-1`
/// (`GEOCODE_LOCATION_ACCURACY_UNKNOWN`).
public struct GeoClueLocationValues: Sendable, Hashable {
  /// Latitude, degrees, `-90...90`.
  public var latitude: Double
  /// Longitude, degrees, `-180...180`.
  public var longitude: Double
  /// Radius of the horizontal error, metres: the fix's 95% horizontal error
  /// (``Location/horizontalAccuracy``: from GST when the receiver sends it, else gpsd's `eph`);
  /// `-1` when the fix carries neither.
  public var accuracy: Double
  /// Altitude above mean sea level, metres (GGA's altitude, as GeoClue's NMEA source reads it),
  /// for 3D fixes; `-Double.greatestFiniteMagnitude` when unknown.
  public var altitude: Double
  /// Speed over ground, m/s; `-1` when unknown.
  public var speed: Double
  /// Course over ground, degrees true `0..<360`; `-1` when unknown.
  public var heading: Double
  /// A human-readable description of the source, e.g. `GPS fix from replay:/path/log.nmea`.
  public var description: String
  /// The fix time: seconds since 1970-01-01T00:00:00Z.
  public var seconds: UInt64
  /// The microseconds within ``seconds``, `0..<1_000_000`.
  public var microseconds: UInt64

  /// GeoClue's altitude marker for "unknown" (`-G_MAXDOUBLE`).
  public static let unknownAltitude = -Double.greatestFiniteMagnitude

  /// The values for `location`, or `nil` when its fix has no position (GeoClue reports only
  /// positions).
  ///
  /// - Parameter receivedAt: milliseconds since 1970 to use when the fix has no date (GGA alone),
  ///   as GeoClue stamps such locations with the time it received them.
  public init?(_ location: Location, receivedAt: Int64) {
    guard location.fix.mode.hasPosition, let coordinate = location.fix.coordinate else {
      return nil
    }
    let fix = location.fix
    latitude = coordinate.latitude
    longitude = coordinate.longitude
    accuracy =
      location.horizontalAccuracy.flatMap {
        $0.radius95.isFinite && $0.radius95 >= 0 ? $0.radius95 : nil
      } ?? -1
    altitude = location.altitudeMSL.flatMap { $0.isFinite ? $0 : nil } ?? Self.unknownAltitude
    speed = fix.speedOverGround.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil } ?? -1
    heading = fix.courseOverGround.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil } ?? -1
    let source = location.provenance.isSimulated ? "simulated GPS fix" : "GPS fix"
    description = "\(source) from \(location.provenance.backend)"
    let milliseconds = max(0, fix.time ?? receivedAt)
    seconds = UInt64(milliseconds / 1000)
    microseconds = UInt64(milliseconds % 1000) * 1000
  }

  /// Creates values directly (tests).
  public init(
    latitude: Double, longitude: Double, accuracy: Double = -1, altitude: Double = unknownAltitude,
    speed: Double = -1, heading: Double = -1, description: String = "", seconds: UInt64,
    microseconds: UInt64 = 0
  ) {
    self.latitude = latitude
    self.longitude = longitude
    self.accuracy = accuracy
    self.altitude = altitude
    self.speed = speed
    self.heading = heading
    self.description = description
    self.seconds = seconds
    self.microseconds = microseconds
  }
}

/// GeoClue 2.6's update thresholds (`gclue-service-client.c`, `below_threshold`): a new location is
/// not signalled (no new Location object, no `LocationUpdated`) when it is closer than
/// `DistanceThreshold` metres to the last *signalled* location, or when its timestamp is less
/// than `TimeThreshold` seconds from that location's (either suffices). A threshold of 0 is off.
/// The very first location is always signalled.
public enum GeoClueThresholds {
  /// Whether `new` is below the thresholds relative to `signalled`.
  ///
  /// - Parameters:
  ///   - distance: `DistanceThreshold`, metres (0: off).
  ///   - time: `TimeThreshold`, seconds (0: off).
  public static func suppresses(
    _ new: GeoClueLocationValues, after signalled: GeoClueLocationValues?, distance: UInt32,
    time: UInt32
  ) -> Bool {
    guard let signalled else { return false }
    if distance > 0 && Self.distance(from: signalled, to: new) < Double(distance) { return true }
    if time > 0 {
      let difference =
        new.seconds > signalled.seconds
        ? new.seconds - signalled.seconds : signalled.seconds - new.seconds
      if difference < UInt64(time) { return true }
    }
    return false
  }

  /// Mean Earth radius GeoClue's distance uses (geocode-glib, `EARTH_RADIUS_KM` 6372.795).
  public static let earthRadiusMetres = 6_372_795.0

  /// Great-circle distance in metres by the haversine formula on a sphere of
  /// ``earthRadiusMetres``, as `gclue_location_get_distance_from` computes it.
  public static func distance(from a: GeoClueLocationValues, to b: GeoClueLocationValues) -> Double
  {
    let radians = Double.pi / 180
    let dLat = (b.latitude - a.latitude) * radians
    let dLon = (b.longitude - a.longitude) * radians
    let h =
      sin(dLat / 2) * sin(dLat / 2) + cos(a.latitude * radians) * cos(b.latitude * radians)
      * sin(dLon / 2)
      * sin(dLon / 2)
    return 2 * earthRadiusMetres * asin(min(1, sqrt(h)))
  }
}

/// GeoClue's accuracy levels (`GClueAccuracyLevel`, the `RequestedAccuracyLevel` and
/// `AvailableAccuracyLevel` values).
public enum GeoClueAccuracyLevel: UInt32, Sendable, CaseIterable {
  /// Location services off.
  case none = 0
  /// Country.
  case country = 1
  /// City.
  case city = 4
  /// Neighbourhood.
  case neighborhood = 5
  /// Street.
  case street = 6
  /// Exact: what a receiver gives, and all locationd gives.
  case exact = 8
}
