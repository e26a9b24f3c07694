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
    let backend = location.provenance.backend
    let source =
      !location.provenance.isSimulated ? "GPS fix" : backend.hasPrefix("replay:") ? "replayed GPS fix" : "simulated GPS fix"
    description = "\(source) from \(backend)"
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

/// What a client that asked for less than `EXACT` gets: the position moved to the centre of the
/// cell of a fixed grid that holds it, at the scale of the requested level, with `Accuracy` the
/// radius that covers the whole cell (as Android's approximate location snaps to a grid instead of
/// handing out the receiver's position).
///
/// The scale of each level (metres; GeoClue's levels name no distance, geocode-glib's accuracy
/// constants do for country, city and street):
///
/// | level | scale |
/// |---|---|
/// | `COUNTRY` (1), and `NONE` (0), which GeoClue raises to `COUNTRY` at `Start` | 300,000 (`GEOCODE_LOCATION_ACCURACY_COUNTRY`) |
/// | `CITY` (4) | 15,000 (`GEOCODE_LOCATION_ACCURACY_CITY`) |
/// | `NEIGHBORHOOD` (5), a cell tower's reach in GeoClue's 3G and CDMA sources | 3,000 |
/// | `STREET` (6) | 1,000 (`GEOCODE_LOCATION_ACCURACY_STREET`) |
/// | `EXACT` (8) | the fix itself, unchanged |
///
/// The grid: latitude bands of `180 / n` degrees, `n = round(180 / (scale / 111,226 m))` (the
/// metres of one degree on GeoClue's sphere of radius 6,372,795 m); each band is cut into
/// `m = max(1, floor(360 / (bandHeight / cos(band's central latitude))))` equal longitude cells
/// starting at -180, so cells are about `scale` wide on every band and the grid never depends on
/// the fix. The position becomes the cell's centre; `Accuracy` is the distance from the centre to
/// the cell's farthest corner plus the fix's own 95% radius when known. Altitude, speed and
/// heading become unknown (they would tell more than the level allows); the time and
/// description stay.
public enum GeoClueCoarsening {
  /// Metres of one degree of latitude on GeoClue's sphere (radius 6,372,795 m).
  public static let metresPerDegree = GeoClueThresholds.earthRadiusMetres * Double.pi / 180

  /// The grid's scale for a requested level in metres; `nil` for `EXACT` (and any level above
  /// `STREET`), which is not coarsened.
  public static func scale(for level: UInt32) -> Double? {
    switch level {
    case 0...GeoClueAccuracyLevel.country.rawValue: return 300_000
    case GeoClueAccuracyLevel.country.rawValue + 1...GeoClueAccuracyLevel.city.rawValue: return 15_000
    case GeoClueAccuracyLevel.neighborhood.rawValue: return 3_000
    case GeoClueAccuracyLevel.street.rawValue: return 1_000
    default: return nil
    }
  }

  /// The cell of `latitude`, `longitude` (degrees) on the grid of `scale` metres: its centre and
  /// its height and width in degrees.
  public static func cell(latitude: Double, longitude: Double, scale: Double)
    -> (latitude: Double, longitude: Double, height: Double, width: Double)
  {
    let bands = max(1, (180 / (scale / metresPerDegree)).rounded())
    let height = 180 / bands
    let band = min(bands - 1, max(0, ((latitude + 90) / height).rounded(.down)))
    let centreLatitude = -90 + (band + 0.5) * height
    let stretch = cos(centreLatitude * Double.pi / 180)
    let cells = max(1, (360 / (height / max(stretch, 1e-9))).rounded(.down))
    let width = 360 / cells
    let column = min(cells - 1, max(0, ((longitude + 180) / width).rounded(.down)))
    let centreLongitude = -180 + (column + 0.5) * width
    return (centreLatitude, centreLongitude, height, width)
  }

  /// `values` as a client that asked for `level` gets them; unchanged for `EXACT`.
  public static func values(_ values: GeoClueLocationValues, level: UInt32) -> GeoClueLocationValues {
    guard let scale = scale(for: level) else { return values }
    let cell = cell(latitude: values.latitude, longitude: values.longitude, scale: scale)
    // The farthest corner: at the cell's edge nearer the equator, where a degree of longitude is
    // longest.
    let (low, high) = (cell.latitude - cell.height / 2, cell.latitude + cell.height / 2)
    let edge = low <= 0 && high >= 0 ? 0 : min(abs(low), abs(high))
    let north = cell.height / 2 * metresPerDegree
    let east = cell.width / 2 * metresPerDegree * cos(min(edge, 90) * Double.pi / 180)
    var coarse = values
    coarse.latitude = cell.latitude
    coarse.longitude = cell.longitude
    coarse.accuracy = (north * north + east * east).squareRoot() + max(0, values.accuracy)
    coarse.altitude = GeoClueLocationValues.unknownAltitude
    coarse.speed = -1
    coarse.heading = -1
    return coarse
  }
}
