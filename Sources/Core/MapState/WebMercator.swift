#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Spherical Web Mercator (EPSG:3857) as used by slippy-map tiles: 256-point tiles, zoom level
/// `z` has `2^z` tiles across the world.
///
/// Formulas (OpenStreetMap wiki "Zoom levels" and "Slippy map tilenames"; EPSG:3857
/// "WGS 84 / Pseudo-Mercator", sphere radius 6 378 137 m):
/// - world size in points: `256 * 2^z`
/// - normalised x in `0...1`: `x = (lon + 180) / 360`
/// - normalised y in `0...1` (north at 0): `y = (1 - asinh(tan(lat)) / pi) / 2`
/// - inverse: `lat = atan(sinh(pi * (1 - 2y)))`, `lon = 360x - 180`
/// - ground resolution: `metres per point = 156543.03392804097 * cos(lat) / 2^z`, where
///   `156543.03392804097 = 2 * pi * 6378137 / 256`
///
/// Latitudes are clamped to `-85.05112878...85.05112878` (`atan(sinh(pi))`), where the square
/// world map ends.
public enum WebMercator {
  /// Radius of the Web Mercator sphere: the WGS84 semi-major axis, metres (EPSG:3857).
  public static let earthRadius = 6_378_137.0
  /// Edge of one map tile, points.
  public static let tileSize = 256.0
  /// Metres per point on the equator at zoom level 0: `2 * pi * 6378137 / 256`.
  public static let metresPerPointAtZoomZero = 156_543.033_928_040_97
  /// Highest latitude that Web Mercator shows, degrees: `atan(sinh(pi))` rounded as EPSG:3857 does.
  public static let maxLatitude = 85.051_128_78
  /// Valid zoom levels, fractional, as Google Maps and OpenStreetMap tile servers use them.
  public static let zoomRange: ClosedRange<Double> = 0...22

  /// Clamps a latitude in degrees to `-maxLatitude...maxLatitude`; non-finite values become 0.
  public static func clampLatitude(_ latitude: Double) -> Double {
    guard latitude.isFinite else { return 0 }
    return min(max(latitude, -maxLatitude), maxLatitude)
  }

  /// Width (and height) of the whole world at `zoom`, points: `256 * 2^zoom`.
  public static func worldSize(zoom: Double) -> Double {
    tileSize * pow(2, zoom)
  }

  /// Ground distance covered by one point at `latitude` (degrees, clamped) and `zoom`, metres:
  /// `156543.03392804097 * cos(latitude) / 2^zoom` (OSM wiki "Zoom levels").
  public static func metresPerPoint(latitude: Double, zoom: Double) -> Double {
    metresPerPointAtZoomZero * cos(clampLatitude(latitude) * .pi / 180) / pow(2, zoom)
  }

  /// Normalised Web Mercator x of a longitude in degrees: `0` at 180 W, `1` at 180 E.
  public static func x(longitude: Double) -> Double {
    (longitude + 180) / 360
  }

  /// Normalised Web Mercator y of a latitude in degrees (clamped): `0` at the north edge, `1` at
  /// the south edge.
  public static func y(latitude: Double) -> Double {
    (1 - mercatorY(latitude: latitude) / .pi) / 2
  }

  /// Longitude in degrees of a normalised x.
  public static func longitude(x: Double) -> Double {
    x * 360 - 180
  }

  /// Latitude in degrees of a normalised y: `atan(sinh(pi * (1 - 2y)))`.
  public static func latitude(y: Double) -> Double {
    latitude(mercatorY: .pi * (1 - 2 * y))
  }

  /// Mercator ordinate in radians of a latitude in degrees (clamped): `asinh(tan(lat))`.
  public static func mercatorY(latitude: Double) -> Double {
    asinh(tan(clampLatitude(latitude) * .pi / 180))
  }

  /// Latitude in degrees of a Mercator ordinate in radians (the Gudermannian function), clamped.
  public static func latitude(mercatorY: Double) -> Double {
    clampLatitude(atan(sinh(mercatorY)) * 180 / .pi)
  }
}
