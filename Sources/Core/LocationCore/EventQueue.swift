import Queues
import Synchronization

/// What an ``EventQueue`` does with a bounded element that arrives while ``EventQueue/capacity``
/// bounded elements are queued. Elements that are not bounded (``QueuedEvent/isBounded`` is
/// `false`: status changes) are always queued, whatever the policy.
package enum QueueOverflow: Sendable, Hashable {
  /// Back-pressure. ``EventQueue/push(_:)`` suspends the producer until the consumer has taken the
  /// bounded elements down to half of the capacity (or the queue finishes, or the producing task
  /// is cancelled); ``EventQueue/post(_:)`` queues beyond the bound, for a producer that waits
  /// afterwards with ``EventQueue/waitForSpace()`` or cannot wait at all. Nothing is dropped.
  /// For sources that can be slowed down: a log replay, the simulation, a lossless reader.
  case waitForSpace
  /// The oldest queued bounded element is removed to make room and counted in
  /// ``EventQueue/dropped``. Never waits. For sources that cannot be slowed down: gpsd.
  case dropOldest
  /// The new element is merged into the newest queued element when
  /// ``QueuedEvent/coalesced(into:)`` allows it (a location replacing the location before it);
  /// otherwise it is appended, and beyond the capacity the oldest bounded element is removed and
  /// counted in ``EventQueue/dropped``. Never waits. For readers that want only the newest
  /// location: a subscriber of the location manager.
  case coalesce
}

/// An element of an ``EventQueue``: says whether the bound applies to it and how it merges.
package protocol QueuedEvent: Sendable {
  /// Whether the queue's capacity and overflow policy apply to this element (a location); when
  /// `false` (a status change) it is always queued and never dropped or waited for.
  var isBounded: Bool { get }

  /// This element merged into `older`, the newest element still queued, under
  /// ``QueueOverflow/coalesce``; `nil` when the two do not merge (the default).
  func coalesced(into older: Self) -> Self?
}

extension QueuedEvent {
  /// Never merges.
  package func coalesced(into older: Self) -> Self? { nil }
}

