import Synchronization
import SystemIO
import TrackStore

/// The daemon's ``MQTTOutbox``: the durable queue (`mqtt-outbox.sqlite`) while its store works,
/// a bounded queue in memory while it does not, and back to the store when it works again.
///
/// A store that fails while running (a full disk, a filesystem remounted read-only, an I/O
/// error) is handled as one that failed at start: the message that failed and the ones after it
/// go to memory (at most ``memoryLimit`` messages and ``memoryMaxBytes`` bytes, the oldest
/// dropped and counted), publishing goes on, and the store is tried again after 1 s, 2 s, 4 s
/// ... up to 60 s (``Backoff``). When it takes writes again, the messages in memory are moved to it
/// with their sequence numbers (so the session's order and acknowledgements stay valid), and new
/// messages are queued on disk again.
///
/// A store that cannot be opened at start is handled the same way: the queue starts in memory and
/// the store is opened with the same backoff. When it opens, the messages in memory are moved to
/// it with their sequence numbers, and messages an earlier run left in it (which the session has
/// not seen) are renumbered after them, keeping their order: they are published after those
/// queued meanwhile, and no acknowledgement given meanwhile can remove them unsent.
///
/// Delivered while the store could not record it: the broker's acknowledgement of a message
/// still in the store (a full disk cannot delete either) is kept in memory; those messages are not
/// published again, and they are removed from the store when it works again. Only a stop of the
/// daemon before that leaves them in the store, to be published a second time at the next start:
/// ``unrecordedDeliveries`` counts them, and the daemon logs the count at shutdown.
public final class FallbackOutbox: MQTTOutbox {
  /// What the outbox has done, for the log and tests.
  public struct Counters: Sendable, Hashable {
    /// Whether messages are queued in memory now.
    public var inMemory = false
    /// Why they are, in the words of the `mqttQueueInMemory` line; `nil` while the queue is on disk.
    public var reason: String?
    /// Times the store failed and the outbox moved to memory.
    public var fellBack = 0
    /// Times the store worked again and the messages in memory moved back to it.
    public var recovered = 0
    /// Messages dropped from the memory queue at its bound.
    public var memoryDropped = 0
    /// Messages delivered while the store could not remove them, removed later (not sent twice).
    public var removedLate = 0
  }

  private struct State {
    var memory: [OutboxMessage] = []
    var head = 0
    var memoryBytes: Int64 = 0
    var nextMemory: Int64 = 1
    var lastDurable: Int64 = 0
    /// Acknowledged by the broker, not yet removed from the store.
    var deliveredThrough: Int64?
    /// `nil` until the store opens (it could not be opened at start).
    var store: TrackStore?
    var inMemory = false
    var retryAt = 0.0
    var backoff = Backoff()
    var counters = Counters()

    var memoryCount: Int { memory.count - head }
  }

  private let open: (@Sendable () throws(TrackStoreError) -> TrackStore)?
  private let qos: Int
  private let state: Mutex<State>
  private let now: @Sendable () -> Double
  private let log: @Sendable (_ event: String, _ detail: String) -> Void
  /// Messages the memory queue holds at most.
  public let memoryLimit: Int
  /// Bytes of topics and payloads the memory queue holds at most.
  public let memoryMaxBytes: Int64

  /// Wraps `store`'s outbox.
  ///
  /// - Parameters:
  ///   - qos: the session's QoS (0 or 1), kept with each message.
  ///   - memoryLimit: messages held in memory at most (the `mqtt-queue-limit`), at least 1.
  ///   - memoryMaxBytes: bytes of topics and payloads held in memory at most (`mqtt-queue-size`).
  ///   - now: a monotonic clock, seconds (`CLOCK_MONOTONIC` by default; a virtual one in tests).
  ///   - log: `mqttQueueInMemory` when the store fails (with the reason), `mqttQueueOnDisk` when it
  ///     works again (with the messages moved back and removed late).
  public init(
    store: TrackStore, qos: Int, memoryLimit: Int, memoryMaxBytes: Int64,
    now: (@Sendable () -> Double)? = nil,
    log: @escaping @Sendable (_ event: String, _ detail: String) -> Void
  ) {
    self.open = nil
    self.qos = qos
    self.memoryLimit = max(1, memoryLimit)
    self.memoryMaxBytes = max(1, memoryMaxBytes)
    self.now = now ?? { MonotonicClock.seconds() }
    self.log = log
    var initial = State()
    initial.store = store
    initial.lastDurable = (try? store.lastOutgoingID()) ?? 0
    initial.nextMemory = initial.lastDurable + 1
    state = Mutex(initial)
  }

