import JSON
import LocationModel

/// GeoJSON (RFC 7946) input and output of regions.
///
/// Input: a Polygon geometry, a Feature whose geometry is a Polygon, or a FeatureCollection with
/// exactly one such Feature; positions are `[longitude, latitude]` or `[longitude, latitude,
/// altitude]` (the altitude is ignored) in WGS84 degrees; every ring closed (last position equal
/// to the first) with at least 4 positions; the first ring is the exterior, the others holes.
/// Either orientation is accepted (RFC 7946 section 3.1.6 asks parsers not to reject rings by
/// their orientation). One difference from RFC 7946, which draws a line between two positions
/// straight in longitude/latitude: locationd takes every edge as the geodesic (shortest path)
/// between its vertices, so a ring may cross the antimeridian without being cut and may
/// surround a pole. Consecutive equal positions are merged. An object with two members of the same
/// name (RFC 8259 leaves their meaning undefined) is refused. The shape is then checked with
/// ``RegionShape/validate()``.
public enum RegionGeoJSON {
  /// Largest GeoJSON text accepted, bytes: 10 MiB (10,485,760 bytes), checked before parsing.
  public static let maxBytes = 10 * 1024 * 1024

  /// Points of the polygon that approximates a circle in ``feature(_:)``: 72 (every 5 degrees
  /// of azimuth), so the chord error is below 0.1% of the radius.
  public static let circlePoints = 72

  /// Parses a GeoJSON Polygon geometry, a Feature with a Polygon geometry, or a FeatureCollection
  /// with exactly one such Feature (RFC 7946; rules above) into a validated polygon shape.
  ///
  /// - Throws: ``RegionError/fileTooLarge(bytes:limit:)`` above ``maxBytes``,
  ///   ``RegionError/invalidGeoJSON(reason:)`` naming what is wrong (not JSON, an unsupported
  ///   type such as MultiPolygon, wrong nesting, a position out of range, a ring with fewer than 4
  ///   positions or not closed, a member name given twice in one object...), or any error of ``RegionShape/validate()``.
  public static func shape(from bytes: [UInt8]) throws(RegionError) -> RegionShape {
    if bytes.count > maxBytes { throw .fileTooLarge(bytes: bytes.count, limit: maxBytes) }
    let document: JSONValue
    do {
      document = try JSONValue.parse(bytes)
    } catch {
      throw .invalidGeoJSON(reason: "not JSON: \(error.description)")
    }
    // Parsers differ on which of two equal names wins (the first here, the last elsewhere), so
    // the same file would mean different polygons: refuse it, as requests are refused.
    if let path = document.firstDuplicateMemberPath {
      throw .invalidGeoJSON(reason: "duplicate member \"\(path.prefix(200))\": give each member once")
    }
    let polygon = try polygonGeometry(in: document)
    guard let coordinates = polygon["coordinates"]?.arrayValue else {
      throw .invalidGeoJSON(reason: "the Polygon has no \"coordinates\" array")
    }
    guard !coordinates.isEmpty else { throw .invalidGeoJSON(reason: "the Polygon has no rings") }
    var rings: [[Coordinate]] = []
    for (ringIndex, ringValue) in coordinates.enumerated() {
      rings.append(try ring(ringValue, ringIndex))
    }
    let shape = RegionShape.polygon(exterior: rings[0], holes: Array(rings.dropFirst()))
    try shape.validate()
    return shape
  }

  /// The Polygon geometry object inside `document`.
  static func polygonGeometry(in document: JSONValue) throws(RegionError) -> JSONValue {
    guard document.objectMembers != nil else { throw .invalidGeoJSON(reason: "the top level is not an object") }
    guard let type = document["type"]?.stringValue else {
      throw .invalidGeoJSON(reason: "the top-level object has no \"type\" string")
    }
    switch type {
    case "Polygon":
      return document
    case "Feature":
      return try geometry(ofFeature: document, "the Feature")
    case "FeatureCollection":
      guard let features = document["features"]?.arrayValue else {
        throw .invalidGeoJSON(reason: "the FeatureCollection has no \"features\" array")
      }
      guard features.count == 1 else {
        throw .invalidGeoJSON(
          reason: "the FeatureCollection has \(features.count) features: need exactly one Feature with a Polygon (one region per file)")
      }
      guard features[0]["type"]?.stringValue == "Feature" else {
        throw .invalidGeoJSON(reason: "the FeatureCollection's feature is not an object of type \"Feature\"")
      }
      return try geometry(ofFeature: features[0], "the FeatureCollection's feature")
    default:
      throw .invalidGeoJSON(reason: unsupported(type))
    }
  }

