import NMEA

/// A labelled point on the map, keyed by ``id``, as MapKit's `MKPointAnnotation`.
///
/// JSON shape (also in snapshots and the state file):
/// `{"id": String, "lat": degrees, "lon": degrees, "title": String, "subtitle"?: String, "kind"?: String}`.
public struct Annotation: Sendable, Hashable, Codable {
  /// Identifier, unique on the map: 1...128 characters, no control characters.
  public var id: String
  /// Position, WGS84 degrees.
  public var coordinate: Coordinate
  /// Label shown next to the point, at most 256 characters.
  public var title: String
  /// Second line of the label, at most 256 characters; `nil` when absent.
  public var subtitle: String?
  /// Free-form category a renderer may style by (e.g. `"poi"`, `"waypoint"`), at most 64
  /// characters; `nil` when absent. The mirrored current location has kind `"location"`.
  public var kind: String?

  /// Identifier reserved for the annotation that mirrors the current location.
  public static let locationID = "location"
  /// Longest accepted identifier, characters.
  public static let maxIdentifierLength = 128
  /// Longest accepted title or subtitle, characters.
  public static let maxTextLength = 256
  /// Longest accepted kind, characters.
  public static let maxKindLength = 64

  /// Creates an annotation; not validated (the service validates with ``validate()``).
  public init(
    id: String, coordinate: Coordinate, title: String, subtitle: String? = nil, kind: String? = nil
  ) {
    self.id = id
    self.coordinate = coordinate
    self.title = title
    self.subtitle = subtitle
    self.kind = kind
  }

  private enum CodingKeys: String, CodingKey {
    case id, lat, lon, title, subtitle, kind
  }

  /// Decodes the flat JSON shape `{"id","lat","lon","title","subtitle"?,"kind"?}`.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    id = try container.decode(String.self, forKey: .id)
    coordinate = Coordinate(
      latitude: try container.decode(Double.self, forKey: .lat),
      longitude: try container.decode(Double.self, forKey: .lon))
    title = try container.decode(String.self, forKey: .title)
    subtitle = try container.decodeIfPresent(String.self, forKey: .subtitle)
    kind = try container.decodeIfPresent(String.self, forKey: .kind)
  }

  /// Encodes the flat JSON shape; absent subtitle and kind are left out.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(id, forKey: .id)
    try container.encode(coordinate.latitude, forKey: .lat)
    try container.encode(coordinate.longitude, forKey: .lon)
    try container.encode(title, forKey: .title)
    try container.encodeIfPresent(subtitle, forKey: .subtitle)
    try container.encodeIfPresent(kind, forKey: .kind)
  }

  /// Checks identifier, coordinate and text lengths.
  ///
  /// - Throws: ``MapStateError/invalidIdentifier(_:reason:)``,
  ///   ``MapStateError/invalidCoordinate(latitude:longitude:)`` or ``MapStateError/textTooLong(field:count:limit:)``.
  ///   Does not check the reserved ``locationID``: the service does.
  public func validate() throws(MapStateError) {
    try Self.validateIdentifier(id)
    guard coordinate.isValid else {
      throw .invalidCoordinate(latitude: coordinate.latitude, longitude: coordinate.longitude)
    }
    if title.count > Self.maxTextLength {
      throw .textTooLong(field: "title", count: title.count, limit: Self.maxTextLength)
    }
    if let subtitle, subtitle.count > Self.maxTextLength {
      throw .textTooLong(field: "subtitle", count: subtitle.count, limit: Self.maxTextLength)
    }
    if let kind, kind.count > Self.maxKindLength {
      throw .textTooLong(field: "kind", count: kind.count, limit: Self.maxKindLength)
    }
    // Control characters would reach other users' terminals (escape sequences) and break the
    // one-line text output; they are refused like in identifiers.
    for (field, text) in [("title", title), ("subtitle", subtitle ?? ""), ("kind", kind ?? "")]
    where text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
      throw .controlCharacters(field: field)
    }
  }

  /// Checks that an identifier is 1...128 characters without control characters.
  ///
  /// - Throws: ``MapStateError/invalidIdentifier(_:reason:)``.
  public static func validateIdentifier(_ id: String) throws(MapStateError) {
    if id.isEmpty { throw .invalidIdentifier(id, reason: "empty") }
    if id.count > maxIdentifierLength {
      throw .invalidIdentifier(
        String(id.prefix(32)) + "...", reason: "longer than \(maxIdentifierLength) characters")
    }
    if id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
      throw .invalidIdentifier(id, reason: "contains control characters")
    }
  }
}

