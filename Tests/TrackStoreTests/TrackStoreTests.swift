import Foundation
import LocationModel
import Testing

@testable import TrackStore

@Suite struct TrackStoreTests {
  @Test func storesEveryFieldAndReadsItBackInTimeOrder() throws {
    let directory = try temporaryDirectory()
    let store = try TrackStore(path: directory + "/track.sqlite")
    let points = syntheticTrack(count: 500)
    // Stored out of order: the cursor returns time order.
    try store.append(Array(points[250...]))
    try store.append(Array(points[..<250]))
    #expect(try allPoints(store) == points)
    #expect(try store.integrityCheck() == "ok")
    // A second connection (locationctl's read-only one) sees the same rows.
    let reader = try TrackStore(readingAt: directory + "/track.sqlite")
    #expect(try allPoints(reader).count == 500)
  }

  @Test func recordsOnlyLocationsWithTimeAndPosition() {
    var fix = Fix(mode: .fix3D)
    fix.coordinate = Coordinate(latitude: 1, longitude: 2)
    let provenance = Provenance(backend: "simulate", isSimulated: true)
    #expect(TrackPoint(Location(fix: fix, provenance: provenance)) == nil)  // no date yet
    fix.time = 1_000
    #expect(TrackPoint(Location(fix: fix, provenance: provenance))?.time == 1_000)
    fix.mode = .noFix
    #expect(TrackPoint(Location(fix: fix, provenance: provenance)) == nil)
    fix.mode = .fix2D
    fix.coordinate = Coordinate(latitude: 91, longitude: 0)
    #expect(TrackPoint(Location(fix: fix, provenance: provenance)) == nil)
  }

  @Test func sinceAndUntilSelectAHalfOpenRange() throws {
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite")
    let points = syntheticTrack(count: 100, start: 1_000_000, step: 1000)
    try store.append(points)
    let selected = try allPoints(store, since: 1_010_000, until: 1_020_000)
    #expect(selected.map(\.time) == Array(stride(from: Int64(1_010_000), to: 1_020_000, by: 1000)))
  }

  @Test func retentionByAgeCountsFromTheNewestFixAndRunsInSteps() throws {
    var configuration = TrackStoreConfiguration()
    configuration.maxAge = 60_000
    configuration.retentionBatch = 20
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite", configuration: configuration)
    // 2019 fixes: far older than the machine's clock, yet kept, since age counts from the newest.
    try store.append(syntheticTrack(count: 100, start: 1_556_712_000_000, step: 1000))
    #expect(try store.enforceRetention() == 20)
    #expect(try store.enforceRetention() == 19)
    #expect(try store.enforceRetention() == 0)
    let left = try allPoints(store)
    #expect(left.count == 61)
    #expect(left.first.map(\.time) == Int64(1_556_712_039_000))
  }

  @Test func aFutureDatedFixDoesNotAgeTheHistory() throws {
    var configuration = TrackStoreConfiguration()
    configuration.maxAge = 60_000
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite", configuration: configuration)
    let start: Int64 = 1_556_712_000_000
    try store.append(syntheticTrack(count: 30, start: start, step: 1000))
    // A replay with a late rollover floor, or a bad receiver time: one fix in 2030.
    try store.append(syntheticTrack(count: 1, start: 1_900_000_000_000))
    // The clock reads just after the genuine fixes: none of them is older than a minute.
    let clock = start + 30_000
    #expect(try store.enforceRetention(now: clock) == 0)
    try store.append(syntheticTrack(count: 30, start: start + 30_000, step: 1000))
    #expect(try store.enforceRetention(now: start + 60_000) == 0)
    #expect(try allPoints(store).count == 61)
    // Time goes on: the oldest genuine fixes age out against the newest genuine one, not the 2030 one.
    #expect(try store.enforceRetention(now: start + 70_000) == 0, "the newest genuine fix is at +59 s")
    try store.append(syntheticTrack(count: 1, start: start + 70_000))
    #expect(try store.enforceRetention(now: start + 70_000) == 10)
    #expect(try allPoints(store).first.map(\.time) == start + 10_000)
    // The clock behind every fix (a 1970 clock): the reference is the clock, nothing is deleted.
    #expect(try store.enforceRetention(now: 0) == 0)
    #expect(try allPoints(store).count == 52)
  }

