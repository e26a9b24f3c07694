@_exported import LocationModel
@_exported import LocationProtocol
@_exported import Regions

/// The map state the daemon keeps (what `locationctl --json map` prints), as a value.
///
/// The daemon's map is shared: every client, the web page and the MQTT fleet view see and change
/// the same one (docs/map-state.md).
public struct MapStateSnapshot: Sendable, Hashable {
  /// Map centre, WGS84 degrees.
  public var center: Coordinate
  /// Zoom level, Web Mercator, `0...22`.
  public var zoom: Double
  /// How the map follows the current location (MapKit's `MKUserTrackingMode`).
  public var mode: UserTrackingMode
  /// The annotations: the current location (id ``Annotation/locationID``) first when there is a
  /// fix, then the others in the order they were first added.
  public var annotations: [Annotation]
  /// Rotation, degrees true, `0..<360` (the course over ground in `followWithHeading`).
  public var rotation: Double
  /// Whether a tracking session runs.
  public var tracking: Bool
  /// For a change (``LocationClient/mapChanges``): what changed, by the `what` names of
  /// docs/PROTOCOL.md (`center`, `zoom`, `mode`, `annotationAdded`, `annotationReplaced`,
  /// `annotationRemoved`, `location`, `trackingStarted`, `trackingStopped`, ...), in order;
  /// empty for a state that was asked for.
  public var changes: [String]
  /// For a change: the annotations it added, replaced or removed, by identifier, in order (the
  /// `annotationAdded`, `annotationReplaced` and `annotationRemoved` entries of ``changes``);
  /// empty otherwise.
  public var annotationChanges: [AnnotationChange]

  /// One annotation change of a map change, by identifier; the added or replaced annotation
  /// itself is in ``MapStateSnapshot/annotations``.
  public enum AnnotationChange: Sendable, Hashable {
    /// An annotation with a new identifier was added.
    case added(id: String)
    /// An annotation replaced the one with the same identifier.
    case replaced(id: String)
    /// The annotation with this identifier was removed.
    case removed(id: String)
  }

  /// Creates a snapshot.
  public init(
    center: Coordinate, zoom: Double, mode: UserTrackingMode, annotations: [Annotation],
    rotation: Double = 0,
    tracking: Bool = false, changes: [String] = [], annotationChanges: [AnnotationChange] = []
  ) {
    self.center = center
    self.zoom = zoom
    self.mode = mode
    self.annotations = annotations
    self.rotation = rotation
    self.tracking = tracking
    self.changes = changes
    self.annotationChanges = annotationChanges
  }

  /// The snapshot of a `MAP` reply or event (docs/PROTOCOL.md, "map").
  ///
  /// - Throws: ``LocationClientError/Code/badReply`` when a required member is missing or out of
  ///   range.
  init(map object: JSONValue) throws(LocationClientError) {
    guard let center = Wire.coordinate(object["center"]), let zoom = object["zoom"]?.doubleValue,
      let modeName = object["mode"]?.stringValue, let mode = UserTrackingMode(rawValue: modeName),
      let list = object["annotations"]?.arrayValue
    else {
      throw Wire.bad("a MAP object without center, zoom, mode or annotations", object)
    }
    var annotations: [Annotation] = []
    for item in list {
      guard let id = item["id"]?.stringValue, let coordinate = Wire.coordinate(item) else {
        throw Wire.bad("an annotation without id, lat or lon", object)
      }
      annotations.append(
        Annotation(
          id: id, coordinate: coordinate, title: item["title"]?.stringValue ?? "",
          subtitle: item["subtitle"]?.stringValue, kind: item["kind"]?.stringValue))
    }
    self.init(
      center: center, zoom: zoom, mode: mode, annotations: annotations,
      rotation: object["rotation"]?.doubleValue ?? 0,
      tracking: object["tracking"]?.boolValue ?? false,
      changes: object["changes"]?.arrayValue?.compactMap { $0["what"]?.stringValue } ?? [],
      annotationChanges: object["changes"]?.arrayValue?.compactMap { change in
        guard let id = change["id"]?.stringValue else { return nil }
        switch change["what"]?.stringValue {
        case "annotationAdded": return .added(id: id)
        case "annotationReplaced": return .replaced(id: id)
        case "annotationRemoved": return .removed(id: id)
        default: return nil
        }
      } ?? [])
  }
}

