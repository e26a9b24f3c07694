import LocationModel
import LocationProtocol
import Synchronization

/// A ``ClientChannel`` whose client is the program itself: what the service gives it waits in an
/// ``OutboundQueue`` until ``read()`` takes it, as a client that reads when it likes. The
/// reference front-end of the kit: the same coalescing (`"missed":N`), bounds, drop rule and
/// bursts as the socket, web and NMEA front-ends, without a descriptor or a thread, so that
/// the service and the front-end conformance tests run without I/O or sleeps.
public final class InMemoryChannel: ClientChannel, Sendable {
  private struct State {
    var queue: OutboundQueue
    /// Why the channel was dropped or closed (`slowClient`, `closedByService`); `nil` while open.
    var dropReason: String?
    var statuses: [AuthorizationStatus] = []
  }

  /// The client's number (``ConnectionNumber``).
  public let id: UInt64
  private let state: Mutex<State>
  private let disconnected: @Sendable (String) -> Void

  /// Creates an open channel.
  ///
  /// - Parameters:
  ///   - limits: the drop rule's bounds; by default the socket front-end's (1 MiB, 4096 entries).
  ///   - disconnected: called exactly once, with the reason, when the channel is dropped
  ///     (`slowClient`) or closed (`closedByService`); a front-end would then close the
  ///     connection and tell the service (``RequestHandler/clientDisconnected(_:)``).
  public init(
    limits: OutboundLimits = OutboundLimits(maxBytes: Reply.maximumBytes, maxMessages: 4096),
    disconnected: @escaping @Sendable (String) -> Void = { _ in }
  ) {
    id = ConnectionNumber.next()
    state = Mutex(State(queue: OutboundQueue(limits: limits)))
    self.disconnected = disconnected
  }

  /// Whether neither dropped nor closed.
  public var isConnected: Bool { state.withLock { $0.dropReason == nil } }

  /// Why the channel was dropped or closed; `nil` while connected.
  public var dropReason: String? { state.withLock { $0.dropReason } }

  /// Every status ``authorizationChanged(_:)`` was given, in order.
  public var authorizationChanges: [AuthorizationStatus] { state.withLock { $0.statuses } }

  /// Queues `event` (encoded here).
  @discardableResult public func send(_ event: Event) -> Bool { deliver(EncodedEvent(event)) }

  /// Queues `event`: coalesced under its key, or counted against the bounds (beyond them the
  /// channel is dropped and `false` returned).
  @discardableResult public func deliver(_ event: EncodedEvent) -> Bool {
    let dropped = state.withLock { state -> Bool? in
      guard state.dropReason == nil else { return nil }
      if let key = event.coalescingKey {
        state.queue.coalesce(key: key, body: event.body)
        return false
      }
      if state.queue.append(event.body) { return false }
      return drop("slowClient", &state)
    }
    return finish(dropped)
  }

  /// Queues `events` as one burst: the bounds are checked once, before it.
  @discardableResult public func deliverBurst(_ events: [EncodedEvent]) -> Bool {
    let dropped = state.withLock { state -> Bool? in
      guard state.dropReason == nil else { return nil }
      guard state.queue.beginBurst() else { return drop("slowClient", &state) }
      defer { state.queue.endBurst() }
      for event in events { state.queue.append(event.body) }
      return false
    }
    return finish(dropped)
  }

  /// Records `status` (``authorizationChanges``).
  public func authorizationChanged(_ status: AuthorizationStatus) {
    state.withLock { $0.statuses.append(status) }
  }

  /// Closes the channel (what is queued is dropped).
  public func close() {
    finish(
      state.withLock { state -> Bool? in
        guard state.dropReason == nil else { return nil }
        return drop("closedByService", &state)
      })
  }

  /// Takes everything queued, in order, as the client reads it: one JSON object per event,
  /// a coalesced one with `"missed":N` when it replaced others. Empty once dropped or closed.
  public func read() -> [[UInt8]] {
    state.withLock { state in
      var bodies: [[UInt8]] = []
      while let head = state.queue.popFirst() { bodies.append(head.bytes) }
      return bodies
    }
  }

  private func drop(_ reason: String, _ state: inout State) -> Bool {
    if reason == "slowClient" { state.queue.logSlowClient(id, transport: "memory") }
    state.queue.removeAll()
    state.dropReason = reason
    return true
  }

  /// Calls `disconnected` when this call dropped or closed the channel (`true`), outside the
  /// lock; returns whether the channel was still connected before the call (`false` when it
  /// had gone: `nil`, or was dropped by it).
  @discardableResult private func finish(_ dropped: Bool?) -> Bool {
    guard let dropped else { return false }
    if dropped {
      disconnected(dropReason ?? "")
      return false
    }
    return true
  }
}
