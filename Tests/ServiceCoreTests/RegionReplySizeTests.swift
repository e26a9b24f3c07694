import LocationCore
import LocationModel
import LocationTestKit
import MapState
import Regions
import Testing

@testable import LocationProtocol
@testable import ServiceCore

private let root = PeerCredentials(pid: 1, uid: 0, gid: 0)

private final class SilentChannel: ClientChannel {
  let id = ConnectionNumber.next()
  @discardableResult func send(_ event: Event) -> Bool { true }
  @discardableResult func deliver(_ event: EncodedEvent) -> Bool { true }
  var isConnected: Bool { true }
  func close() {}
}

/// The service with `count` circles of 100 m spread over 20 degrees of longitude (ids `r00000`
/// ...), regions in memory.
private func service(circles count: Int) async throws -> (LocationService, MapStateService) {
  let regions = RegionService()
  for index in 0..<count {
    let longitude = -10 + 20 * Double(index) / Double(max(count, 1))
    let id = "r" + String(100_000 + index).dropFirst()
    _ = await regions.add(
      try Region(
        id: id, shape: .circle(center: Coordinate(latitude: 48, longitude: longitude), radius: 100))
    )
  }
  let backend = FakeBackend()
  let map = MapStateService()
  let service = LocationService(
    manager: LocationManager(backend: backend), map: map, backend: backend,
    authority: AuthorizationAuthority(Authorizer(groupName: nil)), regions: regions)
  await service.start()
  return (service, map)
}

private func ask(_ service: LocationService, _ line: String) async throws -> JSONValue {
  let context = ClientContext(connection: SilentChannel(), peer: root)
  _ = await service.handle(Request(command: .requestAuthorization), from: context)
  let request: Request
  do {
    request = try Request.parse(Array(line.utf8))
  } catch {
    return Reply.error(error.code, message: error.message).json(id: nil)
  }
  return try JSONValue.parse(await service.handle(request, from: context).json(id: nil).encoded)
}

@Suite("Replies too large for a client are refused before they are built", .serialized)
struct RegionReplySizeTests {
  @Test("map geojson and svg with 20,000 regions: limitExceeded naming the regions")
  func mapTooLarge() async throws {
    let (service, map) = try await service(circles: 20_000)
    #expect(await eventually { await map.monitoredRegions.count == 20_000 })
    let geojson = try await ask(service, #"{"cmd":"map","format":"geojson"}"#)
    #expect(geojson["code"] == "limitExceeded")
    let message = geojson["message"]?.stringValue ?? ""
    #expect(message.contains("20000 monitored regions"))
    #expect(message.contains("remove regions"))
    #expect(!message.contains("annotations"))
    // Zoomed out over all of them, the SVG is refused too.
    try await map.setCenter(Coordinate(latitude: 48, longitude: 0))
    try await map.setZoom(3)
    let svg = try await ask(service, #"{"cmd":"map","format":"svg"}"#)
    #expect(svg["code"] == "limitExceeded")
    #expect(svg["message"]?.stringValue?.contains("monitored regions") == true)
    // Zoomed in at 15, only the few regions in view are drawn and the SVG is answered.
    try await map.setZoom(15)
    let near = try await ask(service, #"{"cmd":"map","format":"svg"}"#)
    let text = try #require(near["svg"]?.stringValue)
    let drawn = text.components(separatedBy: "<g class=\"region\"").count - 1
    #expect(drawn >= 1 && drawn <= 100)
    await service.shutdown(reason: "test")
  }

  @Test("region list: limitExceeded pointing at paging, and pages with after and limit")
  func listPaging() async throws {
    let (service, _) = try await service(circles: 12_000)
    let whole = try await ask(service, #"{"cmd":"region","action":"list"}"#)
    #expect(whole["code"] == "limitExceeded")
    #expect(whole["message"]?.stringValue?.contains("--after ID --limit N") == true)
    let first = try await ask(service, #"{"cmd":"region","action":"list","limit":3}"#)
    #expect(
      first["regions"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [
        "r00000", "r00001", "r00002",
      ])
    #expect(first["more"] == true)
    let next = try await ask(
      service, #"{"cmd":"region","action":"list","after":"r00002","limit":2}"#)
    #expect(
      next["regions"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["r00003", "r00004"])
    #expect(next["more"] == true)
    let last = try await ask(
      service, #"{"cmd":"region","action":"list","after":"r11998","limit":5}"#)
    #expect(last["regions"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["r11999"])
    #expect(last["more"] == false)
    let bad = try await ask(service, #"{"cmd":"region","action":"list","limit":0}"#)
    #expect(bad["code"] == "invalidArgument")
    await service.shutdown(reason: "test")
  }
}
