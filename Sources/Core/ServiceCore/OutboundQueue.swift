import JSON
import Queues

/// The bounds of one client's ``OutboundQueue``: how much never-coalesced data may wait for a
/// client that reads slowly before its front-end drops it.
public struct OutboundLimits: Sendable, Hashable {
  /// Bytes of counted entries not yet written, 1 or more.
  public var maxBytes: Int
  /// Counted entries not yet fully written, 1 or more.
  public var maxMessages: Int

  /// Creates bounds; a client is dropped when its backlog exceeds either of them.
  public init(maxBytes: Int, maxMessages: Int) {
    self.maxBytes = maxBytes
    self.maxMessages = maxMessages
  }
}

/// One client's outbound queue, shared by every front-end that writes to a client at its own
/// pace (the Unix socket, Server-Sent Events, the NMEA feed). Not thread-safe: keep it under the
/// client's lock.
///
/// Three kinds of entries, in the order they were given:
/// - **counted** bytes (``append(_:counted:written:)`` with `counted: true`): events that are
///   never coalesced (`BACKEND`, `WARNING`, replies, NMEA sentences). They make up the
///   *backlog*: the bytes of them not yet written and how many are not fully written.
/// - **uncounted** bytes (`counted: false`): data whose amount is bounded elsewhere (the rest of
///   a partly written coalescible event, an SSE comment, the stream's `retry:` field).
/// - **coalescible** events (``coalesce(key:body:)``): a newer event with the same key (`"TPV"`,
///   `"MAP"`) replaces the waiting one, which moves to the back and is then taken with
///   `"missed":N` (how many it replaced) added to its JSON object. They never count, so a client
///   behind on fixes holds one fix, not a backlog.
///
/// **The drop rule**: a client whose backlog exceeds ``OutboundLimits/maxBytes`` or
/// ``OutboundLimits/maxMessages`` after a counted entry was queued is dropped by its front-end
/// (``append(_:counted:written:)`` returns `false`). A **burst** (the `REGION` events of one fix,
/// ``beginBurst()``) is checked once, before it: a client within the bounds gets all of it, one
/// beyond them is dropped; the next entry after the burst is checked again.
public struct OutboundQueue {
  /// What a queued entry is, as ``first()`` and ``popFirst()`` report it.
  public enum Kind: Sendable, Hashable {
    /// Never coalesced; part of the backlog.
    case counted
    /// Outside the backlog (bounded elsewhere).
    case uncounted
    /// A coalescible event taken from the queue, after replacing `missed` (0 or more) others.
    case coalesced(missed: Int)
  }

  /// The first entry of the queue, as it is to be written.
  public struct Head: Sendable {
    /// The whole entry: a coalesced event's JSON with `"missed":N` when it replaced others,
    /// followed by the queue's terminator.
    public var bytes: [UInt8]
    /// How many of `bytes` were written already, 0 up to `bytes.count - 1`.
    public var offset: Int
    /// The entry's kind.
    public var kind: Kind
  }

  private enum Entry: Sendable {
    case bytes([UInt8], Kind)
    case coalesced(String)
  }

  private struct Pending: Sendable {
    var key: String
    var body: [UInt8]
    var missed: Int
  }

  /// The bounds checked by the drop rule.
  public let limits: OutboundLimits
  /// Appended to a coalesced event's JSON when it is taken: a newline for the line protocols,
  /// nothing for a front-end that frames events itself (Server-Sent Events).
  public let terminator: [UInt8]
  private var entries = FIFO<Entry>()
  private var pending: [Pending] = []
  private var headOffset = 0
  /// Bytes of counted entries not yet written.
  public private(set) var backlogBytes = 0
  /// Counted entries not yet fully written.
  public private(set) var backlogMessages = 0
  /// A burst is being queued: the drop rule is not applied to its entries.
  public private(set) var inBurst = false

  /// Creates an empty queue.
  ///
  /// - Parameters:
  ///   - limits: the bounds of the drop rule.
  ///   - terminator: the bytes that end a coalesced event when it is taken (see ``terminator``).
  public init(limits: OutboundLimits, terminator: [UInt8] = []) {
    self.limits = limits
    self.terminator = terminator
  }

  /// Whether nothing waits to be written.
  public var isEmpty: Bool { entries.isEmpty }

  /// Whether the backlog exceeds a bound.
  public var isBeyondLimits: Bool {
    backlogBytes > limits.maxBytes || backlogMessages > limits.maxMessages
  }

