import Glibc
import LocationCore
import LocationTestKit
import MapState
import Synchronization
import Testing

@testable import LocationProtocol
@testable import ServiceCore
import LocationModel
import SystemIO

/// A client channel that keeps what the service pushes to it, as parsed JSON objects. Like the
/// socket transport, it writes an event given with ``sendAfterReply(_:)`` while a request is being
/// answered (``Harness/ask(_:_:as:)``) right after that reply, and every other event at once.
private final class RecordingChannel: ClientChannel {
  let id = ConnectionNumber.next()
  /// The events written, in order.
  let received = Mutex<[JSONValue]>([])
  /// Replies and events in the order the client would read them.
  let transcript = Mutex<[JSONValue]>([])
  private let pending = Mutex<(answering: Bool, held: [JSONValue])>((false, []))

  @discardableResult func send(_ event: Event) -> Bool { deliver(EncodedEvent(event)) }

  @discardableResult func deliver(_ event: EncodedEvent) -> Bool {
    if let location = event.location { locations.withLock { $0.append(location) } }
    if let value = try? JSONValue.parse(event.body) { write(value) }
    signal()
    return true
  }

  @discardableResult func sendAfterReply(_ event: Event) -> Bool {
    if let value = try? JSONValue.parse(EncodedEvent(event).body) {
      let held = pending.withLock { state -> Bool in
        if state.answering { state.held.append(value) }
        return state.answering
      }
      if !held { write(value) }
    }
    signal()
    return true
  }

  private func write(_ value: JSONValue) {
    received.withLock { $0.append(value) }
    transcript.withLock { $0.append(value) }
  }

  /// A request from this client is being answered.
  func beginAnswer() { pending.withLock { $0.answering = true } }

  /// Its reply is written, then the events held for after it.
  func answered(_ reply: JSONValue) {
    let held = pending.withLock { state -> [JSONValue] in
      state.answering = false
      defer { state.held = [] }
      return state.held
    }
    transcript.withLock { $0.append(reply) }
    for value in held { write(value) }
  }

  private let waiters = Mutex<(count: Int, waiting: [CheckedContinuation<Void, Never>])>((0, []))

  private func signal() {
    let ready = waiters.withLock { state in
      state.count += 1
      defer { state.waiting = [] }
      return state.waiting
    }
    for waiter in ready { waiter.resume() }
  }

  /// How many events the channel has been given, by either method.
  var givenCount: Int { waiters.withLock { $0.count } }

  /// Returns once the channel has been given `count` events (by either method) in all.
  func waitForEvents(_ count: Int) async {
    while waiters.withLock({ $0.count }) < count {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let done = waiters.withLock { state -> Bool in
          if state.count >= count { return true }
          state.waiting.append(continuation)
          return false
        }
        if done { continuation.resume() }
      }
    }
  }

  var isConnected: Bool { true }
  func close() {}

  /// The typed fixes that came with the events (``EncodedEvent/location``), in order.
  let locations = Mutex<[Location]>([])

  /// What ``authorizationChanged(_:)`` was told, in order.
  let statuses = Mutex<[AuthorizationStatus]>([])
  func authorizationChanged(_ status: AuthorizationStatus) { statuses.withLock { $0.append(status) } }

  /// The classes of everything received, in order.
  var classes: [String] { received.withLock { $0.compactMap { $0["class"]?.stringValue } } }
}

/// uid and gid 65534 (nobody, nogroup on Debian), whose passwd entry has no supplementary group.
private let nobody = PeerCredentials(pid: 4242, uid: 65534, gid: 65534)

/// The real service over a fake backend (``ServiceParts``: `service`, `authority`, `backend`,
/// `directory`), driven without any transport.
@dynamicMemberLookup
private struct Harness {
  let parts: ServiceParts

  init(group: String?) async throws {
    parts = try ServiceParts(group: group)
    await parts.service.start()
  }

  subscript<Part>(dynamicMember part: KeyPath<ServiceParts, Part>) -> Part { parts[keyPath: part] }

