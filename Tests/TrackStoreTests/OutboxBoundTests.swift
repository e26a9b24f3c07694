import Foundation
import LocationModel
import Testing

@testable import TrackStore

/// The history and the MQTT outbox are bounded separately: the outbox in its own file, by
/// messages and bytes; retention counts only the history's file.
@Suite struct OutboxBoundTests {
  func outboxConfiguration(messages: Int, bytes: Int64) -> TrackStoreConfiguration {
    var configuration = TrackStoreConfiguration()
    configuration.outboxLimit = messages
    configuration.outboxMaxBytes = bytes
    configuration.maxAge = 0
    configuration.maxBytes = 0
    return configuration
  }

  /// A message of `size` bytes (topic and payload) that names its index.
  func message(_ index: Int, size: Int) -> (topic: String, payload: [UInt8]) {
    let topic = "owntracks/a/b"
    var payload = Array("{\"_type\":\"location\",\"n\":\(index),\"pad\":\"".utf8)
    payload += [UInt8](repeating: 0x78, count: max(0, size - topic.utf8.count - payload.count - 2))
    payload += Array("\"}".utf8)
    return (topic, payload)
  }

  func index(of message: OutgoingMessage?) -> Int? {
    guard let message else { return nil }
    let text = String(decoding: message.payload, as: UTF8.self)
    guard let start = text.range(of: "\"n\":"), let end = text[start.upperBound...].firstIndex(of: ",") else { return nil }
    return Int(text[start.upperBound..<end])
  }

  /// The issue's outage: fixes recorded with a 1 MiB `track-max-size` while 15,000 messages wait
  /// for a broker that does not answer. Before, the outbox shared the file and its pages counted
  /// against the cap: retention deleted every fix. Now the history keeps its newest fixes within
  /// its own bound, and the outbox drops its oldest messages at its own bound, counted.
  @Test func anOutageFillsTheOutboxWithoutEatingTheHistory() throws {
    let directory = try temporaryDirectory()
    var history = TrackStoreConfiguration()
    history.maxBytes = 1 << 20
    history.maxAge = 0
    let track = try TrackStore(path: directory + "/" + TrackStore.fileName, configuration: history)
    defer { track.close() }
    let outbox = try TrackStore(
      path: directory + "/" + TrackStore.outboxFileName, configuration: outboxConfiguration(messages: 10_000, bytes: 32 << 20))
    defer { outbox.close() }
    let recorder = TrackRecorder(store: track, capacity: 100_000)
    let points = syntheticTrack(count: 15_000)
    for (index, point) in points.enumerated() {
      #expect(recorder.record(point))
      let (topic, payload) = message(index, size: 220)
      try outbox.enqueueOutgoing(topic: topic, payload: payload)
      if index % 500 == 499 { recorder.flush() }
    }
    recorder.flush()
    let counters = recorder.counters
    #expect(counters.recorded == 15_000)
    #expect(counters.failed == 0)
    let kept = try allPoints(track)
    // About 1 MiB / 133 bytes a fix: thousands kept, the newest among them, the oldest expired.
    #expect(kept.count > 5_000)
    #expect(kept.count < 15_000)
    #expect(kept.last?.time == points.last?.time)
    #expect(kept.map(\.time) == points.suffix(kept.count).map(\.time))
    #expect(counters.expired == 15_000 - kept.count)
    let used = try track.state.withLock { state throws(TrackStoreError) in try TrackStore.usedBytes(state.connection) }
    #expect(used <= 1 << 20)
    // The outbox: at its bound, the oldest 5,000 dropped and counted, the newest waiting in order.
    #expect(outbox.outgoingCount == 10_000)
    #expect(outbox.outgoingDropped == 5_000)
    #expect(index(of: try outbox.peekOutgoing(limit: 1).first) == 5_000)
    #expect(track.outgoingCount == 0)
  }

  @Test func theByteBoundDropsTheOldestAndSurvivesAReopen() throws {
    let path = try temporaryDirectory() + "/" + TrackStore.outboxFileName
    let configuration = outboxConfiguration(messages: 1_000_000, bytes: 100_000)
    var store = try TrackStore(path: path, configuration: configuration)
    for index in 0..<1_000 {
      let (topic, payload) = message(index, size: 1_000)
      try store.enqueueOutgoing(topic: topic, payload: payload)
    }
    #expect(store.outgoingCount == 100)
    #expect(store.outgoingBytes == 100_000)
    #expect(store.outgoingDropped == 900)
    #expect(index(of: try store.peekOutgoing(limit: 1).first) == 900)
    // A larger message pushes out as many of the oldest as it needs.
    let (topic, payload) = message(1_000, size: 2_500)
    try store.enqueueOutgoing(topic: topic, payload: payload)
    #expect(store.outgoingBytes <= 100_000)
    #expect(store.outgoingCount == 98)
    #expect(store.outgoingDropped == 903)
    #expect(index(of: try store.peekOutgoing(limit: 1).first) == 903)
    // A message beyond the whole bound is refused, and nothing is dropped for it.
    #expect(throws: TrackStoreError.self) { try store.enqueueOutgoing(topic: "t", payload: [UInt8](repeating: 1, count: 100_000)) }
    #expect(store.outgoingCount == 98)
    store.close()
    store = try TrackStore(path: path, configuration: configuration)
    defer { store.close() }
    #expect(store.outgoingBytes == 97 * 1_000 + 2_500)
    #expect(store.outgoingDropped == 903)
    let first = try store.peekOutgoing(limit: 10)
    guard let last = first.last else {
      Issue.record("the outbox is empty")
      return
    }
    #expect(try store.acknowledgeOutgoing(upTo: last.id) == 10)
    #expect(store.outgoingBytes == 87 * 1_000 + 2_500)
  }

  /// An earlier version's outbox in `track.sqlite` moves, in order, to the outbox's own file.
  @Test func anEarlierOutboxMovesInOrder() throws {
    let directory = try temporaryDirectory()
    let track = try TrackStore(path: directory + "/" + TrackStore.fileName)
    defer { track.close() }
    try track.append(syntheticTrack(count: 20))
    for index in 0..<2_500 {
      let (topic, payload) = message(index, size: 200)
      try track.enqueueOutgoing(topic: topic, payload: payload, retain: index % 2 == 0, enqueuedAt: Int64(index))
    }
    let outbox = try TrackStore(
      path: directory + "/" + TrackStore.outboxFileName, configuration: outboxConfiguration(messages: 100_000, bytes: 1 << 30))
    defer { outbox.close() }
    #expect(try track.moveOutgoing(to: outbox) == 2_500)
    #expect(track.outgoingCount == 0)
    #expect(try allPoints(track).count == 20)
    let moved = try outbox.peekOutgoing(limit: 10_000)
    #expect(moved.map { index(of: $0) } == (0..<2_500).map { $0 })
    #expect(moved.map(\.enqueuedAt) == (0..<2_500).map { Int64($0) })
    #expect(moved.map(\.retain) == (0..<2_500).map { $0 % 2 == 0 })
    #expect(try track.moveOutgoing(to: outbox) == 0)
  }
}
