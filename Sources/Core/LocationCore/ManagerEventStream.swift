import Queues
import Synchronization
import LocationModel

/// What a ``LocationManager`` subscriber receives.
public enum ManagerEvent: Sendable, Hashable {
  /// A new location. `missed` counts the newer-than-delivered locations that were coalesced away
  /// because the subscriber was slower than the backend (0 when it kept up).
  case location(Location, missed: Int)
  /// The backend's status changed (``BackendStatus``), with a human-readable detail.
  case status(BackendStatus, detail: String?)
  /// A non-fatal backend error message (only on ``LocationManager/observe()`` streams).
  case error(String)
}

/// A location shared by reference between the mailboxes it is queued in: one allocation per fix
/// instead of one copy per subscriber; the reader copies it out only when it takes it.
final class SharedLocation: Sendable {
  let value: Location
  init(_ value: Location) { self.value = value }
}

/// What a mailbox queues: locations by reference, anything else as is.
enum MailboxEntry: Sendable {
  case location(SharedLocation, missed: Int)
  indirect case other(ManagerEvent)

  var event: ManagerEvent {
    switch self {
    case .location(let shared, let missed): return .location(shared.value, missed: missed)
    case .other(let event): return event
    }
  }
}

extension MailboxEntry: QueuedEvent {
  /// Every entry counts toward a coalescing mailbox's bound: locations and statuses alike.
  package var isBounded: Bool { true }

  /// A location replaces the queued location before it, adding that one (and those it replaced)
  /// to its missed count; anything else is queued after it.
  package func coalesced(into older: MailboxEntry) -> MailboxEntry? {
    guard case .location(let location, let missed) = self,
      case .location(_, let previouslyMissed) = older
    else { return nil }
    return .location(location, missed: previouslyMissed + missed + 1)
  }
}

/// A subscriber's mailbox: the ``EventQueue`` between the ``LocationManager`` (which posts without
/// ever waiting, and wakes each reader once per burst) and one ``ManagerEventStream``.
///
/// - Coalescing (the default): ``QueueOverflow/coalesce`` with a bound of
///   ``MailboxBounds/coalescingCapacity`` entries. Consecutive locations merge into the newest
///   (with a count of those skipped); beyond the bound the oldest entry is dropped.
/// - Lossless (`coalesces: false`, for recording, tests and the daemon's hub):
///   ``QueueOverflow/waitForSpace`` with a bound of ``LocationManager/losslessBacklog``. The manager
///   posts beyond it (it never waits for one reader while posting) and then, for observers, waits
///   with ``EventQueue/waitForSpace()`` before it reads the backend again.
typealias EventMailbox = EventQueue<MailboxEntry>

/// The bounds of a ``LocationManager``'s mailboxes.
enum MailboxBounds {
  /// Most entries a coalescing mailbox holds for a reader that does not read: status changes and
  /// errors (and at most one location between two of them); older ones are dropped.
  static let coalescingCapacity = 64
}

extension EventQueue where Element == MailboxEntry {
  /// Creates a mailbox: coalescing, or lossless with `coalesces: false`.
  convenience init(coalesces: Bool) {
    if coalesces {
      self.init(capacity: MailboxBounds.coalescingCapacity, overflow: .coalesce)
    } else {
      self.init(capacity: LocationManager.losslessBacklog, overflow: .waitForSpace)
    }
  }

  /// Whether consecutive locations are coalesced (false: every event is kept).
  var coalesces: Bool { overflow == .coalesce }
}

/// Ends a subscription when the last copy of its stream and iterator goes away.
final class SubscriptionHandle: Sendable {
  let mailbox: EventMailbox
  private let onTermination: @Sendable () -> Void

  init(mailbox: EventMailbox, onTermination: @escaping @Sendable () -> Void) {
    self.mailbox = mailbox
    self.onTermination = onTermination
  }

  deinit {
    mailbox.finish()
    onTermination()
  }
}

/// One subscriber's events from a ``LocationManager``; each call to `subscribe` or `observe`
/// returns its own stream.
///
/// A slow reader never delays the backend or other subscribers: while it is not reading, newer
/// locations replace older ones (``ManagerEvent/location(_:missed:)`` says how many were skipped).
/// The stream ends when ``cancel()`` is called, the iterating task is cancelled, the client
/// disconnects or the manager shuts down. Iterate it from one task.
public struct ManagerEventStream: AsyncSequence, Sendable {
  /// The events.
  public typealias Element = ManagerEvent
  /// The stream never throws.
  public typealias Failure = Never

  let handle: SubscriptionHandle

  /// Reads the stream's events in order.
  public struct AsyncIterator: AsyncIteratorProtocol {
    let handle: SubscriptionHandle

    /// The next event; `nil` when the stream has ended.
    public mutating func next() async -> ManagerEvent? {
      guard let entry = await handle.mailbox.next() else {
        // Ended, or the iterating task was cancelled: either way the stream is over.
        handle.mailbox.finish()
        return nil
      }
      return entry.event
    }
  }

  /// Creates the iterator.
  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(handle: handle)
  }

  /// Ends the stream: events already queued are still read, then the iteration ends.
  public func cancel() {
    handle.mailbox.finish()
  }
}
