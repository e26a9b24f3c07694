import Synchronization

/// One queued message: its place in the queue and what to publish.
public struct OutboxMessage: Sendable, Hashable {
  /// Position in the queue, increasing with each append; delivery follows it.
  public var sequence: Int64
  /// Topic to publish to.
  public var topic: String
  /// Payload, the OwnTracks JSON.
  public var payload: [UInt8]
  /// Whether the broker keeps it as the topic's retained message (MQTT 3.1.1, 3.3.1.3):
  /// locations as `mqtt-retain` says, transitions never.
  public var retain: Bool

  /// Creates a message.
  public init(sequence: Int64, topic: String, payload: [UInt8], retain: Bool) {
    self.sequence = sequence
    self.topic = topic
    self.payload = payload
    self.retain = retain
  }
}

/// Why the queue could not take or give a message (the disk is full, the store is damaged...).
public struct OutboxError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What failed, with the store's own message.
  public var description: String

  /// Creates an error.
  public init(_ description: String) { self.description = description }
}

/// The store-and-forward queue of the MQTT front-end: every message is appended before it is
/// published and removed only after the broker acknowledged it (QoS 1), so messages survive a
/// broker outage, and with a durable store (the track store's outbox) a daemon restart too.
///
/// Contract, for every implementation: ``oldest(after:limit:)`` returns messages in increasing
/// ``OutboxMessage/sequence``, which is the order of ``append(topic:payload:retain:)``, with the
/// topic, payload and retain flag given there; ``remove(through:)``
/// removes every message up to and including a sequence; when an append would exceed the limit,
/// the oldest messages are dropped and counted in ``droppedCount``. Safe to call from any thread.
public protocol MQTTOutbox: AnyObject, Sendable {
  /// Appends a message at the end, to be published with the MQTT retain flag `retain`.
  ///
  /// - Throws: ``OutboxError`` when the store cannot take it (the message is lost and the caller logs it).
  func append(topic: String, payload: [UInt8], retain: Bool) throws(OutboxError)
  /// At most `limit` messages with a sequence above `after` (all when `nil`), oldest first.
  func oldest(after: Int64?, limit: Int) throws(OutboxError) -> [OutboxMessage]
  /// Removes every message whose sequence is `sequence` or lower.
  func remove(through sequence: Int64) throws(OutboxError)
  /// Messages queued now.
  var count: Int { get }
  /// Messages dropped because the queue was full, since it was created.
  var droppedCount: Int { get }
}

/// An ``MQTTOutbox`` in memory: bounded, in order, lost at exit. Used when no durable store is
/// configured and in tests of the delivery order.
public final class MemoryOutbox: MQTTOutbox {
  private struct State {
    var messages: [OutboxMessage] = []
    var head = 0
    var nextSequence: Int64 = 1
    var dropped = 0
  }
  private let state = Mutex(State())
  /// The most messages held; `>= 1`.
  public let limit: Int

  /// Creates an empty queue holding at most `limit` messages (at least 1).
  public init(limit: Int) { self.limit = max(1, limit) }

  /// See ``MQTTOutbox/append(topic:payload:retain:)``.
  public func append(topic: String, payload: [UInt8], retain: Bool) throws(OutboxError) {
    state.withLock { state in
      state.messages.append(OutboxMessage(sequence: state.nextSequence, topic: topic, payload: payload, retain: retain))
      state.nextSequence += 1
      if state.messages.count - state.head > limit {
        state.head += 1
        state.dropped += 1
      }
      Self.compact(&state)
    }
  }

  /// See ``MQTTOutbox/oldest(after:limit:)``.
  public func oldest(after: Int64?, limit: Int) throws(OutboxError) -> [OutboxMessage] {
    state.withLock { state in
      var result: [OutboxMessage] = []
      var index = state.head
      while index < state.messages.count, result.count < limit {
        let message = state.messages[index]
        if after.map({ message.sequence > $0 }) ?? true { result.append(message) }
        index += 1
      }
      return result
    }
  }

  /// See ``MQTTOutbox/remove(through:)``.
  public func remove(through sequence: Int64) throws(OutboxError) {
    state.withLock { state in
      while state.head < state.messages.count, state.messages[state.head].sequence <= sequence { state.head += 1 }
      Self.compact(&state)
    }
  }

  /// See ``MQTTOutbox/count``.
  public var count: Int { state.withLock { $0.messages.count - $0.head } }
  /// See ``MQTTOutbox/droppedCount``.
  public var droppedCount: Int { state.withLock { $0.dropped } }

  private static func compact(_ state: inout State) {
    if state.head > 1024, state.head * 2 > state.messages.count {
      state.messages.removeFirst(state.head)
      state.head = 0
    }
  }
}
