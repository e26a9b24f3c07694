import Synchronization
import Testing

@testable import LocationCore

/// A test element: bounded ones stand for locations (and merge, counting what they replaced),
/// unbounded ones for status changes.
private struct Item: QueuedEvent, Equatable, CustomStringConvertible {
  var name: String
  var isBounded: Bool
  var merged = 0
  var merges = true

  static func location(_ name: String) -> Item { Item(name: name, isBounded: true) }
  static func status(_ name: String) -> Item { Item(name: name, isBounded: false) }
  /// Bounded but never merging: a status in a subscriber's mailbox, which counts toward its bound.
  static func boundedStatus(_ name: String) -> Item {
    Item(name: name, isBounded: true, merges: false)
  }

  func coalesced(into older: Item) -> Item? {
    guard merges, older.merges, isBounded, older.isBounded else { return nil }
    return Item(name: name, isBounded: true, merged: older.merged + merged + 1)
  }

  var description: String { merged == 0 ? name : "\(name)+\(merged)" }
}

/// A flag shared with a task.
private final class Flag: Sendable {
  private let value = Atomic<Bool>(false)
  func set() { value.store(true, ordering: .sequentiallyConsistent) }
  var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
}

/// Takes what is queued now (the queue is finished first, so this never waits).
private func drain(_ queue: EventQueue<Item>) async -> [String] {
  queue.finish()
  var names: [String] = []
  while let item = await queue.next() { names.append(item.description) }
  return names
}

/// Yields until `condition` holds; no wall clock: it ends as soon as the other task got there.
private func yield(until condition: () -> Bool) async {
  while !condition() { await Task.yield() }
}

@Suite(.timeLimit(.minutes(1)))
struct EventQueueTests {
  @Test func dropOldestKeepsTheNewestBoundedElementsAndEveryStatus() async {
    let queue = EventQueue<Item>(capacity: 3, overflow: .dropOldest)
    for item in [
      Item.status("s1"), .location("a"), .location("b"), .status("s2"), .location("c"),
      .location("d"),
      .location("e"),
    ] {
      queue.post(item)
    }
    #expect(queue.dropped == 2)
    #expect(queue.count == 5)
    #expect(await drain(queue) == ["s1", "s2", "c", "d", "e"])
  }

  @Test func dropOldestNeverDropsStatusesEvenBeyondTheBound() async {
    let queue = EventQueue<Item>(capacity: 1, overflow: .dropOldest)
    for index in 0..<100 { queue.post(.status("s\(index)")) }
    queue.post(.location("a"))
    queue.post(.location("b"))
    #expect(queue.dropped == 1)
    let names = await drain(queue)
    #expect(names.count == 101)
    #expect(names.last == "b")
  }

  @Test func coalesceMergesIntoTheNewestAndDropsTheOldestBeyondTheBound() async {
    let queue = EventQueue<Item>(capacity: 3, overflow: .coalesce)
    queue.post(.location("l1"))
    queue.post(.location("l2"))  // merges: l2+1
    queue.post(.boundedStatus("a"))
    queue.post(.location("l3"))
    queue.post(.location("l4"))  // merges: l4+1
    #expect(queue.count == 3)
    #expect(queue.dropped == 0)
    queue.post(.boundedStatus("b"))  // full: drops l2+1
    queue.post(.location("l5"))  // b does not merge; full: drops a
    #expect(queue.dropped == 2)
    #expect(await drain(queue) == ["l4+1", "b", "l5"])
  }

  @Test func coalesceStartsAfreshOnceTheConsumerTookTheLocation() async {
    let queue = EventQueue<Item>(capacity: 8, overflow: .coalesce)
    queue.post(.location("l1"))
    #expect(await queue.next()?.description == "l1")
    queue.post(.location("l2"))
    queue.post(.location("l3"))
    #expect(await drain(queue) == ["l3+1"])
  }