  /// Sends one request line from `channel` (as `peer`) and returns the reply as JSON.
  func ask(_ line: String, _ channel: RecordingChannel, as peer: PeerCredentials = nobody) async throws
    -> JSONValue
  {
    let request = try Request.parse(Array(line.utf8))
    let context = ClientContext(connection: channel, peer: peer)
    channel.beginAnswer()
    let reply = await parts.service.handle(request, from: context).json(id: nil)
    channel.answered(reply)
    return reply
  }

  func stop() async {
    await parts.service.shutdown(reason: "test")
    parts.directory.remove()
  }
}

private func fix(_ latitude: Double) -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.coordinate = Coordinate(latitude: latitude, longitude: 2.5)
  fix.time = 1_700_000_000_000 + Int64(latitude * 1000)
  return fix
}

@Suite("One authority for authorization")
struct AuthorizationAuthorityTests {
  @Test("the authority decides with the rule in force: root always, the group's members until it changes")
  func authorityFollowsReplacement() throws {
    try #require(GroupDatabase.groupID(named: "nogroup") == 65534, "Debian's nogroup")
    let authority = AuthorizationAuthority(Authorizer(groupName: "nogroup"))
    #expect(authority.decide(for: nobody).status == .authorized)
    #expect(authority.decide(for: nobody).reason == "group")
    #expect(authority.remedy == "run as root or as a member of group nogroup")
    authority.replace(with: Authorizer(groupName: "daemon"))
    #expect(authority.groupName == "daemon")
    #expect(authority.decide(for: nobody) == (.denied, "notInGroup"))
    #expect(authority.decide(for: PeerCredentials(pid: 1, uid: 0, gid: 0)) == (.authorized, "root"))
    authority.replace(with: Authorizer(groupName: nil))
    #expect(authority.decide(for: nobody) == (.denied, "rootOnly"))
    #expect(authority.remedy == "run as root")
  }

