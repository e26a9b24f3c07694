import JSON
import MapState
import Testing
import LocationModel

@Suite("Center semantics")
struct CenterSemanticsTests {
  let fixes = [fix(52.50, 13.40), fix(52.51, 13.41), fix(52.52, 13.42), fix(52.53, 13.43)]

  @Test func modeNoneCentersOnlyOnTheInitialFix() async throws {
    let service = MapStateService()
    await service.trackingStarted()
    for fix in fixes { await service.update(fix: fix) }
    #expect(await service.currentViewport.center == Coordinate(latitude: 52.50, longitude: 13.40))
    #expect(await service.currentLocation == Coordinate(latitude: 52.53, longitude: 13.43))
    // Losing and regaining the fix within the session does not re-center.
    await service.update(fix: nil)
    await service.update(fix: fix(10, 10))
    #expect(await service.currentViewport.center == Coordinate(latitude: 52.50, longitude: 13.40))
    // A new session centers on its first fix again.
    await service.trackingStopped()
    await service.trackingStarted()
    await service.update(fix: nil)
    await service.update(fix: fix(11, 12))
    await service.update(fix: fix(12, 13))
    #expect(await service.currentViewport.center == Coordinate(latitude: 11, longitude: 12))
  }

  @Test("the first fix brings a still-default world view to street level, never a moved view")
  func firstFixZoomsInOnlyAnUntouchedView() async throws {
    let untouched = MapStateService()
    #expect(await untouched.currentViewport.zoom == Viewport.default.zoom)
    await untouched.trackingStarted()
    await untouched.update(fix: fix(52.50, 13.40))
    #expect(await untouched.currentViewport.center == Coordinate(latitude: 52.50, longitude: 13.40))
    #expect(await untouched.currentViewport.zoom == 16)
    // The next session's first fix re-centers but leaves the zoom the user now has.
    try await untouched.setZoom(12)
    await untouched.trackingStopped()
    await untouched.trackingStarted()
    await untouched.update(fix: fix(48.1, 11.5))
    #expect(await untouched.currentViewport.zoom == 12)

    // Zoomed by the user (center still 0, 0): the zoom stays.
    let zoomed = MapStateService()
    try await zoomed.setZoom(5)
    await zoomed.trackingStarted()
    await zoomed.update(fix: fix(52.50, 13.40))
    #expect(await zoomed.currentViewport.zoom == 5)

    // Panned by the user (zoom still 2): the zoom stays.
    let panned = MapStateService()
    try await panned.setCenter(Coordinate(latitude: 10, longitude: 20))
    await panned.trackingStarted()
    await panned.update(fix: fix(52.50, 13.40))
    #expect(await panned.currentViewport.zoom == 2)
  }

  @Test func fixesWithoutTrackingSessionNeverMoveTheCenter() async throws {
    let service = MapStateService()
    for fix in fixes { await service.update(fix: fix) }
    #expect(await service.currentViewport.center == Coordinate(latitude: 0, longitude: 0))
  }