  @Test func waitForSpaceSuspendsTheProducerUntilTheConsumerTakesHalf() async {
    let queue = EventQueue<Item>(capacity: 4, overflow: .waitForSpace)
    for name in ["a", "b", "c", "d"] { await queue.push(.location(name)) }  // below the bound: no wait
    let pushed = Flag()
    let producer = Task {
      await queue.push(.location("e"))
      pushed.set()
    }
    await yield { queue.waitingProducerCount == 1 || pushed.isSet }
    #expect(queue.waitingProducerCount == 1, "the fifth push waits")
    #expect(!pushed.isSet)
    #expect(queue.count == 4)
    #expect(await queue.next()?.name == "a")
    #expect(queue.waitingProducerCount == 1, "3 queued is above half of 4: still waiting")
    #expect(await queue.next()?.name == "b")
    #expect(queue.waitingProducerCount == 0, "2 queued: the producer is resumed")
    await producer.value
    #expect(queue.dropped == 0)
    #expect(await drain(queue) == ["c", "d", "e"])
  }

  @Test func waitForSpaceNeverHoldsBackAStatus() async {
    let queue = EventQueue<Item>(capacity: 1, overflow: .waitForSpace)
    await queue.push(.location("a"))
    await queue.push(.status("s"))  // the queue is full of locations; a status does not wait
    queue.post(.location("b"))  // post never waits: beyond the bound
    #expect(queue.count == 3)
    #expect(await drain(queue) == ["a", "s", "b"])
  }

  @Test func aBurstWaitsOnceAndIsQueuedWhole() async {
    let queue = EventQueue<Item>(capacity: 2, overflow: .waitForSpace)
    queue.post(.location("a"))
    queue.post(.location("b"))
    let producer = Task {
      await queue.push(contentsOf: [.location("c"), .location("d"), .location("e")])
    }
    await yield { queue.waitingProducerCount == 1 }
    #expect(queue.count == 2)
    #expect(await queue.next()?.name == "a")
    await producer.value
    #expect(queue.count == 4, "one below the bound, then the whole burst")
    #expect(await drain(queue) == ["b", "c", "d", "e"])
  }

  @Test func finishingReleasesAWaitingProducerWithoutQueuing() async {
    let queue = EventQueue<Item>(capacity: 1, overflow: .waitForSpace)
    queue.post(.location("a"))
    let producer = Task { await queue.push(.location("b")) }
    await yield { queue.waitingProducerCount == 1 }
    queue.finish()
    await producer.value
    queue.post(.location("c"))  // ignored after finish
    #expect(await queue.next()?.name == "a")
    #expect(await queue.next() == nil)
  }

  @Test func cancellingAWaitingProducerReturnsWithoutQueuing() async {
    let queue = EventQueue<Item>(capacity: 1, overflow: .waitForSpace)
    queue.post(.location("a"))
    let producer = Task { await queue.push(.location("b")) }
    await yield { queue.waitingProducerCount == 1 }
    producer.cancel()
    await producer.value
    #expect(await drain(queue) == ["a"])
  }

  @Test func batchesTakeWhatIsQueuedUpToTheMaximum() async {
    let queue = EventQueue<Item>(capacity: 100, overflow: .waitForSpace)
    for index in 0..<5 { queue.post(.location("\(index)")) }
    #expect(await queue.nextBatch(upTo: 3)?.map(\.name) == ["0", "1", "2"])
    #expect(await queue.nextBatch(upTo: 3)?.map(\.name) == ["3", "4"])
    queue.finish()
    #expect(await queue.nextBatch(upTo: 3) == nil)
  }

  @Test func aWaitingConsumerIsWokenOncePerBurst() async {
    let queue = EventQueue<Item>(capacity: 8, overflow: .coalesce)
    let consumer = Task { await queue.nextBatch(upTo: 10)?.map(\.description) }
    await yield { queue.isConsumerWaiting }
    #expect(queue.postWithoutWake(.location("a")), "the first post owes a wake-up")
    #expect(!queue.postWithoutWake(.boundedStatus("s")), "the second does not")
    #expect(!queue.postWithoutWake(.location("b")))
    queue.wake()
    #expect(await consumer.value == ["a", "s", "b"])
  }

  @Test func cancellingAWaitingConsumerEndsItsWait() async {
    let queue = EventQueue<Item>(capacity: 4, overflow: .dropOldest)
    let consumer = Task { await queue.next() }
    await yield { queue.isConsumerWaiting }
    consumer.cancel()
    #expect(await consumer.value == nil)
    #expect(!queue.isFinished, "the queue itself stays open")
  }
}
