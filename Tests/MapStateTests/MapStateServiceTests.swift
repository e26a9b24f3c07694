import LocationModel
import MapState
import Testing

@Suite("Annotations")
struct AnnotationTests {
  @Test func addingAnExistingIdentifierReplacesInPlace() async throws {
    let service = MapStateService()
    try await service.addAnnotation(
      Annotation(id: "a", coordinate: Coordinate(latitude: 1, longitude: 2), title: "First"))
    try await service.addAnnotation(
      Annotation(id: "b", coordinate: Coordinate(latitude: 3, longitude: 4), title: "Second"))
    let events = await service.events()
    try await service.addAnnotation(
      Annotation(
        id: "a", coordinate: Coordinate(latitude: 5, longitude: 6), title: "Moved",
        subtitle: "now here", kind: "poi"))
    await service.finishEvents()
    let annotations = await service.annotations
    #expect(annotations.map(\.id) == ["a", "b"])
    #expect(annotations[0].title == "Moved")
    #expect(annotations[0].coordinate == Coordinate(latitude: 5, longitude: 6))
    #expect(annotations[0].subtitle == "now here")
    #expect(annotations.filter { $0.title == "First" }.isEmpty)
    let received = await collect(events)
    #expect(received.map(\.changes) == [[.annotationReplaced(id: "a")]])
    #expect(received.first?.map.annotations.count == 2)
  }

