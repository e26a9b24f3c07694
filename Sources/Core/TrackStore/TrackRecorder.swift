import Dispatch
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import LocationModel
import Synchronization
import SystemIO

/// Records accepted fixes into a ``TrackStore`` off the caller's path.
///
/// ``record(_:)`` never blocks and never touches SQLite: it converts the location to a
/// ``TrackPoint`` and appends it to a bounded in-memory queue (``capacity``, default 4,096 fixes).
/// The store's own serial dispatch queue drains that queue: each drain takes every waiting fix and
/// commits them in one transaction, then runs one retention step. At 1 Hz that is one small
/// transaction per fix; under a fast replay the batches grow with the backlog, so the store keeps
/// up at its bulk rate. A fix arriving while the queue is full is dropped and counted
/// (``Counters/dropped``), as is a batch whose transaction failed (``Counters/failed``: a full
/// disk, say). Recording failures never stop tracking.
///
/// A `kill -9` loses what is still in the queue: fixes that arrived since the last commit, which
/// is less than a second's worth unless the disk is slower than the fix rate (then `dropped`
/// counts the excess).
public final class TrackRecorder: Sendable {
  /// What the recorder has done since it was created.
  public struct Counters: Sendable, Hashable {
    /// Fixes committed to the store.
    public var recorded: Int = 0
    /// Fixes not recorded because the queue was full.
    public var dropped: Int = 0
    /// Fixes lost because their transaction failed (``lastError`` says why).
    public var failed: Int = 0
    /// Locations with nothing to record (no date-time, no position).
    public var skipped: Int = 0
    /// Rows deleted by retention.
    public var expired: Int = 0
    /// The newest committed fix time (milliseconds since the Unix epoch).
    public var lastCommittedTime: Int64?
    /// The last error, until a later commit succeeds.
    public var lastError: TrackStoreError?
  }

  private struct State {
    var pending: [TrackPoint] = []
    var draining = false
    var counters = Counters()
    /// Monotonic seconds of the last `trackRetention` line, and fixes deleted since.
    var retentionLoggedAt: Int64?
    var retentionUnlogged = 0
  }

  /// At most one `trackRetention` line per this many seconds.
  static let retentionLogInterval: Int64 = 3600

  /// The store written to.
  public let store: TrackStore
  /// Fixes the queue holds before dropping.
  public let capacity: Int
  private let state: Mutex<State>
  private let queue = DispatchQueue(label: "locationd.track-store")
  private let log: @Sendable (_ event: String, _ detail: String) -> Void

  /// Creates a recorder for `store`.
  ///
  /// - Parameters:
  ///   - capacity: fixes the queue holds, at least 1 (default 4,096).
  ///   - log: called on the store's queue when recording starts failing (`trackStoreFailed`, with
  ///     the error) and when it recovers (`trackStoreRecovered`, with the fixes lost meanwhile);
  ///     once per transition, not per fix; and when retention deletes fixes (`trackRetention`,
  ///     with the count: the first time, then at most once an hour with the count since).
  public init(
    store: TrackStore, capacity: Int = 4_096,
    log: @escaping @Sendable (_ event: String, _ detail: String) -> Void = { _, _ in }
  ) {
    self.store = store
    self.capacity = max(1, capacity)
    self.log = log
    self.state = Mutex(State())
  }

  /// The counters now.
  public var counters: Counters { state.withLock { $0.counters } }

  /// Fixes queued and not yet taken into a transaction: near 0 while the disk keeps up; it grows
  /// (up to ``capacity``, then fixes are dropped) while a write the disk has not finished holds
  /// the store. Never waits for the store.
  public var waiting: Int { state.withLock { $0.pending.count } }

  /// Queues `location` for the store. Returns `false` when it was not queued: nothing to record
  /// (counted as skipped) or the queue is full (counted as dropped). Never blocks.
  @discardableResult
  public func record(_ location: Location) -> Bool {
    guard let point = TrackPoint(location) else {
      state.withLock { $0.counters.skipped += 1 }
      return false
    }
    return record(point)
  }

  /// Queues `point` (see ``record(_:)-(Location)``).
  @discardableResult
  public func record(_ point: TrackPoint) -> Bool {
    let start = state.withLock { state -> Bool? in
      guard state.pending.count < capacity else {
        state.counters.dropped += 1
        return nil
      }
      state.pending.append(point)
      if state.draining { return false }
      state.draining = true
      return true
    }
    guard let start else { return false }
    if start { queue.async { self.drain() } }
    return true
  }

  /// Waits until every fix queued before this call is committed (or has failed).
  public func flush() {
    queue.sync {}
  }

  private func drain() {
    while true {
      let batch = state.withLock { state -> [TrackPoint] in
        let batch = state.pending
        state.pending.removeAll(keepingCapacity: true)
        if batch.isEmpty { state.draining = false }
        return batch
      }
      guard !batch.isEmpty else { return }
      do {
        // A replayed fix the store already holds (the same log after a restart) is not stored.
        let stored = try store.append(batch)
        var expired = 0
        var retentionError: TrackStoreError?
        do { expired = try store.enforceRetention() } catch { retentionError = error }
        let recovered = state.withLock { state -> (TrackStoreError, Int)? in
          state.counters.recorded += stored
          state.counters.expired += expired
          state.counters.lastCommittedTime = max(state.counters.lastCommittedTime ?? .min, batch.map(\.time).max() ?? .min)
          defer { state.counters.lastError = retentionError }
          guard let previous = state.counters.lastError, retentionError == nil else { return nil }
          return (previous, state.counters.failed)
        }
        if expired > 0 {
          let seconds = Int64(MonotonicClock.nanoseconds() / 1_000_000_000)
          let due = state.withLock { state -> Int? in
            state.retentionUnlogged += expired
            if let last = state.retentionLoggedAt, seconds - last < Self.retentionLogInterval { return nil }
            state.retentionLoggedAt = seconds
            defer { state.retentionUnlogged = 0 }
            return state.retentionUnlogged
          }
          if let due { log("trackRetention", "deleted \(due) fixes beyond track-max-age or track-max-size") }
        }
        if let (previous, failed) = recovered {
          log("trackStoreRecovered", "after \(previous.description); \(failed) fixes lost in all")
        }
      } catch {
        let first = state.withLock { state -> Bool in
          state.counters.failed += batch.count
          defer { state.counters.lastError = error }
          return state.counters.lastError != error
        }
        if first { log("trackStoreFailed", error.description) }
      }
    }
  }
}
