import Testing

@testable import LocationClient

/// The map screen's rules on a scripted daemon: when the centre moves, and when it must not.
@MainActor
@Suite struct MapViewModelTests {
  let daemon = FakeDaemon()
  let clock = VirtualClock()

  /// A tracking model with a recording renderer, its updates and map-changes connections
  /// watching.
  func trackingModel() async throws -> (MapViewModel, RecordingMapRenderer) {
    let renderer = RecordingMapRenderer()
    let model = MapViewModel(client: daemon.client(clock: clock), zoomLevel: 16, renderer: renderer)
    #expect(await model.requestAuthorization() == .authorized)
    await model.startTracking()
    let daemon = daemon
    try await withHangGuard { await daemon.waitForWatchers(2) }
    return (model, renderer)
  }

  /// Pushes a fix and waits until the model handled it.
  func fix(_ model: MapViewModel, _ latitude: Double, _ longitude: Double) async {
    let count = model.locationsReceived + 1
    daemon.push(FakeDaemon.tpv(latitude, longitude))
    await model.waitForLocations(count)
  }

  @Test func noFixNoCoordinate() async throws {
    let (model, renderer) = try await trackingModel()
    #expect(model.currentCoordinate == nil)
    #expect(model.initialCoordinate == nil)
    #expect(model.mapCenter == nil)
    #expect(renderer.centers.isEmpty)
    model.centerOnCurrentLocation()
    #expect(model.mapCenter == nil)
    #expect(renderer.calls.isEmpty)
  }