  @Test func removeAndErrors() async throws {
    let service = MapStateService()
    try await service.addAnnotation(
      Annotation(id: "a", coordinate: Coordinate(latitude: 1, longitude: 2), title: "A"))
    try await service.addAnnotation(
      Annotation(id: "b", coordinate: Coordinate(latitude: 1, longitude: 2), title: "B"))
    try await service.removeAnnotation(id: "a")
    #expect(await service.annotations.map(\.id) == ["b"])
    await #expect(throws: MapStateError.noSuchAnnotation(id: "a")) {
      try await service.removeAnnotation(id: "a")
    }
    await #expect(throws: MapStateError.reservedIdentifier("location")) {
      try await service.removeAnnotation(id: "location")
    }
    await #expect(throws: MapStateError.reservedIdentifier("location")) {
      try await service.addAnnotation(
        Annotation(id: "location", coordinate: Coordinate(latitude: 0, longitude: 0), title: "x"))
    }
    await #expect(throws: MapStateError.invalidIdentifier("", reason: "empty")) {
      try await service.addAnnotation(
        Annotation(id: "", coordinate: Coordinate(latitude: 0, longitude: 0), title: "x"))
    }
    for bad in [
      Coordinate(latitude: 91, longitude: 0), Coordinate(latitude: 0, longitude: -180.5),
      Coordinate(latitude: .nan, longitude: 0),
    ] {
      await #expect(throws: MapStateError.self) {
        try await service.addAnnotation(Annotation(id: "bad", coordinate: bad, title: "x"))
      }
    }
    let long = String(repeating: "x", count: Annotation.maxIdentifierBytes + 1)
    await #expect(throws: MapStateError.self) {
      try await service.addAnnotation(
        Annotation(id: long, coordinate: Coordinate(latitude: 0, longitude: 0), title: "x"))
    }
    await #expect(throws: MapStateError.self) {
      try await service.addAnnotation(
        Annotation(id: "tab\tid", coordinate: Coordinate(latitude: 0, longitude: 0), title: "x"))
    }
    #expect(await service.annotations.map(\.id) == ["b"])
  }

  @Test(
    "ids and texts are limited in bytes of UTF-8 and in combining marks per character, as region ids are"
  )
  func textRulesCountBytes() async throws {
    let service = MapStateService()
    let here = Coordinate(latitude: 0, longitude: 0)
    // One character of 2,999 bytes: "e" and 1,499 combining accents.
    let column = "e" + String(repeating: "\u{0301}", count: 1499)
    #expect(column.count == 1)
    await #expect(throws: MapStateError.self) {
      try await service.addAnnotation(Annotation(id: column, coordinate: here))
    }
    await #expect(throws: MapStateError.textTooLong(field: "title", bytes: 2999, limit: 1024)) {
      try await service.addAnnotation(Annotation(id: "a", coordinate: here, title: column))
    }
    // Within the bytes, but 5 marks on one character.
    let five = "e" + String(repeating: "\u{0301}", count: 5)
    await #expect(throws: MapStateError.tooManyCombiningMarks(field: "title", count: 5, limit: 4)) {
      try await service.addAnnotation(Annotation(id: "a", coordinate: here, title: five))
    }
    await #expect(throws: MapStateError.self) {
      try await service.addAnnotation(Annotation(id: five, coordinate: here))
    }
    // 22 characters, 6,022 bytes: over the id's 256 bytes.
    let heavy = String(repeating: "x", count: 21) + "y" + String(repeating: "\u{0301}", count: 3000)
    #expect(heavy.count == 22 && heavy.utf8.count == 6022)
    await #expect(throws: MapStateError.self) {
      try await service.addAnnotation(Annotation(id: heavy, coordinate: here))
    }
    // At the limits: 256 bytes of id (128 two-byte characters), 1,024 bytes of title, 4 marks.
    let id = String(repeating: "é", count: 128)
    try await service.addAnnotation(
      Annotation(
        id: id, coordinate: here, title: String(repeating: "a", count: 1024),
        subtitle: "e\u{0301}\u{0302}\u{0303}\u{0304}"))
    await #expect(throws: MapStateError.self) {
      try await service.addAnnotation(
        Annotation(id: String(repeating: "é", count: 129), coordinate: here))
    }
    await #expect(throws: MapStateError.textTooLong(field: "title", bytes: 1026, limit: 1024)) {
      try await service.addAnnotation(
        Annotation(id: "b", coordinate: here, title: String(repeating: "é", count: 513)))
    }
    await #expect(throws: MapStateError.textTooLong(field: "kind", bytes: 65, limit: 64)) {
      try await service.addAnnotation(
        Annotation(id: "b", coordinate: here, kind: String(repeating: "k", count: 65)))
    }
    // The same rule holds for region ids and titles (Regions) and OwnTracks tids.
    #expect(
      TextRules.problem(column, maxBytes: TextRules.maxTitleBytes)
        == "2999 bytes of UTF-8, limit 1024")
    #expect(
      TextRules.problem(column, maxBytes: 4096) == "1499 combining marks on one character, limit 4")
    #expect(
      TextRules.problem(heavy, maxBytes: TextRules.maxIdentifierBytes)
        == "6022 bytes of UTF-8, limit 256")
    #expect(TextRules.problem("1\u{FE0F}\u{20E3} Vi\u{1EC7}t", maxBytes: 64) == nil)
    #expect(await service.annotations.map(\.id) == [id])
  }

  @Test func listOrderIsFirstInsertion() async throws {
    let service = MapStateService()
    for id in ["charlie", "alpha", "bravo"] {
      try await service.addAnnotation(
        Annotation(id: id, coordinate: Coordinate(latitude: 0, longitude: 0), title: id))
    }
    try await service.addAnnotation(
      Annotation(id: "alpha", coordinate: Coordinate(latitude: 1, longitude: 1), title: "again"))
    try await service.removeAnnotation(id: "charlie")
    try await service.addAnnotation(
      Annotation(id: "charlie", coordinate: Coordinate(latitude: 0, longitude: 0), title: "back"))
    #expect(await service.annotations.map(\.id) == ["alpha", "bravo", "charlie"])
  }

  @Test func locationAnnotationMirrorsFixesAndVanishes() async throws {
    let service = MapStateService()
    try await service.addAnnotation(
      Annotation(id: "home", coordinate: Coordinate(latitude: 1, longitude: 1), title: "Home"))
    #expect(await service.annotations.map(\.id) == ["home"])
    await service.update(fix: fix(48.1, 11.5))
    var annotations = await service.annotations
    #expect(annotations.map(\.id) == ["location", "home"])
    #expect(annotations[0].coordinate == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(annotations[0].kind == "location")
    await service.update(fix: fix(48.2, 11.6))
    annotations = await service.annotations
    #expect(annotations[0].coordinate == Coordinate(latitude: 48.2, longitude: 11.6))
    #expect(annotations.count == 2)
    await service.update(fix: nil)
    #expect(await service.annotations.map(\.id) == ["home"])
    #expect(await service.currentLocation == nil)
    await service.update(fix: fix(48.3, 11.7))
    #expect(await service.annotations.first?.id == "location")
    // A fix without a position is no fix.
    await service.update(fix: Fix(mode: .noFix))
    #expect(await service.annotations.map(\.id) == ["home"])
    var twoD = Fix(mode: .fix2D)
    twoD.coordinate = Coordinate(latitude: 120, longitude: 0)
    await service.update(fix: twoD)
    #expect(await service.annotations.map(\.id) == ["home"])
  }

  @Test func snapshotJSONHasTheAgreedShape() async throws {
    let service = MapStateService()
    try await service.addAnnotation(
      Annotation(
        id: "p1", coordinate: Coordinate(latitude: 52.5, longitude: 13.25), title: "Gate",
        subtitle: "east", kind: "poi"))
    try await service.addAnnotation(
      Annotation(id: "p2", coordinate: Coordinate(latitude: -1.5, longitude: -2.25), title: "Plain")
    )
    try await service.setCenter(Coordinate(latitude: 52.5, longitude: 13.25))
    try await service.setZoom(12.5)
    let json = await service.snapshot.jsonString()
    #expect(
      json.hasPrefix(
        #"{"annotations":[{"id":"p1","kind":"poi","lat":52.5,"lon":13.25,"subtitle":"east","title":"Gate"},{"id":"p2","lat":-1.5,"lon":-2.25,"title":"Plain"}],"center":{"lat":52.5,"lon":13.25},"mode":"none","#
      ), "\(json)")
    #expect(json.contains(#""zoom":12.5}"#))
    #expect(json.contains(#""tracking":false"#))
    #expect(json.contains(#""rotation":0"#))
    #expect(json.contains(#""size":{"height":600,"width":800}"#))
  }
}

