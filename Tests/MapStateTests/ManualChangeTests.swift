import MapState
import Testing
import LocationModel

@Suite("Manual changes while following")
struct ManualChangeTests {
  @Test("a manual zoom or pan in followWithHeading ends following and turns the map north up")
  func manualChangeLeavesHeadingMode() async throws {
    for change in ["zoom", "center"] {
      let service = MapStateService()
      await service.trackingStarted()
      await service.setMode(.followWithHeading)
      await service.update(fix: fix(52.5, 13.4, course: 90))
      #expect(await service.currentViewport.rotation == 90)
      if change == "zoom" {
        try await service.setZoom(15)
      } else {
        try await service.setCenter(Coordinate(latitude: 52.6, longitude: 13.5))
      }
      #expect(await service.trackingMode == .none, "after \(change)")
      #expect(await service.currentViewport.rotation == 0, "after \(change)")
    }
  }

  @Test("titles, subtitles and kinds with control characters are refused")
  func controlCharactersRefused() async throws {
    let service = MapStateService()
    let place = Coordinate(latitude: 1, longitude: 2)
    let hostile = [
      Annotation(id: "a", coordinate: place, title: "\u{1B}[31mRED\u{1B}[0m"),
      Annotation(id: "b", coordinate: place, title: "two\nlines"),
      Annotation(id: "c", coordinate: place, title: "ok", subtitle: "bell\u{07}"),
      Annotation(id: "d", coordinate: place, title: "ok", kind: "tab\there"),
    ]
    for annotation in hostile {
      await #expect(throws: MapStateError.self) { try await service.addAnnotation(annotation) }
    }
    try await service.addAnnotation(Annotation(id: "e", coordinate: place, title: "Café ☕ «ok»"))
    #expect(await service.annotations.map(\.id) == ["e"])
  }
}
