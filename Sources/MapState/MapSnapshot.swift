import LocationModel

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The map state as clients see it: what `locationctl --json map` prints.
///
/// JSON shape (keys sorted, absent optionals left out):
/// ```
/// {"annotations": [{"id","lat","lon","title","subtitle"?,"kind"?}],
///  "center": {"lat": degrees, "lon": degrees}, "mode": "none"|"follow"|"followWithHeading",
///  "rotation": degrees true, "size": {"height": points, "width": points},
///  "span": {"lat": degrees, "lon": degrees}, "tracking": Bool, "zoom": 0...22}
/// ```
/// `annotations` lists the current location (id `"location"`, kind `"location"`) first when
/// there is a fix, then the others in the order they were first added.
public struct MapSnapshot: Sendable, Hashable, Codable {
  /// A position in the snapshot's short form, WGS84 degrees.
  public struct LatLon: Sendable, Hashable, Codable {
    /// Latitude, degrees.
    public var lat: Double
    /// Longitude, degrees.
    public var lon: Double

    /// Creates a position from latitude and longitude in degrees.
    public init(lat: Double, lon: Double) {
      self.lat = lat
      self.lon = lon
    }
  }

  /// A view size, points.
  public struct Size: Sendable, Hashable, Codable {
    /// Width, points.
    public var width: Double
    /// Height, points.
    public var height: Double

    /// Creates a size in points.
    public init(width: Double, height: Double) {
      self.width = width
      self.height = height
    }
  }

  /// Map center, WGS84 degrees.
  public var center: LatLon
  /// Zoom level, Web Mercator, `0...22`.
  public var zoom: Double
  /// User-tracking mode.
  public var mode: UserTrackingMode
  /// Annotations: the current location first when there is a fix, then by first insertion.
  public var annotations: [Annotation]
  /// Map rotation, degrees true, `0..<360` (0 = north up).
  public var rotation: Double
  /// Viewport size, points.
  public var size: Size
  /// Span of the unrotated view in degrees (`lat` = latitudeDelta, `lon` = longitudeDelta).
  public var span: LatLon
  /// Whether a tracking session is running (between tracking started and stopped).
  public var tracking: Bool

  /// Creates a snapshot of a viewport, mode, ordered annotations and tracking state.
  public init(viewport: Viewport, mode: UserTrackingMode, annotations: [Annotation], tracking: Bool)
  {
    center = LatLon(lat: viewport.center.latitude, lon: viewport.center.longitude)
    zoom = viewport.zoom
    self.mode = mode
    self.annotations = annotations
    rotation = viewport.rotation
    size = Size(width: viewport.size.width, height: viewport.size.height)
    let span = viewport.span
    self.span = LatLon(lat: span.latitudeDelta, lon: span.longitudeDelta)
    self.tracking = tracking
  }

  /// The snapshot as one JSON object, UTF-8, keys sorted, no whitespace: deterministic.
  ///
  /// - Throws: `EncodingError` only for a non-finite number, which the service never stores.
  public func jsonData() throws -> Data {
    try Self.encoder.encode(self)
  }

  /// ``jsonData()`` as a `String`.
  public func jsonString() throws -> String {
    String(decoding: try jsonData(), as: UTF8.self)
  }

  /// A sorted-keys encoder; JSONEncoder is a class, so each call gets its own.
  static var encoder: JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
  }
}

/// Everything a renderer needs: the snapshot plus the viewport and the recent track.
public struct MapRenderState: Sendable, Hashable {
  /// The client-facing state.
  public var snapshot: MapSnapshot
  /// The viewport the snapshot describes.
  public var viewport: Viewport
  /// Recent fix positions, oldest first (at most the service's track capacity).
  public var track: [Coordinate]
  /// The current location, `nil` without a fix.
  public var currentLocation: Coordinate?

  /// Creates a render state.
  public init(
    snapshot: MapSnapshot, viewport: Viewport, track: [Coordinate], currentLocation: Coordinate?
  ) {
    self.snapshot = snapshot
    self.viewport = viewport
    self.track = track
    self.currentLocation = currentLocation
  }
}

/// Why the center moved.
public enum CenterReason: String, Sendable, Hashable, Codable {
  /// The first fix of a tracking session.
  case initialFix
  /// An explicit "center on current location" request.
  case centerOnCurrentLocation
  /// A fix while following (or switching to a following mode with a fix known).
  case follow
  /// A client set the center or region.
  case manual
}

/// One thing that changed in the map state.
///
/// JSON shape: `{"what": name, ...}` with `reason` for `center`, `from`/`to` for `mode`,
/// `id` for annotation changes.
public enum MapChange: Sendable, Hashable, Encodable {
  /// The center moved.
  case center(CenterReason)
  /// The zoom level changed.
  case zoom
  /// The viewport size changed.
  case size
  /// The rotation changed.
  case rotation
  /// The user-tracking mode changed.
  case mode(from: UserTrackingMode, to: UserTrackingMode)
  /// An annotation with a new identifier was added.
  case annotationAdded(id: String)
  /// An annotation replaced the one with the same identifier.
  case annotationReplaced(id: String)
  /// An annotation was removed.
  case annotationRemoved(id: String)
  /// The current location (the `"location"` annotation and the track) changed; `hasFix` false
  /// means it disappeared.
  case location(hasFix: Bool)
  /// A tracking session started.
  case trackingStarted
  /// The tracking session stopped.
  case trackingStopped
  /// The state was first delivered to a newly attached renderer (renderers only, never streamed).
  case attached

  /// Short name of the change: the JSON `what` value.
  public var name: String {
    switch self {
    case .center: return "center"
    case .zoom: return "zoom"
    case .size: return "size"
    case .rotation: return "rotation"
    case .mode: return "mode"
    case .annotationAdded: return "annotationAdded"
    case .annotationReplaced: return "annotationReplaced"
    case .annotationRemoved: return "annotationRemoved"
    case .location: return "location"
    case .trackingStarted: return "trackingStarted"
    case .trackingStopped: return "trackingStopped"
    case .attached: return "attached"
    }
  }

  private enum CodingKeys: String, CodingKey {
    case what, reason, from, to, id, hasFix
  }

  /// Encodes `{"what": name, ...details}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(name, forKey: .what)
    switch self {
    case .center(let reason): try container.encode(reason, forKey: .reason)
    case .mode(let from, let to):
      try container.encode(from, forKey: .from)
      try container.encode(to, forKey: .to)
    case .annotationAdded(let id), .annotationReplaced(let id), .annotationRemoved(let id):
      try container.encode(id, forKey: .id)
    case .location(let hasFix): try container.encode(hasFix, forKey: .hasFix)
    default: break
    }
  }
}

/// One map-state change event: what changed (in the order applied) and the state after it.
///
/// JSON shape: `{"changes": [MapChange], "map": MapSnapshot}`.
public struct MapEvent: Sendable, Hashable, Encodable {
  /// What changed, in order; never empty.
  public var changes: [MapChange]
  /// The state after the changes.
  public var map: MapSnapshot

  /// Creates an event.
  public init(changes: [MapChange], map: MapSnapshot) {
    self.changes = changes
    self.map = map
  }

  /// The event as one JSON object, keys sorted, no whitespace.
  public func jsonData() throws -> Data {
    try MapSnapshot.encoder.encode(self)
  }
}
