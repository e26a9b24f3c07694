import TrackStore

/// A durable ``MQTTOutbox``: a ``TrackStore``'s outbox table (SQLite, WAL), so queued messages
/// survive a broker outage, a restart and `kill -9`. Its bounds are the store's
/// ``TrackStoreConfiguration/outboxLimit`` and ``TrackStoreConfiguration/outboxMaxBytes``: at a
/// bound the oldest waiting messages are deleted and counted. A failing store fails its calls;
/// the daemon uses ``FallbackOutbox``, which goes on in memory instead.
public final class TrackStoreOutbox: MQTTOutbox {
  private let store: TrackStore
  private let qos: Int

  /// Wraps `store`; messages are queued with the session's `qos` (0 or 1) and each message's own
  /// retain flag, which the table keeps with it.
  public init(store: TrackStore, qos: Int) {
    self.store = store
    self.qos = qos
  }

  /// See ``MQTTOutbox/append(topic:payload:retain:)``; committed before it returns.
  public func append(topic: String, payload: [UInt8], retain: Bool) throws(OutboxError) {
    do { try store.enqueueOutgoing(topic: topic, payload: payload, qos: qos, retain: retain) } catch {
      throw OutboxError(error.description)
    }
  }

  /// See ``MQTTOutbox/oldest(after:limit:)``: the store gives the oldest rows, so the messages
  /// still in flight (at most ``MQTTSession/window``) are read again and skipped.
  public func oldest(after: Int64?, limit: Int) throws(OutboxError) -> [OutboxMessage] {
    guard limit > 0 else { return [] }
    let rows: [OutgoingMessage]
    do { rows = try store.peekOutgoing(limit: min(10_000, limit + MQTTSession.window)) } catch {
      throw OutboxError(error.description)
    }
    var result: [OutboxMessage] = []
    for row in rows where after.map({ row.id > $0 }) ?? true {
      result.append(OutboxMessage(sequence: row.id, topic: row.topic, payload: row.payload, retain: row.retain))
      if result.count == limit { break }
    }
    return result
  }

  /// See ``MQTTOutbox/remove(through:)``.
  public func remove(through sequence: Int64) throws(OutboxError) {
    do { try store.acknowledgeOutgoing(upTo: sequence) } catch { throw OutboxError(error.description) }
  }

  /// See ``MQTTOutbox/count``.
  public var count: Int { store.outgoingCount }
  /// See ``MQTTOutbox/droppedCount``.
  public var droppedCount: Int { store.outgoingDropped }
}
