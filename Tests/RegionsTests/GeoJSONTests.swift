import JSON
import LocationModel
import Testing

@testable import Regions

@Suite struct GeoJSONTests {
  static let square = "[[[13.40,52.51],[13.42,52.51],[13.42,52.53],[13.40,52.53],[13.40,52.51]]]"

  @Test(arguments: [
    "{\"type\":\"Polygon\",\"coordinates\":\(square)}",
    "{\"type\":\"Feature\",\"properties\":{\"name\":\"x\"},\"geometry\":{\"type\":\"Polygon\",\"coordinates\":\(square)}}",
    "{\"type\":\"FeatureCollection\",\"features\":[{\"type\":\"Feature\",\"properties\":null,\"geometry\":{\"type\":\"Polygon\",\"coordinates\":\(square)}}]}",
  ])
  func acceptsPolygonFeatureAndCollection(_ text: String) throws {
    let shape = try RegionGeoJSON.shape(from: Array(text.utf8))
    guard case .polygon(let exterior, let holes) = shape else {
      Issue.record("not a polygon")
      return
    }
    #expect(exterior.count == 4)
    #expect(exterior[1] == Coordinate(latitude: 52.51, longitude: 13.42))
    #expect(holes.isEmpty)
  }

  @Test func acceptsAltitudeHolesAndRepeatedPositions() throws {
    let text = """
      {"type":"Polygon","coordinates":[
        [[13.40,52.51,30],[13.42,52.51,30],[13.42,52.51,31],[13.42,52.53,30],[13.40,52.53,30],[13.40,52.51,30]],
        [[13.41,52.515],[13.411,52.52],[13.412,52.515],[13.41,52.515]]]}
      """
    let shape = try RegionGeoJSON.shape(from: Array(text.utf8))
    guard case .polygon(let exterior, let holes) = shape else { return }
    #expect(exterior.count == 4)
    #expect(holes.count == 1 && holes[0].count == 3)
  }

