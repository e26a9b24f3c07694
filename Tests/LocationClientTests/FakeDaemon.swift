import Synchronization
import Testing

@testable import LocationClient

/// A clock whose time moves only when a test says so: timeouts and reconnection pauses of the
/// client run on it, so no test waits for real time.
final class VirtualClock: Clock, Sendable {
  struct Instant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
    func duration(to other: Instant) -> Duration { other.offset - offset }
    static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
  }

  private struct Sleeper {
    var id: Int
    var deadline: Instant
    var continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var now = Instant(offset: .zero)
    var nextID = 0
    var sleepers: [Sleeper] = []
    var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }

  private let state = Mutex(State())
  var now: Instant { state.withLock { $0.now } }
  var minimumResolution: Duration { .zero }

  func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        let (due, ready) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
          if deadline <= state.now || Task.isCancelled { return (true, []) }
          state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
          let count = state.sleepers.count
          let ready = state.sleeperWaiters.filter { $0.count <= count }.map(\.continuation)
          state.sleeperWaiters.removeAll { $0.count <= count }
          return (false, ready)
        }
        for waiter in ready { waiter.resume() }
        if due {
          if Task.isCancelled {
            continuation.resume(throwing: CancellationError())
          } else {
            continuation.resume()
          }
        }
      }
    } onCancel: {
      let sleeper = state.withLock { state -> Sleeper? in
        guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
        return state.sleepers.remove(at: index)
      }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves time forward and wakes every sleeper whose deadline has come.
  func advance(by duration: Duration) {
    let due = state.withLock { state -> [Sleeper] in
      state.now = state.now.advanced(by: duration)
      let now = state.now
      let due = state.sleepers.filter { $0.deadline <= now }
      state.sleepers.removeAll { $0.deadline <= now }
      return due
    }
    for sleeper in due { sleeper.continuation.resume() }
  }

  /// Returns once at least `count` tasks sleep on this clock.
  func waitForSleepers(_ count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let now = state.withLock { state -> Bool in
        if state.sleepers.count >= count { return true }
        state.sleeperWaiters.append((count, continuation))
        return false
      }
      if now { continuation.resume() }
    }
  }
}

/// A daemon played in memory: answers the protocol's commands as docs/PROTOCOL.md says (the
/// subset the client uses), pushes events to watching connections, can refuse authorization,
/// stay silent, go down and come back.
final class FakeDaemon: Sendable {
  struct State {
    var authorizes = true
    /// Whether commands other than `request` are refused on a connection that has not asked
    /// (as the daemon does).
    var requiresRequest = false
    /// Full (as at `--max-clients`): each new connection gets an `ERROR` tooManyClients without
    /// an `id` and is closed, at once (`.atOpen`) or just after its first send failed (`.atSend`).
    var full: Fullness = .no
    enum Fullness { case no, atOpen, atSend }
    var requested: Set<ObjectIdentifier> = []
    var silent = false
    var down = false
    var connections: [ObjectIdentifier: FakeTransport] = [:]
    var watching: Set<ObjectIdentifier> = []
    var commands: [String] = []
    var requests: [JSONValue] = []
    var opened = 0
    var current: JSONValue = .null
    var initial: JSONValue = .null
    var annotations: [JSONValue] = []
    var watcherWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    var closedWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    var closedCount = 0
  }

  let state = Mutex(State())

  /// A client on this daemon, on `clock`, with a 30 s request timeout.
  func client(clock: VirtualClock) -> LocationClient {
    LocationClient(
      timeout: .seconds(30), clock: clock, reconnectDelay: .milliseconds(500), reconnectAttempts: 5
    ) {
      FakeTransport(daemon: self)
    }
  }

  var commands: [String] { state.withLock { $0.commands } }
  var watcherCount: Int { state.withLock { $0.watching.count } }
  var openConnections: Int { state.withLock { $0.connections.count } }

  /// A TPV as the daemon writes it.
  static func tpv(
    _ latitude: Double, _ longitude: Double, time: String = "2026-11-29T20:55:10.000Z"
  ) -> JSONValue {
    .object([
      JSONMember("class", "TPV"), JSONMember("mode", 3), JSONMember("time", .string(time)),
      JSONMember("lat", .number(latitude)), JSONMember("lon", .number(longitude)),
      JSONMember("altMSL", .number(12.5)),
      JSONMember("eph", .number(19.0)), JSONMember("backend", "simulate"),
      JSONMember("simulated", true),
    ])
  }

  /// Sends `event` to every watching connection (a fix also becomes the current location).
  func push(_ event: JSONValue) {
    let targets = state.withLock { state -> [FakeTransport] in
      if event["class"] == "TPV" {
        if state.initial == .null { state.initial = event }
        state.current = event
      }
      return state.watching.compactMap { state.connections[$0] }
    }
    for target in targets { target.deliver(.message(event)) }
  }