/// The one queue between a producer (a backend's thread or task, the location manager) and one
/// asynchronous consumer (the location manager, a subscriber).
///
/// A ``FIFO`` under a `Mutex`, with an explicit bound: at most ``capacity`` *bounded* elements are
/// held, and what happens beyond it is the ``overflow`` policy: wait (``QueueOverflow/waitForSpace``),
/// drop the oldest (``QueueOverflow/dropOldest``) or merge with the newest
/// (``QueueOverflow/coalesce``). Elements that are not bounded (status changes, errors) are always
/// queued, so a status is never lost or held back by a full queue; the producers that send them
/// send few.
///
/// The consumer takes elements one at a time (``next()``) or all that are queued at once
/// (``nextBatch(upTo:)``), which costs one wake-up per burst instead of one per element. One
/// consumer at a time; any number of producers. ``finish()`` ends the queue: queued elements are
/// still read, then the consumer gets `nil`.
package final class EventQueue<Element: QueuedEvent>: Sendable {
  private struct State {
    var items: FIFO<Element>
    /// Queued elements whose ``QueuedEvent/isBounded`` is `true`.
    var bounded = 0
    var dropped = 0
    var consumer: CheckedContinuation<Void, Never>?
    /// A wake-up of the consumer is owed by a caller of ``postWithoutWake(_:)``.
    var wakeScheduled = false
    /// Producers waiting for the bounded count to fall to ``EventQueue/resumeLevel``.
    var producers: [CheckedContinuation<Void, Never>] = []
    var finished = false
  }

  /// Most bounded elements queued before the ``overflow`` policy applies; at least 1.
  package let capacity: Int
  /// What happens to a bounded element beyond ``capacity``.
  package let overflow: QueueOverflow
  /// Waiting producers resume once the bounded count is at or below this: half the capacity.
  private let resumeLevel: Int
  private let state: Mutex<State>

  /// Creates an empty queue holding at most `capacity` (at least 1) bounded elements, with the
  /// given overflow policy.
  package init(capacity: Int, overflow: QueueOverflow) {
    self.capacity = max(1, capacity)
    self.overflow = overflow
    self.resumeLevel = max(1, capacity) / 2
    // Room for the bound plus a burst, so that a queue that drains and refills keeps its storage.
    state = Mutex(State(items: FIFO(retainedCapacity: 2 * min(max(1, capacity), 2048))))
  }

  /// Elements queued now (bounded or not).
  package var count: Int { state.withLock { $0.items.count } }

  /// Bounded elements removed so far by ``QueueOverflow/dropOldest`` or by
  /// ``QueueOverflow/coalesce`` beyond the capacity (merged elements are not counted here: the
  /// merged element carries its own count).
  package var dropped: Int { state.withLock { $0.dropped } }

  /// Whether ``finish()`` was called.
  package var isFinished: Bool { state.withLock { $0.finished } }

  /// Producers suspended in ``push(_:)``, ``push(contentsOf:)`` or ``waitForSpace()`` (for
  /// diagnostics and tests).
  package var waitingProducerCount: Int { state.withLock { $0.producers.count } }

  /// Whether the consumer is suspended waiting for an element (for diagnostics and tests).
  package var isConsumerWaiting: Bool { state.withLock { $0.consumer != nil } }

  // MARK: Producing

  /// Queues `element`, first waiting while the queue is full when the policy is
  /// ``QueueOverflow/waitForSpace`` and the element is bounded; under the other policies it never
  /// waits (see ``post(_:)``). Returns without queuing when the queue has finished, or when the
  /// calling task is cancelled while it waits.
  package func push(_ element: Element) async {
    if overflow == .waitForSpace && element.isBounded {
      guard await waitUntilBelowCapacity() else { return }
    }
    post(element)
  }

  /// Queues `elements` in order as one burst: waits as ``push(_:)`` does (once, before the
  /// first, and only when one of them is bounded), then queues them all and wakes the consumer
  /// once. With ``QueueOverflow/waitForSpace`` the queue may then hold up to
  /// `capacity - 1 + elements.count` bounded elements.
  package func push(contentsOf elements: [Element]) async {
    guard !elements.isEmpty else { return }
    if overflow == .waitForSpace && elements.contains(where: \.isBounded) {
      guard await waitUntilBelowCapacity() else { return }
    }
    let owed: Bool = state.withLock { state in
      if state.finished { return false }
      for element in elements { enqueue(element, into: &state) }
      return scheduleWake(&state)
    }
    if owed { wake() }
  }

  /// Queues `element` without ever waiting, applying the ``overflow`` policy (beyond the bound
  /// for ``QueueOverflow/waitForSpace``), and wakes a waiting consumer. Ignored once finished.
  package func post(_ element: Element) {
    if postWithoutWake(element) { wake() }
  }

  /// Queues `element` like ``post(_:)`` but does not wake the consumer; returns `true` when the
  /// caller must call ``wake()`` afterwards (once for any number of posts), so that a burst
  /// posted to many queues costs each consumer one wake-up.
  package func postWithoutWake(_ element: Element) -> Bool {
    state.withLock { state in
      if state.finished { return false }
      enqueue(element, into: &state)
      return scheduleWake(&state)
    }
  }

  /// Resumes the consumer if it is waiting (after ``postWithoutWake(_:)`` returned `true`).
  package func wake() {
    let consumer: CheckedContinuation<Void, Never>? = state.withLock { state in
      state.wakeScheduled = false
      defer { state.consumer = nil }
      return state.consumer
    }
    consumer?.resume()
  }

  /// Returns at once while fewer than ``capacity`` bounded elements are queued; otherwise waits
  /// until the consumer has taken them down to half of it, the queue finishes or the calling
  /// task is cancelled. For a producer that posts to several queues and then waits for the
  /// slowest (the location manager and its lossless readers).
  package func waitForSpace() async {
    _ = await waitUntilBelowCapacity()
  }

  /// Ends the queue: the consumer reads what is queued, then `nil`; waiting producers return and
  /// later elements are ignored.
  package func finish() {
    let (consumer, producers) = state.withLock { state in
      state.finished = true
      defer {
        state.consumer = nil
        state.producers = []
      }
      return (state.consumer, state.producers)
    }
    consumer?.resume()
    for producer in producers { producer.resume() }
  }

  // MARK: Consuming

  /// The next element, waiting for one; `nil` once finished and drained, or when the consuming
  /// task is cancelled while nothing is queued.
  package func next() async -> Element? {
    while true {
      let taken: Taken<Element> = state.withLock { state in
        if let element = state.items.popFirst() {
          if element.isBounded { state.bounded -= 1 }
          return .elements(element, Self.releasableProducers(&state, resumeLevel: resumeLevel))
        }
        return state.finished ? .end : .empty
      }
      switch taken {
      case .elements(let element, let producers):
        for producer in producers { producer.resume() }
        return element
      case .end: return nil
      case .empty:
        guard await waitForElements() else { return nil }
      }
    }
  }

  /// Every queued element up to `maximum` (at least 1), in order, waiting for at least one;
  /// `nil` once finished and drained, or when the consuming task is cancelled while nothing is
  /// queued.
  package func nextBatch(upTo maximum: Int) async -> [Element]? {
    while true {
      let taken: Taken<[Element]> = state.withLock { state in
        guard !state.items.isEmpty else { return state.finished ? .end : .empty }
        var batch: [Element] = []
        batch.reserveCapacity(min(state.items.count, max(1, maximum)))
        while batch.count < maximum, let element = state.items.popFirst() {
          if element.isBounded { state.bounded -= 1 }
          batch.append(element)
        }
        return .elements(batch, Self.releasableProducers(&state, resumeLevel: resumeLevel))
      }
      switch taken {
      case .elements(let batch, let producers):
        for producer in producers { producer.resume() }
        return batch
      case .end: return nil
      case .empty:
        guard await waitForElements() else { return nil }
      }
    }
  }

  // MARK: Internals

  private enum Taken<Value> {
    case elements(Value, [CheckedContinuation<Void, Never>])
    case end
    case empty
  }

  /// Queues `element` under the overflow policy; the queue is not finished.
  private func enqueue(_ element: Element, into state: inout State) {
    let bounded = element.isBounded
    if bounded && overflow == .coalesce, let last = state.items.last, last.isBounded,
      let merged = element.coalesced(into: last)
    {
      state.items.replaceLast(merged)
      return
    }
    if bounded && overflow != .waitForSpace && state.bounded >= capacity {
      Self.dropOldestBounded(&state)
    }
    state.items.append(element)
    if bounded { state.bounded += 1 }
  }

  /// Whether a waiting consumer needs a wake-up that nobody owes yet (and marks it owed).
  private func scheduleWake(_ state: inout State) -> Bool {
    guard state.consumer != nil, !state.wakeScheduled else { return false }
    state.wakeScheduled = true
    return true
  }

  /// Removes the oldest bounded element (the first one, usually at the head) and counts it.
  private static func dropOldestBounded(_ state: inout State) {
    if state.items.removeFirst(where: { $0.isBounded }) != nil {
      state.bounded -= 1
      state.dropped += 1
    }
  }

  /// The waiting producers, taken out of the state, once the bounded count is at the resume level.
  private static func releasableProducers(_ state: inout State, resumeLevel: Int)
    -> [CheckedContinuation<Void, Never>]
  {
    guard !state.producers.isEmpty, state.bounded <= resumeLevel else { return [] }
    defer { state.producers = [] }
    return state.producers
  }

  /// Waits until an element is posted, the queue finishes or the task is cancelled; returns
  /// `false` when the task was cancelled.
  private func waitForElements() async -> Bool {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let now: Bool = state.withLock { state in
          if !state.items.isEmpty || state.finished || Task.isCancelled { return true }
          state.consumer = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      let consumer: CheckedContinuation<Void, Never>? = state.withLock { state in
        defer { state.consumer = nil }
        return state.consumer
      }
      consumer?.resume()
    }
    if Task.isCancelled { return state.withLock { !$0.items.isEmpty } }
    return true
  }

  /// Returns `true` once fewer than ``capacity`` bounded elements are queued (at once, or after
  /// waiting for the consumer to take them down to half); `false` when the queue has finished or
  /// the calling task was cancelled.
  private func waitUntilBelowCapacity() async -> Bool {
    while true {
      let ready: Bool? = state.withLock { state in
        if state.finished { return nil }
        return state.bounded < capacity
      }
      guard let ready else { return false }
      if ready { return true }
      if Task.isCancelled { return false }
      await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
          let now: Bool = state.withLock { state in
            if state.finished || state.bounded <= resumeLevel || Task.isCancelled { return true }
            state.producers.append(continuation)
            return false
          }
          if now { continuation.resume() }
        }
      } onCancel: {
        let producers: [CheckedContinuation<Void, Never>] = state.withLock { state in
          defer { state.producers = [] }
          return state.producers
        }
        for producer in producers { producer.resume() }
      }
      if Task.isCancelled { return false }
    }
  }
}
