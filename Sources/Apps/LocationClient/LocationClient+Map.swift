import LocationProtocol
import Synchronization

/// The shared map state, region monitoring and replay controls.
extension LocationClient {
  // MARK: Map

  /// The daemon's map state.
  ///
  /// - Throws: ``LocationClientError``.
  public var mapState: MapStateSnapshot {
    get async throws { try MapStateSnapshot(map: try await call("map")) }
  }

  /// Centres the map on `coordinate` (a centre set by hand: `follow` becomes `none`, as a pan in
  /// MapKit), or with `nil` on the current location (the mode stays).
  ///
  /// - Returns: the map after the change.
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/noFix`` for `nil` without a
  ///   fix, ``LocationClientError/Code/invalidArgument`` for a coordinate out of range).
  @discardableResult public func center(on coordinate: Coordinate?) async throws -> MapStateSnapshot
  {
    guard let coordinate else { return try MapStateSnapshot(map: try await call("center")) }
    return try MapStateSnapshot(
      map: try await call(
        "setCenter",
        [
          JSONMember("lat", .number(coordinate.latitude)),
          JSONMember("lon", .number(coordinate.longitude)),
        ]
      ))
  }

  /// Sets the zoom level (Web Mercator, `0...22`); a zoom by hand switches `follow` to `none`.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/invalidArgument`` out of range).
  @discardableResult public func setZoom(_ level: Double) async throws -> MapStateSnapshot {
    try MapStateSnapshot(map: try await call("zoom", [JSONMember("zoom", .number(level))]))
  }

  /// Sets how the map follows the current location (MapKit's `MKUserTrackingMode`).
  ///
  /// - Throws: ``LocationClientError``.
  @discardableResult public func setUserTrackingMode(_ mode: UserTrackingMode) async throws
    -> MapStateSnapshot
  {
    try MapStateSnapshot(map: try await call("mode", [JSONMember("mode", .string(mode.rawValue))]))
  }

  /// Adds an annotation, or replaces the one with the same identifier (MapKit's
  /// `addAnnotation` with an identity).
  ///
  /// - Parameters:
  ///   - identifier: 1...256 bytes of UTF-8, no control or format characters; `location` and
  ///     `fleet:...` are reserved.
  ///   - coordinate: WGS84 degrees.
  ///   - title: at most 1,024 bytes of UTF-8.
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/invalidArgument``,
  ///   ``LocationClientError/Code/limitExceeded`` beyond 1,000 annotations or 64 KiB of text).
  @discardableResult public func addAnnotation(
    identifier: String, coordinate: Coordinate, title: String = ""
  )
    async throws -> MapStateSnapshot
  {
    let annotation: JSONValue = .object([
      JSONMember("id", .string(identifier)), JSONMember("lat", .number(coordinate.latitude)),
      JSONMember("lon", .number(coordinate.longitude)), JSONMember("title", .string(title)),
    ])
    return try MapStateSnapshot(
      map: try await call("annotate", [JSONMember("annotation", annotation)]))
  }

  /// Removes the annotation with this identifier.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notFound``).
  @discardableResult public func removeAnnotation(identifier: String) async throws
    -> MapStateSnapshot
  {
    try MapStateSnapshot(
      map: try await call("remove", [JSONMember("annotation", .string(identifier))]))
  }

  // MARK: Regions

  /// Starts monitoring `region` (CoreLocation's `CLMonitor.add`), replacing one with the same
  /// identifier (whose state starts again at `unknown`). Transitions arrive on ``regionEvents``.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/invalidArgument`` for a
  ///   region the daemon's rules refuse, with the reason).
  public func monitor(_ region: Region) async throws {
    _ = try await call(
      "region", [JSONMember("action", "add"), JSONMember("region", RegionWire.json(region))])
  }

  /// Stops monitoring the region with this identifier.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notFound``).
  public func stopMonitoring(identifier: String) async throws {
    _ = try await call(
      "region", [JSONMember("action", "remove"), JSONMember("region", .string(identifier))])
  }

  /// The monitored region's state: `unknown` until a fix decides, then `inside` or `outside`.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notFound``).
  public func state(of identifier: String) async throws -> RegionState {
    let reply = try await call(
      "region", [JSONMember("action", "state"), JSONMember("region", .string(identifier))])
    guard let name = reply["region"]?["state"]?.stringValue, let state = RegionState(rawValue: name)
    else {
      throw Wire.bad("a REGION reply without state", reply)
    }
    return state
  }

  // MARK: Replay

  /// Sends a replay control (the backend must be a `replay:` one, and someone must track).
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notReplay``,
  ///   ``LocationClientError/Code/unavailable`` while nothing tracks).
  @discardableResult public func replay(_ action: ReplayAction) async throws -> ReplayStatus {
    var members = [JSONMember]()
    switch action {
    case .pause: members = [JSONMember("action", "pause")]
    case .resume: members = [JSONMember("action", "resume")]
    case .seek(let seconds):
      members = [JSONMember("action", "seek"), JSONMember("value", .number(seconds))]
    case .speed(let factor):
      members = [JSONMember("action", "speed"), JSONMember("value", .number(factor))]
    case .step(let epochs):
      members = [JSONMember("action", "step"), JSONMember("value", .int(Int64(epochs)))]
    }
    let reply = try await call("replay", members)
    guard let state = reply["state"]?.stringValue, let speed = reply["speed"]?.doubleValue else {
      throw Wire.bad("a REPLAY reply without state or speed", reply)
    }
    return ReplayStatus(state: state, speed: speed, position: reply["position"]?.doubleValue)
  }

  /// Pauses the replay.
  @discardableResult public func pauseReplay() async throws -> ReplayStatus {
    try await replay(.pause)
  }
  /// Resumes a paused replay.
  @discardableResult public func resumeReplay() async throws -> ReplayStatus {
    try await replay(.resume)
  }
  /// Moves the replay to `seconds` (`>= 0`) after the log's first epoch.
  @discardableResult public func seekReplay(to seconds: Double) async throws -> ReplayStatus {
    try await replay(.seek(seconds: seconds))
  }
  /// Sets the replay's speed factor (`0...1_000_000`; 1 = real time, 0 = as fast as possible).
  @discardableResult public func setReplaySpeed(_ factor: Double) async throws -> ReplayStatus {
    try await replay(.speed(factor))
  }
  /// Emits the next `epochs` (`1...10_000`) epochs of a paused replay.
  @discardableResult public func stepReplay(epochs: Int = 1) async throws -> ReplayStatus {
    try await replay(.step(epochs: epochs))
  }
}