  /// Opens the store with `open` now; when that fails, starts in memory, logs
  /// `mqttQueueInMemory` with the reason, and calls `open` again with the backoff of a store that
  /// fails while running (1 s, 2 s, 4 s ... up to 60 s, at the next message), moving the memory
  /// queue to the store when it opens. Without libsqlite3
  /// (``TrackStoreError/libraryUnavailable(_:)``) or with a configuration the store refuses
  /// (``TrackStoreError/invalidArgument(_:reason:)``) it is not tried again: the queue stays in
  /// memory for the run.
  ///
  /// - Parameters:
  ///   - open: opens (or creates) the queue's store; called on the caller's thread now, later
  ///     on the thread that appends or reads, the outbox's lock held (it must not call the outbox).
  ///   - qos, memoryLimit, memoryMaxBytes, now, log: as ``init(store:qos:memoryLimit:memoryMaxBytes:now:log:)``.
  public init(
    opening open: @escaping @Sendable () throws(TrackStoreError) -> TrackStore, qos: Int, memoryLimit: Int,
    memoryMaxBytes: Int64, now: (@Sendable () -> Double)? = nil,
    log: @escaping @Sendable (_ event: String, _ detail: String) -> Void
  ) {
    self.open = open
    self.qos = qos
    self.memoryLimit = max(1, memoryLimit)
    self.memoryMaxBytes = max(1, memoryMaxBytes)
    let clock = now ?? { MonotonicClock.seconds() }
    self.now = clock
    self.log = log
    var initial = State()
    do throws(TrackStoreError) {
      let store = try open()
      initial.store = store
      initial.lastDurable = (try? store.lastOutgoingID()) ?? 0
      initial.nextMemory = initial.lastDurable + 1
    } catch {
      initial.inMemory = true
      initial.counters.fellBack = 1
      initial.counters.reason = Self.reason(error)
      let final = Self.isFinal(error)
      initial.retryAt = final ? .infinity : clock() + initial.backoff.next()
      log(
        "mqttQueueInMemory",
        Self.reason(error)
          + (final
            ? "; the queue is kept in memory for this run"
            : "; publishing goes on from memory, the queue's store is tried again with backoff"))
    }
    state = Mutex(initial)
  }

  /// Whether the store can never open in this run (no libsqlite3, a refused configuration).
  static func isFinal(_ error: TrackStoreError) -> Bool {
    switch error {
    case .libraryUnavailable, .invalidArgument: return true
    default: return false
    }
  }

  /// Whether the queue's store is open (`false` while it could not be opened since the start).
  public var isStoreOpen: Bool { state.withLock { $0.store != nil } }

  /// The counters now.
  public var counters: Counters {
    state.withLock { state in
      var counters = state.counters
      counters.inMemory = state.inMemory
      return counters
    }
  }

  /// See ``MQTTOutbox/append(topic:payload:retain:)``: on disk, or in memory while the store fails.
  ///
  /// - Throws: ``OutboxError`` only for a message the queue can never take (larger than its
  ///   byte bound): a failing store is not an error here.
  public func append(topic: String, payload: [UInt8], retain: Bool) throws(OutboxError) {
    let refusal = state.withLock { state -> OutboxError? in
      retryIfDue(&state)
      if !state.inMemory, let store = state.store {
        do throws(TrackStoreError) {
          state.lastDurable = try store.enqueueOutgoing(topic: topic, payload: payload, qos: qos, retain: retain)
          state.nextMemory = state.lastDurable + 1
          return nil
        } catch {
          // Not the store's failure: this message alone cannot be queued.
          if case .invalidArgument = error { return OutboxError(error.description) }
          fallBack(&state, Self.reason(error))
        }
      }
      guard Int64(topic.utf8.count + payload.count) <= memoryMaxBytes else {
        return OutboxError("\(topic.utf8.count + payload.count) bytes exceed the queue's bound of \(memoryMaxBytes)")
      }
      let message = OutboxMessage(sequence: state.nextMemory, topic: topic, payload: payload, retain: retain)
      state.nextMemory += 1
      state.memory.append(message)
      state.memoryBytes += Int64(topic.utf8.count + payload.count)
      while state.memoryCount > memoryLimit || state.memoryBytes > memoryMaxBytes {
        let oldest = state.memory[state.head]
        state.memoryBytes -= Int64(oldest.topic.utf8.count + oldest.payload.count)
        state.head += 1
        state.counters.memoryDropped += 1
      }
      Self.compact(&state)
      return nil
    }
    if let refusal { throw refusal }
  }

