import LocationModel
import Regions
import Testing

@testable import LocationProtocol

@Suite("The region command and event on the wire")
struct RegionProtocolTests {
  private func parse(_ line: String) throws(ProtocolError) -> Request {
    try Request.parse(Array(line.utf8))
  }

  @Test("add with a circle: every member read, defaults for the optional ones")
  func addCircle() throws {
    let request = try parse(
      #"{"cmd":"region","id":3,"action":"add","region":{"id":"home","title":"Home","circle":{"lat":49.2827,"lon":-123.1207,"radius":150},"dwell":60,"notifyOnExit":false}}"#
    )
    guard case .region(.add(let region)) = request.command else {
      Issue.record("not an add: \(request.command)")
      return
    }
    #expect(region.id == "home")
    #expect(region.title == "Home")
    #expect(
      region.shape
        == .circle(center: Coordinate(latitude: 49.2827, longitude: -123.1207), radius: 150))
    #expect(region.dwell == 60)
    #expect(region.notifyOnEntry)
    #expect(!region.notifyOnExit)
    #expect(request.id == .numberText("3"))
    #expect(request.command.name == "region")
  }

  @Test("remove, state and list")
  func otherActions() throws {
    #expect(
      try parse(#"{"cmd":"region","action":"remove","region":"home"}"#).command
        == .region(.remove(id: "home")))
    #expect(
      try parse(#"{"cmd":"region","action":"state","region":"a b"}"#).command
        == .region(.state(id: "a b")))
    #expect(try parse(#"{"cmd":"region","action":"list"}"#).command == .region(.list()))
  }

  @Test(
    "bad requests are invalidArgument with a message that names the problem",
    arguments: [
      (#"{"cmd":"region"}"#, "missing \"action\""),
      (#"{"cmd":"region","action":"move"}"#, "\"action\" must be one of add, remove, list, state"),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","polygon":{"type":"Polygon","type":"Point","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}}}"#,
        "duplicate member \"type\": give each member once"
      ),
      (
        #"{"cmd":"region","action":"list","limit":2.5}"#,
        "\"limit\" must be a whole number"
      ),
      (#"{"cmd":"region","action":"add"}"#, "missing \"region\""),
      (#"{"cmd":"region","action":"add","region":{"id":"x"}}"#, "missing \"region.circle\""),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2}}}"#,
        "missing \"region.circle.radius\": a finite radius in (0, 1000000] metres"
      ),
      // Beyond a Double's range: the rule the engine applies, not the range of a Double.
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2,"radius":1e999}}}"#,
        "\"region.circle.radius\" must be a finite radius in (0, 1000000] metres (got inf)"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2,"radius":5},"dwell":-1e999}}"#,
        "\"region.dwell\" must be a finite time in (0, 604800] seconds (got -inf)"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2,"radius":0}}}"#,
        "invalid radius 0.0 m"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2,"radius":-5}}}"#,
        "invalid radius -5.0 m"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":91,"lon":2,"radius":5}}}"#,
        "\"region.circle.lat\" must be within"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2,"radius":5},"dwell":0}}"#,
        "invalid dwell time"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2,"radius":5},"colour":"red"}}"#,
        "unknown member \"region.colour\""
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","circle":{"lat":1,"lon":2,"radius":5},"polygon":{"type":"Polygon","coordinates":[]}}}"#,
        "not both"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","polygon":[1,2]}}"#,
        "\"region.polygon\" must be a GeoJSON object"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"x","polygon":{"type":"Point","coordinates":[1,2]}}}"#,
        "\"region.polygon\": invalid GeoJSON"
      ),
      (
        #"{"cmd":"region","action":"add","region":{"id":"\u0007","circle":{"lat":1,"lon":2,"radius":5}}}"#,
        "invalid region id"
      ),
      (#"{"cmd":"region","action":"remove"}"#, "missing \"region\""),
      (#"{"cmd":"region","action":"list","region":"x"}"#, "unknown member \"region\""),
    ])
  func refusals(_ line: String, _ message: String) {
    do {
      _ = try parse(line)
      Issue.record("accepted: \(line)")
    } catch {
      #expect(error.code == .invalidArgument, "\(line)")
      #expect(error.message.contains(message), "\(line): \(error.message)")
    }
  }

  @Test("a polygon geometry is read with the engine's GeoJSON rules")
  func addPolygon() throws {
    let request = try parse(
      #"{"cmd":"region","action":"add","region":{"id":"park","polygon":{"type":"Polygon","coordinates":[[[2.0,48.0],[2.01,48.0],[2.01,48.01],[2.0,48.01],[2.0,48.0]]]}}}"#
    )
    guard case .region(.add(let region)) = request.command,
      case .polygon(let exterior, let holes) = region.shape
    else {
      Issue.record("not a polygon: \(request.command)")
      return
    }
    #expect(exterior.count == 4)
    #expect(exterior.first == Coordinate(latitude: 48.0, longitude: 2.0))
    #expect(holes.isEmpty)
    // In replies the rings are closed again, positions [lon, lat].
    let json = RegionWire.json(region)
    #expect(json["polygon"]?["type"] == "Polygon")
    let ring = json["polygon"]?["coordinates"]?.arrayValue?.first?.arrayValue
    #expect(ring?.count == 5)
    #expect(ring?.first == ring?.last)
    #expect(ring?.first?.arrayValue?.map(\.doubleValue) == [2.0, 48.0])
  }

  @Test("replies and the REGION event have the documented members in order")
  func encoding() throws {
    let region = try Region(
      id: "home", title: "Home",
      shape: .circle(center: Coordinate(latitude: 49.2827, longitude: -123.1207), radius: 150),
      dwell: 60)
    let status = RegionStatus(
      region: region, state: .inside, since: 1_790_000_000_000, distanceToBoundary: -42.5,
      distanceTime: 1_790_000_060_000)
    let reply = Reply.region(status, replaced: false).json(id: .number(4))
    #expect(
      reply.jsonString
        == #"{"class":"REGION","id":4,"region":{"id":"home","title":"Home","circle":{"lat":49.2827,"lon":-123.1207,"radius":150},"dwell":60,"notifyOnEntry":true,"notifyOnExit":true,"state":"inside","since":"2026-09-21T14:13:20.000Z","distance":-42.5,"measured":"2026-09-21T14:14:20.000Z"},"replaced":false}"#
    )
    #expect(Reply.regions([]).json(id: nil).jsonString == #"{"class":"REGIONS","regions":[]}"#)
    var fix = Fix(mode: .fix3D)
    fix.coordinate = Coordinate(latitude: 49.2827, longitude: -123.1207)
    fix.time = 1_790_000_000_000
    let location = Location(
      fix: fix, provenance: Provenance(backend: "simulate", isSimulated: true))
    let event = EncodedEvent(
      .region(
        RegionTransition(id: "home", event: .enter, time: 1_790_000_000_000, location: location)))
    let text = String(decoding: event.body, as: UTF8.self)
    #expect(
      text.hasPrefix(
        #"{"class":"REGION","region":"home","event":"enter","time":"2026-09-21T14:13:20.000Z","fix":{"class":"TPV","#
      ))
    #expect(event.coalescingKey == nil, "REGION events are never replaced in a slow client's queue")
  }
}