  /// Another client's change of the shared map: `annotation` added (or replacing the one with
  /// its `id`) or, with `removing`, that identifier removed; then a `MAP` event with its
  /// `changes` (and the centre at 1.5, 2.5) to every watching connection.
  func changeMapElsewhere(adding annotation: JSONValue? = nil, removing: String? = nil) {
    let event = state.withLock { state -> JSONValue in
      var changes: [JSONValue] = []
      if let annotation, let id = annotation["id"]?.stringValue {
        if let index = state.annotations.firstIndex(where: { $0["id"]?.stringValue == id }) {
          state.annotations[index] = annotation
          changes.append(["id": .string(id), "what": "annotationReplaced"])
        } else {
          state.annotations.append(annotation)
          changes.append(["id": .string(id), "what": "annotationAdded"])
        }
      }
      if let removing {
        state.annotations.removeAll { $0["id"]?.stringValue == removing }
        changes.append(["id": .string(removing), "what": "annotationRemoved"])
      }
      changes.append(["reason": "user", "what": "center"])
      return .object([
        JSONMember("class", "MAP"),
        JSONMember("center", ["lat": .number(1.5), "lon": .number(2.5)]), JSONMember("zoom", 15),
        JSONMember("mode", "none"), JSONMember("annotations", .array(state.annotations)),
        JSONMember("rotation", 0), JSONMember("tracking", true),
        JSONMember("changes", .array(changes)),
      ])
    }
    push(event)
  }

  /// Sends `line` to every open connection, watching or not (an error about the connection).
  func sendToAll(_ line: JSONValue) {
    let targets = state.withLock { Array($0.connections.values) }
    for target in targets { target.deliver(.message(line)) }
  }

  var connectionCount: Int { state.withLock { $0.connections.count } }

