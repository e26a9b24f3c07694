import Foundation
import LocationModel
import Synchronization
import Testing

@testable import TrackStore

/// Only our own database: every file that is not a locationd track store, or is damaged, is set
/// aside with its -wal and -shm under `.rejected-TIME` and a fresh store starts; nothing is deleted.
@Suite struct RejectionTests {
  /// A store with `count` fixes at `directory/track.sqlite`, closed (checkpointed, no -wal).
  func makeStore(_ directory: String, count: Int) throws -> String {
    let path = directory + "/track.sqlite"
    let store = try TrackStore(path: path)
    try store.append(syntheticTrack(count: count))
    store.close()
    return path
  }

  /// Opens `path` for writing, expects exactly one rejection whose reason contains `reason`, the
  /// rejected bytes kept under its new name, and a fresh store that records.
  func expectSetAside(_ path: String, reason: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let before = try Data(contentsOf: URL(fileURLWithPath: path))
    let wal = try? Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
    let seen = Mutex<[TrackStoreRejection]>([])
    let store = try TrackStore(path: path) { rejection in seen.withLock { $0.append(rejection) } }
    defer { store.close() }
    let rejections = seen.withLock { $0 }
    #expect(rejections.count == 1, sourceLocation: sourceLocation)
    #expect(store.rejections == rejections, sourceLocation: sourceLocation)
    guard let rejection = rejections.first else { return }
    #expect(rejection.reason.contains(reason), "\(rejection.reason)", sourceLocation: sourceLocation)
    #expect(rejection.keptAs.hasPrefix(path + ".rejected-2"), sourceLocation: sourceLocation)
    #expect(try Data(contentsOf: URL(fileURLWithPath: rejection.keptAs)) == before, sourceLocation: sourceLocation)
    if let wal {
      #expect(try Data(contentsOf: URL(fileURLWithPath: rejection.keptAs + "-wal")) == wal, sourceLocation: sourceLocation)
    }
    // The fresh store records and carries our application id.
    try store.append(syntheticTrack(count: 3, start: 7_000_000_000_000))
    #expect(try allPoints(store).map(\.time) == [7_000_000_000_000, 7_000_000_001_000, 7_000_000_002_000], sourceLocation: sourceLocation)
    let id = try store.state.withLock { state throws(TrackStoreError) in try state.connection.integer("PRAGMA application_id") }
    #expect(id == Int64(TrackStore.applicationID), sourceLocation: sourceLocation)
    #expect(try store.integrityCheck() == "ok", sourceLocation: sourceLocation)
  }

