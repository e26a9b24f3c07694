import LocationModel
import Regions

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The map state of locationd: viewport, annotations, user-tracking mode and the recent track,
/// kept in one place so every client and renderer sees the same map.
///
/// Center semantics (the point of this service: no re-centering by surprise). The center moves
/// only
/// 1. to the first fix after ``trackingStarted()`` (``CenterReason/initialFix``); when the
///    view is still the default world view (``Viewport/default``'s center and zoom), the zoom
///    level becomes ``Viewport/firstFixZoom`` too,
/// 2. on ``centerOnCurrentLocation()``,
/// 3. on every fix while the mode is ``UserTrackingMode/follow`` or
///    ``UserTrackingMode/followWithHeading`` (and when switching to one of them with a fix known),
/// 4. when a client sets it (``setCenter(_:)``, ``setRegion(_:)``, ``setRegion(center:span:)``).
///
/// In mode ``UserTrackingMode/none`` a fix never moves the center (except case 1). Setting the
/// center, zoom or region by hand while following switches the mode to `none`, as panning a
/// MapKit view does. In `followWithHeading` each fix with a course over ground sets the rotation
/// to that course; leaving that mode turns the map north up again.
///
/// Annotations are keyed by identifier. Adding an identifier that exists replaces the annotation
/// in place: it keeps its position in the list, so a moving waypoint does not jump to the end.
/// The list order is: the mirrored current location (id `"location"`, kind `"location"`) first
/// while there is a fix, then the others in the order their identifiers were first added. The
/// id `"location"` is reserved: clients can neither add nor remove it.
///
/// Every change is published as a ``MapEvent`` to all ``events()`` subscribers and to attached
/// renderers, and, when a ``MapStateStore`` is given, viewport, mode and annotations are saved
/// after each change that touches them, by a ``StateSaver`` on its own thread: a change never
/// waits for the disk (the newest state is saved when the disk allows); a request's reply waits
/// at most ``replyWait`` for its change's save (``unsavedChanges``).
public actor MapStateService {
  var viewport: Viewport
  var mode: UserTrackingMode
  var annotationOrder: [String] = []
  var annotationsByID: [String: Annotation] = [:]
  private var location: Coordinate?
  private var course: Double?
  private var track: [Coordinate] = []
  private var regions: [RegionStatus] = []
  private var tracking = false
  private var awaitingInitialFix = false
  private var subscribers: [UUID: AsyncStream<MapEvent>.Continuation] = [:]
  private var renderers: [any MapRenderer] = []
  let store: MapStateStore?
  let saver: StateSaver<PersistedMapState>?
  /// The state last handed to the saver (or loaded), and its ticket.
  var lastSubmitted: PersistedMapState?
  var lastTicket: UInt64 = 0
  /// How long a reply waits for its change's save (``unsavedChanges``).
  public nonisolated let replyWait: Duration
  /// UTF-8 bytes of all annotations' text (``Annotation/textByteCount``).
  var annotationBytes = 0

  /// Most fixes kept in the recent track; older ones are dropped first.
  public nonisolated let trackCapacity: Int
  /// Events buffered per subscriber; a slow subscriber loses the oldest ones.
  public static let eventBufferSize = 64

  /// Creates the service, restoring the saved state from `store` when there is one.
  ///
  /// A missing or corrupt state file logs one line (see ``MapStateStore/load()``) and starts from
  /// ``Viewport/default``, mode `none`, no annotations.
  ///
  /// - Parameters:
  ///   - store: where to save and restore; `nil` keeps everything in memory.
  ///   - trackCapacity: fixes kept in the recent track, at least 2 (smaller values become 2).
  ///   - replyWait: how long ``unsavedChanges`` waits for the newest change's save before it
  ///     answers (the daemon uses 50 ms, so a stalled disk cannot hold a reply up longer).
  public init(store: MapStateStore? = nil, trackCapacity: Int = 500, replyWait: Duration = .seconds(5)) {
    self.store = store
    self.trackCapacity = max(trackCapacity, 2)
    self.replyWait = replyWait
    saver = store.map { store in
      StateSaver(
        label: "locationd.map-state-saves", save: { (state: PersistedMapState) throws(MapStoreError) in try store.save(state) },
        report: { failure, _ in
          if let failure {
            store.log("map state not saved, keeping it in memory path=\(store.path) error=\(failure)")
          } else {
            store.log("map state saved again after an earlier failure path=\(store.path)")
          }
        })
    }
    if let saved = store?.load() {
      viewport = saved.viewport
      mode = saved.mode
      for annotation in saved.annotations {
        annotationOrder.append(annotation.id)
        annotationsByID[annotation.id] = annotation
        annotationBytes += annotation.textByteCount
      }
      lastSubmitted = saved
    } else {
      viewport = .default
      mode = .none
      // The default state is what an absent file means: nothing to write until it changes (a
      // daemon that changed nothing leaves the directory as it found it, as the regions do).
      if store != nil { lastSubmitted = PersistedMapState(viewport: .default, mode: .none, annotations: []) }
    }
  }

  deinit {
    for continuation in subscribers.values { continuation.finish() }
  }

  // MARK: Reading

  /// The client-facing state (what `locationctl --json map` prints).
  public var snapshot: MapSnapshot {
    MapSnapshot(viewport: viewport, mode: mode, annotations: annotations, tracking: tracking)
  }

  /// The state renderers draw: snapshot, viewport, track and current location.
  public var renderState: MapRenderState {
    MapRenderState(
      snapshot: snapshot, viewport: viewport, track: track, currentLocation: location, regions: regions)
  }

  /// The current viewport.
  public var currentViewport: Viewport { viewport }

  /// Why the current viewport, mode and annotations are not saved: the newest completed save
  /// failed (disk full, I/O error, no file descriptors...). Waits up to ``replyWait`` for the
  /// newest change's own save first; when the disk has not answered by then, the outcome of the
  /// save before is given (the newest one completes later, and a failure of it is logged and
  /// reported with the next change). `nil` when the newest completed save reached the disk, or
  /// without a store. Every later change, and ``saveIfNeeded()``, retries.
  public var unsavedChanges: MapStoreError? {
    get async {
      guard let saver else { return nil }
      _ = await saver.wait(for: lastTicket, timeout: replyWait)
      return saver.failure
    }
  }

  /// The user-tracking mode.
  public var trackingMode: UserTrackingMode { mode }

  /// The current location, WGS84 degrees; `nil` without a fix.
  public var currentLocation: Coordinate? { location }

  /// The recent track, oldest first, at most ``trackCapacity`` positions.
  public var recentTrack: [Coordinate] { track }

  /// All annotations in list order: `"location"` first while there is a fix, then the others by
  /// first insertion.
  public var annotations: [Annotation] {
    var result: [Annotation] = []
    result.reserveCapacity(annotationOrder.count + 1)
    if let location {
      result.append(
        Annotation(
          id: Annotation.locationID, coordinate: location, title: "Current location",
          kind: "location"))
    }
    for id in annotationOrder {
      if let annotation = annotationsByID[id] { result.append(annotation) }
    }
    return result
  }

  /// The monitored regions drawn by the renderers, sorted by id.
  public var monitoredRegions: [RegionStatus] { regions }

  /// Replaces the regions the renderers draw with `statuses` (the region monitor's regions and
  /// states; one per id, sorted by id) and publishes the change `regions`. Regions are not part
  /// of `mapstate.json`: the region store keeps them.
  public func setRegions(_ statuses: [RegionStatus]) {
    guard statuses != regions else { return }
    regions = statuses
    publish([.regions])
  }

  /// The map as a GeoJSON FeatureCollection (``GeoJSON/document(for:)``).
  public func geoJSON() -> String { GeoJSON.document(for: renderState) }

  /// The map as an SVG document (``SVGSnapshot/document(for:)``).
  public func svg() -> String { SVGSnapshot.document(for: renderState) }

  /// ``geoJSON()``, refused without being built when longer than `maxBytes` bytes
  /// (``GeoJSON/document(for:maxBytes:)``).
  ///
  /// - Throws: ``RenderTooLarge``.
  public func geoJSON(maxBytes: Int) throws(RenderTooLarge) -> String {
    try GeoJSON.document(for: renderState, maxBytes: maxBytes)
  }

  /// ``svg()``, refused without being built when longer than `maxBytes` bytes
  /// (``SVGSnapshot/document(for:maxBytes:)``).
  ///
  /// - Throws: ``RenderTooLarge``.
  public func svg(maxBytes: Int) throws(RenderTooLarge) -> String {
    try SVGSnapshot.document(for: renderState, maxBytes: maxBytes)
  }

  // MARK: Subscribers and renderers

  /// A stream of every change from now on; any number of subscribers, each with its own buffer
  /// of ``eventBufferSize`` events (oldest dropped). Ends when the service goes away or
  /// ``finishEvents()`` is called.
  public func events() -> AsyncStream<MapEvent> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: MapEvent.self, bufferingPolicy: .bufferingNewest(Self.eventBufferSize))
    let id = UUID()
    subscribers[id] = continuation
    continuation.onTermination = { [weak self] _ in
      Task { await self?.unsubscribe(id) }
    }
    return stream
  }

  private func unsubscribe(_ id: UUID) { subscribers[id] = nil }

  /// Ends every event stream (at shutdown).
  public func finishEvents() {
    for continuation in subscribers.values { continuation.finish() }
    subscribers.removeAll()
  }

  /// Attaches a renderer: it is called at once with ``MapChange/attached`` and the current state,
  /// then after every change (see ``MapRenderer``). Attaching the same object twice has no effect.
  public func attach(renderer: any MapRenderer) {
    guard !renderers.contains(where: { $0 === renderer }) else { return }
    renderers.append(renderer)
    renderer.render(renderState, changes: [.attached])
  }

  /// Detaches a renderer attached with ``attach(renderer:)``; unknown renderers are ignored.
  public func detach(renderer: any MapRenderer) {
    renderers.removeAll { $0 === renderer }
  }

  // MARK: Tracking and fixes

  /// A tracking session started: the next fix with a position becomes the center (whatever the
  /// mode). Call it before feeding the session's fixes.
  public func trackingStarted() {
    tracking = true
    awaitingInitialFix = true
    publish([.trackingStarted])
  }

  /// The tracking session stopped. The current location stays until ``update(fix:)`` says
  /// there is no fix.
  public func trackingStopped() {
    tracking = false
    awaitingInitialFix = false
    publish([.trackingStopped])
  }

  /// Feeds the manager's current fix; `nil`, a fix mode without position, or an invalid
  /// coordinate mean "no fix": the `"location"` annotation disappears and the center stays.
  ///
  /// With a position: the `"location"` annotation moves there, the position joins the track,
  /// and the center moves only for the first fix of a tracking session or while following.
  /// In `followWithHeading` a known course over ground (degrees true) becomes the rotation.
  public func update(fix: Fix?) {
    guard let fix, fix.mode.hasPosition, let coordinate = fix.coordinate, coordinate.isValid else {
      guard location != nil else { return }
      location = nil
      course = nil
      publish([.location(hasFix: false)])
      return
    }
    location = coordinate
    if let value = fix.courseOverGround, value.isFinite { course = value } else { course = nil }
    track.append(coordinate)
    if track.count > trackCapacity { track.removeFirst(track.count - trackCapacity) }
    var changes: [MapChange] = [.location(hasFix: true)]
    if awaitingInitialFix {
      awaitingInitialFix = false
      // A view nobody has moved (the world view of ``Viewport/default``) also zooms in to the
      // street level: a world map with a dot in it says little. A view a client has panned or
      // zoomed keeps its zoom level.
      let untouched =
        viewport.center == Viewport.default.center && viewport.zoom == Viewport.default.zoom
      moveCenter(to: coordinate, reason: .initialFix, changes: &changes)
      if untouched { setZoomLevel(Viewport.firstFixZoom, changes: &changes) }
    } else if mode.follows {
      moveCenter(to: coordinate, reason: .follow, changes: &changes)
    }
    if mode == .followWithHeading, let course { rotate(to: course, changes: &changes) }
    publish(changes)
  }

  /// Moves the center to the current location.
  ///
  /// - Throws: ``MapStateError/noCurrentLocation`` when there is no fix.
  public func centerOnCurrentLocation() throws(MapStateError) {
    guard let location else { throw .noCurrentLocation }
    var changes: [MapChange] = []
    moveCenter(to: location, reason: .centerOnCurrentLocation, changes: &changes)
    publish(changes)
  }

  // MARK: Client requests

  /// Sets the center (WGS84 degrees; the latitude is clamped to +-85.05112878 for display).
  /// Switches following off.
  ///
  /// - Throws: ``MapStateError/invalidCoordinate(latitude:longitude:)`` unless finite and within
  ///   -90...90, -180...180.
  public func setCenter(_ center: Coordinate) throws(MapStateError) {
    guard center.isValid else {
      throw .invalidCoordinate(latitude: center.latitude, longitude: center.longitude)
    }
    var changes: [MapChange] = []
    stopFollowing(changes: &changes)
    moveCenter(to: center, reason: .manual, changes: &changes)
    publish(changes)
  }

  /// Sets the zoom level. Switches following off.
  ///
  /// - Throws: ``MapStateError/invalidZoom(_:)`` unless finite and within 0...22.
  public func setZoom(_ zoom: Double) throws(MapStateError) {
    guard zoom.isFinite, WebMercator.zoomRange.contains(zoom) else { throw .invalidZoom(zoom) }
    var changes: [MapChange] = []
    stopFollowing(changes: &changes)
    setZoomLevel(zoom, changes: &changes)
    publish(changes)
  }

  /// Shows a MapKit-style region: center plus span in degrees. The zoom level becomes the one
  /// that fits the whole span in the viewport (``Viewport/zoom(fitting:size:)``, clamped to
  /// 0...22). Switches following off.
  ///
  /// - Throws: ``MapStateError/invalidCoordinate(latitude:longitude:)`` or
  ///   ``MapStateError/invalidSpan(latitudeDelta:longitudeDelta:)``.
  public func setRegion(_ region: MapRegion) throws(MapStateError) {
    let center = region.center
    guard center.isValid else {
      throw .invalidCoordinate(latitude: center.latitude, longitude: center.longitude)
    }
    guard region.span.isValid else {
      throw .invalidSpan(
        latitudeDelta: region.span.latitudeDelta, longitudeDelta: region.span.longitudeDelta)
    }
    var changes: [MapChange] = []
    stopFollowing(changes: &changes)
    moveCenter(to: center, reason: .manual, changes: &changes)
    setZoomLevel(Viewport.zoom(fitting: region, size: viewport.size), changes: &changes)
    publish(changes)
  }

  /// Shows a region given in metres around `center` (as
  /// `MKCoordinateRegion(center:latitudinalMeters:longitudinalMeters:)`); the zoom level fits
  /// both distances at the center latitude, clamped to 0...22. Switches following off.
  ///
  /// - Throws: ``MapStateError/invalidCoordinate(latitude:longitude:)`` or
  ///   ``MapStateError/invalidMetricSpan(latitudinalMetres:longitudinalMetres:)`` unless both
  ///   distances are finite and positive.
  public func setRegion(center: Coordinate, span: MetricSpan) throws(MapStateError) {
    guard center.isValid else {
      throw .invalidCoordinate(latitude: center.latitude, longitude: center.longitude)
    }
    guard span.latitudinalMetres.isFinite, span.longitudinalMetres.isFinite,
      span.latitudinalMetres > 0,
      span.longitudinalMetres > 0
    else {
      throw .invalidMetricSpan(
        latitudinalMetres: span.latitudinalMetres, longitudinalMetres: span.longitudinalMetres)
    }
    var changes: [MapChange] = []
    stopFollowing(changes: &changes)
    moveCenter(to: center, reason: .manual, changes: &changes)
    setZoomLevel(
      Viewport.zoom(fitting: span, center: viewport.center, size: viewport.size), changes: &changes)
    publish(changes)
  }

  /// Sets the viewport size in points; center, zoom and mode stay.
  ///
  /// - Throws: ``MapStateError/invalidViewportSize(width:height:)`` unless both are finite and in
  ///   1...16384.
  public func setViewportSize(_ size: ViewportSize) throws(MapStateError) {
    guard size.isValid else { throw .invalidViewportSize(width: size.width, height: size.height) }
    guard size != viewport.size else { return }
    viewport.size = size
    publish([.size])
  }

  /// Rotates the map (degrees true that point up, normalised to 0..<360). In
  /// `followWithHeading` this switches to `follow`, since the rotation no longer tracks the course.
  ///
  /// - Throws: ``MapStateError/invalidRotation(_:)`` unless finite.
  public func setRotation(_ degrees: Double) throws(MapStateError) {
    guard degrees.isFinite else { throw .invalidRotation(degrees) }
    var changes: [MapChange] = []
    if mode == .followWithHeading {
      changes.append(.mode(from: mode, to: .follow))
      mode = .follow
    }
    rotate(to: degrees, changes: &changes)
    publish(changes)
  }

  /// Sets the user-tracking mode. Switching to `follow` or `followWithHeading` with a fix known
  /// centers on it at once (as MapKit does); switching to `followWithHeading` with a known course
  /// rotates to it; leaving `followWithHeading` turns the map north up.
  public func setMode(_ newMode: UserTrackingMode) {
    guard newMode != mode else { return }
    var changes: [MapChange] = [.mode(from: mode, to: newMode)]
    let old = mode
    mode = newMode
    if old == .followWithHeading { rotate(to: 0, changes: &changes) }
    if newMode.follows, let location {
      moveCenter(to: location, reason: .follow, changes: &changes)
    }
    if newMode == .followWithHeading, let course { rotate(to: course, changes: &changes) }
    publish(changes)
  }

  // MARK: Internals

  private func moveCenter(
    to coordinate: Coordinate, reason: CenterReason, changes: inout [MapChange]
  ) {
    let before = viewport.center
    viewport.setCenter(coordinate)
    if viewport.center != before { changes.append(.center(reason)) }
  }

  private func setZoomLevel(_ zoom: Double, changes: inout [MapChange]) {
    guard zoom != viewport.zoom else { return }
    viewport.zoom = zoom
    changes.append(.zoom)
  }

  private func rotate(to degrees: Double, changes: inout [MapChange]) {
    let before = viewport.rotation
    viewport.setRotation(degrees)
    if viewport.rotation != before { changes.append(.rotation) }
  }

  private func stopFollowing(changes: inout [MapChange]) {
    guard mode.follows else { return }
    changes.append(.mode(from: mode, to: .none))
    // Leaving followWithHeading turns the map north up, as setMode does.
    if mode == .followWithHeading { rotate(to: 0, changes: &changes) }
    mode = .none
  }

  /// Sends an event for `changes` (if any) to subscribers and renderers, then saves.
  func publish(_ changes: [MapChange]) {
    guard !changes.isEmpty else { return }
    let state = renderState
    let event = MapEvent(changes: changes, map: state.snapshot)
    for continuation in subscribers.values { continuation.yield(event) }
    for renderer in renderers { renderer.render(state, changes: changes) }
    persistIfChanged()
  }
}