  /// See ``MQTTOutbox/oldest(after:limit:)``: the store's messages first (those the broker already
  /// acknowledged skipped), then the memory queue's, whose sequences are all higher.
  public func oldest(after: Int64?, limit: Int) throws(OutboxError) -> [OutboxMessage] {
    guard limit > 0 else { return [] }
    return state.withLock { state in
      retryIfDue(&state)
      var result: [OutboxMessage] = []
      let floor = max(after ?? 0, state.deliveredThrough ?? 0)
      if floor < state.lastDurable, let store = state.store {
        do throws(TrackStoreError) {
          for row in try store.peekOutgoing(after: floor, limit: min(10_000, limit)) {
            result.append(OutboxMessage(sequence: row.id, topic: row.topic, payload: row.payload, retain: row.retain))
          }
        } catch {
          // Unreadable: what is on disk waits for the store's recovery; memory goes on.
          if !state.inMemory { fallBack(&state, Self.reason(error)) }
        }
      }
      var index = state.head
      while index < state.memory.count, result.count < limit {
        if state.memory[index].sequence > floor { result.append(state.memory[index]) }
        index += 1
      }
      return result
    }
  }

  /// See ``MQTTOutbox/remove(through:)``. When the store cannot delete (a full disk), the
  /// acknowledgement is kept and applied once it can: the messages are not published again.
  public func remove(through sequence: Int64) throws(OutboxError) {
    state.withLock { state in
      while state.head < state.memory.count, state.memory[state.head].sequence <= sequence {
        let message = state.memory[state.head]
        state.memoryBytes -= Int64(message.topic.utf8.count + message.payload.count)
        state.head += 1
      }
      Self.compact(&state)
      guard sequence > (state.deliveredThrough ?? 0) else { return }
      guard !state.inMemory, let store = state.store else {
        if state.store != nil { state.deliveredThrough = sequence }
        return
      }
      do throws(TrackStoreError) {
        try store.acknowledgeOutgoing(upTo: sequence)
      } catch {
        state.deliveredThrough = sequence
        fallBack(&state, Self.reason(error))
      }
    }
  }

  /// See ``MQTTOutbox/count``: the store's waiting messages (those delivered while it could not
  /// remove them included) and the memory queue's.
  public var count: Int {
    state.withLock { ($0.store?.outgoingCount ?? 0) + $0.memoryCount }
  }

  /// See ``MQTTOutbox/droppedCount``: the store's drops and the memory queue's.
  public var droppedCount: Int {
    state.withLock { ($0.store?.outgoingDropped ?? 0) + $0.counters.memoryDropped }
  }

  /// Messages the broker acknowledged that the store still holds (it could not delete them):
  /// published a second time if the daemon stops before the store works again.
  public var unrecordedDeliveries: Int {
    state.withLock { state in
      guard let through = state.deliveredThrough, let store = state.store else { return 0 }
      return (try? store.countOutgoing(through: through)) ?? 0
    }
  }

  /// Where the queue is now, for a status answered at once.
  public struct Status: Sendable, Hashable {
    /// Whether messages are queued in memory (the store fails or could not be opened).
    public var inMemory: Bool
    /// Why, in the words of the `mqttQueueInMemory` line; `nil` on disk.
    public var reason: String?
    /// Messages waiting, in the store and in memory.
    public var waiting: Int
    /// Messages only in memory (lost if the daemon stops now).
    public var memoryCount: Int
    /// Messages dropped at the bounds: the store's (kept across restarts) and the memory queue's.
    public var dropped: Int
  }

  /// ``Status`` now, or `nil` while the queue or its store is busy with the disk (a write a
  /// stalled disk has not finished): never waits.
  public var statusIfAvailable: Status? {
    state.withLockIfAvailable { state -> Status? in
      var stored = (waiting: 0, dropped: 0)
      if let store = state.store {
        guard let counts = store.outgoingCountsIfAvailable else { return nil }
        stored = counts
      }
      return Status(
        inMemory: state.inMemory, reason: state.counters.reason,
        waiting: stored.waiting + state.memoryCount, memoryCount: state.memoryCount, dropped: stored.dropped + state.counters.memoryDropped)
    } ?? nil
  }

  /// Messages only in memory (lost if the daemon stops now).
  public var memoryCount: Int { state.withLock { $0.memoryCount } }

