import LocationCore
import Synchronization
import LocationModel

/// The event buffer of a live source: pushing never waits (gpsd cannot be slowed down), a
/// consumer that falls behind loses the oldest *locations* beyond ``locationCapacity``, and status
/// changes and errors are never dropped.
///
/// One producer thread, one consumer (``stream``). Cancelling the consuming task ends the stream.
final class LiveEventBuffer: Sendable {
  private struct State {
    var items: [BackendEvent] = []
    var locations = 0
    var consumer: CheckedContinuation<BackendEvent?, Never>?
    var finished = false
  }

  /// Most locations held for a consumer that is not reading; older ones are dropped first.
  let locationCapacity: Int
  private let state = Mutex(State())
  /// Locations dropped so far because the consumer fell behind.
  private let droppedCount = Atomic<Int>(0)

  /// Creates a buffer holding at most `locationCapacity` (at least 1) unread locations.
  init(locationCapacity: Int) {
    self.locationCapacity = max(1, locationCapacity)
  }

  /// The consuming side; one consumer.
  var stream: AsyncStream<BackendEvent> {
    AsyncStream(unfolding: { [self] in await self.next() })
  }

  /// Locations dropped so far because the consumer fell behind.
  var dropped: Int { droppedCount.load(ordering: .relaxed) }

  /// Hands `event` to the consumer or queues it; never waits.
  func push(_ event: BackendEvent) {
    let handOff: CheckedContinuation<BackendEvent?, Never>? = state.withLock { state in
      if state.finished { return nil }
      if let consumer = state.consumer {
        state.consumer = nil
        return consumer
      }
      if case .location = event {
        if state.locations >= locationCapacity,
          let oldest = state.items.firstIndex(where: {
            if case .location = $0 { true } else { false }
          })
        {
          state.items.remove(at: oldest)
          state.locations -= 1
          droppedCount.add(1, ordering: .relaxed)
        }
        state.locations += 1
      }
      state.items.append(event)
      return nil
    }
    handOff?.resume(returning: event)
  }

  /// Ends the stream once the consumer has read what is queued.
  func finish() {
    let consumer: CheckedContinuation<BackendEvent?, Never>? = state.withLock { state in
      state.finished = true
      guard state.items.isEmpty else { return nil }
      defer { state.consumer = nil }
      return state.consumer
    }
    consumer?.resume(returning: nil)
  }

  private func take(_ state: inout State) -> BackendEvent? {
    guard !state.items.isEmpty else { return nil }
    let event = state.items.removeFirst()
    if case .location = event { state.locations -= 1 }
    return event
  }

  private func next() async -> BackendEvent? {
    enum Immediate {
      case event(BackendEvent)
      case end
      case wait
    }
    let immediate: Immediate = state.withLock { state in
      if let event = take(&state) { return .event(event) }
      return state.finished ? .end : .wait
    }
    switch immediate {
    case .event(let event): return event
    case .end: return nil
    case .wait: break
    }
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<BackendEvent?, Never>) in
        let now: (event: BackendEvent?, resume: Bool) = state.withLock { state in
          if let event = take(&state) { return (event, true) }
          if state.finished || Task.isCancelled { return (nil, true) }
          state.consumer = continuation
          return (nil, false)
        }
        if now.resume { continuation.resume(returning: now.event) }
      }
    } onCancel: {
      let consumer: CheckedContinuation<BackendEvent?, Never>? = state.withLock { state in
        defer { state.consumer = nil }
        return state.consumer
      }
      consumer?.resume(returning: nil)
    }
  }
}