  @Test func retentionBySizeKeepsTheLiveDataUnderTheCap() throws {
    var configuration = TrackStoreConfiguration()
    configuration.maxBytes = 256 * 1024
    configuration.retentionBatch = 1000
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite", configuration: configuration)
    let points = syntheticTrack(count: 20_000)
    for chunk in stride(from: 0, to: points.count, by: 1000) {
      try store.append(Array(points[chunk..<(chunk + 1000)]))
      try store.enforceRetention()
    }
    while try store.enforceRetention() > 0 {}
    let kept = try allPoints(store)
    #expect(kept.count > 1000)
    #expect(kept.count < 20_000)
    #expect(kept.last?.time == points.last?.time)  // the oldest go first
    let used = try store.state.withLock { (state: inout TrackStore.State) throws(TrackStoreError) in
      try TrackStore.usedBytes(state.connection)
    }
    #expect(used <= configuration.maxBytes)
  }

  @Test func aFullStoreFailsWithAClearErrorAndRecordingGoesOn() throws {
    var configuration = TrackStoreConfiguration()
    configuration.maxPageCount = 40  // 160 KiB with 4 KiB pages
    configuration.maxAge = 0
    configuration.maxBytes = 0
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite", configuration: configuration)
    // Fill it: batches, then single fixes, until not even one fits.
    var filled = 0
    var lastFull: TrackStoreError?
    for point in syntheticTrack(count: 20_000) {
      do {
        try store.append([point])
        filled += 1
      } catch {
        lastFull = error
        break
      }
    }
    guard case .diskFull? = lastFull else {
      Issue.record("expected diskFull, got \(String(describing: lastFull))")
      return
    }
    #expect(filled > 100)
    let events = LockedList()
    let recorder = TrackRecorder(store: store, capacity: 100_000) { event, detail in events.add("\(event): \(detail)") }
    for point in syntheticTrack(count: 1_000, start: 8_000_000_000_000) { #expect(recorder.record(point)) }
    recorder.flush()
    let counters = recorder.counters
    #expect(counters.failed == 1_000)
    #expect(counters.recorded == 0)
    guard case .diskFull? = counters.lastError else {
      Issue.record("expected diskFull, got \(String(describing: counters.lastError))")
      return
    }
    #expect(counters.lastError?.description.contains("is full") == true)
    // One line when recording starts failing, not one per batch.
    #expect(events.items.filter { $0.hasPrefix("trackStoreFailed") }.count == 1)
    #expect(try store.integrityCheck() == "ok")
    // Room again: recording resumes and says so.
    try store.clear()
    #expect(recorder.record(syntheticTrack(count: 1, start: 9_000_000_000_000)[0]))
    recorder.flush()
    #expect(recorder.counters.lastError == nil)
    #expect(events.items.last?.hasPrefix("trackStoreRecovered") == true)
    #expect(try allPoints(store).map(\.time) == [9_000_000_000_000])
  }

  @Test func theRecorderEnforcesRetentionAfterEachCommit() throws {
    var configuration = TrackStoreConfiguration()
    configuration.maxAge = 10_000
    configuration.retentionBatch = 1_000
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite", configuration: configuration)
    let recorder = TrackRecorder(store: store)
    // One fix at a time, each committed before the next: retention follows the newest fix.
    for point in syntheticTrack(count: 30, start: 1_000_000, step: 1000) {
      recorder.record(point)
      recorder.flush()
    }
    #expect(recorder.counters.recorded == 30)
    #expect(recorder.counters.expired == 19)
    #expect(try allPoints(store).map(\.time) == Array(stride(from: Int64(1_019_000), through: 1_029_000, by: 1000)))
  }

  @Test func aFullQueueDropsAndCounts() throws {
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite")
    let recorder = TrackRecorder(store: store, capacity: 10)
    var accepted = 0
    for point in syntheticTrack(count: 10_000) where recorder.record(point) { accepted += 1 }
    recorder.flush()
    let counters = recorder.counters
    #expect(counters.recorded == accepted)
    #expect(counters.dropped == 10_000 - accepted)
    #expect(try allPoints(store).count == accepted)
  }

  @Test func outboxKeepsOrderAcrossReopenAndDropsTheOldestAtItsBound() throws {
    let path = try temporaryDirectory() + "/track.sqlite"
    var configuration = TrackStoreConfiguration()
    configuration.outboxLimit = 5
    do {
      let store = try TrackStore(path: path, configuration: configuration)
      for index in 0..<8 {
        try store.enqueueOutgoing(topic: "owntracks/u/d", payload: Array("m\(index)".utf8), qos: 1, retain: true)
      }
      #expect(store.outgoingCount == 5)
      #expect(store.outgoingDropped == 3)
      store.close()
    }
    let store = try TrackStore(path: path, configuration: configuration)
    #expect(store.outgoingCount == 5)
    #expect(store.outgoingDropped == 3)
    let first = try store.peekOutgoing(limit: 2)
    #expect(first.map { String(decoding: $0.payload, as: UTF8.self) } == ["m3", "m4"])
    #expect(first.allSatisfy { $0.retain && $0.qos == 1 && $0.topic == "owntracks/u/d" })
    #expect(try store.acknowledgeOutgoing(upTo: first[1].id) == 2)
    #expect(try store.peekOutgoing(limit: 10).map { String(decoding: $0.payload, as: UTF8.self) } == ["m5", "m6", "m7"])
    #expect(store.outgoingCount == 3)
    // Ids keep increasing after deletes.
    let next = try store.enqueueOutgoing(topic: "t", payload: [])
    #expect(try next > store.peekOutgoing(limit: 10)[2].id)
    #expect(throws: TrackStoreError.invalidArgument("qos", reason: "3 is not 0, 1 or 2")) {
      try store.enqueueOutgoing(topic: "t", payload: [], qos: 3)
    }
    #expect(throws: TrackStoreError.invalidArgument("topic", reason: "empty")) {
      try store.enqueueOutgoing(topic: "", payload: [])
    }
  }

  @Test func anotherProcessCommittingDoesNotStopTheRecorder() throws {
    // The daemon's store runs retention (a query over the fixes) after each commit; another
    // process then clears the fixes (`locationctl track clear`). Every later append and
    // enqueue of the daemon's connection must still commit.
    let path = try temporaryDirectory() + "/track.sqlite"
    let daemon = try TrackStore(path: path)
    defer { daemon.close() }
    let points = syntheticTrack(count: 20, start: 1_556_712_000_000)
    try daemon.append(Array(points.prefix(10)))
    try daemon.enforceRetention(now: 1_556_712_010_000)
    let other = try TrackStore(path: path)
    #expect(try other.clear() == 10)
    other.close()
    try daemon.append(Array(points.suffix(10)))
    try daemon.enforceRetention(now: 1_556_712_020_000)
    _ = try daemon.enqueueOutgoing(topic: "t", payload: [1])
    #expect(try allPoints(daemon).count == 10)
    #expect(daemon.outgoingCount == 1)
  }

  @Test func retentionByAgeDoesNotTrapOnTheEarliestTime() throws {
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite")
    defer { store.close() }
    var point = TrackPoint(time: Int64.min + 1, coordinate: Coordinate(latitude: 1, longitude: 2))
    point.backend = "test"
    try store.append([point])
    #expect(try store.enforceRetention(now: Int64.min + 2) == 0)
  }

  @Test func clearKeepsTheOutbox() throws {
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite")
    try store.append(syntheticTrack(count: 10))
    try store.enqueueOutgoing(topic: "t", payload: [1])
    #expect(try store.clear() == 10)
    #expect(try allPoints(store).isEmpty)
    #expect(store.outgoingCount == 1)
  }

  @Test func refusesANewerSchemaAndAFileThatIsNotAStore() throws {
    let directory = try temporaryDirectory()
    let store = try TrackStore(path: directory + "/track.sqlite")
    store.close()
    let other = try SQLiteConnection(path: directory + "/track.sqlite", readOnly: false)
    try other.execute("PRAGMA user_version = 99")
    other.close()
    #expect(throws: TrackStoreError.self) { try TrackStore(path: directory + "/track.sqlite") }
    FileManager.default.createFile(atPath: directory + "/junk.sqlite", contents: Data(repeating: 0x41, count: 8192))
    #expect(throws: TrackStoreError.self) { try TrackStore(readingAt: directory + "/junk.sqlite") }
    #expect(throws: TrackStoreError.self) { try TrackStore(readingAt: directory + "/missing.sqlite") }
  }

  @Test func statisticsSumGeodesicDistance() throws {
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite")
    let points = syntheticTrack(count: 50)
    try store.append(points)
    let statistics = try store.statistics()
    var expected = 0.0
    for index in 1..<points.count {
      expected += WGS84Geodesic.distance(points[index - 1].coordinate, points[index].coordinate) ?? 0
    }
    #expect(statistics.points == 50)
    #expect(abs(statistics.distance - expected) < 1e-6)
    #expect(statistics.distance > 0)
    #expect(statistics.firstTime == points.first?.time)
    #expect(statistics.duration == 49_000)
  }

  @Test(arguments: [
    ("1556712000", Int64(1_556_712_000_000)),
    ("1556712000.25", 1_556_712_000_250),
    ("2019-05-01T12:00:00Z", 1_556_712_000_000),
    ("2019-05-01T12:00:00.5Z", 1_556_712_000_500),
    ("2019-05-01T14:00:00+02:00", 1_556_712_000_000),
    ("2019-05-01T07:30:00-0430", 1_556_712_000_000),
    ("2019-05-01 12:00Z", 1_556_712_000_000),
    ("2019-05-01", 1_556_668_800_000),
  ])
  func parsesTimes(_ text: String, _ expected: Int64) {
    #expect(TrackTime.parse(text) == expected)
  }

  @Test(arguments: ["", "yesterday", "2019-13-01", "2019-02-30", "2019-05-01T12:00:00", "12.", "2019-05-01T25:00Z"])
  func rejectsTimes(_ text: String) {
    #expect(TrackTime.parse(text) == nil)
  }
}

