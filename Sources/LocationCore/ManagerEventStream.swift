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

/// A one-consumer mailbox that never blocks its producer: consecutive locations are coalesced to
/// the newest one (with a count of those skipped); status changes and errors are kept in order,
/// up to ``statusCapacity`` of them.
final class EventMailbox: Sendable {
  private struct State {
    /// Queued entries from `head` on; taken slots are cleared so they release their location.
    var queue: [MailboxEntry?] = []
    var head = 0
    var waiter: CheckedContinuation<ManagerEvent?, Never>?
    var wakeScheduled = false
    var finished = false
    /// Producers waiting in ``waitForSpace(below:)`` until fewer than `spaceLimit` are queued.
    var spaceWaiters: [CheckedContinuation<Void, Never>] = []
    var spaceLimit = 0
  }

  /// Most non-location events kept for a consumer that does not read; older ones are dropped.
  static let statusCapacity = 64

  private let state = Mutex(State())
  /// Whether consecutive locations are coalesced (false: every event is kept).
  let coalesces: Bool

  /// Creates a mailbox; `coalesces: false` keeps every event (unbounded, for recording and tests).
  init(coalesces: Bool = true) {
    self.coalesces = coalesces
  }

  /// Queues `event` (coalescing it with a queued location) without waking the reader; returns
  /// whether a reader is waiting, in which case the caller must call ``wake()`` afterwards (once
  /// for any number of pushes).
  func push(_ event: MailboxEntry) -> Bool {
    state.withLock { state in
      if state.finished { return false }
      if coalesces, case .location(let location, let missed) = event,
        state.queue.count > state.head,
        case .location(_, let previouslyMissed)? = state.queue[state.queue.count - 1]
      {
        state.queue[state.queue.count - 1] = .location(
          location, missed: previouslyMissed + missed + 1)
      } else {
        if coalesces, state.queue.count - state.head >= Self.statusCapacity {
          state.queue[state.head] = nil
          state.head += 1
        }
        if state.head > 32 && state.head * 2 > state.queue.count {
          state.queue.removeFirst(state.head)
          state.head = 0
        }
        state.queue.append(event)
      }
      if state.waiter != nil && !state.wakeScheduled {
        state.wakeScheduled = true
        return true
      }
      return false
    }
  }

  /// Hands the oldest queued event to a waiting reader, if there is one.
  func wake() {
    let resumption: (CheckedContinuation<ManagerEvent?, Never>, MailboxEntry)? = state.withLock {
      state in
      state.wakeScheduled = false
      guard let waiter = state.waiter, let entry = take(&state) else { return nil }
      state.waiter = nil
      return (waiter, entry)
    }
    if let (waiter, entry) = resumption { waiter.resume(returning: entry.event) }
  }

  /// Queues `event` and wakes a waiting reader at once.
  func send(_ event: ManagerEvent) {
    if push(.other(event)) { wake() }
  }

  /// Ends the mailbox: queued events are still read, then `nil`.
  func finish() {
    let (waiter, producers) = state.withLock { state in
      state.finished = true
      let waiter = state.waiter
      state.waiter = nil
      defer { state.spaceWaiters = [] }
      return (waiter, state.spaceWaiters)
    }
    waiter?.resume(returning: nil)
    for producer in producers { producer.resume() }
  }

  /// Waits while `limit` or more events are queued and the mailbox is not finished; returns when
  /// the reader has taken it down to half of `limit`. For the producer of a mailbox that keeps
  /// every event: without it a source faster than the reader (a replay at full speed) would
  /// queue without bound.
  func waitForSpace(below limit: Int) async {
    // The usual case, without suspending the caller.
    if state.withLock({ $0.finished || $0.queue.count - $0.head < limit }) { return }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.finished || state.queue.count - state.head < limit { return true }
        state.spaceLimit = limit
        state.spaceWaiters.append(continuation)
        return false
      }
      if ready { continuation.resume() }
    }
  }

  var isFinished: Bool { state.withLock { $0.finished } }

  private func take(_ state: inout State) -> MailboxEntry? {
    guard state.head < state.queue.count else { return nil }
    let event = state.queue[state.head]
    state.queue[state.head] = nil
    state.head += 1
    if !state.spaceWaiters.isEmpty && (state.queue.count - state.head) * 2 <= state.spaceLimit {
      // Resuming only schedules the waiting producer; it does not run under this lock.
      for producer in state.spaceWaiters { producer.resume() }
      state.spaceWaiters = []
    }
    if state.head == state.queue.count {
      state.queue.removeAll(keepingCapacity: true)
      state.head = 0
    } else if state.head >= 64 && state.head * 2 > state.queue.count {
      state.queue.removeFirst(state.head)
      state.head = 0
    }
    return event
  }

  /// The next event, waiting for one; `nil` once finished and drained, or when cancelled.
  func next() async -> ManagerEvent? {
    enum Immediate {
      case event(MailboxEntry)
      case end
      case wait
    }
    let first: Immediate = state.withLock { state in
      if let event = take(&state) { return .event(event) }
      return state.finished ? .end : .wait
    }
    switch first {
    case .event(let entry): return entry.event
    case .end: return nil
    case .wait: break
    }
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<ManagerEvent?, Never>) in
        let immediate: Immediate = state.withLock { state in
          if let event = take(&state) { return .event(event) }
          if state.finished || Task.isCancelled { return .end }
          state.waiter = continuation
          return .wait
        }
        switch immediate {
        case .event(let entry): continuation.resume(returning: entry.event)
        case .end: continuation.resume(returning: nil)
        case .wait: break
        }
      }
    } onCancel: {
      finish()
    }
  }
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
      await handle.mailbox.next()
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
