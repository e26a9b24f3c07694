import Glibc
import MQTTFrontEnd
import Synchronization
import Testing

@testable import TrackStore

/// The queue's status for `locationctl status`: where the messages are and why, read from memory
/// and never waiting for a store that a stalled disk holds.
@Suite struct QueueStatusTests {
  final class VirtualClock: Sendable {
    let seconds = Mutex(0.0)
    var now: Double { seconds.withLock { $0 } }
    func advance(_ by: Double) { seconds.withLock { $0 += by } }
  }

  func path() throws -> String {
    var template = Array("/tmp/locationd-queue-status-XXXXXX".utf8CString)
    guard let result = mkdtemp(&template) else { throw QueueStatusFailure() }
    return String(cString: result) + "/" + TrackStore.outboxFileName
  }

  struct QueueStatusFailure: Error {}

  @Test func statusSaysWhereTheQueueIsAndWhy() throws {
    let path = try path()
    let store = try TrackStore(path: path)
    defer { store.close() }
    let clock = VirtualClock()
    let outbox = FallbackOutbox(
      store: store, qos: 1, memoryLimit: 1_000, memoryMaxBytes: 1 << 20, now: { clock.now }, log: { _, _ in })
    for index in 0..<3 { try outbox.append(topic: "owntracks/a/b", payload: Array("\(index)".utf8), retain: true) }
    let onDisk = try #require(outbox.statusIfAvailable)
    #expect(!onDisk.inMemory && onDisk.reason == nil && onDisk.waiting == 3 && onDisk.memoryCount == 0 && onDisk.dropped == 0)
    // The disk fills: the next messages are in memory, and the status says why.
    store.faults.fail(with: TrackStoreFaults.diskFull(path))
    for index in 3..<5 { try outbox.append(topic: "owntracks/a/b", payload: Array("\(index)".utf8), retain: true) }
    let inMemory = try #require(outbox.statusIfAvailable)
    #expect(inMemory.inMemory)
    #expect(inMemory.waiting == 5)
    #expect(inMemory.memoryCount == 2)
    #expect(inMemory.reason?.contains("is full") == true, "\(String(describing: inMemory.reason))")
    #expect(inMemory.reason == outbox.counters.reason)
    // The disk works again: after the backoff the memory moves back and the reason is gone.
    store.faults.fail(with: nil)
    clock.advance(2)
    try outbox.append(topic: "owntracks/a/b", payload: Array("5".utf8), retain: true)
    let back = try #require(outbox.statusIfAvailable)
    #expect(!back.inMemory && back.reason == nil && back.waiting == 6 && back.memoryCount == 0 && back.dropped == 0)
  }

  /// A write that the disk has not finished holds the store's lock: the status is `nil` at once
  /// (a wait here would hold up the `status` reply, and with it the service).
  @Test func statusNeverWaitsForABusyStore() throws {
    let path = try path()
    let store = try TrackStore(path: path)
    defer { store.close() }
    let outbox = FallbackOutbox(store: store, qos: 1, memoryLimit: 10, memoryMaxBytes: 1 << 20, now: { 0 }, log: { _, _ in })
    try outbox.append(topic: "owntracks/a/b", payload: Array("0".utf8), retain: true)
    let whileBusy = store.state.withLock { _ in outbox.statusIfAvailable }
    #expect(whileBusy == nil)
    #expect(outbox.statusIfAvailable?.waiting == 1)
    #expect(store.outgoingCountsIfAvailable?.waiting == 1)
  }
}