/// User-tracking mode, as MapKit's `MKUserTrackingMode`; JSON values `none`, `follow`,
/// `followWithHeading`.
public enum UserTrackingMode: String, Sendable, Hashable, Codable, CaseIterable {
  /// The map does not move with the current location (except on the first fix of a tracking
  /// session and on an explicit "center on current location").
  case none
  /// Every fix moves the center to the current location.
  case follow
  /// As ``follow``, and the map rotates so that the course over ground points up.
  case followWithHeading

  /// Whether fixes move the center.
  public var follows: Bool { self != .none }
}

/// Why a map-state request was refused. Every case has a human-readable ``description``.
public enum MapStateError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A coordinate is not finite or outside latitude `-90...90` / longitude `-180...180` degrees.
  case invalidCoordinate(latitude: Double, longitude: Double)
  /// A zoom level is not finite or outside `0...22`.
  case invalidZoom(Double)
  /// A span in degrees is not finite or outside `(0, 180]` x `(0, 360]`.
  case invalidSpan(latitudeDelta: Double, longitudeDelta: Double)
  /// A span in metres is not finite and positive.
  case invalidMetricSpan(latitudinalMetres: Double, longitudinalMetres: Double)
  /// A viewport size is not finite or outside `1...16384` points.
  case invalidViewportSize(width: Double, height: Double)
  /// A rotation is not finite.
  case invalidRotation(Double)
  /// An annotation identifier is empty, too long or has control characters.
  case invalidIdentifier(String, reason: String)
  /// The identifier is reserved for the mirrored current location (``Annotation/locationID``).
  case reservedIdentifier(String)
  /// A title, subtitle or kind is longer than allowed.
  case textTooLong(field: String, count: Int, limit: Int)
  /// A title, subtitle or kind contains control characters (escape sequences, newlines).
  case controlCharacters(field: String)
  /// No annotation has this identifier.
  case noSuchAnnotation(id: String)
  /// "Center on current location" was asked while there is no fix.
  case noCurrentLocation

  /// A one-line explanation for clients and logs.
  public var description: String {
    switch self {
    case .invalidCoordinate(let latitude, let longitude):
      return
        "invalid coordinate lat=\(latitude) lon=\(longitude): need finite latitude -90...90 and longitude -180...180 degrees"
    case .invalidZoom(let zoom):
      return "invalid zoom level \(zoom): need a finite value in 0...22"
    case .invalidSpan(let latitudeDelta, let longitudeDelta):
      return
        "invalid span latitudeDelta=\(latitudeDelta) longitudeDelta=\(longitudeDelta): need finite degrees in (0, 180] and (0, 360]"
    case .invalidMetricSpan(let latitudinal, let longitudinal):
      return
        "invalid span latitudinalMetres=\(latitudinal) longitudinalMetres=\(longitudinal): need finite positive metres"
    case .invalidViewportSize(let width, let height):
      return "invalid viewport size \(width)x\(height): need finite points in 1...16384"
    case .invalidRotation(let rotation):
      return "invalid rotation \(rotation): need finite degrees"
    case .invalidIdentifier(let id, let reason):
      return "invalid annotation id \"\(id)\": \(reason)"
    case .reservedIdentifier(let id):
      return "annotation id \"\(id)\" is reserved for the current location"
    case .textTooLong(let field, let count, let limit):
      return "annotation \(field) too long: \(count) characters, limit \(limit)"
    case .controlCharacters(let field):
      return "annotation \(field) contains control characters (escape sequences, newlines): use plain text"
    case .noSuchAnnotation(let id):
      return "no annotation with id \"\(id)\""
    case .noCurrentLocation:
      return "no current location: there is no fix"
    }
  }
}
