import Observation

/// The map screen's model (the seed app's `MapViewModel`): the initial and current coordinate,
/// the view's centre, zoom and user-tracking mode, the annotations, the authorization, over a
/// ``LocationClient``; it drives any ``MapRenderer``.
///
/// The centre moves only on the first fix of a tracking session, on ``centerOnCurrentLocation()``
/// and, while ``userTrackingMode`` follows, on each fix; never because a view read the state. A
/// centre set by hand (``setCenter(_:)``, a pan) switches `follow` to `none`, as MapKit does.
/// Without a fix, ``currentCoordinate`` is `nil`: no coordinate is made up.
///
/// The centre, zoom and mode are this view's own camera (as an `MKMapView`'s); the annotations
/// are the daemon's shared map's (every client and the web page see them), without the one that
/// mirrors the current location (``Annotation/locationID``), which ``currentCoordinate`` is.
/// While tracking, the model follows the shared map's annotations through
/// ``LocationClient/mapChanges``: another client's add, replacement (by identifier) or removal
/// reaches ``annotations`` and the renderers; such a change never moves the centre.
/// Tracking is this model's own: ``startTracking()`` iterates ``LocationClient/locationUpdates``
/// and ``LocationClient/mapChanges`` (tracking while they run); ``stopTracking()`` and releasing
/// the model end it.
@MainActor
@Observable
public final class MapViewModel {
  /// The first fix's coordinate in this tracking session (WGS84 degrees); `nil` before it.
  public private(set) var initialCoordinate: Coordinate?
  /// The newest fix's coordinate (WGS84 degrees); `nil` without a fix.
  public private(set) var currentCoordinate: Coordinate?
  /// Where the map is centred (WGS84 degrees); `nil` until something centred it.
  public private(set) var mapCenter: Coordinate?
  /// Zoom level, Web Mercator, `0...22`.
  public private(set) var zoomLevel: Double
  /// How the centre follows the current location.
  public private(set) var userTrackingMode: UserTrackingMode = .none
  /// The daemon map's annotations (the current-location one left out), in its order.
  public private(set) var annotations: [Annotation] = []
  /// The daemon's last answer to ``requestAuthorization()``; `notDetermined` before.
  public private(set) var authorizationStatus: AuthorizationStatus = .notDetermined
  /// Whether this model tracks (between ``startTracking()`` and ``stopTracking()`` or an error).
  public private(set) var isTracking = false
  /// The last failure (a refusal, the daemon gone for good); `nil` after a success.
  public private(set) var lastError: LocationClientError?

