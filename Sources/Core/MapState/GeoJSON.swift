import JSON
import LocationModel
import Regions

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// GeoJSON (RFC 7946) rendering of the map state.
public enum GeoJSON {
  /// Decimal places of coordinates: 7, about 1 cm (RFC 7946 section 11.2 suggests 6 is enough).
  public static let coordinateDigits = 7

  /// The map state as one GeoJSON FeatureCollection, compact, deterministic (fixed member order,
  /// 7 decimals).
  ///
  /// Features, in order:
  /// 1. id `"viewport"`: the visible area as a Polygon (counterclockwise exterior ring, the
  ///    right-hand rule of RFC 7946 section 3.1.6), or a MultiPolygon of two parts cut at the
  ///    antimeridian (section 3.1.9); `bbox` = the view's [west, south, east, north];
  ///    properties `kind` "viewport", `zoom`, `rotation`, `mode`, `center` [lon, lat].
  /// 2. id `"track"`: the recent track as a LineString, oldest first (only with 2 or more points,
  ///    as section 3.1.4 requires); properties `kind` "track", `points`.
  /// 3. Each annotation as a Point; feature `id` and properties `id`, `title`, and `subtitle` /
  ///    `kind` when set.
  /// 4. Each monitored region (``MapRenderState/regions``, sorted by id): feature `id` the
  ///    region's id; properties `kind` "region", `id`, `title` (or `null`), `state` (`unknown`,
  ///    `inside`, `outside`), `shape` (`circle` or `polygon`), for a circle `radius` (metres) and
  ///    `center` [lon, lat], and `dwell` (seconds) when set. The geometry is the engine's
  ///    (``RegionGeoJSON/feature(_:)``): a Polygon with closed rings following the right-hand
  ///    rule, a circle as the polygon through 72 points on it.
  ///
  /// Positions are [longitude, latitude] (section 3.1.1). The collection `bbox` is the view's
  /// bounding box, widened (without crossing the antimeridian) to include features outside it.
  public static func document(for state: MapRenderState) -> String {
    json(for: state).jsonString
  }

  /// ``document(for:)``, refused before it is built when it would be longer than `maxBytes`
  /// bytes of UTF-8: first from a cheap lower bound counted from the regions' vertices (a
  /// circle's fixed ``RegionGeoJSON/circlePoints``), the annotations' texts and the track's
  /// points, then while building (it stops as soon as the features reach `maxBytes`). So at
  /// most about `maxBytes` of text is built, whatever the number of regions.
  ///
  /// - Throws: ``RenderTooLarge`` (format `geojson`) naming the largest part.
  public static func document(for state: MapRenderState, maxBytes: Int) throws(RenderTooLarge) -> String {
    let regionBytes = state.regions.reduce(0) { $0 + RenderEstimate.geoJSONBytes($1.region) }
    let annotationBytes = state.snapshot.annotations.reduce(0) { $0 + RenderEstimate.geoJSONBytes($1) }
    let trackBytes = 8 * state.track.count
    let estimate = 400 + regionBytes + annotationBytes + trackBytes
    let part = RenderEstimate.largest(regions: regionBytes, annotations: annotationBytes, track: trackBytes)
    if estimate > maxBytes {
      throw RenderTooLarge(
        format: "geojson", bytesAtLeast: estimate, limit: maxBytes, regions: state.regions.count, part: part)
    }
    guard let value = json(for: state, budget: maxBytes) else {
      throw RenderTooLarge(
        format: "geojson", bytesAtLeast: maxBytes + 1, limit: maxBytes, regions: state.regions.count, part: part)
    }
    let text = value.jsonString
    if text.utf8.count > maxBytes {
      throw RenderTooLarge(
        format: "geojson", bytesAtLeast: text.utf8.count, limit: maxBytes, regions: state.regions.count, part: part)
    }
    return text
  }

  /// ``document(for:)`` as a JSON value.
  public static func json(for state: MapRenderState) -> JSONValue {
    json(for: state, budget: nil) ?? .object([])
  }

  /// ``json(for:)``, or `nil` as soon as the encoded regions alone exceed `budget` bytes.
  static func json(for state: MapRenderState, budget: Int?) -> JSONValue? {
    let viewport = state.viewport
    let bounds = viewport.bounds
    var features: [JSONValue] = []

    let viewportGeometry: JSONValue
    if bounds.crossesAntimeridian {
      let west = ring(west: bounds.west, south: bounds.south, east: 180, north: bounds.north)
      let east = ring(west: -180, south: bounds.south, east: bounds.east, north: bounds.north)
      viewportGeometry = geometry("MultiPolygon", [[west], [east]])
    } else {
      let exterior = ring(
        west: bounds.west, south: bounds.south, east: bounds.east, north: bounds.north)
      viewportGeometry = geometry("Polygon", [exterior])
    }
    features.append(
      .object([
        JSONMember("type", "Feature"), JSONMember("id", "viewport"), JSONMember("bbox", bbox(bounds)),
        JSONMember("geometry", viewportGeometry),
        JSONMember(
          "properties",
          .object([
            JSONMember("kind", "viewport"), JSONMember("zoom", fixed(viewport.zoom, 6)),
            JSONMember("rotation", fixed(viewport.rotation, 2)),
            JSONMember("mode", .string(state.snapshot.mode.rawValue)),
            JSONMember("center", position(viewport.center)),
          ])),
      ]))

    if state.track.count >= 2 {
      features.append(
        .object([
          JSONMember("type", "Feature"), JSONMember("id", "track"),
          JSONMember("geometry", geometry("LineString", .array(state.track.map(position)))),
          JSONMember(
            "properties",
            .object([JSONMember("kind", "track"), JSONMember("points", .int(Int64(state.track.count)))])),
        ]))
    }

    for annotation in state.snapshot.annotations {
      var properties = [
        JSONMember("id", .string(annotation.id)), JSONMember("title", .string(annotation.title)),
      ]
      if let subtitle = annotation.subtitle { properties.append(JSONMember("subtitle", .string(subtitle))) }
      if let kind = annotation.kind { properties.append(JSONMember("kind", .string(kind))) }
      features.append(
        .object([
          JSONMember("type", "Feature"), JSONMember("id", .string(annotation.id)),
          JSONMember("geometry", geometry("Point", position(annotation.coordinate))),
          JSONMember("properties", .object(properties)),
        ]))
    }

    var regionPoints: [Coordinate] = []
    var regionBytes = 0
    for status in state.regions {
      let feature = regionFeature(status)
      if let budget {
        regionBytes += feature.encoded.count + 1
        if regionBytes > budget { return nil }
      }
      features.append(feature)
      regionPoints += extremePoints(status.region.shape)
    }

    let collectionBounds = widened(
      bounds, toInclude: state.track + state.snapshot.annotations.map(\.coordinate) + regionPoints)
    return .object([
      JSONMember("type", "FeatureCollection"), JSONMember("bbox", bbox(collectionBounds)),
      JSONMember("features", .array(features)),
    ])
  }

