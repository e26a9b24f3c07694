import JSON
import LocationProtocol
import Queues
import ServiceCore
import Synchronization

/// Bounds of one Server-Sent Events stream's queue.
public struct EventStreamLimits: Sendable, Hashable {
  /// Bytes of never-coalesced events (BACKEND, WARNING, SHUTDOWN...) queued before the stream is
  /// ended as too slow. TPV and MAP events are coalesced and do not count.
  public var maxBacklogBytes: Int
  /// Never-coalesced events queued before the stream is ended as too slow.
  public var maxBacklogMessages: Int

  /// 256 KiB or 1024 events.
  public init(maxBacklogBytes: Int = 256 * 1024, maxBacklogMessages: Int = 1024) {
    self.maxBacklogBytes = maxBacklogBytes
    self.maxBacklogMessages = maxBacklogMessages
  }
}

/// The highest event id (`N` of `RUN-N`) any stream of this daemon run has written: a
/// `Last-Event-ID` naming a higher number did not come from this run and is ignored.
final class EventIDRegister: Sendable {
  private let highest = Atomic<UInt64>(0)

  init() {}

  /// The highest id written so far, 0 before the first event.
  var highestIssued: UInt64 { highest.load(ordering: .relaxed) }

  /// Records that `id` was written.
  func issued(_ id: UInt64) {
    var current = highest.load(ordering: .relaxed)
    while id > current {
      let (exchanged, original) = highest.compareExchange(
        expected: current, desired: id, ordering: .relaxed)
      if exchanged { return }
      current = original
    }
  }

  /// The first id of a stream whose request carried `lastEventID`: one past the resumed
  /// number when it is `RUN-N` of this run with `N` (decimal digits only) at most
  /// ``highestIssued``; otherwise 1 (a new stream). Any other header value (another run, a
  /// sign, a number past the ones written, more digits than `UInt64` holds) counts as malformed.
  func firstID(resuming lastEventID: String?, run: String) -> UInt64 {
    guard let lastEventID, lastEventID.hasPrefix(run + "-") else { return 1 }
    let digits = lastEventID.utf8.dropFirst(run.utf8.count + 1)
    guard !digits.isEmpty, digits.count <= 20, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
      let number = UInt64(String(decoding: digits, as: UTF8.self)),
      number <= highestIssued
    else { return 1 }
    // number <= highestIssued, which is below UInt64.max while ids are written one at a time.
    let (next, overflow) = number.addingReportingOverflow(1)
    return overflow ? 1 : next
  }
}

/// One browser's `/events` stream as the service sees it: a ``ClientChannel`` whose events are
/// written as Server-Sent Events (`id:` and `data:` lines).
///
/// The service hands events over on its own thread and never waits: the event is queued here and
/// libmicrohttpd's thread takes it when the connection can be written. As for a slow socket
/// client, a queued TPV (or MAP) event is replaced by a newer one, which then carries
/// `"missed":N`; other events are kept, and a stream whose backlog of them exceeds
/// ``EventStreamLimits`` is ended (that browser reconnects and starts again from the current
/// state). A stalled browser therefore costs at most its own bounded queue and never delays
/// other clients.
final class EventStreamChannel: ClientChannel, Sendable {
  private struct State {
    /// Coalescing, the backlog bounds and the drop rule are the shared ``OutboundQueue``'s;
    /// events are framed as they are taken.
    var queue: OutboundQueue
    /// The frame being written and how much of it was taken.
    var current: [UInt8] = []
    var offset = 0
    var nextID: UInt64
    var ended = false
    var closed = false
  }

  let id: UInt64
  /// Tells the server that data is queued (``HTTPExchange/wake()``); called with no lock held.
  private let wake: @Sendable () -> Void
  /// Event ids are `RUN-N`: `RUN` names this daemon run, `N` counts up.
  private let run: String
  private let limits: EventStreamLimits
  private let state: Mutex<State>
  /// Where written ids are recorded for this run.
  private let register: EventIDRegister?

  init(
    id: UInt64, run: String, firstID: UInt64, limits: EventStreamLimits,
    register: EventIDRegister? = nil, wake: @escaping @Sendable () -> Void
  ) {
    self.id = id
    self.wake = wake
    self.run = run
    self.limits = limits
    self.register = register
    state = Mutex(
      State(
        queue: OutboundQueue(
          limits: OutboundLimits(
            maxBytes: limits.maxBacklogBytes, maxMessages: limits.maxBacklogMessages)),
        nextID: firstID))
  }

  var isConnected: Bool { state.withLock { !$0.ended && !$0.closed } }

  @discardableResult func send(_ event: Event) -> Bool {
    enqueue(body: event.body.encoded, key: event.coalescingKey)
  }