  /// Queues `bytes` behind everything queued before.
  ///
  /// - Parameters:
  ///   - counted: whether the bytes are part of the backlog (see the type's documentation).
  ///   - written: how many of `bytes` the caller already wrote (a direct write that the socket
  ///     took only part of), 0 up to `bytes.count - 1`; only for an entry queued first, when
  ///     the queue is empty. Ignored otherwise.
  /// - Returns: `false` when the entry is counted, no burst is being queued, and the backlog now
  ///   exceeds the bounds: drop the client (``removeAll()``). `true` otherwise.
  @discardableResult
  public mutating func append(_ bytes: [UInt8], counted: Bool = true, written: Int = 0) -> Bool {
    let offset = entries.isEmpty ? max(0, min(written, bytes.count)) : 0
    if entries.isEmpty { headOffset = offset }
    entries.append(.bytes(bytes, counted ? .counted : .uncounted))
    guard counted else { return true }
    backlogBytes += bytes.count - offset
    backlogMessages += 1
    return inBurst || !isBeyondLimits
  }

  /// Queues a coalescible event: a waiting event with the same `key` is replaced (its place
  /// goes to the back, its `missed` count grows by one); otherwise `body` waits at the back.
  ///
  /// - Parameters:
  ///   - key: the coalescing key, e.g. `"TPV"` or `"MAP"`.
  ///   - body: one encoded JSON object, without terminator.
  public mutating func coalesce(key: String, body: [UInt8]) {
    if let index = pending.firstIndex(where: { $0.key == key }) {
      pending[index].body = body
      pending[index].missed += 1
      entries.removeLast {
        if case .coalesced(let other) = $0 { return other == key }
        return false
      }
    } else {
      pending.append(Pending(key: key, body: body, missed: 0))
    }
    entries.append(.coalesced(key))
  }

  /// Starts a burst: checks the drop rule once for all of it.
  ///
  /// - Returns: `false` when the backlog already exceeds the bounds (drop the client; no burst
  ///   started), `true` when the burst may be queued; end it with ``endBurst()``.
  public mutating func beginBurst() -> Bool {
    guard !isBeyondLimits else { return false }
    inBurst = true
    return true
  }

  /// Ends the burst started by ``beginBurst()``; later entries are checked again.
  public mutating func endBurst() { inBurst = false }

  /// The first entry, as it is to be written, with how much of it was written; `nil` when the
  /// queue is empty. A coalescible event becomes fixed bytes here (its `missed` count is final).
  public mutating func first() -> Head? {
    while let entry = entries.first {
      switch entry {
      case .bytes(let bytes, let kind):
        return Head(bytes: bytes, offset: headOffset, kind: kind)
      case .coalesced(let key):
        guard let index = pending.firstIndex(where: { $0.key == key }) else {
          _ = entries.popFirst()
          continue
        }
        let taken = pending.remove(at: index)
        var bytes =
          taken.missed > 0
          ? JSONValue.appending(
            [JSONMember("missed", .int(Int64(taken.missed)))], toEncodedObject: taken.body)
          : taken.body
        bytes.append(contentsOf: terminator)
        let kind = Kind.coalesced(missed: taken.missed)
        entries.replaceFirst(.bytes(bytes, kind))
        headOffset = 0
        return Head(bytes: bytes, offset: 0, kind: kind)
      }
    }
    return nil
  }

  /// Records that `count` more bytes of the first entry were written; the entry leaves the
  /// queue once all of it was.
  ///
  /// - Returns: whether the first entry was completed (and removed).
  @discardableResult
  public mutating func wrote(_ count: Int) -> Bool {
    guard case .bytes(let bytes, let kind)? = entries.first else { return false }
    let taken = max(0, min(count, bytes.count - headOffset))
    headOffset += taken
    if kind == .counted { backlogBytes -= taken }
    guard headOffset == bytes.count else { return false }
    headOffset = 0
    _ = entries.popFirst()
    if kind == .counted { backlogMessages -= 1 }
    return true
  }

  /// Takes the first entry whole (for a front-end that copies it out at once): ``first()``
  /// then ``wrote(_:)`` of what was left of it.
  public mutating func popFirst() -> Head? {
    guard let head = first() else { return nil }
    wrote(head.bytes.count - head.offset)
    return head
  }

  /// Empties the queue (the client is being dropped or has gone); the backlog becomes 0.
  public mutating func removeAll() {
    entries.removeAll()
    pending = []
    headOffset = 0
    backlogBytes = 0
    backlogMessages = 0
    inBurst = false
  }

  /// Logs `slowClient` with the client's number and backlog (and `transport` when given), as
  /// every front-end does when the drop rule drops a client.
  public func logSlowClient(_ client: UInt64, transport: String? = nil) {
    let bytes = String(backlogBytes)
    let messages = String(backlogMessages)
    if let transport {
      Log.event(
        "slowClient",
        [
          "client": String(client), "transport": transport, "backlogBytes": bytes,
          "backlogMessages": messages,
        ])
    } else {
      Log.event(
        "slowClient",
        ["client": String(client), "backlogBytes": bytes, "backlogMessages": messages])
    }
  }
}