  @Test(arguments: [
    ("not json", "not JSON"),
    ("[1,2]", "top level is not an object"),
    ("{\"coordinates\":[]}", "no \"type\""),
    ("{\"type\":\"MultiPolygon\",\"coordinates\":[\(square)]}", "MultiPolygon is not supported"),
    ("{\"type\":\"Point\",\"coordinates\":[1,2]}", "Point is not supported"),
    ("{\"type\":\"Feature\",\"geometry\":null}", "no geometry"),
    ("{\"type\":\"Feature\",\"geometry\":{\"type\":\"Feature\"}}", "a geometry must be a Polygon"),
    ("{\"type\":\"FeatureCollection\",\"features\":[]}", "has 0 features"),
    ("{\"type\":\"FeatureCollection\",\"features\":[{\"type\":\"Polygon\",\"coordinates\":\(square)}]}", "not an object of type \"Feature\""),
    ("{\"type\":\"Polygon\",\"coordinates\":[]}", "no rings"),
    ("{\"type\":\"Polygon\",\"coordinates\":[[13.4,52.5],[13.5,52.5],[13.5,52.6],[13.4,52.5]]}", "is a position, not an array of positions"),
    ("{\"type\":\"Polygon\",\"coordinates\":[[[13.4,52.5],[13.5,52.5],[13.4,52.5]]]}", "has 3 positions"),
    ("{\"type\":\"Polygon\",\"coordinates\":[[[13.4,52.5],[13.5,52.5],[13.5,52.6],[13.4,52.6]]]}", "not closed"),
    ("{\"type\":\"Polygon\",\"coordinates\":[[[52.5,13.4],[52.5,95.0],[52.6,13.5],[52.5,13.4]]]}", "out of range"),
    ("{\"type\":\"Polygon\",\"coordinates\":[[[13.4,52.5],[13.5],[13.5,52.6],[13.4,52.5]]]}", "position 1 is not"),
    ("{\"type\":\"Polygon\",\"coordinates\":[[[13.4,52.5],[13.5,\"52\"],[13.5,52.6],[13.4,52.5]]]}", "not a number"),
    ("{\"type\":\"Nonsense\"}", "unknown GeoJSON type"),
  ])
  func refusesWithAClearReason(_ text: String, _ expected: String) {
    #expect {
      try RegionGeoJSON.shape(from: Array(text.utf8))
    } throws: { error in
      guard case .invalidGeoJSON(let reason) = error as? RegionError else { return false }
      return reason.contains(expected)
    }
  }

  /// Two members of one name (other parsers take the last, this one would take the first): the
  /// same file would mean different polygons, so it is refused, naming the member.
  @Test(arguments: [
    ("{\"type\":\"Polygon\",\"type\":\"Point\",\"coordinates\":\(square)}", "type"),
    ("{\"type\":\"Polygon\",\"coordinates\":\(square),\"coordinates\":[[[0,0],[1,0],[1,1],[0,0]]]}", "coordinates"),
    ("{\"type\":\"Feature\",\"properties\":{},\"geometry\":{\"type\":\"Polygon\",\"coordinates\":\(square),\"coordinates\":\(square)}}", "geometry.coordinates"),
    ("{\"type\":\"FeatureCollection\",\"features\":[{\"type\":\"Feature\",\"properties\":{\"a\":1,\"a\":2},\"geometry\":{\"type\":\"Polygon\",\"coordinates\":\(square)}}]}", "features[0].properties.a"),
  ])
  func duplicateMembersAreRefused(_ text: String, _ path: String) {
    #expect(throws: RegionError.invalidGeoJSON(reason: "duplicate member \"\(path)\": give each member once")) {
      try RegionGeoJSON.shape(from: Array(text.utf8))
    }
  }

  @Test func bowTieIsRefusedAfterParsing() {
    let text = "{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}"
    #expect {
      try RegionGeoJSON.shape(from: Array(text.utf8))
    } throws: { error in
      guard case .selfIntersection = error as? RegionError else { return false }
      return true
    }
  }

  /// A file over 10 MiB is refused before parsing, whatever it holds; a valid polygon of nearly
  /// 10 MiB is accepted.
  @Test func sizeLimit() throws {
    var big = Array("{\"type\":\"Polygon\",\"coordinates\":\(Self.square)}".utf8)
    big += Array(repeating: UInt8(ascii: " "), count: RegionGeoJSON.maxBytes + 1 - big.count)
    #expect(throws: RegionError.fileTooLarge(bytes: RegionGeoJSON.maxBytes + 1, limit: RegionGeoJSON.maxBytes)) {
      try RegionGeoJSON.shape(from: big)
    }
    big.removeLast()
    _ = try RegionGeoJSON.shape(from: big)
  }

  /// Nothing is half-added: a monitor given bad input keeps exactly what it had.
  @Test func badInputLeavesTheMonitorUnchanged() throws {
    var monitor = RegionMonitor()
    monitor.add(try Region(id: "a", shape: .circle(center: Coordinate(latitude: 1, longitude: 1), radius: 10)))
    let before = monitor.persisted()
    let inputs = [
      "{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}",
      "{\"type\":\"MultiPolygon\",\"coordinates\":[]}",
    ]
    for text in inputs {
      do {
        let shape = try RegionGeoJSON.shape(from: Array(text.utf8))
        monitor.add(try Region(id: "a", shape: shape))
        Issue.record("accepted \(text)")
      } catch {}
    }
    #expect(throws: RegionError.self) { try RegionMonitor(restoring: .object([JSONMember("version", 1)])) }
    #expect(monitor.persisted() == before)
  }

  @Test func featureForACircleAndAPolygon() throws {
    let center = Coordinate(latitude: 52.52, longitude: 13.405)
    let circle = try Region(id: "c", title: "Cafe", shape: .circle(center: center, radius: 50), dwell: 60)
    let feature = RegionGeoJSON.feature(RegionStatus(region: circle, state: .inside, since: 5, distanceToBoundary: -3))
    #expect(feature["type"] == "Feature")
    #expect(feature["id"] == "c")
    #expect(feature["properties"]?["kind"] == "circle")
    #expect(feature["properties"]?["radius"] == 50)
    #expect(feature["properties"]?["state"] == "inside")
    #expect(feature["properties"]?["since"] == 5)
    #expect(feature["properties"]?["dwell"] == 60)
    let ringValue = feature["geometry"]?["coordinates"]?.arrayValue?.first?.arrayValue ?? []
    #expect(ringValue.count == RegionGeoJSON.circlePoints + 1)
    #expect(ringValue.first == ringValue.last)
    for position in ringValue {
      let lon = position.arrayValue?[0].doubleValue ?? 0
      let lat = position.arrayValue?[1].doubleValue ?? 0
      #expect(abs(Geodesic.distance(center, Coordinate(latitude: lat, longitude: lon)) - 50) < 1e-6)
    }
    // A clockwise polygon comes out counterclockwise (RFC 7946 right-hand rule), closed.
    let clockwise = ring(around: center, radius: 300, count: 6, clockwise: true)
    let polygon = try Region(id: "p", shape: .polygon(exterior: clockwise, holes: []))
    let polygonFeature = RegionGeoJSON.feature(RegionStatus(region: polygon, state: .unknown, since: nil, distanceToBoundary: nil))
    let positions = polygonFeature["geometry"]?["coordinates"]?.arrayValue?.first?.arrayValue ?? []
    #expect(positions.count == 7)
    let expectedFirst = RegionMonitor.json(clockwise[5])
    #expect(positions.first == expectedFirst)
    #expect(polygonFeature["properties"]?["since"] == .null)
  }

  /// Long geodesic edges are drawn through points on the geodesic, at most 5 km apart.
  @Test func longEdgesAreDensified() throws {
    let exterior = [
      Coordinate(latitude: 60, longitude: 0), Coordinate(latitude: 60, longitude: 10),
      Coordinate(latitude: 62, longitude: 5),
    ]
    let region = try Region(id: "big", shape: .polygon(exterior: exterior, holes: []))
    let feature = RegionGeoJSON.feature(RegionStatus(region: region, state: .outside, since: nil, distanceToBoundary: nil))
    let positions = (feature["geometry"]?["coordinates"]?.arrayValue?.first?.arrayValue ?? []).compactMap { value in
      value.arrayValue.flatMap { pair in
        pair.count == 2 ? pair[1].doubleValue.flatMap { lat in pair[0].doubleValue.map { Coordinate(latitude: lat, longitude: $0) } } : nil
      }
    }
    #expect(positions.count > 100)
    for (a, b) in zip(positions, positions.dropFirst()) {
      #expect(Geodesic.distance(a, b) <= RegionGeoJSON.densifySpacing + 1e-6)
      // Every added point lies on the boundary.
      #expect(abs(region.signedDistance(to: a)) < 0.01)
    }
    // The edge between two points of the 60th parallel bulges north of it (to 60.09 degrees
    // midway): the geodesic, not the parallel.
    #expect(positions.contains { $0.latitude > 60.08 && $0.longitude > 4 && $0.longitude < 6 && $0.latitude < 61 })
  }
}