  @discardableResult func deliver(_ event: EncodedEvent) -> Bool {
    enqueue(body: event.body, key: event.coalescingKey)
  }

  /// Queues the events of one burst (the `REGION` events of one fix), as a socket client's: the
  /// bounds are checked once, before it, so a browser that keeps up gets all of it however many
  /// there are, and one already behind is ended.
  @discardableResult func deliverBurst(_ events: [EncodedEvent]) -> Bool {
    let result = state.withLock { state -> Bool in
      guard !state.ended, !state.closed else { return false }
      guard state.queue.beginBurst() else {
        state.queue.logSlowClient(id, transport: "http")
        state.ended = true
        state.queue.removeAll()
        return false
      }
      defer { state.queue.endBurst() }
      for event in events {
        if let key = event.coalescingKey {
          state.queue.coalesce(key: key, body: event.body)
        } else {
          state.queue.append(event.body)
        }
      }
      return true
    }
    wake()
    return result
  }

  /// Queues a comment line (`: text`), which browsers ignore: keeps proxies from closing an idle
  /// stream and lets the server notice a browser that has gone.
  func sendComment(_ text: String) {
    let frame = Array(": \(text)\n\n".utf8)
    let accepted = state.withLock { state -> Bool in
      guard !state.ended, !state.closed else { return false }
      state.queue.append(frame, counted: false)
      return true
    }
    if accepted { wake() }
  }

  /// Queues raw stream text (the `retry:` field at the start).
  func sendRaw(_ text: String) {
    let accepted = state.withLock { state -> Bool in
      guard !state.ended, !state.closed else { return false }
      state.queue.append(Array(text.utf8), counted: false)
      return true
    }
    if accepted { wake() }
  }

  /// Ends the stream now (what is queued is dropped); the service hears of it when the
  /// connection has closed.
  func close() {
    let changed = state.withLock { state -> Bool in
      guard !state.ended else { return false }
      state.ended = true
      return true
    }
    if changed { wake() }
  }

  /// The connection has gone (libmicrohttpd finished it).
  func closed() {
    state.withLock { state in
      state.closed = true
      state.queue.removeAll()
    }
  }

  private func enqueue(body: [UInt8], key: String?) -> Bool {
    let result = state.withLock { state -> Bool in
      guard !state.ended, !state.closed else { return false }
      if let key {
        state.queue.coalesce(key: key, body: body)
        return true
      }
      if state.queue.append(body) { return true }
      state.queue.logSlowClient(id, transport: "http")
      state.ended = true
      state.queue.removeAll()
      return false
    }
    // Wakes even when the stream just ended, so that libmicrohttpd closes it.
    wake()
    return result
  }

  /// Up to `maximum` bytes of the next frames; empty when nothing is queued, `nil` once ended.
  func nextChunk(maximum: Int) -> [UInt8]? {
    state.withLock { state -> [UInt8]? in
      if state.ended || state.closed { return nil }
      var chunk: [UInt8] = []
      while chunk.count < maximum {
        if state.offset == state.current.count {
          state.current = []
          state.offset = 0
          guard let head = state.queue.popFirst() else { break }
          // Events are framed; comments and the `retry:` field go as they are.
          state.current = head.kind == .uncounted ? head.bytes : frame(head.bytes, &state)
        }
        let take = min(maximum - chunk.count, state.current.count - state.offset)
        chunk.append(contentsOf: state.current[state.offset..<(state.offset + take)])
        state.offset += take
      }
      return chunk
    }
  }

  /// `id: RUN-N`, `data: JSON` and the blank line that ends an event. The JSON writer escapes
  /// line breaks inside strings, so the body is one line.
  private func frame(_ body: [UInt8], _ state: inout State) -> [UInt8] {
    let id = state.nextID
    // Wraps rather than traps: ids start at most one past the run's highest, so counting to
    // 2^64 would take centuries of events.
    state.nextID &+= 1
    register?.issued(id)
    var bytes = Array("id: \(run)-\(id)\ndata: ".utf8)
    bytes.reserveCapacity(bytes.count + body.count + 2)
    bytes.append(contentsOf: body)
    bytes.append(contentsOf: [0x0A, 0x0A])
    return bytes
  }
}

/// A channel for one API request: the service may push an event to it (an `AUTHORIZATION`
/// after a reload) while the request runs; there is no stream to carry it, so it is dropped.
final class RequestChannel: ClientChannel {
  let id: UInt64 = ConnectionNumber.next()
  var isConnected: Bool { true }
  @discardableResult func send(_ event: Event) -> Bool { true }
  @discardableResult func deliver(_ event: EncodedEvent) -> Bool { true }
  func close() {}
}