/// What `status` answers (docs/PROTOCOL.md, "status").
public struct ServiceStatus: Sendable, Hashable {
  /// This connection's authorization.
  public var authorization: AuthorizationStatus
  /// Whether the caller tracks: its user's `start` is in force, or this connection watches.
  public var tracking: Bool
  /// Whether the daemon's backend runs, for anyone.
  public var backendActive: Bool
  /// The backend URI, e.g. `gpsd://localhost:2947`, `simulate`, `replay:/path/log.nmea`.
  public var backendURI: String
  /// The backend's last state.
  public var backendState: BackendStatus
  /// The backend's last human-readable detail, if any.
  public var backendDetail: String?
  /// The first location with a position since tracking started; `nil` without one (or when not
  /// authorized): never a made-up coordinate.
  public var initialLocation: Location?
  /// The newest location with a position; `nil` without one.
  public var currentLocation: Location?
  /// Seconds since the current location arrived, on the daemon's monotonic clock; `nil` without one.
  public var age: Double?
  /// Whether the current location is stale: the source's newest epoch had no position (the
  /// receiver says it has no fix; ``currentLocation`` is the last one known), or it is older
  /// than 5 s.
  public var isStale: Bool
  /// Connected clients.
  public var clients: Int
  /// The reply as received (for members this type does not name, such as `userTracking`, `http`).
  public var json: JSONValue

  /// The status of a `STATUS` reply.
  ///
  /// - Throws: ``LocationClientError/Code/badReply`` for a reply without its required members.
  init(_ reply: JSONValue) throws(LocationClientError) {
    guard let name = reply["authorization"]?.stringValue,
      let authorization = AuthorizationStatus(rawValue: name),
      let tracking = reply["tracking"]?.boolValue, let backend = reply["backend"],
      let uri = backend["uri"]?.stringValue, let stateName = backend["state"]?.stringValue,
      let state = BackendStatus(rawValue: stateName)
    else { throw Wire.bad("a STATUS reply without authorization, tracking or backend", reply) }
    self.authorization = authorization
    self.tracking = tracking
    backendActive = reply["backendActive"]?.boolValue ?? false
    backendURI = uri
    backendState = state
    backendDetail = backend["detail"]?.stringValue
    initialLocation = reply["initial"].flatMap(Wire.location)
    currentLocation = reply["current"].flatMap(Wire.location)
    age = reply["age"]?.doubleValue
    isStale = reply["stale"]?.boolValue ?? false
    clients = reply["clients"]?.intValue ?? 0
    json = reply
  }
}

/// Where a replay stands after a control (docs/PROTOCOL.md, "replay").
public struct ReplayStatus: Sendable, Hashable {
  /// `playing`, `paused` or `endOfData`.
  public var state: String
  /// Speed factor (1 = real time, 0 = as fast as possible).
  public var speed: Double
  /// Seconds of log time since the log's first epoch; `nil` before the first epoch.
  public var position: Double?
}

/// A region transition (CoreLocation's `CLMonitor` event): the `REGION` event.
public struct RegionEvent: Sendable, Hashable {
  /// The region's identifier.
  public var identifier: String
  /// `enter`, `exit` or `dwell`.
  public var kind: RegionEventKind
  /// The deciding fix's time, milliseconds since 1970-01-01 UTC (on its source's timeline).
  public var time: Int64
  /// The deciding fix (for `dwell`, the last one).
  public var location: Location
}