  @Test("a reload that drops the client's group gives one answer to every command, and ends its watch and tracking")
  func reloadRevokesConsistently() async throws {
    try #require(GroupDatabase.groupID(named: "nogroup") == 65534 && GroupDatabase.groupID(named: "daemon") != nil)
    let harness = try await Harness(group: "nogroup")
    let client = RecordingChannel()
    let bystander = RecordingChannel()  // never asked: stays notDetermined, hears nothing
    #expect(try await harness.ask(#"{"cmd":"request"}"#, client)["authorization"] == "authorized")
    #expect(try await harness.ask(#"{"cmd":"watch"}"#, client)["class"] == "WATCH")
    #expect(try await harness.ask(#"{"cmd":"start"}"#, client)["class"] == "TRACKING")
    #expect(harness.backend.isRunning)
    harness.backend.send(fix: fix(1))
    #expect(await eventually { client.classes.contains("TPV") })

    let review = await harness.service.reloadAuthorization(Authorizer(groupName: "daemon"))
    #expect(review.granted == 0 && review.revoked == 1 && review.usersStopped == 1)
    let told = client.received.withLock { $0.last }
    #expect(told?["class"] == "AUTHORIZATION")
    #expect(told?["authorization"] == "denied")
    #expect(bystander.received.withLock { $0 }.isEmpty)
    // Watch and tracking (the connection's and the user's) ended: the backend stopped.
    #expect(!harness.backend.isRunning)
    for line in [#"{"cmd":"start"}"#, #"{"cmd":"location"}"#, #"{"cmd":"watch"}"#, #"{"cmd":"request"}"#] {
      let reply = try await harness.ask(line, client)
      #expect(reply["code"] == "notAuthorized", "\(line): \(reply)")
    }
    let status = try await harness.ask(#"{"cmd":"status"}"#, client)
    #expect(status["authorization"] == "denied")
    #expect(status["tracking"] == false)
    #expect(status["current"] == .null)
    let before = client.received.withLock { $0.count }
    harness.backend.send(fix: fix(2))
    #expect(try await harness.ask(#"{"cmd":"status"}"#, bystander)["authorization"] == "notDetermined")
    #expect(client.received.withLock { $0.count } == before, "no event after losing authorization")
    await harness.stop()
  }

  @Test("a reload that adds the client's group: request, start, location and watch all agree")
  func reloadGrantsConsistently() async throws {
    try #require(GroupDatabase.groupID(named: "nogroup") == 65534 && GroupDatabase.groupID(named: "daemon") != nil)
    let harness = try await Harness(group: "daemon")
    let earlier = RecordingChannel()
    #expect(try await harness.ask(#"{"cmd":"request"}"#, earlier)["code"] == "notAuthorized")
    let review = await harness.service.reloadAuthorization(Authorizer(groupName: "nogroup"))
    #expect(review.granted == 1 && review.revoked == 0)
    #expect(earlier.received.withLock { $0.last?["authorization"] } == "authorized")
    // A client that connects after the reload, and the one that was denied before it.
    for client in [RecordingChannel(), earlier] {
      #expect(try await harness.ask(#"{"cmd":"request"}"#, client)["authorization"] == "authorized")
      #expect(try await harness.ask(#"{"cmd":"start"}"#, client)["class"] == "TRACKING")
      #expect(try await harness.ask(#"{"cmd":"location"}"#, client)["class"] == "LOCATION")
      #expect(try await harness.ask(#"{"cmd":"watch"}"#, client)["class"] == "WATCH")
    }
    #expect(harness.backend.isRunning)
    await harness.stop()
  }

  @Test("a reload that keeps the client's group changes nothing and tells nobody")
  func reloadWithoutChange() async throws {
    try #require(GroupDatabase.groupID(named: "nogroup") == 65534)
    let harness = try await Harness(group: "nogroup")
    let client = RecordingChannel()
    #expect(try await harness.ask(#"{"cmd":"request"}"#, client)["authorization"] == "authorized")
    #expect(try await harness.ask(#"{"cmd":"start"}"#, client)["class"] == "TRACKING")
    let review = await harness.service.reloadAuthorization(Authorizer(groupName: "nogroup"))
    #expect(review.granted == 0 && review.revoked == 0 && review.usersStopped == 0)
    #expect(!client.classes.contains("AUTHORIZATION"))
    #expect(harness.backend.isRunning)
    #expect(try await harness.ask(#"{"cmd":"location"}"#, client)["class"] == "LOCATION")
    await harness.stop()
  }

  @Test("root stays authorized whatever the group")
  func rootSurvivesReload() async throws {
    let harness = try await Harness(group: "nogroup")
    let root = PeerCredentials(pid: 1, uid: 0, gid: 0)
    let client = RecordingChannel()
    #expect(try await harness.ask(#"{"cmd":"request"}"#, client, as: root)["authorization"] == "authorized")
    #expect(try await harness.ask(#"{"cmd":"start"}"#, client, as: root)["class"] == "TRACKING")
    await harness.service.reloadAuthorization(Authorizer(groupName: nil))
    #expect(harness.backend.isRunning)
    #expect(try await harness.ask(#"{"cmd":"location"}"#, client, as: root)["class"] == "LOCATION")
    await harness.stop()
  }

  @Test(
    "a reload that revokes a client while its start or watch awaits the backend: the reply says notAuthorized, the event waits for it",
    arguments: [#"{"cmd":"start"}"#, #"{"cmd":"watch"}"#])
  func revocationDuringRequest(line: String) async throws {
    try #require(GroupDatabase.groupID(named: "nogroup") == 65534 && GroupDatabase.groupID(named: "daemon") != nil)
    let harness = try await Harness(group: "nogroup")
    let client = RecordingChannel()
    #expect(try await harness.ask(#"{"cmd":"request"}"#, client)["authorization"] == "authorized")
    harness.backend.holdNextStart()
    let reply = Task { try await harness.ask(line, client) }
    // The command is inside the manager's await on the backend: the reload runs now. Its own
    // awaits on the manager wait for that start, so it is released once the reload has decided
    // and told the client (every state change of a reload happens before its first await).
    await harness.backend.waitUntilStartIsHeld()
    let before = client.givenCount
    let reload = Task { await harness.service.reloadAuthorization(Authorizer(groupName: "daemon")) }
    await client.waitForEvents(before + 1)
    harness.backend.releaseStart()
    let answer = try await reply.value
    #expect(await reload.value.revoked == 1)
    #expect(answer["code"] == "notAuthorized", "\(line) answered across the revocation: \(answer)")
    // The event goes after the reply being answered, not ahead of it.
    let read = client.transcript.withLock { Array($0.suffix(2)) }
    #expect(read.first?["code"] == "notAuthorized")
    #expect(read.last?["class"] == "AUTHORIZATION" && read.last?["authorization"] == "denied", "\(read)")
    // Nothing the command set up survives: no tracking, no watch, backend stopped.
    #expect(!harness.backend.isRunning)
    let status = try await harness.ask(#"{"cmd":"status"}"#, client)
    #expect(status["authorization"] == "denied")
    #expect(status["tracking"] == false)
    let count = client.received.withLock { $0.count }
    harness.backend.send(fix: fix(3))
    #expect(try await harness.ask(#"{"cmd":"status"}"#, RecordingChannel())["authorization"] == "notDetermined")
    #expect(client.received.withLock { $0.count } == count, "no event after losing authorization")
    await harness.stop()
  }
}

@Suite("Client sessions: open, watch and the typed authorization change", .serialized)
struct ClientSessionTests {
  @Test("open refuses a peer the rule does not accept with the notAuthorized reply and no change call")
  func openRefusesOutsider() async throws {
    try #require(GroupDatabase.groupID(named: "nogroup") == 65534)
    let harness = try await Harness(group: "nogroup")
    let outsider = RecordingChannel()
    var refusal: SessionRefusal?
    do throws(SessionRefusal) {
      _ = try await harness.service.open(peer: PeerCredentials(pid: 77, uid: 4321, gid: 4321), channel: outsider)
    } catch {
      refusal = error
    }
    guard case .error(let code, let message)? = refusal?.reply else {
      Issue.record("the outsider's session was opened")
      await harness.stop()
      return
    }
    #expect(code == .notAuthorized)
    #expect(message.contains("nogroup"), "the remedy names the group: \(message)")
    #expect(outsider.statuses.withLock { $0 }.isEmpty)
    #expect(!harness.backend.isRunning)
    await harness.stop()
  }

  @Test("a session's watch starts tracking and gets fixes; reloads reach authorizationChanged once each")
  func watchAndRevocation() async throws {
    try #require(GroupDatabase.groupID(named: "nogroup") == 65534 && GroupDatabase.groupID(named: "daemon") != nil)
    let harness = try await Harness(group: "nogroup")
    let client = RecordingChannel()
    let session = try await harness.service.open(peer: nobody, channel: client)
    #expect(session.id == client.id)
    #expect(!harness.backend.isRunning, "open alone does not track")
    try await session.watch(coalescing: true)
    #expect(harness.backend.isRunning)
    harness.backend.send(fix: fix(1))
    #expect(await eventually { client.classes.contains("TPV") })
    // The hub's TPV carries the typed fix it was encoded from, and only the TPV does.
    let typed = client.locations.withLock { $0 }
    #expect(typed.map(\.fix) == [fix(1)])
    #expect(client.classes.filter { $0 == "TPV" }.count == typed.count)

    await harness.service.reloadAuthorization(Authorizer(groupName: "daemon"))
    #expect(client.statuses.withLock { $0 } == [.denied])
    #expect(client.received.withLock { $0.last?["authorization"] } == "denied")
    #expect(!harness.backend.isRunning)
    var refusal: SessionRefusal?
    do throws(SessionRefusal) { try await session.watch(coalescing: true) } catch { refusal = error }
    guard case .error(let code, _)? = refusal?.reply else {
      Issue.record("a revoked session could watch again")
      await harness.stop()
      return
    }
    #expect(code == .notAuthorized)

    // A reload that changes nothing for the client calls nothing; the one that grants calls once.
    await harness.service.reloadAuthorization(Authorizer(groupName: "daemon"))
    #expect(client.statuses.withLock { $0 } == [.denied])
    await harness.service.reloadAuthorization(Authorizer(groupName: "nogroup"))
    #expect(client.statuses.withLock { $0 } == [.denied, .authorized])
    await session.close()
    await harness.stop()
  }
}
