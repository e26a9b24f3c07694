import Foundation
import Glibc
import LocationTestKit
import Synchronization
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel

@Suite("Socket server", .serialized, .timeLimit(.minutes(3)))
struct ServerTests {
  @Test("malformed JSON gets malformedJSON and the connection stays up")
  func malformedJSON() async throws {
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    let error = try await client.roundTrip("{\"cmd\": \"status\"")
    #expect(error?["class"] == "ERROR")
    #expect(error?["code"] == "malformedJSON")
    let notObject = try await client.roundTrip("[1,2]")
    #expect(notObject?["code"] == "malformedJSON")
    let status = try await client.roundTrip(#"{"cmd":"status","id":7}"#)
    #expect(status?["class"] == "STATUS")
    #expect(status?["id"] == .int(7))
    #expect(status?["authorization"] == "notDetermined")
    await fixture.stop()
  }

  @Test("unknown command and invalid arguments carry the request id")
  func unknownCommand() async throws {
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    let unknown = try await client.roundTrip(#"{"cmd":"teleport","id":"x1"}"#)
    #expect(unknown?["code"] == "unknownCommand")
    #expect(unknown?["id"] == "x1")
    _ = try await client.roundTrip(#"{"cmd":"request"}"#)
    let invalid = try await client.roundTrip(#"{"cmd":"setCenter","lat":91,"lon":0,"id":3}"#)
    #expect(invalid?["code"] == "invalidArgument")
    #expect(invalid?["id"] == .int(3))
    // Only the valid request reached the handler (which decides authorization).
    #expect(fixture.handler.handled.withLock { $0 } == [.requestAuthorization])
    await fixture.stop()
  }

  @Test("CRLF-terminated requests are accepted")
  func crlf() async throws {
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    try await client.send("{\"cmd\":\"status\",\"id\":1}\r\n{\"cmd\":\"status\",\"id\":2}\r\n")
    #expect(await client.readJSON()?["id"] == .int(1))
    #expect(await client.readJSON()?["id"] == .int(2))
    await fixture.stop()
  }

  @Test("a 1 MB line gets lineTooLong once; the next request is answered")
  func oneMegabyteLine() async throws {
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    var line = Array(#"{"cmd":"annotate","title":""#.utf8)
    line.append(contentsOf: [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
    line.append(contentsOf: Array("\"}\n".utf8))
    try await client.send(line)
    try await client.request(#"{"cmd":"status","id":"after"}"#)
    let error = await client.readJSON()
    #expect(error?["code"] == "lineTooLong")
    let status = await client.readJSON()
    #expect(status?["class"] == "STATUS")
    #expect(status?["id"] == "after")
    await fixture.stop()
  }

  @Test("a client that disconnects mid-request does not disturb others")
  func disconnectMidRequest() async throws {
    let fixture = try ServerFixture()
    let watcher = try fixture.connect()
    _ = try await watcher.roundTrip(#"{"cmd":"request"}"#)
    #expect(try await watcher.roundTrip(#"{"cmd":"watch"}"#)?["class"] == "WATCH")
    do {
      let leaving = try fixture.connect()
      try await leaving.send(#"{"cmd":"sta"#)
    }  // closed here, half a request sent
    #expect(await eventually { fixture.handler.disconnected.withLock { $0.count } == 1 })
    #expect(fixture.server.clientCount == 1)
    let sent = fixture.server.broadcast(Event(body: ["class": "TEST", "n": 1]))
    #expect(sent == 1)
    #expect(await watcher.readJSON()?["n"] == .int(1))
    #expect(try await watcher.roundTrip(#"{"cmd":"status"}"#)?["authorization"] == "authorized")
    await fixture.stop()
  }

  @Test("the client over the cap gets tooManyClients and is closed")
  func clientCap() async throws {
    var options = ServerOptions()
    options.maxClients = 2
    let fixture = try ServerFixture(options: options)
    let first = try fixture.connect()
    let second = try fixture.connect()
    #expect(try await first.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")
    #expect(try await second.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")
    let third = try fixture.connect()
    let refusal = await third.readJSON()
    #expect(refusal?["class"] == "ERROR")
    #expect(refusal?["code"] == "tooManyClients")
    #expect(await third.waitForClose())
    #expect(try await first.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")
    await fixture.stop()
  }

  @Test("clients that connected and closed at once do not keep the next one out")
  func goneClientsFreeTheirPlaces() async throws {
    var options = ServerOptions()
    options.maxClients = 2
    let fixture = try ServerFixture(options: options)
    for round in 0..<20 {
      // A burst of connects that close at once, most before the server accepts them: each
      // one admitted holds a place until its hang-up is read.
      for _ in 0..<8 {
        let gone = try TestClient(path: fixture.path)
        _ = gone
      }
      let client = try fixture.connect()
      let reply = try await client.roundTrip(#"{"cmd":"status"}"#)
      #expect(reply?["class"] == "STATUS", "round \(round): \(String(describing: reply))")
      if reply?["class"] != "STATUS" { break }
    }
    await fixture.stop()
  }

  @Test("commands other than status and request need authorization; root is authorized")
  func authorizationGate() async throws {
    let fixture = try await ServiceFixture(group: nil)
    let client = try fixture.connect()
    let refused = try await client.roundTrip(#"{"cmd":"start","id":1}"#)
    #expect(refused?["code"] == "notAuthorized")
    #expect(refused?["id"] == .int(1))
    let granted = try await client.roundTrip(#"{"cmd":"request","id":2}"#)
    #expect(granted?["class"] == "AUTHORIZATION")
    #expect(granted?["authorization"] == "authorized")
    let started = try await client.roundTrip(#"{"cmd":"start","distanceFilter":5,"id":3}"#)
    #expect(started?["class"] == "TRACKING")
    #expect(started?["tracking"] == true)
    #expect(started?["distanceFilter"] == .int(5))
    #expect(started?["minInterval"] == .null)
    await fixture.stop()
  }

  @Test("a slow client is coalesced, then disconnected at the bound; others are not delayed")
  func slowClient() async throws {
    var options = ServerOptions()
    options.maxBacklogBytes = 256 * 1024
    let fixture = try ServerFixture(options: options)
    let fast = try fixture.connect()
    let lagging = try fixture.connect()  // reads only after the burst
    let stalled = try fixture.connect()  // never reads
    for client in [fast, lagging, stalled] {
      _ = try await client.roundTrip(#"{"cmd":"request"}"#)
      _ = try await client.roundTrip(#"{"cmd":"watch"}"#)
    }
    let padding = String(repeating: "x", count: 1000)
    let total = 2000
    // Phase 1: coalescible location events, paced by what the fast client receives.
    var fastAccounted = 0
    var fastLast = -1
    for batch in stride(from: 0, to: total, by: 100) {
      for sequence in batch..<(batch + 100) {
        fixture.server.broadcast(
          .location(["class": "TPV", "seq": .int(Int64(sequence)), "pad": .string(padding)]))
      }
      while fastLast < batch + 99 {
        guard let event = await fast.readJSON(timeout: .seconds(5)) else { break }
        fastLast = event["seq"]?.intValue ?? -1
        fastAccounted += 1 + (event["missed"]?.intValue ?? 0)
      }
      #expect(fastLast == batch + 99, "the fast client fell behind at batch \(batch)")
    }
    #expect(fastAccounted == total)
    // The lagging client now reads: everything is accounted for, some of it as "missed".
    var laggingAccounted = 0
    var laggingMissed = 0
    var laggingLast = -1
    while laggingLast < total - 1 {
      guard let event = await lagging.readJSON(timeout: .seconds(5)) else { break }
      laggingLast = event["seq"]?.intValue ?? -1
      laggingMissed += event["missed"]?.intValue ?? 0
      laggingAccounted += 1 + (event["missed"]?.intValue ?? 0)
    }
    #expect(laggingLast == total - 1)
    #expect(laggingAccounted == total)
    #expect(laggingMissed > 0)
    #expect(fixture.server.clientCount == 3)

    // Phase 2: non-coalescible events: the stalled client exceeds 256 KiB and is dropped.
    for batch in stride(from: 0, to: 1000, by: 50) {
      for sequence in batch..<(batch + 50) {
        fixture.server.broadcast(
          Event(body: ["class": "NOTE", "seq": .int(Int64(sequence)), "pad": .string(padding)]))
      }
      for sequence in batch..<(batch + 50) {
        let event = await fast.readJSON(timeout: .seconds(5))
        #expect(event?["seq"]?.intValue == sequence)
        if event?["seq"]?.intValue != sequence { break }
      }
      for _ in batch..<(batch + 50) { _ = await lagging.readJSON(timeout: .seconds(5)) }
    }
    #expect(await eventually { fixture.server.clientCount == 2 })
    #expect(await eventually { fixture.handler.watchers.withLock { $0.count } == 2 })
    #expect(await stalled.waitForClose())
    #expect(try await fast.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")
    await fixture.stop()
  }

  @Test("a burst of events larger than the backlog bound reaches a reading client whole; a stalled one is dropped after it")
  func burstBeyondTheBound() async throws {
    var options = ServerOptions()
    options.maxBacklogBytes = 64 * 1024
    options.maxBacklogMessages = 256
    let fixture = try ServerFixture(options: options)
    let reader = try fixture.connect()
    let stalled = try fixture.connect()  // never reads
    for client in [reader, stalled] {
      _ = try await client.roundTrip(#"{"cmd":"request"}"#)
      _ = try await client.roundTrip(#"{"cmd":"watch"}"#)
    }
    let padding = String(repeating: "x", count: 1000)
    let count = 1000  // about 1 MB and 1000 lines: 16 times the byte bound, 4 times the line bound
    let burst = (0..<count).map {
      EncodedEvent(Event(body: ["class": "REGION", "seq": .int(Int64($0)), "pad": .string(padding)]))
    }
    let channels = fixture.handler.watchers.withLock { $0 }
    #expect(channels.count == 2)
    for channel in channels {
      let accepted = channel.deliverBurst(burst)
      #expect(accepted)
    }
    var last = -1
    for sequence in 0..<count {
      guard let event = await reader.readJSON(timeout: .seconds(5)) else { break }
      last = event["seq"]?.intValue ?? -1
      if last != sequence { break }
    }
    #expect(last == count - 1)
    #expect(fixture.server.clientCount == 2)
    // The next line counts against the bound again: the stalled client is still 1 MB behind.
    fixture.server.broadcast(Event(body: ["class": "NOTE", "seq": .int(Int64(count))]))
    #expect(await reader.readJSON(timeout: .seconds(5))?["seq"]?.intValue == count)
    #expect(await eventually { fixture.server.clientCount == 1 })
    #expect(await stalled.waitForClose())
    await fixture.stop()
  }

  @Test(
    "a client that shuts down its sending side still gets its replies, then EOF (a complete last request needs no newline)",
    arguments: ["\n", ""])
  func halfClose(lastLineEnd: String) async throws {
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    try await client.send("{\"cmd\":\"status\",\"id\":1}\n{\"cmd\":\"status\",\"id\":2}" + lastLineEnd)
    Glibc.shutdown(client.fd, Int32(SHUT_WR))
    #expect(await client.readJSON()?["id"] == .int(1))
    #expect(await client.readJSON()?["id"] == .int(2))
    #expect(await client.waitForClose())
    #expect(await eventually { fixture.server.clientCount == 0 })
    await fixture.stop()
  }

  @Test("server shutdown closes clients and removes the socket file")
  func shutdown() async throws {
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    #expect(try await client.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")
    fixture.server.stop()
    await fixture.server.waitUntilStopped()
    #expect(await client.waitForClose())
    #expect(access(fixture.path, F_OK) != 0)
    fixture.directory.remove()
  }

  @Test(
    "every way a client leaves (it closes, half-closes, is dropped as slow, is closed by the service, the server stops) is reported to the service exactly once"
  )
  func everyDepartureReportedOnce() async throws {
    var options = ServerOptions()
    options.maxBacklogBytes = 64 * 1024
    let fixture = try ServerFixture(options: options)
    var clients: [TestClient] = []
    for _ in 0..<6 {
      let client = try fixture.connect()
      _ = try await client.roundTrip(#"{"cmd":"request"}"#)
      #expect(try await client.roundTrip(#"{"cmd":"watch"}"#)?["class"] == "WATCH")
      clients.append(client)
    }
    let ids = fixture.handler.watchers.withLock { $0.map(\.id) }
    #expect(Set(ids).count == 6)
    func reported() -> [UInt64] { fixture.handler.disconnected.withLock { $0 } }

    // It closes.
    clients.removeFirst()
    #expect(await eventually { reported().count == 1 })
    // It half-closes with a request pending: answered, then closed by the server.
    let halfClosed = clients.removeFirst()
    try await halfClosed.send(#"{"cmd":"status","id":"last"}"# + "\n")
    Glibc.shutdown(halfClosed.fd, Int32(SHUT_WR))
    #expect(await halfClosed.readJSON()?["id"] == "last")
    #expect(await halfClosed.waitForClose())
    #expect(await eventually { reported().count == 2 })
    // It stops reading and is dropped as slow; then it closes too.
    let stalled = clients.removeFirst()
    let padding = String(repeating: "x", count: 1000)
    for sequence in 0..<600 {
      fixture.server.broadcast(Event(body: ["class": "NOTE", "seq": .int(Int64(sequence)), "pad": .string(padding)]))
      for client in clients { _ = await client.readJSON(timeout: .seconds(5)) }
    }
    #expect(await stalled.waitForClose())
    withExtendedLifetime(stalled) {}
    #expect(await eventually { reported().count == 3 })
    // The service closes it (a revoked authorization), twice, while it sends a request.
    let revoked = clients.removeFirst()
    let channel = fixture.handler.watchers.withLock { watchers in watchers.first { !reported().contains($0.id) } }
    try await revoked.send(#"{"cmd":"status"}"# + "\n")
    channel?.close()
    channel?.close()
    #expect(await revoked.waitForClose())
    #expect(await eventually { reported().count == 4 })
    // The two left are connected when the server stops.
    fixture.server.stop()
    await fixture.server.waitUntilStopped()
    for client in clients { #expect(await client.waitForClose()) }
    #expect(await eventually { reported().count == 6 })
    // Nothing more arrives late, and each client was reported once.
    for _ in 0..<100 { await Task.yield() }
    #expect(reported().sorted() == ids.sorted(), "\(reported()) for \(ids)")
    fixture.directory.remove()
  }
}

/// Answers `location` after giving the connection an event "after the reply", as a reload that
/// runs while the request is being answered does.
private final class EventDuringReplyHandler: RequestHandler {
  let connections = Mutex<[any ClientChannel]>([])

  func handle(_ request: Request, from client: ClientContext) async -> Reply {
    connections.withLock { $0 = [client.connection] }
    if request.command == .location {
      client.connection.sendAfterReply(
        Event(body: .object([JSONMember("class", "AUTHORIZATION"), JSONMember("authorization", "denied")])))
      // A later event waits behind the held one.
      client.connection.send(
        Event(body: .object([JSONMember("class", "AUTHORIZATION"), JSONMember("authorization", "granted")])))
    }
    return .error(.noFix, message: "no fix yet")
  }
}

extension ServerTests {
  @Test("an event sent after the reply follows the reply being answered, and goes at once when none is")
  func eventAfterReply() async throws {
    let directory = try TemporaryDirectory()
    let path = directory.path + "/run/locationd.sock"
    let handler = EventDuringReplyHandler()
    let server = SocketServer(socket: try ListeningSocket.create(path: path, group: nil), handler: handler)
    try server.start()
    let client = try TestClient(path: path)
    try await client.request(#"{"cmd":"location","id":1}"#)
    let first = await client.readJSON()
    #expect(first?["id"] == .int(1), "the reply comes first: \(String(describing: first))")
    let second = await client.readJSON()
    #expect(second?["class"] == "AUTHORIZATION")
    #expect(second?["authorization"] == "denied")
    #expect(second?["id"] == nil)
    #expect(await client.readJSON()?["authorization"] == "granted")
    // No request is being answered: written at once.
    let connection = try #require(handler.connections.withLock { $0.first })
    #expect(connection.sendAfterReply(Event(body: .object([JSONMember("class", "AUTHORIZATION"), JSONMember("authorization", "authorized")]))))
    #expect(await client.readJSON()?["authorization"] == "authorized")
    server.stop()
    await server.waitUntilStopped()
    directory.remove()
  }
}