  static func unsupported(_ type: String) -> String {
    switch type {
    case "MultiPolygon":
      return "a MultiPolygon is not supported: need a Polygon (make one region per polygon)"
    case "Point", "MultiPoint", "LineString", "MultiLineString", "GeometryCollection":
      return "a \(type) is not supported: need a Polygon (for a circle use the circle region)"
    default:
      return "unknown GeoJSON type \"\(type.prefix(64))\": need a Polygon, a Feature or a FeatureCollection"
    }
  }

  static func geometry(ofFeature feature: JSONValue, _ place: String) throws(RegionError) -> JSONValue {
    guard let geometry = feature["geometry"], geometry.objectMembers != nil else {
      throw .invalidGeoJSON(reason: "\(place) has no geometry object (null or missing)")
    }
    guard let type = geometry["type"]?.stringValue else {
      throw .invalidGeoJSON(reason: "\(place)'s geometry has no \"type\" string")
    }
    guard type == "Polygon" else {
      if type == "Feature" || type == "FeatureCollection" {
        throw .invalidGeoJSON(reason: "\(place)'s geometry is a \(type): a geometry must be a Polygon")
      }
      throw .invalidGeoJSON(reason: "\(place)'s geometry: " + unsupported(type))
    }
    return geometry
  }

  static func ring(_ value: JSONValue, _ ringIndex: Int) throws(RegionError) -> [Coordinate] {
    let name = ringIndex == 0 ? "exterior ring" : "ring \(ringIndex) (hole \(ringIndex))"
    guard let positions = value.arrayValue else {
      throw .invalidGeoJSON(reason: "\(name) is not an array of positions")
    }
    if let first = positions.first, first.doubleValue != nil {
      throw .invalidGeoJSON(
        reason:
          "\(name) is a position, not an array of positions: a Polygon's coordinates nest three deep, [[[longitude, latitude], ...], ...]")
    }
    guard positions.count >= 4 else {
      throw .invalidGeoJSON(
        reason: "\(name) has \(positions.count) positions: a linear ring needs at least 4 (3 vertices and the closing position)")
    }
    var ring: [Coordinate] = []
    ring.reserveCapacity(positions.count)
    for (index, position) in positions.enumerated() {
      guard let numbers = position.arrayValue, numbers.count == 2 || numbers.count == 3 else {
        throw .invalidGeoJSON(
          reason: "\(name) position \(index) is not a [longitude, latitude] or [longitude, latitude, altitude] array")
      }
      guard let longitude = numbers[0].doubleValue, let latitude = numbers[1].doubleValue,
        numbers.count == 2 || numbers[2].doubleValue != nil
      else {
        throw .invalidGeoJSON(reason: "\(name) position \(index) has a member that is not a number")
      }
      guard (-180...180).contains(longitude), (-90...90).contains(latitude) else {
        throw .invalidGeoJSON(
          reason:
            "\(name) position \(index) [\(longitude), \(latitude)] is out of range: positions are [longitude -180...180, latitude -90...90]")
      }
      let coordinate = Coordinate(latitude: latitude, longitude: longitude)
      if let last = ring.last, last == coordinate { continue }
      ring.append(coordinate)
    }
    guard let first = ring.first, let last = ring.last, ring.count > 1, first == last else {
      throw .invalidGeoJSON(reason: "\(name) is not closed: its last position must equal its first (RFC 7946 section 3.1.6)")
    }
    ring.removeLast()
    return ring
  }

