import Foundation
import MapState
import Testing
import LocationModel

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// A fixed map state: central Berlin at zoom 14, a short track, three annotations.
func berlinService() async throws -> MapStateService {
  let service = MapStateService()
  try await service.setZoom(14)
  await service.trackingStarted()
  let track = [
    (52.516_3, 13.377_7), (52.516_8, 13.382_0), (52.517_4, 13.387_5), (52.518_1, 13.393_0),
    (52.519_0, 13.398_2), (52.519_9, 13.402_6),
  ]
  for (index, point) in track.enumerated() {
    await service.update(fix: fix(point.0, point.1, course: 70 + Double(index)))
  }
  try await service.centerOnCurrentLocation()
  try await service.addAnnotation(
    Annotation(
      id: "gate", coordinate: Coordinate(latitude: 52.516_275, longitude: 13.377_704),
      title: "Brandenburger Tor"))
  try await service.addAnnotation(
    Annotation(
      id: "tv", coordinate: Coordinate(latitude: 52.520_815, longitude: 13.409_419),
      title: "Fernsehturm",
      subtitle: "Alexanderplatz", kind: "poi"))
  try await service.addAnnotation(
    Annotation(
      id: "cafe \"1\"", coordinate: Coordinate(latitude: 52.514_0, longitude: 13.395_0),
      title: "Café <Mitte> & 'Co'",
      kind: "poi"))
  return service
}

/// RFC 7946 shape problems of a parsed GeoJSON object; empty when it conforms.
func rfc7946Problems(_ object: Any) -> [String] {
  var problems: [String] = []

  func position(_ value: Any, _ path: String) -> (Double, Double)? {
    guard let array = value as? [Any], (2...3).contains(array.count),
      let numbers = array as? [Double]
    else {
      problems.append("\(path): not a position [lon, lat]")
      return nil
    }
    let (lon, lat) = (numbers[0], numbers[1])
    if !(-180...180).contains(lon) || !(-90...90).contains(lat) {
      problems.append("\(path): [\(lon), \(lat)] out of range (longitude first)")
    }
    return (lon, lat)
  }

  func ring(_ value: Any, _ path: String, exterior: Bool) {
    guard let array = value as? [Any], array.count >= 4 else {
      problems.append("\(path): linear ring needs 4 or more positions")
      return
    }
    let points = array.enumerated().compactMap { position($0.element, "\(path)[\($0.offset)]") }
    guard points.count == array.count else { return }
    if let first = points.first, let last = points.last, first != last {
      problems.append("\(path): ring not closed")
    }
    var twiceArea = 0.0
    for index in 0..<(points.count - 1) {
      twiceArea += points[index].0 * points[index + 1].1 - points[index + 1].0 * points[index].1
    }
    if exterior && twiceArea <= 0 { problems.append("\(path): exterior ring not counterclockwise") }
    if !exterior && twiceArea >= 0 { problems.append("\(path): hole not clockwise") }
  }

  func polygon(_ value: Any, _ path: String) {
    guard let rings = value as? [Any], !rings.isEmpty else {
      problems.append("\(path): polygon needs rings")
      return
    }
    for (index, element) in rings.enumerated() {
      ring(element, "\(path)[\(index)]", exterior: index == 0)
    }
  }

  func geometry(_ value: Any, _ path: String) {
    guard let object = value as? [String: Any], let type = object["type"] as? String else {
      problems.append("\(path): geometry without type")
      return
    }
    let coordinates = object["coordinates"] as Any
    switch type {
    case "Point": _ = position(coordinates, path + ".coordinates")
    case "LineString":
      guard let array = coordinates as? [Any], array.count >= 2 else {
        problems.append("\(path): LineString needs 2 or more positions")
        return
      }
      for (index, element) in array.enumerated() {
        _ = position(element, "\(path).coordinates[\(index)]")
      }
    case "Polygon": polygon(coordinates, path + ".coordinates")
    case "MultiPolygon":
      guard let array = coordinates as? [Any], !array.isEmpty else {
        problems.append("\(path): MultiPolygon needs polygons")
        return
      }
      for (index, element) in array.enumerated() {
        polygon(element, "\(path).coordinates[\(index)]")
      }
    default: problems.append("\(path): unexpected geometry type \(type)")
    }
  }

  func bbox(_ value: Any?, _ path: String) {
    guard let value else { return }
    guard let numbers = value as? [Double], numbers.count == 4 else {
      problems.append("\(path).bbox: need [west, south, east, north]")
      return
    }
    if numbers[1] > numbers[3] { problems.append("\(path).bbox: south > north") }
    if !numbers.allSatisfy({ abs($0) <= 180 }) || abs(numbers[1]) > 90 || abs(numbers[3]) > 90 {
      problems.append("\(path).bbox: out of range")
    }
  }

  guard let collection = object as? [String: Any],
    collection["type"] as? String == "FeatureCollection",
    let features = collection["features"] as? [Any]
  else { return ["not a FeatureCollection with features"] }
  bbox(collection["bbox"], "collection")
  for (index, element) in features.enumerated() {
    let path = "features[\(index)]"
    guard let feature = element as? [String: Any], feature["type"] as? String == "Feature" else {
      problems.append("\(path): not a Feature")
      continue
    }
    if let id = feature["id"], !(id is String || id is NSNumber) {
      problems.append("\(path).id: not string or number")
    }
    if !(feature["properties"] is [String: Any] || feature["properties"] is NSNull) {
      problems.append("\(path).properties: missing")
    }
    bbox(feature["bbox"], path)
    if let value = feature["geometry"], !(value is NSNull) {
      geometry(value, path + ".geometry")
    } else {
      problems.append("\(path).geometry: missing")
    }
  }
  return problems
}