  @Test func initialFixCentresOnceAndLaterFixesDoNotInNone() async throws {
    let (model, renderer) = try await trackingModel()
    await fix(model, 48.1, 11.5)
    #expect(model.initialCoordinate == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(model.mapCenter == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(
      renderer.calls == [.setCenter(Coordinate(latitude: 48.1, longitude: 11.5), zoomLevel: 16)])
    await fix(model, 48.2, 11.6)
    await fix(model, 48.3, 11.7)
    #expect(model.currentCoordinate == Coordinate(latitude: 48.3, longitude: 11.7))
    #expect(model.initialCoordinate == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(model.mapCenter == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(renderer.centers.count == 1)
    // Reading the state moves nothing.
    _ = (model.mapCenter, model.currentCoordinate, model.zoomLevel, model.annotations)
    #expect(renderer.centers.count == 1)
  }

  @Test func centerOnCurrentLocationCentresOnce() async throws {
    let (model, renderer) = try await trackingModel()
    await fix(model, 10, 20)
    await fix(model, 10.5, 20.5)
    model.centerOnCurrentLocation()
    #expect(model.mapCenter == Coordinate(latitude: 10.5, longitude: 20.5))
    await fix(model, 11, 21)
    #expect(model.mapCenter == Coordinate(latitude: 10.5, longitude: 20.5))
    #expect(
      renderer.centers == [
        Coordinate(latitude: 10, longitude: 20), Coordinate(latitude: 10.5, longitude: 20.5),
      ])
    #expect(model.userTrackingMode == .none)
  }

  @Test func followFollowsAndPanSwitchesToNone() async throws {
    let (model, renderer) = try await trackingModel()
    await fix(model, 1, 1)
    model.setUserTrackingMode(.follow)
    await fix(model, 2, 2)
    await fix(model, 3, 3)
    #expect(model.mapCenter == Coordinate(latitude: 3, longitude: 3))
    model.setCenter(Coordinate(latitude: -33.9, longitude: 151.2))
    #expect(model.userTrackingMode == .none)
    await fix(model, 4, 4)
    #expect(model.mapCenter == Coordinate(latitude: -33.9, longitude: 151.2))
    #expect(model.currentCoordinate == Coordinate(latitude: 4, longitude: 4))
    #expect(
      renderer.centers == [
        Coordinate(latitude: 1, longitude: 1), Coordinate(latitude: 1, longitude: 1),
        Coordinate(latitude: 2, longitude: 2), Coordinate(latitude: 3, longitude: 3),
        Coordinate(latitude: -33.9, longitude: 151.2),
      ])
  }

  @Test func stopTrackingClosesTheConnectionAndANewSessionCentresAgain() async throws {
    let (model, renderer) = try await trackingModel()
    await fix(model, 5, 5)
    model.stopTracking()
    #expect(!model.isTracking)
    let daemon = daemon
    try await withHangGuard { await daemon.waitForClosed(2) }
    #expect(daemon.watcherCount == 0)
    #expect(model.currentCoordinate == Coordinate(latitude: 5, longitude: 5))
    await model.startTracking()
    try await withHangGuard { await daemon.waitForWatchers(2) }
    await fix(model, 6, 6)
    #expect(model.initialCoordinate == Coordinate(latitude: 6, longitude: 6))
    #expect(
      renderer.centers == [
        Coordinate(latitude: 5, longitude: 5), Coordinate(latitude: 6, longitude: 6),
      ])
  }

  @Test func annotationsAreReplacedByIdentifier() async throws {
    let (model, renderer) = try await trackingModel()
    renderer.reset()
    try await model.addAnnotation(
      identifier: "home", coordinate: Coordinate(latitude: 1, longitude: 2), title: "Home")
    try await model.addAnnotation(
      identifier: "home", coordinate: Coordinate(latitude: 3, longitude: 4), title: "New home")
    try await model.addAnnotation(
      identifier: "work", coordinate: Coordinate(latitude: 5, longitude: 6), title: "Work")
    #expect(model.annotations.map(\.id) == ["home", "work"])
    #expect(model.annotations.first?.title == "New home")
    // The daemon's limit (2 on the scripted daemon): refused, nothing changes, nothing drawn.
    do {
      try await model.addAnnotation(
        identifier: "third", coordinate: Coordinate(latitude: 0, longitude: 0))
      Issue.record("a third annotation was accepted")
    } catch let error as LocationClientError {
      #expect(error.code == .limitExceeded)
    }
    #expect(model.annotations.map(\.id) == ["home", "work"])
    try await model.removeAnnotation(identifier: "home")
    #expect(
      renderer.calls == [
        .addOrReplaceAnnotation(
          Annotation(id: "home", coordinate: Coordinate(latitude: 1, longitude: 2), title: "Home")),
        .addOrReplaceAnnotation(
          Annotation(
            id: "home", coordinate: Coordinate(latitude: 3, longitude: 4), title: "New home")),
        .addOrReplaceAnnotation(
          Annotation(id: "work", coordinate: Coordinate(latitude: 5, longitude: 6), title: "Work")),
        .removeAnnotation(identifier: "home"),
      ])
    #expect(model.annotations.map(\.id) == ["work"])
  }

  @Test func otherClientsAnnotationChangesAreFollowedWithoutMovingTheCentre() async throws {
    let (model, renderer) = try await trackingModel()
    await fix(model, 48.1, 11.5)
    renderer.reset()
    let cafe: JSONValue = ["id": "cafe", "lat": .number(1), "lon": .number(2), "title": "Cafe"]
    let moved: JSONValue = ["id": "cafe", "lat": .number(3), "lon": .number(4), "title": "Café"]
    let dock: JSONValue = ["id": "dock", "lat": .number(-5), "lon": .number(6), "title": "Dock"]
    daemon.changeMapElsewhere(adding: cafe)
    try await withHangGuard { await model.waitForMapChanges(1) }
    daemon.changeMapElsewhere(adding: dock)
    daemon.changeMapElsewhere(adding: moved)
    try await withHangGuard { await model.waitForMapChanges(3) }
    #expect(model.annotations.map(\.id) == ["cafe", "dock"])
    #expect(model.annotations.first?.coordinate == Coordinate(latitude: 3, longitude: 4))
    #expect(model.annotations.first?.title == "Café")
    daemon.changeMapElsewhere(removing: "cafe")
    try await withHangGuard { await model.waitForMapChanges(4) }
    #expect(model.annotations.map(\.id) == ["dock"])
    #expect(
      renderer.calls == [
        .addOrReplaceAnnotation(
          Annotation(id: "cafe", coordinate: Coordinate(latitude: 1, longitude: 2), title: "Cafe")),
        .addOrReplaceAnnotation(
          Annotation(id: "dock", coordinate: Coordinate(latitude: -5, longitude: 6), title: "Dock")),
        .addOrReplaceAnnotation(
          Annotation(id: "cafe", coordinate: Coordinate(latitude: 3, longitude: 4), title: "Café")),
        .removeAnnotation(identifier: "cafe"),
      ])
    // The events' centre (1.5, 2.5) is the shared map's, not this view's camera.
    #expect(model.mapCenter == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(renderer.centers.isEmpty)
    // After stopping, the shared map's changes no longer reach the model.
    model.stopTracking()
    let daemon = daemon
    try await withHangGuard { await daemon.waitForClosed(2) }
    daemon.changeMapElsewhere(removing: "dock")
    #expect(model.annotations.map(\.id) == ["dock"])
    #expect(model.mapChangesReceived == 4)
  }

  @Test func annotationsChangedWhileNotWatchingAreLoadedAfterARestart() async throws {
    let (model, renderer) = try await trackingModel()
    let daemon = daemon
    let clock = clock
    try await withHangGuard { while await model.annotationReloads < 1 { await Task.yield() } }
    #expect(model.annotations.isEmpty)
    daemon.goDown()
    // The map changed while the model could not watch: no event will tell.
    daemon.state.withLock {
      $0.annotations = [["id": "dock", "lat": .number(-5), "lon": .number(6), "title": "Dock"]]
    }
    try await withHangGuard { await clock.waitForSleepers(2) }
    daemon.comeBack()
    clock.advance(by: .milliseconds(500))
    try await withHangGuard {
      await daemon.waitForWatchers(2)
      while await model.annotationReloads < 2 { await Task.yield() }
    }
    #expect(model.annotations.map(\.id) == ["dock"])
    #expect(
      renderer.calls.last
        == .addOrReplaceAnnotation(
          Annotation(id: "dock", coordinate: Coordinate(latitude: -5, longitude: 6), title: "Dock")
        ))
    #expect(renderer.centers.isEmpty)
  }

  @Test func ownAnnotationChangesEchoedByTheDaemonDrawNothingTwice() async throws {
    let (model, renderer) = try await trackingModel()
    renderer.reset()
    try await model.addAnnotation(
      identifier: "home", coordinate: Coordinate(latitude: 1, longitude: 2), title: "Home")
    // The daemon's event for the same change (as it sends one to every watcher).
    daemon.changeMapElsewhere(
      adding: ["id": "home", "lat": .number(1), "lon": .number(2), "title": "Home"])
    try await withHangGuard { await model.waitForMapChanges(1) }
    #expect(model.annotations.map(\.id) == ["home"])
    #expect(
      renderer.calls == [
        .addOrReplaceAnnotation(
          Annotation(id: "home", coordinate: Coordinate(latitude: 1, longitude: 2), title: "Home"))
      ])
  }

  @Test func anInvalidCentreOrZoomChangesNothing() async throws {
    let (model, renderer) = try await trackingModel()
    await fix(model, 48.1, 11.5)
    model.setUserTrackingMode(.follow)
    renderer.reset()
    for bad in [
      Coordinate(latitude: .nan, longitude: 0), Coordinate(latitude: 91, longitude: 0),
      Coordinate(latitude: 0, longitude: .infinity), Coordinate(latitude: 0, longitude: -180.5),
    ] {
      model.setCenter(bad)
      #expect(model.lastError?.code == .invalidArgument)
    }
    model.setZoomLevel(.nan)
    #expect(model.lastError?.code == .invalidArgument)
    model.setZoomLevel(-.infinity)
    #expect(model.mapCenter == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(model.zoomLevel == 16)
    // Not a pan: the mode still follows.
    #expect(model.userTrackingMode == .follow)
    #expect(renderer.calls.isEmpty)
  }

  @Test func refusedAuthorizationIsDenied() async throws {
    daemon.state.withLock { $0.authorizes = false }
    let model = MapViewModel(client: daemon.client(clock: clock))
    #expect(await model.requestAuthorization() == .denied)
    #expect(model.authorizationStatus == .denied)
  }
}
