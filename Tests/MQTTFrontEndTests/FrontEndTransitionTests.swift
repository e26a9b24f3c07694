import JSON
import LocationModel
import LocationProtocol
import MQTTFrontEnd
import OwnTracks
import Regions
import ServiceCore
import Synchronization
import Testing

/// The service core as the front-end sees it: authorizes, accepts the watch, knows one region
/// (`home`, titled "Home") and counts the `region` `state` requests.
private final class RegionServiceStub: RequestHandler {
  let regionRequests = Mutex<[String]>([])

  func handle(_ request: Request, from client: ClientContext) async -> Reply {
    switch request.command {
    case .region(.state(let id)):
      regionRequests.withLock { $0.append(id) }
      let circle = RegionShape.circle(center: Coordinate(latitude: 48.1, longitude: 11.5), radius: 100)
      guard id == "home", let region = try? Region(id: "home", title: "Home", shape: circle) else {
        return .error(.notFound, message: "no region \"\(id)\"")
      }
      return .region(RegionStatus(region: region, state: .inside, since: 0, distanceToBoundary: -5))
    default:
      return .object(class: "OK", members: [])
    }
  }

  func clientDisconnected(_ client: ClientContext) async {}
}

@Suite("MQTT front-end: region transitions")
struct FrontEndTransitionTests {
  static func regionEvent(_ id: String, _ kind: RegionEventKind, second: Int64) -> EncodedEvent {
    var fix = Fix(mode: .fix3D)
    fix.time = (1_796_047_200 + second) * 1000 + 250
    fix.coordinate = Coordinate(latitude: 48.1009, longitude: 11.5)
    let location = Location(fix: fix, provenance: Provenance(backend: "simulate", isSimulated: true))
    return EncodedEvent(.region(RegionTransition(id: id, event: kind, time: fix.time ?? 0, location: location)))
  }

  @Test("REGION enter and exit are queued in order as transitions on TOPIC/event, not retained; dwell is not")
  func queuesTransitions() async throws {
    var settings = MQTTSettings(broker: try MQTTBrokerAddress(uri: "mqtt://127.0.0.1:1"))
    settings.topic = "owntracks/alice/car"
    settings.trackerID = "AC"
    settings.retain = true
    settings.minimumInterval = 3600  // the location limiter must not hold transitions back
    let outbox = MemoryOutbox(limit: 100)
    let handler = RegionServiceStub()
    let frontEnd = OwnTracksFrontEnd(settings: settings, credentials: nil, outbox: outbox, handler: handler)
    try await frontEnd.start()
    frontEnd.deliver(Self.regionEvent("home", .enter, second: 1))
    frontEnd.deliver(Self.regionEvent("home", .dwell, second: 30))
    frontEnd.deliver(Self.regionEvent("gone", .exit, second: 61))
    // The transitions are queued by the front-end's own task: wait for it, bounded.
    for _ in 0..<1000 where frontEnd.counters.transitions < 2 { try await Task.sleep(for: .milliseconds(5)) }
    await frontEnd.stop()
    let messages = try outbox.oldest(after: nil, limit: 10)
    #expect(messages.map(\.topic) == ["owntracks/alice/car/event", "owntracks/alice/car/event"])
    #expect(messages.map(\.retain) == [false, false])
    #expect(
      messages.map { String(decoding: $0.payload, as: UTF8.self) } == [
        #"{"_type":"transition","tid":"AC","wtst":0,"tst":1796047201,"lat":48.1009,"lon":11.5,"event":"enter","desc":"Home","t":"c","rid":"home"}"#,
        // A region removed meanwhile: desc falls back to its id.
        #"{"_type":"transition","tid":"AC","wtst":0,"tst":1796047261,"lat":48.1009,"lon":11.5,"event":"leave","desc":"gone","t":"c","rid":"gone"}"#,
      ])
    #expect(frontEnd.counters.transitions == 2)
    #expect(frontEnd.counters.queued == 0, "no location was queued")
    // dwell is skipped before the title is asked for.
    #expect(handler.regionRequests.withLock { $0 } == ["home", "gone"])
  }
}