/// Elements, attributes and texts of an XML document, or the parser error.
final class XMLCollector: NSObject, XMLParserDelegate {
  struct Element {
    var name: String
    var attributes: [String: String]
    var text = ""
  }
  var elements: [Element] = []
  private var open: [Int] = []

  func parser(
    _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
    qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    open.append(elements.count)
    elements.append(Element(name: elementName, attributes: attributes))
  }

  func parser(
    _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
    qualifiedName: String?
  ) {
    _ = open.popLast()
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) {
    if let index = open.last { elements[index].text += string }
  }

  static func parse(_ text: String) throws -> [Element] {
    let parser = XMLParser(data: Data(text.utf8))
    let collector = XMLCollector()
    parser.delegate = collector
    guard parser.parse() else {
      throw parser.parserError ?? CocoaError(.coderReadCorrupt)
    }
    return collector.elements
  }
}

/// The package's `Tests/MapStateTests/Golden` directory.
let goldenDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  .appendingPathComponent("Golden")

/// Compares `text` with a golden file; with `UPDATE_GOLDEN=1` in the environment, rewrites it.
func expectGolden(
  _ text: String, named name: String, sourceLocation: SourceLocation = #_sourceLocation
) throws {
  let url = goldenDirectory.appendingPathComponent(name)
  if ProcessInfo.processInfo.environment["UPDATE_GOLDEN"] == "1" {
    try Data(text.utf8).write(to: url)
    return
  }
  let expected = try String(contentsOf: url, encoding: .utf8)
  #expect(
    text == expected, "differs from golden \(name); rerun with UPDATE_GOLDEN=1 after checking",
    sourceLocation: sourceLocation)
}

