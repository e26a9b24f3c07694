import LocationCore
import LocationModel
import Testing

@testable import GPSDBackend

/// The queue a gpsd backend posts to: ``QueueOverflow/dropOldest`` over ``BackendEvent``s, so a
/// consumer that falls behind loses the oldest locations and never a status.
@Suite(.timeLimit(.minutes(1)))
struct GPSDEventQueueTests {
  private func location(_ index: Int) -> BackendEvent {
    var fix = Fix(mode: .fix3D)
    fix.time = Int64(index)
    return .location(
      Location(fix: fix, provenance: Provenance(backend: "gpsd://test", isSimulated: false)))
  }

  @Test func slowConsumerLosesOldestLocationsButNoStatus() async {
    let queue = EventQueue<BackendEvent>(capacity: 10, overflow: .dropOldest)
    queue.post(.status(.connecting, detail: nil))
    for index in 0..<25 {
      queue.post(location(index))
      if index == 5 { queue.post(.status(.noFix, detail: "a")) }
      if index == 6 { queue.post(.status(.connected, detail: "b")) }
    }
    queue.post(.status(.stopped, detail: nil))
    queue.finish()
    var statuses: [BackendStatus] = []
    var times: [Int64] = []
    for await event in BackendEvents(queue) {
      switch event {
      case .status(let status, _): statuses.append(status)
      case .location(let location): times.append(location.fix.time ?? -1)
      case .error: break
      }
    }
    #expect(statuses == [.connecting, .noFix, .connected, .stopped])
    #expect(times == Array(15..<25), "the newest 10 locations, in order")
    #expect(queue.dropped == 15)
  }

  @Test func waitingConsumerGetsEventsAsTheyArrive() async {
    let queue = EventQueue<BackendEvent>(capacity: 4, overflow: .dropOldest)
    let reader = Task {
      var count = 0
      for await _ in BackendEvents(queue) { count += 1 }
      return count
    }
    while !queue.isConsumerWaiting { await Task.yield() }
    for index in 0..<3 { queue.post(location(index)) }
    queue.finish()
    #expect(await reader.value == 3)
    #expect(queue.dropped == 0)
  }

  @Test func cancellingTheConsumerEndsTheStream() async {
    let queue = EventQueue<BackendEvent>(capacity: 4, overflow: .dropOldest)
    let reader = Task {
      var count = 0
      for await _ in BackendEvents(queue) { count += 1 }
      return count
    }
    while !queue.isConsumerWaiting { await Task.yield() }
    reader.cancel()
    #expect(await reader.value == 0)
  }

  @Test func theBackendBoundsItsQueueByBufferedLocations() throws {
    var options = GPSDBackend.Options()
    options.bufferedLocations = 7
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:1", options: options)
    #expect(backend.events.queue.capacity == 7)
    #expect(backend.events.queue.overflow == .dropOldest)
    #expect(backend.droppedLocations == 0)
  }
}