  /// Returns once at least `count` connections watch.
  func waitForWatchers(_ count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.watching.count >= count { return true }
        state.watcherWaiters.append((count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  /// Returns once at least `count` connections have closed in all.
  func waitForClosed(_ count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.closedCount >= count { return true }
        state.closedWaiters.append((count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  /// A restart: `SHUTDOWN` to watchers, every connection closed, the locations forgotten; the
  /// daemon stays down (connections refused) until ``comeBack()``.
  func goDown() {
    push(.object([JSONMember("class", "SHUTDOWN"), JSONMember("reason", "SIGTERM")]))
    let all = state.withLock { state -> [FakeTransport] in
      state.down = true
      state.initial = .null
      state.current = .null
      return Array(state.connections.values)
    }
    for connection in all { connection.close() }
  }

  func comeBack() { state.withLock { $0.down = false } }

  func register(_ connection: FakeTransport) throws(LocationClientError) {
    let refused = state.withLock { state -> Bool in
      if state.down { return true }
      state.connections[ObjectIdentifier(connection)] = connection
      state.opened += 1
      return false
    }
    if refused { throw LocationClientError(.noDaemon, "nothing listens (fake daemon down)") }
  }

  func unregister(_ connection: FakeTransport) {
    let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      guard state.connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else {
        return []
      }
      state.watching.remove(ObjectIdentifier(connection))
      state.closedCount += 1
      let count = state.closedCount
      let ready = state.closedWaiters.filter { $0.count <= count }.map(\.continuation)
      state.closedWaiters.removeAll { $0.count <= count }
      return ready
    }
    for waiter in ready { waiter.resume() }
  }

  /// The reply to `request` from `connection`, `nil` when silent.
  func handle(_ request: JSONValue, from connection: FakeTransport) -> JSONValue? {
    guard let command = request["cmd"]?.stringValue else { return nil }
    var waiters: [CheckedContinuation<Void, Never>] = []
    let body = state.withLock { state -> [JSONMember]? in
      state.commands.append(command)
      state.requests.append(request)
      if state.silent { return nil }
      func error(_ code: String, _ message: String) -> [JSONMember] {
        [
          JSONMember("class", "ERROR"), JSONMember("code", .string(code)),
          JSONMember("message", .string(message)),
        ]
      }
      func map() -> [JSONMember] {
        [
          JSONMember("class", "MAP"),
          JSONMember("center", ["lat": .number(1.5), "lon": .number(2.5)]), JSONMember("zoom", 15),
          JSONMember("mode", "none"), JSONMember("annotations", .array(state.annotations)),
          JSONMember("rotation", 0), JSONMember("tracking", true),
        ]
      }
      if state.requiresRequest, command != "request",
        !state.requested.contains(ObjectIdentifier(connection))
      {
        return error("notAuthorized", "send {\"cmd\":\"request\"} first to ask for authorization")
      }
      switch command {
      case "request":
        guard state.authorizes else { return error("notAuthorized", "uid 65534 is not authorized") }
        state.requested.insert(ObjectIdentifier(connection))
        return [JSONMember("class", "AUTHORIZATION"), JSONMember("authorization", "authorized")]
      case "watch":
        state.watching.insert(ObjectIdentifier(connection))
        let count = state.watching.count
        waiters = state.watcherWaiters.filter { $0.count <= count }.map(\.continuation)
        state.watcherWaiters.removeAll { $0.count <= count }
        return [JSONMember("class", "WATCH"), JSONMember("enable", true)]
      case "location":
        return [
          JSONMember("class", "LOCATION"), JSONMember("initial", state.initial),
          JSONMember("current", state.current),
        ]
      case "map": return map()
      case "annotate":
        guard let annotation = request["annotation"], let id = annotation["id"]?.stringValue else {
          return error("invalidArgument", "missing annotation")
        }
        if state.annotations.count >= 2,
          !state.annotations.contains(where: { $0["id"]?.stringValue == id })
        {
          return error("limitExceeded", "annotation limit exceeded (fake limit 2)")
        }
        if let index = state.annotations.firstIndex(where: { $0["id"]?.stringValue == id }) {
          state.annotations[index] = annotation
        } else {
          state.annotations.append(annotation)
        }
        return map()
      case "remove":
        let id = request["annotation"]?.stringValue
        guard let index = state.annotations.firstIndex(where: { $0["id"]?.stringValue == id })
        else {
          return error("notFound", "no annotation")
        }
        state.annotations.remove(at: index)
        return map()
      case "replay":
        return [
          JSONMember("class", "REPLAY"), JSONMember("state", "paused"), JSONMember("speed", 1),
          JSONMember("position", request["value"] ?? .null),
        ]
      default:
        return [JSONMember("class", "OK"), JSONMember("cmd", .string(command))]
      }
    }
    for waiter in waiters { waiter.resume() }
    guard var members = body, let id = request["id"] else { return nil }
    members.insert(JSONMember("id", id), at: 1)
    return .object(members)
  }
}

/// One connection to a ``FakeDaemon``: replies are delivered at once, on the sender's thread.
final class FakeTransport: LocationTransport {
  private struct State {
    var receive: (@Sendable (TransportInput) -> Void)?
    var closed = false
  }

  let daemon: FakeDaemon
  private let state = Mutex(State())

  init(daemon: FakeDaemon) { self.daemon = daemon }

  func open(_ receive: @escaping @Sendable (TransportInput) -> Void)
    async throws(LocationClientError)
  {
    try daemon.register(self)
    state.withLock { $0.receive = receive }
    if daemon.state.withLock({ $0.full }) == .atOpen { refuse() }
  }

  /// Sends the daemon's tooManyClients line and closes, as locationd does when it is full.
  func refuse() {
    deliver(
      .message(
        .object([
          JSONMember("class", "ERROR"), JSONMember("code", "tooManyClients"),
          JSONMember("message", "locationd already serves 64 clients (--max-clients)"),
        ])))
    close()
  }

  func send(_ line: [UInt8]) throws(LocationClientError) {
    guard state.withLock({ !$0.closed && $0.receive != nil }) else {
      throw LocationClientError(.connectionClosed, "closed")
    }
    if daemon.state.withLock({ $0.full }) == .atSend {
      // The send fails on the closed socket before the reader has read the ERROR line.
      Task { self.refuse() }
      throw LocationClientError(.connectionClosed, "locationd closed the connection")
    }
    guard let request = try? JSONValue.parse(Array(line.dropLast())) else {
      throw LocationClientError(.badReply, "the client sent a line that is not JSON")
    }
    if let reply = daemon.handle(request, from: self) { deliver(.message(reply)) }
  }

  func deliver(_ input: TransportInput) {
    let receive = state.withLock { $0.closed ? nil : $0.receive }
    receive?(input)
  }

  func close() {
    let receive = state.withLock { state -> (@Sendable (TransportInput) -> Void)? in
      guard !state.closed else { return nil }
      state.closed = true
      return state.receive
    }
    daemon.unregister(self)
    receive?(.closed(LocationClientError(.connectionClosed, "locationd closed the connection")))
  }
}

/// Runs `body`, failing the test when it takes more than 60 s: a guard against hangs only (the
/// tests never wait for time to pass).
func withHangGuard<T: Sendable>(
  _ body: @escaping @Sendable () async throws -> T,
  sourceLocation: SourceLocation = #_sourceLocation
) async throws -> T {
  try await withThrowingTaskGroup(of: T?.self) { group in
    group.addTask { try await body() }
    group.addTask {
      try await Task.sleep(for: .seconds(60))
      return nil
    }
    defer { group.cancelAll() }
    guard let first = try await group.next(), let value = first else {
      Issue.record("did not finish within 60 s", sourceLocation: sourceLocation)
      throw CancellationError()
    }
    return value
  }
}
