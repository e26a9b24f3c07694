import JSON
import LocationModel
import Regions

/// The map state as clients see it: what `locationctl --json map` prints.
///
/// JSON shape (``json``, the members of the `MAP` reply after `"class"`, in this order; absent
/// optionals left out):
/// ```
/// {"center": {"lat": degrees, "lon": degrees}, "zoom": 0...22,
///  "mode": "none"|"follow"|"followWithHeading",
///  "annotations": [{"id","lat","lon","title","subtitle"?,"kind"?}],
///  "rotation": degrees true, "size": {"width": points, "height": points},
///  "span": {"lat": degrees, "lon": degrees}, "tracking": Bool}
/// ```
/// ``jsonData()`` writes the same members with keys sorted.
/// `annotations` lists the current location (id `"location"`, kind `"location"`) first when
/// there is a fix, then the others in the order they were first added.
public struct MapSnapshot: Sendable, Hashable {
  /// Map center, WGS84 degrees.
  public var center: Coordinate
  /// Zoom level, Web Mercator, `0...22`.
  public var zoom: Double
  /// User-tracking mode.
  public var mode: UserTrackingMode
  /// Annotations: the current location first when there is a fix, then by first insertion.
  public var annotations: [Annotation]
  /// Map rotation, degrees true, `0..<360` (0 = north up).
  public var rotation: Double
  /// Viewport size, points.
  public var size: ViewportSize
  /// Span of the unrotated view in degrees (JSON `lat` = latitudeDelta, `lon` = longitudeDelta).
  public var span: CoordinateSpan
  /// Whether a tracking session is running (between tracking started and stopped).
  public var tracking: Bool

  /// Creates a snapshot of a viewport, mode, ordered annotations and tracking state.
  public init(viewport: Viewport, mode: UserTrackingMode, annotations: [Annotation], tracking: Bool)
  {
    center = viewport.center
    zoom = viewport.zoom
    self.mode = mode
    self.annotations = annotations
    rotation = viewport.rotation
    size = viewport.size
    span = viewport.span
    self.tracking = tracking
  }

  /// The snapshot as a JSON object in the member order of the `MAP` reply (see above).
  public var json: JSONValue {
    .object([
      JSONMember("center", Self.latLon(center.latitude, center.longitude)),
      JSONMember("zoom", .number(zoom)),
      JSONMember("mode", .string(mode.rawValue)),
      JSONMember("annotations", .array(annotations.map(\.json))),
      JSONMember("rotation", .number(rotation)),
      JSONMember(
        "size", .object([JSONMember("width", .number(size.width)), JSONMember("height", .number(size.height))])),
      JSONMember("span", Self.latLon(span.latitudeDelta, span.longitudeDelta)),
      JSONMember("tracking", .bool(tracking)),
    ])
  }

  /// `{"lat":..,"lon":..}`.
  static func latLon(_ latitude: Double, _ longitude: Double) -> JSONValue {
    .object([JSONMember("lat", .number(latitude)), JSONMember("lon", .number(longitude))])
  }

  /// ``json`` with keys sorted, as UTF-8 without whitespace: deterministic (golden files).
  public func jsonData() -> [UInt8] {
    json.sortingKeys().encoded
  }

  /// ``jsonData()`` as a `String`.
  public func jsonString() -> String {
    String(decoding: jsonData(), as: UTF8.self)
  }
}

/// Everything a renderer needs: the snapshot plus the viewport, the recent track and the
/// monitored regions.
public struct MapRenderState: Sendable, Hashable {
  /// The client-facing state.
  public var snapshot: MapSnapshot
  /// The viewport the snapshot describes.
  public var viewport: Viewport
  /// Recent fix positions, oldest first (at most the service's track capacity).
  public var track: [Coordinate]
  /// The current location, `nil` without a fix.
  public var currentLocation: Coordinate?
  /// The monitored regions with their states, sorted by id (keyed by id: one entry per id).
  public var regions: [RegionStatus]

  /// Creates a render state.
  public init(
    snapshot: MapSnapshot, viewport: Viewport, track: [Coordinate], currentLocation: Coordinate?,
    regions: [RegionStatus] = []
  ) {
    self.snapshot = snapshot
    self.viewport = viewport
    self.track = track
    self.currentLocation = currentLocation
    self.regions = regions
  }

  /// Hashes the snapshot, viewport, track, location and each region's id and state (equal
  /// states hash equally; ``RegionStatus`` itself is only `Equatable`).
  public func hash(into hasher: inout Hasher) {
    hasher.combine(snapshot)
    hasher.combine(viewport)
    hasher.combine(track)
    hasher.combine(currentLocation)
    hasher.combine(regions.count)
    for status in regions {
      hasher.combine(status.region)
      hasher.combine(status.state)
    }
  }
}

/// Why the center moved.
public enum CenterReason: String, Sendable, Hashable {
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
public enum MapChange: Sendable, Hashable {
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
  /// The monitored regions changed: one was added, replaced or removed, or changed state.
  case regions

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
    case .regions: return "regions"
    }
  }

  /// `{"what": name, ...details}` with the members sorted by name, as the `changes` of a `MAP`
  /// event carry it: `{"reason":..,"what":"center"}`, `{"from":..,"to":..,"what":"mode"}`,
  /// `{"id":..,"what":"annotationAdded"}`, `{"hasFix":..,"what":"location"}`.
  public var json: JSONValue {
    let what = JSONMember("what", .string(name))
    switch self {
    case .center(let reason): return .object([JSONMember("reason", .string(reason.rawValue)), what])
    case .mode(let from, let to):
      return .object([JSONMember("from", .string(from.rawValue)), JSONMember("to", .string(to.rawValue)), what])
    case .annotationAdded(let id), .annotationReplaced(let id), .annotationRemoved(let id):
      return .object([JSONMember("id", .string(id)), what])
    case .location(let hasFix): return .object([JSONMember("hasFix", .bool(hasFix)), what])
    default: return .object([what])
    }
  }
}

/// One map-state change event: what changed (in the order applied) and the state after it.
///
/// JSON shape: `{"changes": [MapChange], "map": MapSnapshot}`.
public struct MapEvent: Sendable, Hashable {
  /// What changed, in order; never empty.
  public var changes: [MapChange]
  /// The state after the changes.
  public var map: MapSnapshot

  /// Creates an event.
  public init(changes: [MapChange], map: MapSnapshot) {
    self.changes = changes
    self.map = map
  }

  /// The event as one JSON object: `{"changes": [MapChange], "map": MapSnapshot}`.
  public var json: JSONValue {
    .object([JSONMember("changes", .array(changes.map(\.json))), JSONMember("map", map.json)])
  }

  /// ``json`` with keys sorted, as UTF-8 without whitespace.
  public func jsonData() -> [UInt8] {
    json.sortingKeys().encoded
  }
}
