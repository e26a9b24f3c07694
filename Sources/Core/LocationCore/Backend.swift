import LocationModel
import Queues

/// What a backend reports.
public enum BackendEvent: Sendable, Hashable {
  /// A new location (one per epoch).
  case location(Location)
  /// A change of ``BackendStatus``, with a human-readable detail.
  case status(BackendStatus, detail: String?)
  /// A non-fatal error (a bad line in a log, a refused connection), as a message.
  case error(String)
}

extension BackendEvent: QueuedEvent {
  /// Locations are bounded by a backend's queue; status changes and errors are always queued.
  package var isBounded: Bool {
    if case .location = self { return true }
    return false
  }
}

/// A source of locations: gpsd, an NMEA log replay, a simulated GPS.
///
/// `start()` begins producing ``BackendEvent``s on ``events``; `stop()` ends production (the
/// stream stays open, so the backend can be started again). Implementations are thread-safe.
public protocol LocationBackend: AnyObject, Sendable {
  /// The backend's URI, e.g. `simulate`, `replay:/var/log/drive.nmea?speed=10`, `gpsd://localhost:2947`.
  var uri: String { get }
  /// Every event the backend produces, for its whole life; one consumer.
  var events: BackendEvents { get }
  /// Starts producing events. Throws when the backend cannot start (missing file, bad route).
  func start() async throws
  /// Stops producing events; idempotent.
  func stop() async
}

/// A backend's events, in order, for its whole life: the consuming side of the backend's one
/// ``EventQueue``. One consumer: ``LocationManager`` (which takes what is queued in bursts), or a
/// test or tool iterating it.
///
/// Each backend states its queue's bound and overflow policy: a replay or the simulation waits
/// while 1024 locations are unread (back-pressure), a live gpsd connection drops the oldest
/// location beyond its `bufferedLocations` option. Status changes and errors are never dropped
/// or held back. Iteration ends when the backend is released, or returns `nil` when the
/// iterating task is cancelled.
public struct BackendEvents: AsyncSequence, Sendable {
  /// The events.
  public typealias Element = BackendEvent
  /// The sequence never throws.
  public typealias Failure = Never

  /// The queue the backend posts to.
  package let queue: EventQueue<BackendEvent>

  /// Wraps a backend's queue.
  package init(_ queue: EventQueue<BackendEvent>) {
    self.queue = queue
  }

  /// Reads the events one at a time.
  public struct AsyncIterator: AsyncIteratorProtocol {
    let queue: EventQueue<BackendEvent>

    /// The next event; `nil` when the backend's queue has ended or the task is cancelled.
    public mutating func next() async -> BackendEvent? {
      await queue.next()
    }
  }

  /// Creates the iterator.
  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(queue: queue)
  }

  /// Every queued event up to `maximum`, waiting for at least one; `nil` at the end.
  package func nextBatch(upTo maximum: Int) async -> [BackendEvent]? {
    await queue.nextBatch(upTo: maximum)
  }
}
