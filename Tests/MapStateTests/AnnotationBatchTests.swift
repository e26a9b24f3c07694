import LocationModel
import MapState
import Testing

@Suite("Annotations added as one batch")
struct AnnotationBatchTests {
  @Test("a batch is one event listing every change; refused ones are returned and the rest kept")
  func oneEventPerBatch() async throws {
    let service = MapStateService()
    let events = await service.events()
    var iterator = events.makeAsyncIterator()
    let first = Annotation(id: "owntracks/a/one", coordinate: Coordinate(latitude: 1, longitude: 2), title: "A1")
    try await service.addAnnotation(first)
    _ = await iterator.next()
    var moved = first
    moved.coordinate = Coordinate(latitude: 1.5, longitude: 2)
    let second = Annotation(id: "owntracks/b/two", coordinate: Coordinate(latitude: 3, longitude: 4), title: "B2")
    let reserved = Annotation(id: Annotation.locationID, coordinate: Coordinate(latitude: 0, longitude: 0))
    let invalid = Annotation(id: "owntracks/c/three", coordinate: Coordinate(latitude: 91, longitude: 0))
    let refused = await service.addAnnotations([moved, reserved, second, invalid, second])
    #expect(refused.map(\.annotation.id) == [Annotation.locationID, "owntracks/c/three"])
    #expect(refused.first?.error == .reservedIdentifier(Annotation.locationID))
    let event = try #require(await iterator.next())
    #expect(event.changes == [.annotationReplaced(id: "owntracks/a/one"), .annotationAdded(id: "owntracks/b/two")])
    #expect(event.map.annotations.map(\.id) == ["owntracks/a/one", "owntracks/b/two"])
    #expect(event.map.annotations.first?.coordinate.latitude == 1.5)
  }

  @Test("the map's limit applies within a batch: the annotation that would exceed it is refused")
  func limit() async {
    let service = MapStateService()
    let batch = (0...AnnotationLimits.maxCount).map {
      Annotation(id: "d\($0)", coordinate: Coordinate(latitude: 0, longitude: 0))
    }
    let refused = await service.addAnnotations(batch)
    #expect(refused.map(\.annotation.id) == ["d\(AnnotationLimits.maxCount)"])
    #expect(await service.snapshot.annotations.count == AnnotationLimits.maxCount)
  }
}