  /// Closes the store at shutdown, once the front-end has stopped: taken out of WAL mode as
  /// every store closed cleanly is (``TrackStore/close()``), so no `-wal` or `-shm` file stays
  /// beside it. What the queue holds afterwards stays in memory; nothing is opened again.
  public func close() {
    state.withLock { state in
      state.store?.close()
      state.store = nil
      state.inMemory = true
      state.retryAt = .infinity
    }
  }

  /// Tries the store again now, whatever the backoff says (at shutdown).
  public func retryNow() {
    state.withLock { state in
      guard state.inMemory else { return }
      state.retryAt = 0
      retryIfDue(&state)
    }
  }

  /// The store's error in the queue's words (a full store's own text speaks of fixes).
  static func reason(_ error: TrackStoreError) -> String {
    switch error {
    case .diskFull(let path, let message): return "the queue's store \(path) is full (disk or size cap): \(message)"
    case .sqlite(let code, let message, let operation):
      return "the queue's store failed while \(operation): \(message) (SQLite code \(code))"
    default: return error.description
    }
  }

  private func fallBack(_ state: inout State, _ reason: String) {
    state.retryAt = now() + state.backoff.next()
    guard !state.inMemory else { return }
    state.inMemory = true
    state.counters.fellBack += 1
    state.counters.reason = reason
    log("mqttQueueInMemory", "\(reason); publishing goes on from memory, the queue's store is tried again with backoff")
  }

  /// Moves the memory queue back to the store when the retry is due and the store takes it.
  private func retryIfDue(_ state: inout State) {
    guard state.inMemory, now() >= state.retryAt else { return }
    guard let store = state.store else {
      openLate(&state)
      return
    }
    do throws(TrackStoreError) {
      var removed = 0
      if let through = state.deliveredThrough {
        removed = try store.acknowledgeOutgoing(upTo: through)
      }
      var moved = 0
      while state.head < state.memory.count {
        let message = state.memory[state.head]
        try store.enqueueOutgoing(
          topic: message.topic, payload: message.payload, qos: qos, retain: message.retain, id: message.sequence)
        state.memoryBytes -= Int64(message.topic.utf8.count + message.payload.count)
        state.head += 1
        state.lastDurable = message.sequence
        moved += 1
      }
      // Sequences handed out from memory and already delivered are never reused on disk.
      try store.reserveOutgoingIDs(through: state.nextMemory - 1)
      state.lastDurable = max(state.lastDurable, state.nextMemory - 1)
      Self.leaveMemory(&state)
      state.counters.removedLate += removed
      log(
        "mqttQueueOnDisk",
        "the queue's store works again: \(moved) messages moved back from memory, \(removed) delivered meanwhile removed")
    } catch {
      state.retryAt = now() + state.backoff.next()
    }
  }

  /// The queue is on disk again: the memory queue emptied (its messages were moved), no pending
  /// acknowledgement of memory messages, the backoff reset, and the recovery counted.
  private static func leaveMemory(_ state: inout State) {
    state.memory.removeAll()
    state.head = 0
    state.memoryBytes = 0
    state.deliveredThrough = nil
    state.inMemory = false
    state.backoff.reset()
    state.counters.recovered += 1
    state.counters.reason = nil
  }

  /// Opens the store that could not be opened at start and moves the memory queue to it, ahead
  /// of what an earlier run left there (see the type's comment).
  private func openLate(_ state: inout State) {
    guard let open else { return }
    do throws(TrackStoreError) {
      let store = try open()
      let through = state.nextMemory - 1
      let waiting = state.memory[state.head...].map { message in
        OutgoingMessage(
          id: message.sequence, topic: message.topic, payload: message.payload, qos: qos, retain: message.retain)
      }
      let renumbered: Int
      do throws(TrackStoreError) {
        renumbered = try store.adoptOutgoing(Array(waiting), through: through)
      } catch {
        store.close()
        throw error
      }
      let moved = waiting.count
      state.store = store
      state.lastDurable = max(through, (try? store.lastOutgoingID()) ?? through)
      state.nextMemory = state.lastDurable + 1
      // Acknowledgements given meanwhile were of memory messages, removed already.
      Self.leaveMemory(&state)
      log(
        "mqttQueueOnDisk",
        "the queue's store opened: \(moved) messages moved from memory, \(renumbered) left by an earlier run queued after them")
    } catch {
      state.retryAt = Self.isFinal(error) ? .infinity : now() + state.backoff.next()
    }
  }

  private static func compact(_ state: inout State) {
    if state.head > 1024, state.head * 2 > state.memory.count {
      state.memory.removeFirst(state.head)
      state.head = 0
    }
  }
}
