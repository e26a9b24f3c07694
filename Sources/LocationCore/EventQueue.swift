import Queues
import Synchronization
import LocationModel

/// A single-consumer queue between a backend's producing task and the consumer of its event
/// stream, with back-pressure: ``push(_:)`` waits while ``capacity`` elements are queued, while
/// ``pushUrgent(_:)`` (status changes) always enqueues, so a status is never lost even when the
/// consumer is busy elsewhere. The stream side is ``stream``, an `AsyncStream` that pulls from
/// the queue.
final class EventQueue<Element: Sendable>: Sendable {
  private struct State {
    var items: FIFO<Element>
    var consumer: CheckedContinuation<Element?, Never>?
    var producers: [CheckedContinuation<Void, Never>] = []
    var finished = false

    var count: Int { items.count }

    mutating func take() -> Element? { items.popFirst() }
  }

  private enum Outcome {
    case done(CheckedContinuation<Element?, Never>?, Element?)
    case wait
  }

  private enum Immediate {
    case element(Element, [CheckedContinuation<Void, Never>])
    case end
    case wait
  }

  /// Most elements queued by ``push(_:)`` before it waits.
  let capacity: Int
  private let state: Mutex<State>

  /// Creates a queue that makes producers wait beyond `capacity` queued elements.
  init(capacity: Int) {
    self.capacity = max(1, capacity)
    state = Mutex(State(items: FIFO(retainedCapacity: max(1, capacity))))
  }

  /// An `AsyncStream` reading this queue; one consumer. Cancelling the consuming task ends it.
  var stream: AsyncStream<Element> {
    AsyncStream(unfolding: { [self] in await self.next() })
  }

  /// Enqueues `element`, first waiting while the queue is full. Returns without enqueuing when
  /// the calling task is cancelled or the queue has finished.
  func push(_ element: Element) async {
    while true {
      let outcome: Outcome = state.withLock { state in
        if state.finished { return .done(nil, nil) }
        guard state.count < capacity else { return .wait }
        state.items.append(element)
        if let consumer = state.consumer, let first = state.take() {
          state.consumer = nil
          return .done(consumer, first)
        }
        return .done(nil, nil)
      }
      switch outcome {
      case .done(let consumer, let first):
        if let consumer { consumer.resume(returning: first) }
        return
      case .wait:
        if Task.isCancelled { return }
        await withTaskCancellationHandler {
          await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow: Bool = state.withLock { state in
              if state.finished || state.count < capacity || Task.isCancelled { return true }
              state.producers.append(continuation)
              return false
            }
            if resumeNow { continuation.resume() }
          }
        } onCancel: {
          let producers: [CheckedContinuation<Void, Never>] = state.withLock { state in
            let producers = state.producers
            state.producers = []
            return producers
          }
          for producer in producers { producer.resume() }
        }
        if Task.isCancelled { return }
      }
    }
  }

  /// Enqueues `element` whatever the queue's length (for rare events such as status changes).
  func pushUrgent(_ element: Element) {
    let handOff: (CheckedContinuation<Element?, Never>, Element?)? = state.withLock { state in
      if state.finished { return nil }
      state.items.append(element)
      guard let consumer = state.consumer else { return nil }
      state.consumer = nil
      return (consumer, state.take())
    }
    if let (consumer, first) = handOff { consumer.resume(returning: first) }
  }

  /// The next element, waiting for one; `nil` once finished and drained, or when the consuming
  /// task is cancelled.
  func next() async -> Element? {
    let immediate: Immediate = state.withLock { state in
      if let element = state.take() {
        let producers = state.count < capacity ? state.producers : []
        if !producers.isEmpty { state.producers = [] }
        return .element(element, producers)
      }
      return state.finished ? .end : .wait
    }
    switch immediate {
    case .element(let element, let producers):
      for producer in producers { producer.resume() }
      return element
    case .end:
      return nil
    case .wait:
      break
    }
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
        let now: (Element?, Bool, [CheckedContinuation<Void, Never>]) = state.withLock { state in
          if let element = state.take() {
            let producers = state.producers
            state.producers = []
            return (element, true, producers)
          }
          if state.finished || Task.isCancelled { return (nil, true, []) }
          state.consumer = continuation
          let producers = state.producers
          state.producers = []
          return (nil, false, producers)
        }
        for producer in now.2 { producer.resume() }
        if now.1 { continuation.resume(returning: now.0) }
      }
    } onCancel: {
      let consumer: CheckedContinuation<Element?, Never>? = state.withLock { state in
        let consumer = state.consumer
        state.consumer = nil
        return consumer
      }
      consumer?.resume(returning: nil)
    }
  }

  /// Ends the queue: the consumer reads what is queued, then `nil`; waiting producers return.
  func finish() {
    let (consumer, producers):
      (CheckedContinuation<Element?, Never>?, [CheckedContinuation<Void, Never>]) =
        state.withLock { state in
          state.finished = true
          let consumer = state.items.isEmpty ? state.consumer : nil
          if consumer != nil { state.consumer = nil }
          let producers = state.producers
          state.producers = []
          return (consumer, producers)
        }
    consumer?.resume(returning: nil)
    for producer in producers { producer.resume() }
  }
}
