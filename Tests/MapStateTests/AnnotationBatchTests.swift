import Foundation
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

  @Test("many annotations removed at once are one event and one save; absent ids and location are skipped")
  func removalIsOneChange() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("batch-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory, log: { _ in })
    let service = MapStateService(store: store)
    let fleet = (0..<500).map {
      Annotation(id: "owntracks/u/d\($0)", coordinate: Coordinate(latitude: 1, longitude: 2), title: "D\($0)", kind: "owntracks")
    }
    let home = Annotation(id: "home", coordinate: Coordinate(latitude: 3, longitude: 4), title: "Home")
    _ = await service.addAnnotations(fleet + [home])
    let events = await service.events()
    var iterator = events.makeAsyncIterator()
    let removed = await service.removeAnnotations(fleet.map(\.id) + ["absent", Annotation.locationID])
    #expect(removed == 500)
    let event = try #require(await iterator.next())
    #expect(event.changes.count == 500)
    #expect(event.changes.first == .annotationRemoved(id: "owntracks/u/d0"))
    #expect(event.map.annotations.map(\.id) == ["home"])
    // What was saved is the state after the whole batch.
    #expect(await service.savesSettled())
    #expect(store.load()?.annotations.map(\.id) == ["home"])
    #expect(await service.removeAnnotations(["absent"]) == 0)
  }

  @Test("annotation ids are compared by code points: an equivalent spelling is refused, not a replacement")
  func idsAreLiteral() async throws {
    let service = MapStateService()
    let nfc = Annotation(id: "caf\u{E9}", coordinate: Coordinate(latitude: 1, longitude: 2), title: "NFC")
    let nfd = Annotation(id: "cafe\u{301}", coordinate: Coordinate(latitude: 3, longitude: 4), title: "NFD")
    try await service.addAnnotation(nfc)
    await #expect(throws: MapStateError.self) { try await service.addAnnotation(nfd) }
    #expect(await service.addAnnotations([nfd]).count == 1)
    await #expect(throws: MapStateError.noSuchAnnotation(id: nfd.id)) { try await service.removeAnnotation(id: nfd.id) }
    #expect(await service.removeAnnotations([nfd.id]) == 0)
    #expect(await service.snapshot.annotations.map(\.title) == ["NFC"])
    try await service.removeAnnotation(id: nfc.id)
    try await service.addAnnotation(nfd)
    #expect(await service.snapshot.annotations.map(\.title) == ["NFD"])
  }
}