final class LockedList: @unchecked Sendable {
  private let lock = NSLock()
  private var list: [String] = []
  func add(_ item: String) { lock.withLock { list.append(item) } }
  var items: [String] { lock.withLock { list } }
}

/// The same replayed log recorded again (after a daemon restart) adds nothing; a live
/// receiver's fixes are all kept.
@Suite struct ReplayRecordedOnceTests {
  @Test func aReplayedFixTheStoreHoldsIsNotStoredAgain() throws {
    let directory = try temporaryDirectory()
    let store = try TrackStore(path: directory + "/" + TrackStore.fileName)
    defer { store.close() }
    // Every second point is simulated (replayed), the others live.
    let track = syntheticTrack(count: 100)
    #expect(try store.append(track) == 100)
    // The same fixes again: the 50 live ones are stored, the 50 replayed ones are not.
    #expect(try store.append(track) == 50)
    #expect(try store.statistics(since: nil, until: nil, sources: .simulated).points == 50)
    #expect(try store.statistics(since: nil, until: nil, sources: .live).points == 100)
    // The same log with other options in its URI (another speed) is still the same log.
    let faster = syntheticTrack(count: 100, backend: "replay:/log.nmea?speed=50")
    #expect(try store.append(faster) == 50)
    #expect(try store.statistics(since: nil, until: nil, sources: .simulated).points == 50)
    // Another log at the same times is its own history.
    var other = syntheticTrack(count: 100, backend: "replay:/other.nmea")
    for index in other.indices { other[index].source = "/other.nmea" }
    #expect(try store.append(other) == 100)
    #expect(try store.statistics(since: nil, until: nil, sources: .simulated).points == 100)
  }
}