@Suite("Viewport requests")
struct ViewportRequestTests {
  @Test func defaultsAndValidation() async throws {
    let service = MapStateService()
    let snapshot = await service.snapshot
    #expect(snapshot.center == Coordinate(latitude: 0, longitude: 0))
    #expect(snapshot.zoom == 2)
    #expect(snapshot.mode == .none)
    for zoom in [-0.5, 22.01, .nan, .infinity] {
      await #expect(throws: MapStateError.self) { try await service.setZoom(zoom) }
    }
    try await service.setZoom(22)
    try await service.setZoom(0)
    await #expect(throws: MapStateError.invalidCoordinate(latitude: 0, longitude: 181)) {
      try await service.setCenter(Coordinate(latitude: 0, longitude: 181))
    }
    await #expect(throws: MapStateError.self) {
      try await service.setRegion(
        MapRegion(
          center: Coordinate(latitude: 0, longitude: 0),
          span: CoordinateSpan(latitudeDelta: 0, longitudeDelta: 1)))
    }
    await #expect(throws: MapStateError.self) {
      try await service.setRegion(
        center: Coordinate(latitude: 0, longitude: 0),
        span: MetricSpan(latitudinalMetres: -1, longitudinalMetres: 1))
    }
    await #expect(throws: MapStateError.self) {
      try await service.setViewportSize(ViewportSize(width: 0, height: 10))
    }
    await #expect(throws: MapStateError.invalidZoom(23)) { try await service.setZoom(23) }
    #expect(MapStateError.invalidZoom(23).description.contains("0...22"))
    #expect(MapStateError.noCurrentLocation.description == "no current location: there is no fix")
  }

  @Test func regionSetsCenterAndFittedZoom() async throws {
    let service = MapStateService()
    let region = MapRegion(
      center: Coordinate(latitude: 40, longitude: -74),
      span: CoordinateSpan(latitudeDelta: 0.05, longitudeDelta: 0.05))
    try await service.setRegion(region)
    let viewport = await service.currentViewport
    #expect(viewport.center == region.center)
    #expect(abs(viewport.zoom - Viewport.zoom(fitting: region, size: viewport.size)) < 1e-12)
    #expect(
      viewport.span.latitudeDelta >= 0.05 - 1e-12 && viewport.span.longitudeDelta >= 0.05 - 1e-12)
    try await service.setRegion(
      center: Coordinate(latitude: 0, longitude: 0),
      span: MetricSpan(latitudinalMetres: 2000, longitudinalMetres: 3821.8513))
    let metric = await service.currentViewport
    #expect(abs(metric.zoom - 15) < 1e-5)
  }
}

@Suite("Characters that draw wide")
struct WideCharacterTests {
  @Test("one character of more than 10 code points is refused in ids and titles; joiners in emoji and Persian text are kept")
  func joiningSequences() async throws {
    let jamo = "\u{1100}" + String(repeating: "\u{1161}", count: 200)
    let vowels = "\u{0915}" + String(repeating: "\u{093E}", count: 50)
    let skin = "👍" + String(repeating: "\u{1F3FD}", count: 50)
    for text in [jamo, vowels, skin] {
      #expect(TextRules.problem(text, maxBytes: 4096)?.hasSuffix("code points in one character, limit 10") == true)
      #expect(throws: MapStateError.self) {
        try Annotation(id: "a", coordinate: Coordinate(latitude: 1, longitude: 1), title: text).validate()
      }
    }
    // A family emoji (7 code points joined by ZWJ) and a Persian word with ZWNJ are text, not
    // control characters.
    let family = "👨\u{200D}👩\u{200D}👧\u{200D}👦 family"
    let persian = "می\u{200C}خواهم"
    for text in [family, persian] {
      #expect(TextRules.problem(text, maxBytes: 4096) == nil)
      try Annotation(id: text, coordinate: Coordinate(latitude: 1, longitude: 1), title: text).validate()
    }
    // Bidirectional controls stay refused.
    #expect(throws: MapStateError.self) {
      try Annotation(id: "a\u{202E}b", coordinate: Coordinate(latitude: 1, longitude: 1), title: "x").validate()
    }
  }
}