  /// A GeoJSON Feature (RFC 7946) for a region and its state, for the map renderers:
  ///
  /// `{"type":"Feature","id":ID,"geometry":{"type":"Polygon","coordinates":[...]},
  ///   "properties":{"id":ID,"title":T|null,"kind":"circle"|"polygon","state":"inside"|...,
  ///   "since":ms|null,"notifyOnEntry":B,"notifyOnExit":B,"dwell":s|null}}`; a circle adds
  /// `"center":[lon,lat]` and `"radius":m` to the properties and its geometry is the polygon
  /// through ``circlePoints`` points on the circle (geodesic direct problem from the center).
  /// Rings are closed and follow the right-hand rule of RFC 7946 section 3.1.6 (exterior
  /// counterclockwise, holes clockwise); polygon edges longer than ``densifySpacing`` are drawn
  /// through added points on the geodesic (see there). Positions are `[longitude, latitude]`, longitudes in
  /// `-180...180`; a ring that crosses the antimeridian is not cut (RFC 7946 section 3.1.9
  /// recommends cutting; renderers that draw straight lines in longitude may draw it the long way
  /// round).
  public static func feature(_ status: RegionStatus) -> JSONValue {
    let region = status.region
    var properties: [JSONMember] = [
      JSONMember("id", .string(region.id)), JSONMember("title", .string(region.title)),
    ]
    let rings: [[Coordinate]]
    switch region.shape {
    case .circle(let center, let radius):
      properties.append(JSONMember("kind", "circle"))
      properties.append(JSONMember("center", RegionMonitor.json(center)))
      properties.append(JSONMember("radius", .number(radius)))
      // Decreasing azimuth: counterclockwise seen from above.
      rings = [
        (0..<circlePoints).map { i in
          let azimuth = -Double(i) * 360 / Double(circlePoints)
          var point = Geodesic.direct(from: center, azimuth: azimuth, distance: radius).coordinate
          point.longitude = normalised(point.longitude)
          return point
        }
      ]
    case .polygon(let exterior, let holes):
      properties.append(JSONMember("kind", "polygon"))
      let counterclockwise = region.prepared.polygon?.counterclockwise ?? []
      rings = ([exterior] + holes).enumerated().map { index, ring in
        let wanted = index == 0
        let isCounterclockwise = index < counterclockwise.count ? counterclockwise[index] : wanted
        return isCounterclockwise == wanted ? ring : ring.reversed()
      }
    }
    properties += [
      JSONMember("state", .string(status.state.rawValue)), JSONMember("since", status.since.map { .int($0) } ?? .null),
      JSONMember("notifyOnEntry", .bool(region.notifyOnEntry)), JSONMember("notifyOnExit", .bool(region.notifyOnExit)),
      JSONMember("dwell", .number(region.dwell)),
    ]
    let total = rings.reduce(0) { $0 + $1.count }
    let coordinates: [JSONValue] = rings.map { ring in
      let drawn = total <= densifyVertexLimit ? densified(ring) : ring
      return .array((drawn + drawn.prefix(1)).map { RegionMonitor.json($0) })
    }
    return .object([
      JSONMember("type", "Feature"), JSONMember("id", .string(region.id)),
      JSONMember("geometry", .object([JSONMember("type", "Polygon"), JSONMember("coordinates", .array(coordinates))])),
      JSONMember("properties", .object(properties)),
    ])
  }

  /// Longest straight piece a polygon edge is drawn with, metres: 5 km. Renderers draw straight
  /// lines in longitude/latitude (or Web Mercator), while locationd's edges are geodesics; an
  /// edge longer than this is drawn through points on the geodesic at most this far apart (at
  /// most 256 pieces per edge, so every edge up to 1,280 km), so the drawing follows the edge to
  /// within a few metres.
  public static let densifySpacing = 5_000.0
  /// Polygons with more vertices than this (20,000) are drawn as given, without added points.
  public static let densifyVertexLimit = 20_000

  /// `ring` with points added along every edge longer than ``densifySpacing``.
  static func densified(_ ring: [Coordinate]) -> [Coordinate] {
    var result: [Coordinate] = []
    result.reserveCapacity(ring.count)
    for index in ring.indices {
      let a = ring[index]
      let b = ring[index + 1 == ring.count ? 0 : index + 1]
      result.append(a)
      let line = Geodesic.inverse(a, b)
      guard line.distance.isFinite, line.distance > densifySpacing else { continue }
      let pieces = min(256, Int((line.distance / densifySpacing).rounded(.up)))
      for k in 1..<pieces {
        var point = Geodesic.direct(
          from: a, azimuth: line.initialAzimuth, distance: line.distance * Double(k) / Double(pieces)
        ).coordinate
        point.longitude = normalised(point.longitude)
        result.append(point)
      }
    }
    return result
  }

  static func normalised(_ longitude: Double) -> Double {
    var value = longitude
    while value > 180 { value -= 360 }
    while value < -180 { value += 360 }
    return value
  }
}
