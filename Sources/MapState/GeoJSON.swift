import LocationModel

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
  ///
  /// Positions are [longitude, latitude] (section 3.1.1). The collection `bbox` is the view's
  /// bounding box, widened (without crossing the antimeridian) to include features outside it.
  public static func document(for state: MapRenderState) -> String {
    let viewport = state.viewport
    let bounds = viewport.bounds
    var features: [String] = []

    let viewportGeometry: String
    if bounds.crossesAntimeridian {
      let west = ring(west: bounds.west, south: bounds.south, east: 180, north: bounds.north)
      let east = ring(west: -180, south: bounds.south, east: bounds.east, north: bounds.north)
      viewportGeometry = "{\"type\":\"MultiPolygon\",\"coordinates\":[[\(west)],[\(east)]]}"
    } else {
      let exterior = ring(
        west: bounds.west, south: bounds.south, east: bounds.east, north: bounds.north)
      viewportGeometry = "{\"type\":\"Polygon\",\"coordinates\":[\(exterior)]}"
    }
    features.append(
      "{\"type\":\"Feature\",\"id\":\"viewport\",\"bbox\":\(bbox(bounds)),\"geometry\":\(viewportGeometry),"
        + "\"properties\":{\"kind\":\"viewport\",\"zoom\":\(TextFormat.fixed(viewport.zoom, 6)),"
        + "\"rotation\":\(TextFormat.fixed(viewport.rotation, 2)),"
        + "\"mode\":\(TextFormat.jsonString(state.snapshot.mode.rawValue)),"
        + "\"center\":\(position(viewport.center))}}")

    if state.track.count >= 2 {
      let line = state.track.map(position).joined(separator: ",")
      features.append(
        "{\"type\":\"Feature\",\"id\":\"track\",\"geometry\":{\"type\":\"LineString\",\"coordinates\":[\(line)]},"
          + "\"properties\":{\"kind\":\"track\",\"points\":\(state.track.count)}}")
    }

    for annotation in state.snapshot.annotations {
      var properties =
        "\"id\":\(TextFormat.jsonString(annotation.id)),\"title\":\(TextFormat.jsonString(annotation.title))"
      if let subtitle = annotation.subtitle {
        properties += ",\"subtitle\":\(TextFormat.jsonString(subtitle))"
      }
      if let kind = annotation.kind { properties += ",\"kind\":\(TextFormat.jsonString(kind))" }
      features.append(
        "{\"type\":\"Feature\",\"id\":\(TextFormat.jsonString(annotation.id)),"
          + "\"geometry\":{\"type\":\"Point\",\"coordinates\":\(position(annotation.coordinate))},"
          + "\"properties\":{\(properties)}}")
    }

    let collectionBounds = widened(
      bounds, toInclude: state.track + state.snapshot.annotations.map(\.coordinate))
    return "{\"type\":\"FeatureCollection\",\"bbox\":\(bbox(collectionBounds)),\"features\":["
      + features.joined(separator: ",") + "]}"
  }

  /// `[lon,lat]` with fixed decimals.
  static func position(_ coordinate: Coordinate) -> String {
    "[\(TextFormat.fixed(coordinate.longitude, coordinateDigits)),\(TextFormat.fixed(coordinate.latitude, coordinateDigits))]"
  }

  /// A closed counterclockwise rectangle ring: SW, SE, NE, NW, SW.
  static func ring(west: Double, south: Double, east: Double, north: Double) -> String {
    let corners = [(west, south), (east, south), (east, north), (west, north), (west, south)]
    return "["
      + corners.map { position(Coordinate(latitude: $0.1, longitude: $0.0)) }.joined(separator: ",")
      + "]"
  }

  /// `[west,south,east,north]`.
  static func bbox(_ bounds: GeoBounds) -> String {
    let values = [bounds.west, bounds.south, bounds.east, bounds.north]
    return "[" + values.map { TextFormat.fixed($0, coordinateDigits) }.joined(separator: ",") + "]"
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