  @ObservationIgnored private let client: LocationClient
  @ObservationIgnored private var renderers: [any MapRenderer] = []
  @ObservationIgnored private var updatesTask: Task<Void, Never>?
  @ObservationIgnored private var mapTask: Task<Void, Never>?
  @ObservationIgnored private var centerOnNextFix = false
  @ObservationIgnored private var session = 0
  /// Locations handled so far, and tasks waiting for a count (tests).
  @ObservationIgnored private(set) var locationsReceived = 0
  @ObservationIgnored private var waiters:
    [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  /// Changes applied to ``annotations`` so far (events, replies, loads).
  @ObservationIgnored private var annotationUpdates = 0
  /// Full loads of the annotations after the map connection started watching (tests).
  @ObservationIgnored private(set) var annotationReloads = 0
  /// Map changes handled so far, and tasks waiting for a count (tests).
  @ObservationIgnored private(set) var mapChangesReceived = 0
  @ObservationIgnored private var mapWaiters:
    [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

  /// A model over `client`, zoomed to `zoomLevel` (`0...22`, clamped), drawing into `renderer`
  /// when given.
  public init(client: LocationClient, zoomLevel: Double = 15, renderer: (any MapRenderer)? = nil) {
    self.client = client
    self.zoomLevel = min(22, max(0, zoomLevel.isFinite ? zoomLevel : 15))
    if let renderer { renderers.append(renderer) }
  }

  isolated deinit {
    updatesTask?.cancel()
    mapTask?.cancel()
  }

  /// Adds a renderer and shows it the current state (centre and zoom when centred, and every
  /// annotation).
  public func attach(_ renderer: any MapRenderer) {
    renderers.append(renderer)
    if let mapCenter { renderer.setCenter(mapCenter, zoomLevel: zoomLevel) }
    for annotation in annotations { renderer.addOrReplaceAnnotation(annotation) }
  }

  /// Asks the daemon for authorization and keeps the answer in ``authorizationStatus``.
  @discardableResult public func requestAuthorization() async -> AuthorizationStatus {
    do {
      authorizationStatus = try await client.requestAuthorization()
      lastError = nil
    } catch {
      lastError = Self.clientError(error)
    }
    return authorizationStatus
  }

  /// Starts tracking: a new session (the next fix is the initial one and centres the map),
  /// the daemon's annotations loaded, then every location and every annotation change of the
  /// shared map handled until ``stopTracking()``. Does nothing while tracking.
  public func startTracking() async {
    guard !isTracking else { return }
    isTracking = true
    session += 1
    let current = session
    initialCoordinate = nil
    do {
      apply(annotations: try await client.mapState.annotations)
    } catch {
      lastError = Self.clientError(error)
    }
    guard isTracking, session == current else { return }
    // Each time the map connection starts watching (and after a daemon restart), the whole
    // state is loaded again: changes made before the watch are in no event.
    let changes = client.mapChanges(onWatching: { [weak self] in
      Task { @MainActor in await self?.reloadAnnotations(session: current) }
    })
    mapTask = Task { [weak self] in
      do {
        for try await change in changes {
          guard let self, self.session == current else { return }
          self.receive(change)
        }
      } catch {
        guard let self, self.session == current else { return }
        self.lastError = Self.clientError(error)
      }
    }
    let updates = client.locationUpdates
    updatesTask = Task { [weak self] in
      do {
        for try await location in updates {
          guard let self else { return }
          self.receive(location)
        }
      } catch {
        guard let self, self.session == current else { return }
        self.lastError = Self.clientError(error)
      }
      guard let self, self.session == current else { return }
      self.isTracking = false
    }
  }

  /// Stops tracking; the coordinates stay as they were (the last fix stays the current one).
  public func stopTracking() {
    session += 1
    updatesTask?.cancel()
    updatesTask = nil
    mapTask?.cancel()
    mapTask = nil
    isTracking = false
    centerOnNextFix = false
  }

  /// Centres the map on the current location once ("center on me"); without a fix yet, on the
  /// next fix. The mode stays as it is.
  public func centerOnCurrentLocation() {
    if let currentCoordinate {
      moveCenter(to: currentCoordinate)
    } else {
      centerOnNextFix = true
    }
  }

  /// Centres the map where the user put it (a pan): `follow` and `followWithHeading` become `none`.
  /// A coordinate that is not valid (NaN, infinite, beyond ±90° or ±180°) changes nothing and
  /// sets ``lastError`` (`invalidArgument`).
  public func setCenter(_ coordinate: Coordinate) {
    guard coordinate.isValid else {
      lastError = LocationClientError(
        .invalidArgument,
        "map centre \(coordinate.latitude), \(coordinate.longitude) is not a coordinate: need finite degrees, latitude -90...90, longitude -180...180"
      )
      return
    }
    if userTrackingMode.follows { userTrackingMode = .none }
    centerOnNextFix = false
    moveCenter(to: coordinate)
  }

  /// Sets the zoom level (`0...22`, clamped); the centre stays. NaN or an infinity changes
  /// nothing and sets ``lastError`` (`invalidArgument`).
  public func setZoomLevel(_ level: Double) {
    guard level.isFinite else {
      lastError = LocationClientError(
        .invalidArgument, "zoom level \(level) is not a number: need 0...22")
      return
    }
    let clamped = min(22, max(0, level))
    guard clamped != zoomLevel else { return }
    zoomLevel = clamped
    if let mapCenter {
      for renderer in renderers { renderer.setCenter(mapCenter, zoomLevel: zoomLevel) }
    }
  }

  /// Sets how the centre follows the location; switching to a following mode centres on the
  /// current location at once, as MapKit does.
  public func setUserTrackingMode(_ mode: UserTrackingMode) {
    userTrackingMode = mode
    if mode.follows, let currentCoordinate { moveCenter(to: currentCoordinate) }
  }

  /// Adds an annotation to the daemon's map, or replaces the one with the same identifier.
  ///
  /// - Throws: ``LocationClientError`` (`invalidArgument`, `limitExceeded`, `notAuthorized`...).
  public func addAnnotation(identifier: String, coordinate: Coordinate, title: String = "")
    async throws
  {
    let map = try await client.addAnnotation(
      identifier: identifier, coordinate: coordinate, title: title)
    apply(annotations: map.annotations)
  }

  /// Removes an annotation from the daemon's map.
  ///
  /// - Throws: ``LocationClientError`` (`notFound`...).
  public func removeAnnotation(identifier: String) async throws {
    let map = try await client.removeAnnotation(identifier: identifier)
    apply(annotations: map.annotations)
  }

  /// Handles one location: the current coordinate, and the centre when this is the session's
  /// first fix, when a centring waits for a fix, or while following.
  func receive(_ location: Location) {
    guard let coordinate = location.fix.coordinate else { return }
    currentCoordinate = coordinate
    if initialCoordinate == nil {
      initialCoordinate = coordinate
      centerOnNextFix = false
      moveCenter(to: coordinate)
    } else if centerOnNextFix || userTrackingMode.follows {
      centerOnNextFix = false
      moveCenter(to: coordinate)
    }
    locationsReceived += 1
    let ready = waiters.filter { $0.count <= locationsReceived }
    waiters.removeAll { $0.count <= locationsReceived }
    for waiter in ready { waiter.continuation.resume() }
  }

  /// Loads the daemon's annotations again (the map connection started watching), unless the
  /// session ended meanwhile. A load during which the annotations changed (an event, this
  /// model's own add or remove) may be older than that change, so it is not applied but asked
  /// again (up to 5 times).
  private func reloadAnnotations(session current: Int) async {
    for _ in 0..<5 {
      let updatesBefore = annotationUpdates
      guard session == current, let map = try? await client.mapState, session == current else {
        return
      }
      guard annotationUpdates == updatesBefore else { continue }
      apply(annotations: map.annotations)
      annotationReloads += 1
      return
    }
  }

  /// Handles one change of the shared map: its annotation changes (another client's or this
  /// model's own) reach ``annotations`` and the renderers, by identifier. The centre, zoom and
  /// mode are this view's own camera and stay as they are.
  func receive(_ change: MapStateSnapshot) {
    annotationUpdates += 1
    for annotationChange in change.annotationChanges {
      switch annotationChange {
      case .added(let id), .replaced(let id):
        guard id != Annotation.locationID,
          let annotation = change.annotations.last(where: { $0.id == id })
        else { continue }
        if let index = annotations.firstIndex(where: { $0.id == id }) {
          guard annotations[index] != annotation else { continue }
          annotations[index] = annotation
        } else {
          annotations.append(annotation)
        }
        for renderer in renderers { renderer.addOrReplaceAnnotation(annotation) }
      case .removed(let id):
        guard let index = annotations.firstIndex(where: { $0.id == id }) else { continue }
        annotations.remove(at: index)
        for renderer in renderers { renderer.removeAnnotation(identifier: id) }
      }
    }
    mapChangesReceived += 1
    let ready = mapWaiters.filter { $0.count <= mapChangesReceived }
    mapWaiters.removeAll { $0.count <= mapChangesReceived }
    for waiter in ready { waiter.continuation.resume() }
  }

  /// Returns once `count` map changes have been handled since the model was made.
  func waitForMapChanges(_ count: Int) async {
    guard mapChangesReceived < count else { return }
    await withCheckedContinuation { mapWaiters.append((count, $0)) }
  }

  /// Returns once `count` locations have been handled since the model was made.
  func waitForLocations(_ count: Int) async {
    guard locationsReceived < count else { return }
    await withCheckedContinuation { waiters.append((count, $0)) }
  }

  private func moveCenter(to coordinate: Coordinate) {
    mapCenter = coordinate
    for renderer in renderers { renderer.setCenter(coordinate, zoomLevel: zoomLevel) }
  }

  /// Takes the daemon's annotations (without the current location's) and tells the renderers
  /// what was added, replaced or removed.
  private func apply(annotations new: [Annotation]) {
    annotationUpdates += 1
    let shown = new.filter { $0.id != Annotation.locationID }
    let old = Dictionary(annotations.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
    let kept = Set(shown.map(\.id))
    for annotation in annotations where !kept.contains(annotation.id) {
      for renderer in renderers { renderer.removeAnnotation(identifier: annotation.id) }
    }
    for annotation in shown where old[annotation.id] != annotation {
      for renderer in renderers { renderer.addOrReplaceAnnotation(annotation) }
    }
    annotations = shown
  }

  private static func clientError(_ error: any Error) -> LocationClientError {
    error as? LocationClientError ?? LocationClientError(.systemError, "\(error)")
  }
}
