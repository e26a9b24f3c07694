import Dispatch
import ServiceCore
import Synchronization

/// Puts an ``MQTTOutbox`` off the fix path: ``append(topic:payload:retain:)`` hands the message
/// to a serial queue of its own (`locationd.mqtt-outbox`) and returns at once, so a stalled or
/// failing disk under a durable outbox delays queueing, never the hub that delivers fixes to every
/// client. Reads (``oldest(after:limit:)``, ``remove(through:)``) go straight to the wrapped outbox.
///
/// At most ``pendingLimit`` messages wait for the disk; beyond that the oldest waiting one is
/// dropped and counted (`mqttQueueBehind dropped=N`, logged at counts 1, 2, 4, 8...). Messages keep
/// their order. An append the wrapped outbox refuses is counted and logged by `onFailure`.
public final class OutboxWriter: MQTTOutbox {
  /// Most messages waiting for the disk: 4,096 (minutes of fixes at 10 Hz).
  public static let pendingLimit = 4096

  private struct Message {
    var topic: String
    var payload: [UInt8]
    var retain: Bool
  }

  private struct State {
    var pending: [Message] = []
    var head = 0
    var running = false
    var dropped = 0
    var waiters: [CheckedContinuation<Void, Never>] = []
  }

  private let wrapped: any MQTTOutbox
  private let state = Mutex(State())
  private let queue = DispatchQueue(label: "locationd.mqtt-outbox")
  private let onFailure: @Sendable (OutboxError) -> Void

  /// Wraps `outbox`; `onFailure` is told of each append the outbox refused (on the writer's queue).
  public init(_ outbox: any MQTTOutbox, onFailure: @escaping @Sendable (OutboxError) -> Void) {
    wrapped = outbox
    self.onFailure = onFailure
  }

  /// Queues the message for the outbox and returns at once (never throws: a refusal by the
  /// outbox is reported to `onFailure` when it happens).
  public func append(topic: String, payload: [UInt8], retain: Bool) throws(OutboxError) {
    let (start, dropped): (Bool, Int?) = state.withLock { state in
      var dropped: Int?
      if state.pending.count - state.head >= Self.pendingLimit {
        state.head += 1
        state.dropped += 1
        dropped = state.dropped
      }
      state.pending.append(Message(topic: topic, payload: payload, retain: retain))
      let start = !state.running
      state.running = true
      return (start, dropped)
    }
    if let dropped, LogThrottle.powersOfTwo.logs(dropped) {
      Log.event("mqttQueueBehind", ["dropped": String(dropped), "reason": "the outbox's disk is slower than the fixes"])
    }
    if start { queue.async { self.drain() } }
  }

  private func drain() {
    while true {
      let batch: [Message] = state.withLock { state in
        let batch = Array(state.pending[state.head...])
        state.pending.removeAll(keepingCapacity: true)
        state.head = 0
        if batch.isEmpty { state.running = false }
        return batch
      }
      if batch.isEmpty {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
          guard !state.running else { return [] }
          let waiters = state.waiters
          state.waiters = []
          return waiters
        }
        for waiter in waiters { waiter.resume() }
        return
      }
      for message in batch {
        do throws(OutboxError) {
          try wrapped.append(topic: message.topic, payload: message.payload, retain: message.retain)
        } catch {
          onFailure(error)
        }
      }
    }
  }

  /// Waits until every message handed over so far is in the wrapped outbox (or refused).
  public func flush() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let idle: Bool = state.withLock { state in
        if !state.running { return true }
        state.waiters.append(continuation)
        return false
      }
      if idle { continuation.resume() }
    }
  }

  /// Passed to the wrapped outbox.
  public func oldest(after: Int64?, limit: Int) throws(OutboxError) -> [OutboxMessage] {
    try wrapped.oldest(after: after, limit: limit)
  }

  /// Passed to the wrapped outbox.
  public func remove(through sequence: Int64) throws(OutboxError) {
    try wrapped.remove(through: sequence)
  }

  /// Messages in the wrapped outbox plus those still waiting for it.
  public var count: Int {
    wrapped.count + state.withLock { $0.pending.count - $0.head }
  }

  /// Dropped by the wrapped outbox (full) plus those dropped while waiting for it.
  public var droppedCount: Int {
    wrapped.droppedCount + state.withLock { $0.dropped }
  }
}