/// Reading the daemon's JSON into the model's types.
enum Wire {
  /// A `badReply` error quoting (the start of) `value`.
  static func bad(_ what: String, _ value: JSONValue) -> LocationClientError {
    LocationClientError(
      .badReply,
      "locationd sent \(what): \(String(decoding: value.encoded.prefix(200), as: UTF8.self))")
  }

  /// `{"lat":..,"lon":..}` (or any object with both) within range, else `nil`.
  static func coordinate(_ value: JSONValue?) -> Coordinate? {
    guard let latitude = value?["lat"]?.doubleValue, let longitude = value?["lon"]?.doubleValue,
      (-90...90).contains(latitude), (-180...180).contains(longitude)
    else { return nil }
    return Coordinate(latitude: latitude, longitude: longitude)
  }

  /// The location of a TPV object with a position (mode 2 or 3 and `lat`/`lon`); `nil` for
  /// anything else (`null`, a TPV without a position).
  ///
  /// Reads the gpsd TPV members locationd writes (`mode`, `time`, `lat`, `lon`, `altMSL`,
  /// `altHAE`, `speed`, `track`, `climb`, `magvar`, `eph`, `epv`) and the provenance (`backend`,
  /// `source`, `line`, `simulated`, `rolloverWeeks`). `eph`/`epv` become the fix's reported
  /// errors, so ``Fix/eph`` gives back the daemon's figure.
  static func location(_ tpv: JSONValue) -> Location? {
    guard tpv["class"] == "TPV", let modeNumber = tpv["mode"]?.intValue,
      let mode = FixMode(rawValue: modeNumber),
      mode.hasPosition, let coordinate = coordinate(tpv)
    else { return nil }
    var fix = Fix(mode: mode)
    fix.coordinate = coordinate
    if let text = tpv["time"]?.stringValue, let time = milliseconds(iso8601: text) {
      fix.time = time
      fix.timeOfDay = Int32(UTCTime(milliseconds: time).millisecondOfDay)
    }
    fix.altitudeMSL = tpv["altMSL"]?.doubleValue
    if let hae = tpv["altHAE"]?.doubleValue, let msl = fix.altitudeMSL {
      fix.geoidSeparation = hae - msl
    }
    fix.speedOverGround = tpv["speed"]?.doubleValue
    fix.courseOverGround = tpv["track"]?.doubleValue
    fix.climb = tpv["climb"]?.doubleValue
    fix.magneticVariation = tpv["magvar"]?.doubleValue
    fix.reportedEPH = tpv["eph"]?.doubleValue
    fix.reportedEPV = tpv["epv"]?.doubleValue
    let provenance = Provenance(
      backend: tpv["backend"]?.stringValue ?? "", source: tpv["source"]?.stringValue,
      line: tpv["line"]?.intValue,
      isSimulated: tpv["simulated"]?.boolValue ?? false,
      rolloverWeeks: tpv["rolloverWeeks"]?.intValue)
    return Location(fix: fix, provenance: provenance)
  }

  /// Milliseconds since 1970-01-01T00:00:00Z of an ISO 8601 UTC time as TPVs write it,
  /// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (1 to 9 fraction digits: ``UTCTime/Syntax/tpv``); `nil` for
  /// anything else.
  static func milliseconds(iso8601 text: String) -> Int64? {
    UTCTime(iso8601: text, syntax: .tpv)?.milliseconds
  }

  /// The region transition of a `REGION` event; `nil` for a malformed one.
  static func regionEvent(_ event: JSONValue) -> RegionEvent? {
    guard event["class"] == "REGION", let id = event["region"]?.stringValue,
      let kindName = event["event"]?.stringValue, let kind = RegionEventKind(rawValue: kindName),
      let fix = event["fix"], let location = location(fix)
    else { return nil }
    let time = event["time"]?.stringValue.flatMap(milliseconds(iso8601:)) ?? location.fix.time ?? 0
    return RegionEvent(identifier: id, kind: kind, time: time, location: location)
  }
}