  @Test func aFileThatIsNotSQLiteIsSetAside() throws {
    let path = try temporaryDirectory() + "/track.sqlite"
    _ = FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x41, count: 8192))
    try expectSetAside(path, reason: "not an SQLite database")
  }

  @Test func anotherApplicationsDatabaseIsSetAside() throws {
    let path = try temporaryDirectory() + "/track.sqlite"
    let other = try SQLiteConnection(path: path, readOnly: false)
    try other.execute("PRAGMA application_id = 1234; CREATE TABLE fixes(x); CREATE TABLE meta(y)")
    other.close()
    try expectSetAside(path, reason: "application id 0x4d2")
  }

  @Test func aDatabaseWithTablesThatAreNotOursIsSetAside() throws {
    let path = try temporaryDirectory() + "/track.sqlite"
    let other = try SQLiteConnection(path: path, readOnly: false)
    try other.execute("CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES ('keep me')")
    other.close()
    try expectSetAside(path, reason: "not a track store's: notes")
  }

  @Test func aStoreMissingOurTablesIsSetAside() throws {
    let directory = try temporaryDirectory()
    let path = try makeStore(directory, count: 10)
    let edit = try SQLiteConnection(path: path, readOnly: false)
    try edit.execute("DROP TABLE outbox")
    edit.close()
    try expectSetAside(path, reason: "tables missing: outbox")
  }

  /// A checkpointed store with another database's WAL beside it: SQLite would replay the other
  /// database's pages over ours (its tables, none of our fixes).
  @Test(arguments: [4096, 8192]) func aForeignWALIsSetAsideWithTheStore(pageSize: Int) throws {
    let directory = try temporaryDirectory()
    let path = try makeStore(directory, count: 100)
    // Left in WAL mode, as an earlier version closed its stores: judged by what the WAL holds.
    let raw = try SQLiteConnection(path: path, readOnly: false)
    #expect(try raw.text("PRAGMA journal_mode = WAL") == "wal")
    raw.close()
    #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    let other = try SQLiteConnection(path: directory + "/other.sqlite", readOnly: false)
    try other.execute(
      """
      PRAGMA page_size = \(pageSize); PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
      CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES ('not a fix')
      """)
    try FileManager.default.copyItem(atPath: directory + "/other.sqlite-wal", toPath: path + "-wal")
    other.close()
    try expectSetAside(path, reason: pageSize == 4096 ? "not a track store's: notes" : "-wal file does not belong to it (page size 8192")
  }

  /// An old copy of the store's own -wal restored beside the store the daemon closed later: SQLite
  /// would replay the old pages over the newer ones (seen: 62 fixes became 37). The store's
  /// header says it was closed out of WAL mode, so the -wal file is set aside alone and the
  /// history stays whole and in use.
  @Test func anOldWALBesideACleanlyClosedStoreIsSetAsideAlone() throws {
    let path = try temporaryDirectory() + "/track.sqlite"
    let store = try TrackStore(path: path)
    try store.append(syntheticTrack(count: 50))
    let old = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
    try #require(old.count > 32)
    try store.append(syntheticTrack(count: 50, start: 8_000_000_000_000))
    store.close()
    #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the daemon's close leaves no -wal file")
    try old.write(to: URL(fileURLWithPath: path + "-wal"))
    let reopened = try TrackStore(path: path)
    defer { reopened.close() }
    try #require(reopened.rejections.count == 1, "\(reopened.rejections)")
    let rejection = try #require(reopened.rejections.first)
    #expect(rejection.reason.contains("its -wal file does not belong to it (the store was closed out of WAL mode"))
    #expect(rejection.keptAs.hasPrefix(path + "-wal.rejected-2"), "\(rejection.keptAs)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: rejection.keptAs)) == old)
    #expect(try allPoints(reopened).count == 100)
    #expect(try reopened.integrityCheck() == "ok")
    try reopened.append(syntheticTrack(count: 1, start: 9_000_000_000_000))
    #expect(try allPoints(reopened).count == 101)
  }

  @Test func garbageInTheMiddleIsSetAside() throws {
    let directory = try temporaryDirectory()
    let path = try makeStore(directory, count: 20_000)
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    let size = try handle.seekToEnd()
    try handle.seek(toOffset: size / 2 / 4096 * 4096)
    try handle.write(contentsOf: Data(repeating: 0xA5, count: 3 * 4096))
    try handle.close()
    try expectSetAside(path, reason: "damaged")
  }

  @Test func aTruncatedStoreIsSetAside() throws {
    let directory = try temporaryDirectory()
    let path = try makeStore(directory, count: 20_000)
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    let size = try handle.seekToEnd()
    try handle.truncate(atOffset: size / 2 + 100)
    try handle.close()
    try expectSetAside(path, reason: "truncated")
  }

  /// A store of the previous version has no application id: with our tables it is adopted, its
  /// history kept, and the id set.
  @Test func aStoreWithoutApplicationIDIsAdopted() throws {
    let directory = try temporaryDirectory()
    let path = try makeStore(directory, count: 50)
    let edit = try SQLiteConnection(path: path, readOnly: false)
    try edit.execute("PRAGMA application_id = 0")
    edit.close()
    let store = try TrackStore(path: path)
    defer { store.close() }
    #expect(store.rejections.isEmpty)
    #expect(try allPoints(store).count == 50)
    let id = try store.state.withLock { state throws(TrackStoreError) in try state.connection.integer("PRAGMA application_id") }
    #expect(id == Int64(TrackStore.applicationID))
    #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains("rejected") }.isEmpty)
  }

  /// Damage found while recording: the store is set aside and the batch lands in a fresh one.
  @Test func aStoreDamagedWhileInUseIsSetAsideAndRecordingResumes() throws {
    let directory = try temporaryDirectory()
    let path = directory + "/track.sqlite"
    let seen = Mutex<[TrackStoreRejection]>([])
    let store = try TrackStore(path: path) { rejection in seen.withLock { $0.append(rejection) } }
    defer { store.close() }
    try store.append(syntheticTrack(count: 20_000))
    try store.state.withLock { state throws(TrackStoreError) in
      _ = try state.connection.text("PRAGMA wal_checkpoint(TRUNCATE)")
    }
    // Everything after the first page (the schema) becomes garbage, and the page cache is let go.
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    let size = try handle.seekToEnd()
    try handle.seek(toOffset: 4096)
    try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4096))
    try handle.close()
    try store.state.withLock { state throws(TrackStoreError) in try state.connection.execute("PRAGMA shrink_memory") }
    let recorder = TrackRecorder(store: store)
    for point in syntheticTrack(count: 5, start: 7_000_000_000_000) { recorder.record(point) }
    recorder.flush()
    #expect(recorder.counters.recorded == 5)
    #expect(recorder.counters.failed == 0)
    let rejections = seen.withLock { $0 }
    #expect(rejections.count == 1)
    #expect(rejections.first?.reason.contains("damaged while in use") == true)
    if let keptAs = rejections.first?.keptAs {
      #expect(FileManager.default.fileExists(atPath: keptAs))
    }
    #expect(try allPoints(store).count == 5)
    #expect(try store.integrityCheck() == "ok")
  }

  /// The queue's store damaged while in use: set aside, and the ids of new messages stay above
  /// every id given before (a publisher's position in the queue stays valid).
  @Test func aDamagedQueueKeepsItsIdsIncreasing() throws {
    let path = try temporaryDirectory() + "/" + TrackStore.outboxFileName
    let seen = Mutex<[TrackStoreRejection]>([])
    let store = try TrackStore(path: path) { rejection in seen.withLock { $0.append(rejection) } }
    defer { store.close() }
    var last: Int64 = 0
    for index in 0..<2_000 {
      last = try store.enqueueOutgoing(topic: "owntracks/a/b", payload: [UInt8](repeating: UInt8(index % 200), count: 1_000))
    }
    try store.state.withLock { state throws(TrackStoreError) in
      _ = try state.connection.text("PRAGMA wal_checkpoint(TRUNCATE)")
    }
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    let size = try handle.seekToEnd()
    try handle.seek(toOffset: 4096)
    try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4096))
    try handle.close()
    try store.state.withLock { state throws(TrackStoreError) in try state.connection.execute("PRAGMA shrink_memory") }
    let next = try store.enqueueOutgoing(topic: "owntracks/a/b", payload: Array("after".utf8))
    #expect(seen.withLock { $0.count } == 1)
    #expect(next == last + 1)
    #expect(store.outgoingCount == 1)
    #expect(try store.peekOutgoing(limit: 10).map(\.id) == [last + 1])
  }

  @Test func aSecondRejectionInTheSameSecondGetsItsOwnName() throws {
    let directory = try temporaryDirectory()
    let path = directory + "/track.sqlite"
    _ = FileManager.default.createFile(atPath: path, contents: Data("first".utf8))
    let first = try StoreCheck.setAside(path, now: 1_764_600_000_000)
    _ = FileManager.default.createFile(atPath: path, contents: Data("second".utf8))
    let second = try StoreCheck.setAside(path, now: 1_764_600_000_000)
    #expect(first == path + ".rejected-20251201T144000Z")
    #expect(second == first + ".1")
    #expect(try String(contentsOfFile: first, encoding: .utf8) == "first")
    #expect(try String(contentsOfFile: second, encoding: .utf8) == "second")
  }

  @Test func aHotRollbackJournalIsRolledBackBeforeTheCheck() throws {
    let path = try temporaryDirectory() + "/track.sqlite"
    // A process killed inside a large write transaction in rollback-journal mode: its pages
    // spilled into the file, the journal that undoes them stays beside it.
    let script = """
      import os, sqlite3, sys
      c = sqlite3.connect(sys.argv[1], isolation_level=None)
      c.execute("PRAGMA cache_size=2")
      c.execute("CREATE TABLE t(x)")
      c.execute("BEGIN")
      for i in range(400): c.execute("INSERT INTO t VALUES (?)", (os.urandom(1000),))
      os._exit(0)
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", script, path]
    try process.run()
    process.waitUntilExit()
    try #require(process.terminationStatus == 0)
    try #require(StoreCheck.fileSize(path + "-journal") > 0, "no hot journal was left")
    // Judged after the rollback (a table that is not ours), set aside, and a fresh store records.
    let store = try TrackStore(path: path)
    defer { store.close() }
    #expect(store.rejections.count == 1)
    #expect(store.rejections.first?.reason.contains("not a track store's: t") == true, "\(store.rejections)")
    try store.append(syntheticTrack(count: 3, start: 7_000_000_000_000))
    #expect(try allPoints(store).count == 3)
    // The file set aside holds the rolled-back database: the table, none of the killed rows.
    let kept = try SQLiteConnection(path: try #require(store.rejections.first?.keptAs), readOnly: true)
    defer { kept.close() }
    #expect(try kept.integer("SELECT count(*) FROM t") == 0)
  }

  /// A link, a directory or a FIFO at the store's path (a restore that mixed files, a planted
  /// link) is set aside by rename, never followed, opened or deleted, and a fresh store records;
  /// before, it kept the store (and the MQTT queue's) unavailable for the whole run.
  @Test func somethingThatIsNotARegularFileIsSetAside() throws {
    let directory = try temporaryDirectory()
    let target = directory + "/operators-file"
    try Data("operator's data".utf8).write(to: URL(fileURLWithPath: target))
    let cases: [(name: String, make: (String) -> Int32, reason: String)] = [
      ("link.sqlite", { symlink(target, $0) }, "not a regular file: a symbolic link, not followed"),
      ("dir.sqlite", { mkdir($0, 0o755) }, "not a regular file: a directory"),
      ("fifo.sqlite", { mkfifo($0, 0o600) }, "not a regular file: a FIFO"),
    ]
    for (name, make, reason) in cases {
      let path = directory + "/" + name
      try #require(make(path) == 0, "\(name)")
      if name == "dir.sqlite" { try Data("kept".utf8).write(to: URL(fileURLWithPath: path + "/inside")) }
      let store = try TrackStore(path: path)
      defer { store.close() }
      try #require(store.rejections.count == 1, "\(name): \(store.rejections)")
      let rejection = try #require(store.rejections.first)
      #expect(rejection.reason == reason, "\(name)")
      #expect(rejection.keptAs.hasPrefix(path + ".rejected-2"), "\(name)")
      var info = stat()
      try #require(lstat(rejection.keptAs, &info) == 0, "\(name): nothing kept")
      #expect(StoreCheck.notRegularFile(rejection.keptAs).map { reason.hasSuffix($0) } == true, "\(name)")
      try store.append(syntheticTrack(count: 2, start: 7_000_000_000_000))
      #expect(try allPoints(store).count == 2, "\(name)")
      #expect(StoreCheck.notRegularFile(path) == nil, "\(name)")
    }
    // The link's target and the directory's contents are the operator's, untouched.
    #expect(try String(contentsOfFile: target, encoding: .utf8) == "operator's data")
    let keptDirectory = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
      $0.hasPrefix("dir.sqlite.rejected-")
    }
    #expect(keptDirectory.count == 1)
    let inside = try keptDirectory.first.map { try String(contentsOfFile: directory + "/" + $0 + "/inside", encoding: .utf8) }
    #expect(inside == "kept")
  }
}