  @Test func centerOnCurrentLocationMovesTheCenter() async throws {
    let service = MapStateService()
    await #expect(throws: MapStateError.noCurrentLocation) {
      try await service.centerOnCurrentLocation()
    }
    await service.trackingStarted()
    for fix in fixes { await service.update(fix: fix) }
    let events = await service.events()
    try await service.centerOnCurrentLocation()
    await service.finishEvents()
    #expect(await service.currentViewport.center == Coordinate(latitude: 52.53, longitude: 13.43))
    #expect(await service.trackingMode == .none)
    #expect(await collect(events).map(\.changes) == [[.center(.centerOnCurrentLocation)]])
  }

  @Test func followMovesTheCenterOnEveryFix() async throws {
    let service = MapStateService()
    await service.setMode(.follow)
    for fix in fixes {
      await service.update(fix: fix)
      #expect(await service.currentViewport.center == fix.coordinate)
    }
    #expect(await service.currentViewport.rotation == 0)
  }

  @Test func manualPanOrZoomTurnsFollowOff() async throws {
    let service = MapStateService()
    await service.setMode(.follow)
    await service.update(fix: fixes[0])
    let events = await service.events()
    try await service.setCenter(Coordinate(latitude: 1, longitude: 2))
    #expect(await service.trackingMode == .none)
    await service.update(fix: fixes[1])
    #expect(await service.currentViewport.center == Coordinate(latitude: 1, longitude: 2))
    await service.finishEvents()
    let received = await collect(events)
    #expect(received.first?.changes == [.mode(from: .follow, to: .none), .center(.manual)])
    #expect(received.first?.map.mode == UserTrackingMode.none)

    // Switching follow on with a fix known centers at once; zooming by hand stops it.
    await service.setMode(.follow)
    #expect(await service.currentViewport.center == fixes[1].coordinate)
    try await service.setZoom(16)
    #expect(await service.trackingMode == .none)
    await service.update(fix: fixes[2])
    #expect(await service.currentViewport.center == fixes[1].coordinate)
    #expect(await service.currentViewport.zoom == 16)
  }

  @Test func followWithHeadingRotatesToTheCourse() async throws {
    let service = MapStateService()
    await service.setMode(.followWithHeading)
    await service.update(fix: fix(1, 1, course: 90))
    #expect(await service.currentViewport.rotation == 90)
    #expect(await service.currentViewport.center == Coordinate(latitude: 1, longitude: 1))
    await service.update(fix: fix(1, 1.001))  // no course: rotation stays
    #expect(await service.currentViewport.rotation == 90)
    await service.update(fix: fix(1, 1.002, course: 270.5))
    #expect(await service.currentViewport.rotation == 270.5)
    await service.setMode(.follow)
    #expect(await service.currentViewport.rotation == 0)
    await service.update(fix: fix(1, 1.003, course: 45))
    #expect(await service.currentViewport.rotation == 0)
    // Mode none: a course never rotates the map.
    await service.setMode(.none)
    await service.update(fix: fix(1, 1.004, course: 10))
    #expect(await service.currentViewport.rotation == 0)
    #expect(await service.currentViewport.center == Coordinate(latitude: 1, longitude: 1.003))
  }

  @Test func everyChangeIsAnEventForEverySubscriber() async throws {
    let service = MapStateService()
    let first = await service.events()
    let second = await service.events()
    await service.trackingStarted()
    await service.update(fix: fix(5, 6))
    await service.setMode(.follow)
    await service.update(fix: fix(5.5, 6.5))
    try await service.addAnnotation(
      Annotation(id: "x", coordinate: Coordinate(latitude: 0, longitude: 0), title: "X"))
    try await service.removeAnnotation(id: "x")
    await service.update(fix: nil)
    await service.trackingStopped()
    await service.finishEvents()
    let expected: [[MapChange]] = [
      [.trackingStarted],
      [.location(hasFix: true), .center(.initialFix), .zoom],
      [.mode(from: .none, to: .follow)],
      [.location(hasFix: true), .center(.follow)],
      [.annotationAdded(id: "x")],
      [.annotationRemoved(id: "x")],
      [.location(hasFix: false)],
      [.trackingStopped],
    ]
    let a = await collect(first)
    let b = await collect(second)
    #expect(a.map(\.changes) == expected)
    #expect(b == a)
    #expect(a[1].map.center == Coordinate(latitude: 5, longitude: 6))
    #expect(a[1].map.tracking)
    #expect(a[3].map.center == Coordinate(latitude: 5.5, longitude: 6.5))
    let json = String(decoding: a[2].jsonData(), as: UTF8.self)
    #expect(json.hasPrefix(#"{"changes":[{"from":"none","to":"follow","what":"mode"}],"map":{"#))
    // Each change's members are sorted by name, as the MAP event's "changes" carry them.
    #expect(
      a[1].changes.map(\.json.jsonString) == [
        #"{"hasFix":true,"what":"location"}"#, #"{"reason":"initialFix","what":"center"}"#,
        #"{"what":"zoom"}"#,
      ])
    #expect(a[4].changes.map(\.json.jsonString) == [#"{"id":"x","what":"annotationAdded"}"#])
    #expect(MapChange.trackingStopped.json.jsonString == #"{"what":"trackingStopped"}"#)
  }

  @Test func renderersSeeEveryChange() async throws {
    let service = MapStateService(trackCapacity: 3)
    let renderer = InMemoryRenderer()
    await service.attach(renderer: renderer)
    await service.attach(renderer: renderer)
    for index in 0..<5 { await service.update(fix: fix(Double(index), 0)) }
    let calls = renderer.calls
    #expect(
      calls.map(\.changes) == [[.attached]] + Array(repeating: [.location(hasFix: true)], count: 5))
    #expect(calls.last?.state.track == [2.0, 3, 4].map { Coordinate(latitude: $0, longitude: 0) })
    #expect(calls.last?.state.currentLocation == Coordinate(latitude: 4, longitude: 0))
    await service.detach(renderer: renderer)
    await service.update(fix: fix(9, 9))
    #expect(renderer.calls.count == 6)
  }
}
