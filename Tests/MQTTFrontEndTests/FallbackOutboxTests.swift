import Glibc
import MQTTFrontEnd
import Synchronization
import Testing
import TrackStore

/// A store that fails while running is handled as one that failed at start: the queue moves to
/// memory, publishing goes on, the store is tried again with backoff on a virtual clock, and
/// what was delivered meanwhile is not sent twice.
@Suite struct FallbackOutboxTests {
  final class VirtualClock: Sendable {
    let seconds = Mutex(0.0)
    var now: Double { seconds.withLock { $0 } }
    func advance(_ by: Double) { seconds.withLock { $0 += by } }
  }

  final class Events: Sendable {
    let lines = Mutex<[String]>([])
    func add(_ event: String, _ detail: String) { lines.withLock { $0.append("\(event): \(detail)") } }
    var all: [String] { lines.withLock { $0 } }
  }

  func directory() throws -> String {
    var template = Array("/tmp/locationd-fallback-XXXXXX".utf8CString)
    let created = template.withUnsafeMutableBufferPointer { buffer -> String? in
      guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return nil }
      return String(cString: result)
    }
    return try #require(created)
  }

  func payload(_ index: Int) -> [UInt8] { Array("{\"_type\":\"location\",\"n\":\(index)}".utf8) }
  func indices(_ messages: [OutboxMessage]) -> [Int] {
    messages.compactMap { message in
      let text = String(decoding: message.payload, as: UTF8.self)
      return Int(text.dropFirst("{\"_type\":\"location\",\"n\":".count).dropLast())
    }
  }

  @Test(arguments: ["ENOSPC", "EIO", "EROFS"])
  func aStoreFailingWhileRunningFallsBackToMemoryAndComesBack(_ fault: String) throws {
    let path = try directory() + "/" + TrackStore.outboxFileName
    let store = try TrackStore(path: path)
    defer { store.close() }
    let clock = VirtualClock()
    let events = Events()
    let outbox = FallbackOutbox(
      store: store, qos: 1, memoryLimit: 1_000, memoryMaxBytes: 1 << 20, now: { clock.now }, log: events.add)
    for index in 0..<10 { try outbox.append(topic: "owntracks/a/b", payload: payload(index), retain: true) }
    // The session publishes the ten; then the disk fails.
    let first = try outbox.oldest(after: nil, limit: 64)
    #expect(first.map(\.sequence) == Array(1...10))
    let error: TrackStoreError =
      switch fault {
      case "ENOSPC": TrackStoreFaults.diskFull(path)
      case "EIO": TrackStoreFaults.ioError
      default: TrackStoreFaults.readOnly
      }
    store.faults.fail(with: error)
    // The broker acknowledges 1...5: the store cannot delete them, the acknowledgement is kept.
    try outbox.remove(through: 5)
    #expect(outbox.counters.inMemory)
    #expect(events.all.count == 1)
    #expect(events.all.first?.hasPrefix("mqttQueueInMemory: ") == true)
    // Fixes go on: queued in memory, never an error, and published after those on disk.
    for index in 10..<20 { try outbox.append(topic: "owntracks/a/b", payload: payload(index), retain: true) }
    let next = try outbox.oldest(after: 10, limit: 64)
    #expect(indices(next) == Array(10..<20))
    #expect(next.map(\.sequence) == Array(11...20))
    // After a reconnect the session starts again from the oldest: the five delivered ones are skipped.
    #expect(indices(try outbox.oldest(after: nil, limit: 64)) == Array(5..<20))
    try outbox.remove(through: 15)
    #expect(outbox.unrecordedDeliveries == 10)
    // The store works again, but the retry waits for its backoff (1 s after the failure).
    store.faults.fail(with: nil)
    clock.advance(0.5)
    try outbox.append(topic: "owntracks/a/b", payload: payload(20), retain: true)
    #expect(outbox.counters.inMemory)
    #expect(outbox.memoryCount == 6)
    clock.advance(0.5)
    try outbox.append(topic: "owntracks/a/b", payload: payload(21), retain: true)
    let counters = outbox.counters
    #expect(!counters.inMemory)
    #expect(counters.fellBack == 1)
    #expect(counters.recovered == 1)
    #expect(counters.removedLate == 10)
    #expect(outbox.memoryCount == 0)
    #expect(outbox.unrecordedDeliveries == 0)
    #expect(events.all.last?.hasPrefix("mqttQueueOnDisk: ") == true)
    // On disk now, in order, with their sequences: nothing delivered is left to be sent twice.
    let waiting = try outbox.oldest(after: nil, limit: 64)
    #expect(indices(waiting) == Array(15...21))
    #expect(waiting.map(\.sequence) == Array(16...22))
    #expect(store.outgoingCount == 7)
    // And it survives a restart.
    store.close()
    let reopened = try TrackStore(path: path)
    defer { reopened.close() }
    #expect(try reopened.peekOutgoing(limit: 100).map(\.id) == Array(16...22))
  }

  @Test func theMemoryQueueIsBoundedAndCountsWhatItDrops() throws {
    let path = try directory() + "/" + TrackStore.outboxFileName
    let store = try TrackStore(path: path)
    defer { store.close() }
    let clock = VirtualClock()
    let outbox = FallbackOutbox(
      store: store, qos: 1, memoryLimit: 10, memoryMaxBytes: 1 << 20, now: { clock.now }, log: { _, _ in })
    store.faults.fail(with: TrackStoreFaults.diskFull(path))
    for index in 0..<25 { try outbox.append(topic: "t", payload: payload(index), retain: false) }
    #expect(outbox.memoryCount == 10)
    #expect(outbox.droppedCount == 15)
    #expect(indices(try outbox.oldest(after: nil, limit: 64)) == Array(15..<25))
    // The store keeps failing: each retry is further away (1, 2, 4 s ...), and nothing is lost beyond the bound.
    clock.advance(1)
    try outbox.append(topic: "t", payload: payload(25), retain: false)
    #expect(outbox.counters.inMemory)
    store.faults.fail(with: nil)
    clock.advance(1)
    try outbox.append(topic: "t", payload: payload(26), retain: false)
    #expect(outbox.counters.inMemory)  // next retry 2 s after the last: at 3 s
    clock.advance(1)
    try outbox.append(topic: "t", payload: payload(27), retain: false)
    #expect(!outbox.counters.inMemory)
    #expect(indices(try outbox.oldest(after: nil, limit: 64)) == Array(17...27))
  }

  final class Opens: Sendable {
    let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
  }

  @Test(arguments: ["ENOSPC", "EIO", "EROFS"])
  func aStoreThatCannotBeOpenedAtStartIsTriedAgainAndTakesTheMemoryQueue(_ fault: String) throws {
    let path = try directory() + "/" + TrackStore.outboxFileName
    // An earlier run left three messages that the broker never acknowledged.
    let earlier = try TrackStore(path: path)
    for index in 100..<103 { try earlier.enqueueOutgoing(topic: "owntracks/a/b", payload: payload(index), retain: true) }
    earlier.close()
    let faults = TrackStoreFaults()
    let error: TrackStoreError =
      switch fault {
      case "ENOSPC": TrackStoreFaults.diskFull(path)
      case "EIO": TrackStoreFaults.ioError
      default: .openFailed(path: path, code: EROFS, message: "cannot open it for writing: Read-only file system")
      }
    faults.fail(with: error)
    let clock = VirtualClock()
    let events = Events()
    let opens = Opens()
    let outbox = FallbackOutbox(
      opening: { () throws(TrackStoreError) -> TrackStore in
        opens.add()
        return try TrackStore(path: path, faults: faults)
      }, qos: 1, memoryLimit: 1_000, memoryMaxBytes: 1 << 20, now: { clock.now }, log: events.add)
    #expect(opens.value == 1)
    #expect(!outbox.isStoreOpen)
    #expect(outbox.counters.inMemory)
    #expect(events.all.count == 1)
    #expect(events.all.first?.hasPrefix("mqttQueueInMemory: ") == true)
    #expect(events.all.first?.contains("tried again with backoff") == true, "\(events.all)")
    // Publishing goes on from memory; the broker acknowledges the first four.
    for index in 0..<10 { try outbox.append(topic: "owntracks/a/b", payload: payload(index), retain: true) }
    #expect(try outbox.oldest(after: nil, limit: 64).map(\.sequence) == Array(1...10))
    try outbox.remove(through: 4)
    #expect(outbox.count == 6)
    #expect(outbox.unrecordedDeliveries == 0)
    // Tried again 1 s after the start, then 2 s after that, not in between.
    clock.advance(0.5)
    try outbox.append(topic: "owntracks/a/b", payload: payload(10), retain: true)
    #expect(opens.value == 1)
    clock.advance(0.5)
    try outbox.append(topic: "owntracks/a/b", payload: payload(11), retain: true)
    #expect(opens.value == 2)
    #expect(!outbox.isStoreOpen)
    clock.advance(1.9)
    try outbox.append(topic: "owntracks/a/b", payload: payload(12), retain: true)
    #expect(opens.value == 2)
    // The disk works again: at the next try the store opens and takes the memory queue, with its
    // sequences, ahead of the earlier run's messages, which the session has not seen.
    faults.fail(with: nil)
    clock.advance(0.1)
    try outbox.append(topic: "owntracks/a/b", payload: payload(13), retain: true)
    #expect(opens.value == 3)
    #expect(outbox.isStoreOpen)
    let counters = outbox.counters
    #expect(!counters.inMemory)
    #expect(counters.fellBack == 1)
    #expect(counters.recovered == 1)
    #expect(outbox.memoryCount == 0)
    #expect(events.all.count == 2)
    #expect(
      events.all.last == "mqttQueueOnDisk: the queue's store opened: 9 messages moved from memory, 3 left by an earlier run queued after them")
    // The session goes on from where it was (sequence 10 sent): nothing skipped, nothing reused.
    let rest = try outbox.oldest(after: 10, limit: 64)
    #expect(indices(rest) == [10, 11, 12, 100, 101, 102, 13])
    #expect(rest.map(\.sequence) == Array(11...17))
    // Acknowledging what it sent before the open removes none of the earlier run's messages.
    try outbox.remove(through: 13)
    #expect(indices(try outbox.oldest(after: nil, limit: 64)) == [100, 101, 102, 13])
    #expect(outbox.count == 4)
    // On disk: a restart finds them, in that order.
    let reopened = try TrackStore(path: path)
    defer { reopened.close() }
    #expect(try reopened.peekOutgoing(limit: 100).map(\.id) == Array(14...17))
    try outbox.append(topic: "owntracks/a/b", payload: payload(14), retain: true)
    #expect(try reopened.lastOutgoingID() == 18)
  }

  @Test func withoutTheLibraryTheQueueStaysInMemoryAndIsNotTriedAgain() throws {
    let clock = VirtualClock()
    let events = Events()
    let opens = Opens()
    let outbox = FallbackOutbox(
      opening: { () throws(TrackStoreError) -> TrackStore in
        opens.add()
        throw .libraryUnavailable("libsqlite3.so.0: cannot open shared object file")
      }, qos: 1, memoryLimit: 5, memoryMaxBytes: 1 << 20, now: { clock.now }, log: events.add)
    for index in 0..<8 {
      clock.advance(100)
      try outbox.append(topic: "t", payload: payload(index), retain: false)
    }
    #expect(opens.value == 1)
    #expect(events.all.count == 1)
    #expect(events.all.first?.hasSuffix("the queue is kept in memory for this run") == true, "\(events.all)")
    #expect(indices(try outbox.oldest(after: nil, limit: 64)) == Array(3..<8))
    #expect(outbox.droppedCount == 3)
  }
}