@Suite("Renderers")
struct RendererTests {
  @Test func geoJSONIsValidRFC7946() async throws {
    let service = try await berlinService()
    let text = await service.geoJSON()
    let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
    #expect(rfc7946Problems(object) == [])
    let collection = try #require(object as? [String: Any])
    let features = try #require(collection["features"] as? [[String: Any]])
    let types = features.compactMap { ($0["geometry"] as? [String: Any])?["type"] as? String }
    #expect(types == ["Polygon", "LineString", "Point", "Point", "Point", "Point"])
    let ids = features.compactMap { $0["id"] as? String }
    #expect(ids == ["viewport", "track", "location", "gate", "tv", "cafe \"1\""])

    // Points are [lon, lat] and carry id and title.
    let gate = try #require(features.first { $0["id"] as? String == "gate" })
    let gateCoordinates = (gate["geometry"] as? [String: Any])?["coordinates"] as? [Double]
    #expect(gateCoordinates == [13.377_704, 52.516_275])
    let properties = try #require(gate["properties"] as? [String: Any])
    #expect(properties["title"] as? String == "Brandenburger Tor")
    #expect(properties["id"] as? String == "gate")
    let cafe = try #require(features.last?["properties"] as? [String: Any])
    #expect(cafe["title"] as? String == "Café <Mitte> & 'Co'")
    #expect(cafe["kind"] as? String == "poi")

    // The track has all six fixes in order; the bbox is the viewport's.
    let track = (features[1]["geometry"] as? [String: Any])?["coordinates"] as? [[Double]]
    #expect(track?.count == 6)
    #expect(track?.first == [13.377_7, 52.516_3])
    let viewport = await service.currentViewport
    let bounds = viewport.bounds
    let bbox = try #require(features[0]["bbox"] as? [Double])
    #expect(abs(bbox[0] - bounds.west) < 1e-7 && abs(bbox[1] - bounds.south) < 1e-7)
    #expect(abs(bbox[2] - bounds.east) < 1e-7 && abs(bbox[3] - bounds.north) < 1e-7)
    #expect(collection["bbox"] as? [Double] == bbox)  // everything is in view
    #expect(
      abs(((features[0]["properties"] as? [String: Any])?["zoom"] as? Double ?? 0) - 14) < 1e-9)
  }

  @Test func geoJSONAcrossTheAntimeridianAndWithoutTrack() async throws {
    let service = MapStateService()
    try await service.setCenter(Coordinate(latitude: -17, longitude: 179.5))
    try await service.setZoom(6)
    try await service.addAnnotation(
      Annotation(id: "far", coordinate: Coordinate(latitude: 60, longitude: 10), title: "Far"))
    await service.update(fix: fix(-17, -179.9))
    let object = try JSONSerialization.jsonObject(with: Data(await service.geoJSON().utf8))
    #expect(rfc7946Problems(object) == [])
    let features = try #require((object as? [String: Any])?["features"] as? [[String: Any]])
    // One fix is no LineString: the track feature is left out.
    #expect(
      features.compactMap { ($0["geometry"] as? [String: Any])?["type"] as? String } == [
        "MultiPolygon", "Point", "Point",
      ])
    let bbox = try #require(features[0]["bbox"] as? [Double])
    #expect(bbox[0] > bbox[2])  // west > east across the antimeridian (RFC 7946 section 5.2)
    // The collection bbox widens to include the far annotation.
    let collectionBBox = try #require((object as? [String: Any])?["bbox"] as? [Double])
    #expect(collectionBBox[3] >= 60)
  }

  @Test func shapeCheckCatchesClockwiseAndSwappedPositions() throws {
    let clockwise = """
      {"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[0,1],[1,1],[1,0],[0,0]]]}},
      {"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[52.5,170.0]}}]}
      """
    let problems = rfc7946Problems(try JSONSerialization.jsonObject(with: Data(clockwise.utf8)))
    #expect(problems.count == 2)
  }

  @Test func svgIsWellFormedWithTheExpectedElements() async throws {
    let service = try await berlinService()
    let elements = try XMLCollector.parse(await service.svg())
    #expect(elements.first?.name == "svg")
    #expect(elements.first?.attributes["width"] == "800.00")
    #expect(elements.filter { $0.name == "polyline" }.count == 1)
    let points = elements.first { $0.name == "polyline" }?.attributes["points"]?.split(
      separator: " ")
    #expect(points?.count == 6)
    let groups = elements.filter { $0.name == "g" }
    #expect(
      groups.filter { $0.attributes["class"] == "annotation" }.map { $0.attributes["data-id"] } == [
        "location", "gate", "tv", "cafe \"1\"",
      ])
    #expect(elements.filter { $0.name == "circle" }.count == 4)
    let texts = elements.filter { $0.name == "text" }.map(\.text)
    #expect(texts.contains("Brandenburger Tor"))
    #expect(texts.contains("Café <Mitte> & 'Co'"))
    #expect(texts.contains("Alexanderplatz"))
    #expect(texts.contains("1 km"))  // 9.555 m/pt * cos(52.52) = 5.815 m/pt; 200 pt = 1163 m
    #expect(groups.contains { $0.attributes["class"] == "center" })
    let scale = try #require(groups.first { $0.attributes["class"] == "scale-bar" })
    #expect(scale.attributes["data-metres"] == "1000")
    // The center crosshair is in the middle; the current location (the center here) too.
    let location = try #require(elements.firstIndex { $0.attributes["data-id"] == "location" })
    #expect(elements[location + 1].attributes["cx"] == "400.00")
    #expect(elements[location + 1].attributes["cy"] == "300.00")
  }

  @Test func svgEscapesHostileText() async throws {
    let service = MapStateService()
    try await service.addAnnotation(
      Annotation(
        id: "x]]>&<", coordinate: Coordinate(latitude: 0, longitude: 0),
        title: "</text><script>\"'&amp;"))
    let elements = try XMLCollector.parse(await service.svg())
    #expect(elements.filter { $0.name == "script" }.isEmpty)
    #expect(elements.contains { $0.name == "text" && $0.text == "</text><script>\"'&amp;" })
    #expect(elements.contains { $0.attributes["data-id"] == "x]]>&<" })
  }

  @Test func goldenSnapshotOfAFixedState() async throws {
    let service = try await berlinService()
    try expectGolden(await service.svg(), named: "berlin.svg")
    try expectGolden(await service.geoJSON() + "\n", named: "berlin.geojson")
    try expectGolden(await service.snapshot.jsonString() + "\n", named: "berlin.map.json")
  }

  @Test func renderersBehindOneProtocol() async throws {
    let service = try await berlinService()
    let renderers: [any MapRenderer] = [GeoJSONRenderer(), SVGRenderer(), InMemoryRenderer()]
    for renderer in renderers { await service.attach(renderer: renderer) }
    try await service.setZoom(13)
    let state = await service.renderState
    #expect((renderers[0] as? GeoJSONRenderer)?.latest == GeoJSON.document(for: state))
    #expect((renderers[1] as? SVGRenderer)?.latest == SVGSnapshot.document(for: state))
    #expect((renderers[2] as? InMemoryRenderer)?.latest == state)
  }
}