  /// The feature of one monitored region (see ``json(for:)``, item 4).
  static func regionFeature(_ status: RegionStatus) -> JSONValue {
    let region = status.region
    var properties = [
      JSONMember("kind", "region"), JSONMember("id", .string(region.id)), JSONMember("title", .string(region.title)),
      JSONMember("state", .string(status.state.rawValue)),
    ]
    switch region.shape {
    case .circle(let center, let radius):
      properties.append(JSONMember("shape", "circle"))
      properties.append(JSONMember("radius", .number(radius)))
      properties.append(JSONMember("center", position(center)))
    case .polygon:
      properties.append(JSONMember("shape", "polygon"))
    }
    // The engine's geometry: rings closed, exterior counterclockwise and holes clockwise (RFC
    // 7946 section 3.1.6), a circle as the polygon through points on it.
    let regionGeometry = RegionGeoJSON.feature(status)["geometry"] ?? .null
    if let dwell = region.dwell { properties.append(JSONMember("dwell", .number(dwell))) }
    return .object([
      JSONMember("type", "Feature"), JSONMember("id", .string(region.id)), JSONMember("geometry", regionGeometry),
      JSONMember("properties", .object(properties)),
    ])
  }

  /// Points that bound a shape: a polygon's exterior vertices, a circle's northernmost,
  /// southernmost, easternmost and westernmost points (spherical approximation, for a bbox).
  static func extremePoints(_ shape: RegionShape) -> [Coordinate] {
    switch shape {
    case .polygon(let exterior, _):
      return exterior
    case .circle(let center, let radius):
      let latitudeDelta = radius / 111_320
      let north = min(90, center.latitude + latitudeDelta)
      let south = max(-90, center.latitude - latitudeDelta)
      let cosine = cos(center.latitude * .pi / 180)
      guard cosine > 1e-6, latitudeDelta / cosine < 180 else {
        return [Coordinate(latitude: north, longitude: -180), Coordinate(latitude: south, longitude: 180)]
      }
      var west = center.longitude - latitudeDelta / cosine
      var east = center.longitude + latitudeDelta / cosine
      if west < -180 { west += 360 }
      if east > 180 { east -= 360 }
      return [
        Coordinate(latitude: north, longitude: center.longitude), Coordinate(latitude: south, longitude: center.longitude),
        Coordinate(latitude: center.latitude, longitude: west), Coordinate(latitude: center.latitude, longitude: east),
      ]
    }
  }

  /// `{"type":TYPE,"coordinates":COORDINATES}`.
  static func geometry(_ type: String, _ coordinates: JSONValue) -> JSONValue {
    .object([JSONMember("type", .string(type)), JSONMember("coordinates", coordinates)])
  }

  /// A number written with exactly `digits` decimals (``TextFormat/fixed(_:_:)``).
  static func fixed(_ value: Double, _ digits: Int) -> JSONValue {
    .raw(Array(TextFormat.fixed(value, digits).utf8))
  }

  /// `[lon,lat]` with fixed decimals.
  static func position(_ coordinate: Coordinate) -> JSONValue {
    [fixed(coordinate.longitude, coordinateDigits), fixed(coordinate.latitude, coordinateDigits)]
  }

  /// A closed counterclockwise rectangle ring: SW, SE, NE, NW, SW.
  static func ring(west: Double, south: Double, east: Double, north: Double) -> JSONValue {
    let corners = [(west, south), (east, south), (east, north), (west, north), (west, south)]
    return .array(corners.map { position(Coordinate(latitude: $0.1, longitude: $0.0)) })
  }

  /// `[west,south,east,north]`.
  static func bbox(_ bounds: GeoBounds) -> JSONValue {
    .array([bounds.west, bounds.south, bounds.east, bounds.north].map { fixed($0, coordinateDigits) })
  }

  /// The box grown to contain every coordinate; a box across the antimeridian that would need
  /// to grow in longitude becomes -180...180.
  static func widened(_ bounds: GeoBounds, toInclude coordinates: [Coordinate]) -> GeoBounds {
    var result = bounds
    for coordinate in coordinates {
      result.south = min(result.south, coordinate.latitude)
      result.north = max(result.north, coordinate.latitude)
      if result.crossesAntimeridian {
        if coordinate.longitude < result.west && coordinate.longitude > result.east {
          result.west = -180
          result.east = 180
        }
      } else {
        result.west = min(result.west, coordinate.longitude)
        result.east = max(result.east, coordinate.longitude)
      }
    }
    return result
  }
}
