import Foundation
import LocationModel
import MapState
import Regions
import Testing

#if canImport(FoundationXML)
  import FoundationXML
#endif

@Suite("Renderers: monitored regions")
struct RegionRendererTests {
  /// Berlin's map with a circle (inside) and a clockwise square with a hole (unknown).
  static func regions() throws -> [RegionStatus] {
    let circle = try Region(
      id: "gate", title: "Pariser Platz",
      shape: .circle(center: Coordinate(latitude: 52.516_3, longitude: 13.378_0), radius: 120),
      dwell: 60)
    // Exterior clockwise (north-west, north-east, south-east, south-west), as a client may send it.
    let park = try Region(
      id: "park",
      shape: .polygon(
        exterior: [
          Coordinate(latitude: 52.518, longitude: 13.390),
          Coordinate(latitude: 52.518, longitude: 13.400),
          Coordinate(latitude: 52.512, longitude: 13.400),
          Coordinate(latitude: 52.512, longitude: 13.390),
        ],
        holes: [
          [
            Coordinate(latitude: 52.514, longitude: 13.393),
            Coordinate(latitude: 52.514, longitude: 13.396),
            Coordinate(latitude: 52.516, longitude: 13.396),
            Coordinate(latitude: 52.516, longitude: 13.393),
          ]
        ]))
    return [
      RegionStatus(
        region: circle, state: .inside, since: 1_790_000_000_000, distanceToBoundary: -80),
      RegionStatus(region: park, state: .unknown, since: nil, distanceToBoundary: nil),
    ]
  }

  @Test("GeoJSON: one valid RFC 7946 feature per region, with kind, id, title, state and shape")
  func geoJSON() async throws {
    let service = try await berlinService()
    let renderer = InMemoryRenderer()
    await service.attach(renderer: renderer)
    await service.setRegions(try Self.regions())
    #expect(renderer.calls.last?.changes == [.regions])
    #expect(renderer.latest?.regions.map(\.region.id) == ["gate", "park"])
    let object = try JSONSerialization.jsonObject(with: Data(await service.geoJSON().utf8))
    #expect(rfc7946Problems(object).isEmpty, "\(rfc7946Problems(object))")
    let features = try #require((object as? [String: Any])?["features"] as? [[String: Any]])
    let regions = features.filter {
      ($0["properties"] as? [String: Any])?["kind"] as? String == "region"
    }
    #expect(regions.map { $0["id"] as? String } == ["gate", "park"])
    let gate = try #require(regions.first?["properties"] as? [String: Any])
    #expect(gate["state"] as? String == "inside")
    #expect(gate["title"] as? String == "Pariser Platz")
    #expect(gate["shape"] as? String == "circle")
    #expect(gate["radius"] as? Double == 120)
    #expect(gate["dwell"] as? Double == 60)
    let park = try #require(regions.last)
    #expect((park["properties"] as? [String: Any])?["state"] as? String == "unknown")
    #expect((park["properties"] as? [String: Any])?["title"] is NSNull)
    let rings = try #require((park["geometry"] as? [String: Any])?["coordinates"] as? [[[Double]]])
    #expect(rings.count == 2 && rings[0].count == 5 && rings[1].count == 5)
    // Same ids replace: a new list without the park leaves only the circle.
    await service.setRegions(Array(try Self.regions().prefix(1)))
    #expect(await service.geoJSON().contains("\"park\"") == false)
  }

  @Test("SVG: a circle and a path with its hole, filled by state, labelled")
  func svg() async throws {
    let service = try await berlinService()
    await service.setRegions(try Self.regions())
    let elements = try XMLCollector.parse(await service.svg())
    let groups = elements.enumerated().filter {
      $0.element.name == "g" && $0.element.attributes["class"] == "region"
    }
    #expect(groups.map { $0.element.attributes["data-id"] } == ["gate", "park"])
    #expect(groups.map { $0.element.attributes["data-state"] } == ["inside", "unknown"])
    let circle = elements[try #require(groups.first?.offset) + 1]
    #expect(circle.name == "circle")
    // 120 m at zoom 14 and 52.5163 N: 9.5546 m/pt * cos(52.5163) = 5.8143 m/pt -> 20.64 pt.
    #expect(circle.attributes["r"] == "20.64")
    let path = elements[try #require(groups.last?.offset) + 1]
    #expect(path.name == "path")
    #expect(path.attributes["fill-rule"] == "evenodd")
    #expect(path.attributes["d"]?.components(separatedBy: "Z").count == 3, "two closed subpaths")
    let texts = elements.filter { $0.name == "text" }.map(\.text)
    #expect(texts.contains("Pariser Platz") && texts.contains("park"))
  }

  /// The numbers of an SVG path's `d`, as (x, y) pairs.
  static func pathPoints(_ d: String) -> [(x: Double, y: Double)] {
    let numbers = d.split(separator: " ").compactMap { Double($0) }
    return stride(from: 0, to: numbers.count - 1, by: 2).map { (numbers[$0], numbers[$0 + 1]) }
  }

  @Test("SVG: a ring around the North Pole is filled up to the map's edge, not drawn flat")
  func polarRing() async throws {
    let ring = (0..<8).map { Coordinate(latitude: 85, longitude: -180 + 45 * Double($0)) }
    let cap = try Region(id: "arctic", title: "", shape: .polygon(exterior: ring, holes: []))
    let service = MapStateService()
    try await service.setCenter(Coordinate(latitude: 70, longitude: 10))
    try await service.setZoom(1)
    await service.setRegions([RegionStatus(region: cap, state: .unknown, since: nil, distanceToBoundary: nil)])
    let elements = try XMLCollector.parse(await service.svg())
    let group = try #require(
      elements.firstIndex { $0.name == "g" && $0.attributes["data-id"] == "arctic" })
    let path = elements[group + 1]
    #expect(path.name == "path")
    let points = Self.pathPoints(path.attributes["d"] ?? "")
    let ys = Set(points.map(\.y))
    #expect(ys.count == 2, "the ring's line and the map's edge: \(points)")
    // The ring goes once round: its x grows (or falls) by one world width, 512 pt at zoom 1.
    let xs = points.map(\.x)
    #expect(abs((xs.max() ?? 0) - (xs.min() ?? 0) - 512) < 0.02, "\(xs)")
    // The edge is above the ring (smaller y): the cap towards the pole is filled.
    #expect((ys.min() ?? 0) < (ys.max() ?? 0))
    // An empty title is labelled with the id.
    #expect(elements[group + 2].name == "text")
    #expect(elements[group + 2].text == "arctic")
  }
}
