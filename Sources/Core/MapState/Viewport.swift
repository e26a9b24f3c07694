import LocationModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Size of the map view, points (the unit of a 256-point tile).
///
/// Both sides are finite and in `1...16384`; the default is 800 x 600.
public struct ViewportSize: Sendable, Hashable {
  /// Width, points, `1...16384`.
  public var width: Double
  /// Height, points, `1...16384`.
  public var height: Double

  /// Largest accepted side, points.
  public static let maxSide = 16_384.0
  /// 800 x 600 points.
  public static let `default` = ViewportSize(width: 800, height: 600)

  /// Creates a size in points; not validated (see ``isValid``).
  public init(width: Double, height: Double) {
    self.width = width
    self.height = height
  }

  /// Whether both sides are finite and in `1...16384`.
  public var isValid: Bool {
    width.isFinite && height.isFinite && (1...Self.maxSide).contains(width)
      && (1...Self.maxSide).contains(height)
  }
}

/// Extent of a region in degrees, as MapKit's `MKCoordinateSpan`.
///
/// `latitudeDelta` is north edge minus south edge, `0 < latitudeDelta <= 180`;
/// `longitudeDelta` is east edge minus west edge, `0 < longitudeDelta <= 360`.
public struct CoordinateSpan: Sendable, Hashable {
  /// North-south extent, degrees, `(0, 180]`.
  public var latitudeDelta: Double
  /// East-west extent, degrees, `(0, 360]`.
  public var longitudeDelta: Double

  /// Creates a span in degrees; not validated (see ``isValid``).
  public init(latitudeDelta: Double, longitudeDelta: Double) {
    self.latitudeDelta = latitudeDelta
    self.longitudeDelta = longitudeDelta
  }

  /// Whether both deltas are finite, positive and at most 180 (latitude) and 360 (longitude).
  public var isValid: Bool {
    latitudeDelta.isFinite && longitudeDelta.isFinite && latitudeDelta > 0 && latitudeDelta <= 180
      && longitudeDelta > 0 && longitudeDelta <= 360
  }
}

/// A region as MapKit's `MKCoordinateRegion`: a center (WGS84 degrees) and a span in degrees.
///
/// The span is measured around the center in Web Mercator: the north and south edges are at equal
/// distances in points above and below the center, so in degrees they are not symmetric away from
/// the equator.
public struct MapRegion: Sendable, Hashable {
  /// Center of the region, WGS84 degrees.
  public var center: Coordinate
  /// Extent of the region, degrees.
  public var span: CoordinateSpan

  /// Creates a region from a center and a span.
  public init(center: Coordinate, span: CoordinateSpan) {
    self.center = center
    self.span = span
  }
}

/// Extent of a region in metres at its center, as MapKit's
/// `MKCoordinateRegion(center:latitudinalMeters:longitudinalMeters:)`.
public struct MetricSpan: Sendable, Hashable {
  /// North-south distance, metres, finite and positive.
  public var latitudinalMetres: Double
  /// East-west distance at the center latitude, metres, finite and positive.
  public var longitudinalMetres: Double

  /// Creates a span in metres; not validated.
  public init(latitudinalMetres: Double, longitudinalMetres: Double) {
    self.latitudinalMetres = latitudinalMetres
    self.longitudinalMetres = longitudinalMetres
  }
}

/// A bounding box in WGS84 degrees, in the order of an RFC 7946 `bbox`: west, south, east, north.
///
/// When the box crosses the antimeridian `west` is greater than `east` (RFC 7946 section 5.2).
public struct GeoBounds: Sendable, Hashable {
  /// Western edge, degrees, `-180...180`.
  public var west: Double
  /// Southern edge, degrees, `-90...90`.
  public var south: Double
  /// Eastern edge, degrees, `-180...180`.
  public var east: Double
  /// Northern edge, degrees, `-90...90`.
  public var north: Double

  /// Creates a bounding box from its edges in degrees.
  public init(west: Double, south: Double, east: Double, north: Double) {
    self.west = west
    self.south = south
    self.east = east
    self.north = north
  }

  /// Whether the box crosses the antimeridian (`west > east`).
  public var crossesAntimeridian: Bool { west > east }
}

/// What a map shows: center, zoom level, size and rotation.
///
/// The zoom level is the Google Maps / OpenStreetMap one: Web Mercator, fractional, `0...22`,
/// 256-point tiles. ``region`` and ``metricSpan`` give the same view as a MapKit region, and
/// ``zoom(fitting:size:)`` goes the other way. The center latitude is clamped to
/// `-85.05112878...85.05112878` (see ``WebMercator``).
public struct Viewport: Sendable, Hashable {
  /// Center of the view, WGS84 degrees; latitude within the Web Mercator limit.
  public private(set) var center: Coordinate
  /// Zoom level, `0...22`, fractional.
  public var zoom: Double
  /// Size of the view, points.
  public var size: ViewportSize
  /// Rotation of the map, degrees true, `0..<360`: the direction that points up on screen
  /// (0 = north up), as MapKit's camera heading.
  public var rotation: Double

  /// The world map at zoom level 2 centered on 0, 0, 800 x 600 points, north up.
  ///
  /// A view needs a center even before anything is known; this shows the whole world, as a
  /// freshly opened Google Maps or OpenStreetMap view does, instead of pretending to know a place.
  public static let `default` = Viewport(
    center: Coordinate(latitude: 0, longitude: 0), zoom: 2, size: .default)

  /// The zoom level the first fix of a tracking session brings a view that is still
  /// ``default`` (center 0, 0, zoom 2) to: 16, street level (about 2.4 m per point at the
  /// equator; OpenStreetMap wiki, "Zoom levels": streets and buildings). A view a client has
  /// moved keeps its zoom level.
  public static let firstFixZoom: Double = 16

  /// Creates a viewport; the center latitude is clamped to the Web Mercator limit and the
  /// rotation is normalised to `0..<360`. Other values are stored as given.
  public init(center: Coordinate, zoom: Double, size: ViewportSize = .default, rotation: Double = 0)
  {
    self.center = Coordinate(latitude: 0, longitude: 0)
    self.zoom = zoom
    self.size = size
    self.rotation = 0
    setCenter(center)
    setRotation(rotation)
  }

  /// Moves the center; the latitude is clamped to the Web Mercator limit.
  public mutating func setCenter(_ coordinate: Coordinate) {
    center = Coordinate(
      latitude: WebMercator.clampLatitude(coordinate.latitude), longitude: coordinate.longitude)
  }

  /// Sets the rotation, degrees true; normalised to `0..<360` (non-finite becomes 0).
  public mutating func setRotation(_ degrees: Double) {
    guard degrees.isFinite else {
      rotation = 0
      return
    }
    let normalised = degrees.truncatingRemainder(dividingBy: 360)
    rotation = normalised < 0 ? normalised + 360 : normalised
    if rotation == 360 { rotation = 0 }
  }

  /// Ground distance of one point at the center, metres (``WebMercator/metresPerPoint(latitude:zoom:)``).
  public var metresPerPoint: Double {
    WebMercator.metresPerPoint(latitude: center.latitude, zoom: zoom)
  }

  /// Half the view height as a Mercator ordinate difference, radians.
  private static func halfHeightMercator(height: Double, zoom: Double) -> Double {
    height / 2 * 2 * .pi / WebMercator.worldSize(zoom: zoom)
  }

  /// The span in degrees of the unrotated view.
  ///
  /// - `longitudeDelta = width * 360 / (256 * 2^zoom)`, at most 360.
  /// - `latitudeDelta = north - south`, where `north/south = atan(sinh(Y +/- d))`,
  ///   `Y = asinh(tan(center latitude))` and `d = (height / 2) * 2 pi / (256 * 2^zoom)`;
  ///   each edge is clamped to the Web Mercator limit, so spans near the poles shrink.
  public var span: CoordinateSpan {
    let world = WebMercator.worldSize(zoom: zoom)
    let longitudeDelta = min(size.width * 360 / world, 360)
    let y = WebMercator.mercatorY(latitude: center.latitude)
    let d = Self.halfHeightMercator(height: size.height, zoom: zoom)
    let north = WebMercator.latitude(mercatorY: y + d)
    let south = WebMercator.latitude(mercatorY: y - d)
    return CoordinateSpan(latitudeDelta: north - south, longitudeDelta: longitudeDelta)
  }

  /// The view as a MapKit-style region: ``center`` and ``span``.
  public var region: MapRegion { MapRegion(center: center, span: span) }

  /// The view's extent in metres at the center: `metresPerPoint * height` by
  /// `metresPerPoint * width`.
  public var metricSpan: MetricSpan {
    MetricSpan(
      latitudinalMetres: metresPerPoint * size.height,
      longitudinalMetres: metresPerPoint * size.width)
  }

  /// Zoom level at which `longitudeDelta` degrees fill `width` points:
  /// `log2(width * 360 / (256 * longitudeDelta))`. Not clamped.
  public static func zoom(forLongitudeDelta longitudeDelta: Double, width: Double) -> Double {
    log2(width * 360 / (WebMercator.tileSize * longitudeDelta))
  }

  /// Zoom level at which `latitudeDelta` degrees around `centerLatitude` fill `height` points.
  ///
  /// Inverse of ``span``: with `Y = asinh(tan(center))`, the half height `d` in Mercator radians
  /// satisfies `sinh(d) = cosh(Y) * tan(latitudeDelta / 2)` (from the tangent of a difference of
  /// two Gudermannians), and `zoom = log2(height * pi / (256 * d))`. Not clamped.
  public static func zoom(
    forLatitudeDelta latitudeDelta: Double, centerLatitude: Double, height: Double
  )
    -> Double
  {
    let y = WebMercator.mercatorY(latitude: centerLatitude)
    let d = asinh(cosh(y) * tan(latitudeDelta * .pi / 360))
    return log2(height * .pi / (WebMercator.tileSize * d))
  }

  /// Zoom level at which `metres` of ground at `latitude` fill `points` points:
  /// `log2(156543.03392804097 * cos(latitude) * points / metres)`. Not clamped.
  public static func zoom(forMetres metres: Double, latitude: Double, points: Double) -> Double {
    log2(
      WebMercator.metresPerPointAtZoomZero * cos(WebMercator.clampLatitude(latitude) * .pi / 180)
        * points
        / metres)
  }

  /// The zoom level that shows all of `region` in a view of `size`, as MapKit's
  /// `regionThatFits`: the smaller of the zoom levels fitting the latitude and the longitude span,
  /// clamped to `0...22`.
  public static func zoom(fitting region: MapRegion, size: ViewportSize) -> Double {
    let byLongitude = zoom(forLongitudeDelta: region.span.longitudeDelta, width: size.width)
    let byLatitude = zoom(
      forLatitudeDelta: region.span.latitudeDelta, centerLatitude: region.center.latitude,
      height: size.height)
    return clampZoom(min(byLongitude, byLatitude))
  }

  /// The zoom level that shows `span` metres around `center` in a view of `size`: the smaller of
  /// the two fitting zoom levels, clamped to `0...22`.
  public static func zoom(fitting span: MetricSpan, center: Coordinate, size: ViewportSize)
    -> Double
  {
    let byWidth = zoom(
      forMetres: span.longitudinalMetres, latitude: center.latitude, points: size.width)
    let byHeight = zoom(
      forMetres: span.latitudinalMetres, latitude: center.latitude, points: size.height)
    return clampZoom(min(byWidth, byHeight))
  }

  /// Clamps a zoom level to `0...22`; NaN becomes 0.
  public static func clampZoom(_ zoom: Double) -> Double {
    guard !zoom.isNaN else { return 0 }
    return min(max(zoom, WebMercator.zoomRange.lowerBound), WebMercator.zoomRange.upperBound)
  }

  /// Where `coordinate` appears in the view, points from the top-left corner (x right, y down),
  /// taking ``rotation`` into account. Longitudes take the copy of the world nearest the center.
  public func point(for coordinate: Coordinate) -> (x: Double, y: Double) {
    let world = WebMercator.worldSize(zoom: zoom)
    var dxWorld =
      WebMercator.x(longitude: coordinate.longitude) - WebMercator.x(longitude: center.longitude)
    dxWorld -= dxWorld.rounded()  // nearest copy: -0.5...0.5
    let dx = dxWorld * world
    let dy =
      (WebMercator.y(latitude: coordinate.latitude) - WebMercator.y(latitude: center.latitude))
      * world
    let angle = -rotation * .pi / 180
    let rx = dx * cos(angle) - dy * sin(angle)
    let ry = dx * sin(angle) + dy * cos(angle)
    return (size.width / 2 + rx, size.height / 2 + ry)
  }

  /// The WGS84 bounding box of everything visible, including the corners of a rotated view.
  ///
  /// Latitudes are clamped to the Web Mercator limit; when the view is wider than the world the
  /// box spans `-180...180`; when it crosses the antimeridian `west > east`.
  public var bounds: GeoBounds {
    let world = WebMercator.worldSize(zoom: zoom)
    let angle = rotation * .pi / 180
    let cx = WebMercator.x(longitude: center.longitude)
    let cy = WebMercator.y(latitude: center.latitude)
    var minDX = Double.infinity
    var maxDX = -Double.infinity
    var minY = Double.infinity
    var maxY = -Double.infinity
    for (sx, sy) in [(-1.0, -1.0), (1, -1), (1, 1), (-1, 1)] {
      let px = sx * size.width / 2
      let py = sy * size.height / 2
      let dx = (px * cos(angle) - py * sin(angle)) / world
      let dy = (px * sin(angle) + py * cos(angle)) / world
      minDX = min(minDX, dx)
      maxDX = max(maxDX, dx)
      minY = min(minY, cy + dy)
      maxY = max(maxY, cy + dy)
    }
    let north = WebMercator.latitude(y: max(minY, 0))
    let south = WebMercator.latitude(y: min(maxY, 1))
    guard maxDX - minDX < 1 else {
      return GeoBounds(west: -180, south: south, east: 180, north: north)
    }
    return GeoBounds(
      west: Self.wrapLongitude(WebMercator.longitude(x: cx + minDX)), south: south,
      east: Self.wrapLongitude(WebMercator.longitude(x: cx + maxDX)), north: north)
  }

  /// Wraps a longitude in degrees into `-180...180` (180 stays 180).
  static func wrapLongitude(_ longitude: Double) -> Double {
    guard longitude < -180 || longitude > 180 else { return longitude }
    var wrapped = (longitude + 180).truncatingRemainder(dividingBy: 360)
    if wrapped < 0 { wrapped += 360 }
    return wrapped - 180
  }
}
