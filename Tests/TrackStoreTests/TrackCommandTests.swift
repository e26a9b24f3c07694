import Foundation
import Testing
@testable import TrackStore
import LocationModel

/// `locationctl track export|stats|clear` against a store file, as a user runs them.
@Suite struct TrackCommandTests {
  static let locationctl = packageRoot + "/.build/debug/locationctl"

  func storeDirectory() throws -> String {
    let directory = try temporaryDirectory()
    let store = try TrackStore(path: directory + "/" + TrackStore.fileName)
    try store.append(syntheticTrack(count: 60, start: 1_556_712_000_000))
    store.close()
    return directory
  }

  @Test func exportsToAFileAndToStandardOutput() throws {
    let directory = try storeDirectory()
    let file = directory + "/trip.csv"
    let toFile = try run([
      Self.locationctl, "track", "export", "--state-dir", directory, "--format", "csv", "--since",
      "2019-05-01T12:00:30Z", file,
    ])
    #expect(toFile.status == 0, "\(toFile.error)")
    let text = try String(contentsOfFile: file, encoding: .utf8)
    #expect(text.split(separator: "\n").count == 31)  // header and 30 fixes
    #expect(!FileManager.default.fileExists(atPath: file + ".partial"))
    let toOutput = try run([
      Self.locationctl, "track", "export", "--store", directory + "/track.sqlite", "--until", "1556712010", "-",
    ])
    #expect(toOutput.status == 0, "\(toOutput.error)")
    #expect(toOutput.output.hasPrefix("<?xml"))
    #expect(toOutput.output.components(separatedBy: "<trkpt ").count - 1 == 10)
  }

  /// `locationctl track export | head -1`: the export ends as `cat` would, by SIGPIPE, without
  /// a "Broken pipe" message, once its reader has gone.
  @Test func exportToAPipeWhoseReaderLeftEndsQuietly() throws {
    let directory = try temporaryDirectory()
    let store = try TrackStore(path: directory + "/" + TrackStore.fileName)
    // Well over a pipe's 64 KiB of GPX, so that the export is still writing when the reader goes.
    try store.append(syntheticTrack(count: 5_000, start: 1_556_712_000_000))
    store.close()
    let output = Pipe()
    let error = Pipe()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.locationctl)
    process.arguments = ["track", "export", "--state-dir", directory]
    process.standardOutput = output
    process.standardError = error
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let first = output.fileHandleForReading.availableData
    #expect(String(decoding: first, as: UTF8.self).hasPrefix("<?xml"))
    try output.fileHandleForReading.close()
    process.waitUntilExit()
    let message = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    #expect(process.terminationReason == .uncaughtSignal, "\(message)")
    #expect(process.terminationStatus == SIGPIPE, "\(message)")
    #expect(message.isEmpty, "\(message)")
  }

  /// The store's `-wal`, `-shm` and `-journal` names are refused also when those files do not
  /// exist (the daemon stopped): SQLite would read an export written there as the store's log.
  @Test func exportOntoTheStoresCompanionNamesIsRefused() throws {
    let directory = try storeDirectory()
    for suffix in ["-wal", "-shm", "-journal"] {
      let target = directory + "/track.sqlite" + suffix
      try? FileManager.default.removeItem(atPath: target)
      let run = try run([Self.locationctl, "track", "export", "--state-dir", directory, target])
      #expect(run.status == 1, "\(suffix): \(run.error)")
      #expect(run.error.contains("refusing to export onto the track store's \(suffix) file"), "\(run.error)")
      #expect(!FileManager.default.fileExists(atPath: target + ".partial"), "\(suffix): a partial export was left")
    }
    // Another name in the same directory is fine.
    let fine = try run([Self.locationctl, "track", "export", "--state-dir", directory, directory + "/trip.gpx"])
    #expect(fine.status == 0, "\(fine.error)")
  }

  /// `--store` and `--state-dir` both name the store: given together, one would be ignored.
  @Test func storeAndStateDirectoryTogetherAreRefused() throws {
    let directory = try storeDirectory()
    for action in [["stats"], ["export", "-"], ["clear"]] {
      let both = try run(
        [Self.locationctl, "track"] + action + ["--store", directory + "/track.sqlite", "--state-dir", "/nonexistent"])
      #expect(both.status == 64, "\(action): \(both.error)")
      #expect(both.error.contains("give --store FILE or --state-dir DIR, not both"), "\(both.error)")
    }
    // Nothing was cleared.
    let stats = try run([Self.locationctl, "--json", "track", "stats", "--state-dir", directory])
    #expect(stats.output.contains(#""points":60"#), "\(stats.output)")
  }

  @Test func selectsBySource() throws {
    // The synthetic track alternates: even fixes replayed or simulated, odd ones live.
    let directory = try storeDirectory()
    for (source, points) in [("live", 30), ("simulated", 30), ("all", 60)] {
      let stats = try run([Self.locationctl, "--json", "track", "stats", "--state-dir", directory, "--source", source])
      #expect(stats.status == 0, "\(stats.error)")
      let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.output.utf8)) as? [String: Any])
      #expect(object["points"] as? Int == points, "--source \(source)")
    }
    let live = try run([
      Self.locationctl, "track", "export", "--state-dir", directory, "--format", "csv", "--source", "live", "-",
    ])
    #expect(live.status == 0, "\(live.error)")
    let rows = live.output.split(separator: "\n").dropFirst()
    #expect(rows.count == 30)
    #expect(rows.allSatisfy { $0.hasSuffix(",false") })
    let geojson = try run([
      Self.locationctl, "track", "export", "--state-dir", directory, "--format", "geojson", "--source", "simulated",
    ])
    #expect(geojson.output.contains(#""properties":{"points":30,"#))
    let bad = try run([Self.locationctl, "track", "stats", "--state-dir", directory, "--source", "replay"])
    #expect(bad.status == 64)
    #expect(bad.error.contains("--source takes live, simulated or all, got replay"))
  }

  @Test func statsAndClear() throws {
    let directory = try storeDirectory()
    let stats = try run([Self.locationctl, "--json", "track", "stats", "--state-dir", directory])
    #expect(stats.status == 0, "\(stats.error)")
    let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.output.utf8)) as? [String: Any])
    #expect(object["points"] as? Int == 60)
    #expect(object["duration"] as? Double == 59)
    #expect(object["first"] as? String == "2019-05-01T12:00:00Z")
    #expect(object["last"] as? String == "2019-05-01T12:00:59Z")
    #expect((object["distance"] as? Double ?? 0) > 0)
    #expect(object["outgoing"] as? Int == 0)
    #expect(object["outgoingDropped"] as? Int == 0)
    let clear = try run([Self.locationctl, "track", "clear", "--state-dir", directory])
    #expect(clear.status == 0, "\(clear.error)")
    #expect(clear.output == "deleted 60 fixes\n")
    let after = try run([Self.locationctl, "track", "stats", "--state-dir", directory])
    #expect(after.output.contains("points:   0"))
  }

  @Test(arguments: [
    (["track", "export", "--since", "yesterday"], Int32(64), "--since needs ISO 8601"),
    (["track", "export", "--format", "kml"], 64, "--format takes gpx, geojson or csv"),
    (["track", "export", "--gap", "0"], 64, "--gap takes seconds"),
    (["track", "export", "--gap", "1e-9"], 64, "--gap takes seconds from 0.001 to 31536000 (365 days), got 1e-9"),
    (["track", "export", "--gap", "1e308"], 64, "--gap takes seconds from 0.001 to 31536000 (365 days), got 1e308"),
    (["track", "stats", "--since", "x"], 64, "--since needs ISO 8601 (2019-05-01T12:00:00Z) or Unix seconds, got x"),
    (["track", "stats", "--since", "20", "--until", "10"], 64, "--until must be later than --since"),
    (["track", "export", "--since", "20", "--until", "10"], 64, "--until must be later than --since"),
    (["track", "export", "a", "b"], 64, "at most one FILE"),
    (["track", "frobnicate"], 64, "track takes export, stats or clear"),
    (["track", "stats", "--state-dir", "/nonexistent"], 1, "no track store at /nonexistent/track.sqlite"),
    (["track", "clear", "--state-dir", "/nonexistent"], 1, "no track store at /nonexistent/track.sqlite"),
    // A separate word that starts with -- is the next option, never a value.
    (["track", "export", "--state-dir", "--format", "csv"], 64, "write --state-dir=--format"),
    (["track", "stats", "--since", "--state-dir", "/tmp"], 64, "option --since needs a value, but --state-dir follows it"),
    (["track", "export", "--store=--x"], 1, "no track store at --x"),
  ])
  func badUsageAndMissingStores(_ arguments: [String], _ status: Int32, _ message: String) throws {
    let result = try run([Self.locationctl] + arguments)
    #expect(result.status == status)
    #expect(result.error.contains(message), "\(result.error)")
    #expect(!result.error.contains("UsageError("), "\(result.error)")
  }

  @Test func trackHelpShowsWhereTheStoreIsTaken() throws {
    let help = try run([Self.locationctl, "track", "--help"])
    #expect(help.status == 0, "\(help.error)")
    let lines = help.output.split(separator: "\n").map(String.init)
    #expect(lines.first?.hasPrefix("usage: locationctl") == true, "\(help.output)")
    // Each of export, stats and clear names both ways to find the store in its synopsis.
    for command in ["track export", "track stats", "track clear"] {
      let synopsis = lines.drop { !$0.contains(command) }.prefix(2).joined(separator: " ")
      #expect(synopsis.contains("[--state-dir DIR|--store FILE]"), "\(command): \(help.output)")
    }
    #expect(help.output.contains("$LOCATIOND_STATE_DIR"), "\(help.output)")
  }

  @Test func aFailedExportLeavesAnExistingFileUntouched() throws {
    let directory = try storeDirectory()
    let file = directory + "/keep.gpx"
    try "old".write(toFile: file, atomically: false, encoding: .utf8)
    // Not a store: the export fails before writing anything.
    try "junk".write(toFile: directory + "/junk.sqlite", atomically: false, encoding: .utf8)
    let result = try run([Self.locationctl, "track", "export", "--store", directory + "/junk.sqlite", file])
    #expect(result.status == 1)
    #expect(try String(contentsOfFile: file, encoding: .utf8) == "old")
    #expect(!FileManager.default.fileExists(atPath: file + ".partial"))
  }

  @Test func exportRefusesTheStoreItsFilesAndSymbolicLinks() throws {
    let directory = try storeDirectory()
    let storeFile = directory + "/track.sqlite"
    let before = try Data(contentsOf: URL(fileURLWithPath: storeFile))
    try FileManager.default.createSymbolicLink(atPath: directory + "/link.gpx", withDestinationPath: directory + "/x.gpx")
    try FileManager.default.linkItem(atPath: storeFile, toPath: directory + "/hardlink")
    let cases: [(String, String)] = [
      (storeFile, "onto the track store itself"),
      (directory + "/./track.sqlite", "onto the track store itself"),
      (directory + "/hardlink", "onto the track store itself"),
      (directory + "/link.gpx", "symbolic link"),
      (directory, "is a directory"),
    ]
    for (target, message) in cases {
      let result = try run([Self.locationctl, "track", "export", "--state-dir", directory, target])
      #expect(result.status == 1, "\(target)")
      #expect(result.error.contains(message), "\(target): \(result.error)")
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: storeFile)) == before)
    #expect(!FileManager.default.fileExists(atPath: directory + "/x.gpx"))
    let stats = try run([Self.locationctl, "track", "stats", "--state-dir", directory])
    #expect(stats.output.contains("points:   60"))
  }

  @Test func exportWritesIntoDevicesAndFIFOsAndCreatesFilesPrivate() throws {
    let directory = try storeDirectory()
    let toNull = try run([Self.locationctl, "track", "export", "--state-dir", directory, "/dev/null"])
    #expect(toNull.status == 0, "\(toNull.error)")
    var status = stat()
    #expect(stat("/dev/null", &status) == 0)
    #expect(status.st_mode & S_IFMT == S_IFCHR)
    let fifo = directory + "/pipe"
    #expect(mkfifo(fifo, 0o600) == 0)
    // The reading end, open before the export starts (non-blocking: nothing waits on a writer
    // that never comes); the 60 fixes (about 4 KB) fit the pipe's buffer.
    let reader = open(fifo, O_RDONLY | O_NONBLOCK)
    #expect(reader >= 0)
    defer { close(reader) }
    let toFIFO = try run([Self.locationctl, "track", "export", "--state-dir", directory, "--format", "csv", fifo])
    var bytes = [UInt8](repeating: 0, count: 65_536)
    let count = read(reader, &bytes, bytes.count)
    let received = String(decoding: bytes.prefix(max(0, count)), as: UTF8.self)
    #expect(toFIFO.status == 0, "\(toFIFO.error)")
    #expect(received.split(separator: "\n").count == 61)
    #expect(lstat(fifo, &status) == 0)
    #expect(status.st_mode & S_IFMT == S_IFIFO)
    let file = directory + "/trip.gpx"
    let old = umask(0o022)
    defer { umask(old) }
    let toFile = try run([Self.locationctl, "track", "export", "--state-dir", directory, file])
    #expect(toFile.status == 0, "\(toFile.error)")
    #expect(stat(file, &status) == 0)
    #expect(status.st_mode & 0o777 == 0o600)
  }

  /// `track stats` counts the MQTT queue's own file beside the store.
  @Test func statsCountsTheQueueBesideTheStore() throws {
    let directory = try storeDirectory()
    let queue = try TrackStore(path: directory + "/" + TrackStore.outboxFileName)
    for index in 0..<3 { try queue.enqueueOutgoing(topic: "owntracks/a/b", payload: Array("\(index)".utf8)) }
    queue.close()
    let stats = try run([Self.locationctl, "--json", "track", "stats", "--state-dir", directory])
    #expect(stats.status == 0, "\(stats.error)")
    let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.output.utf8)) as? [String: Any])
    #expect(object["points"] as? Int == 60)
    #expect(object["outgoing"] as? Int == 3)
  }

  /// A queue file that cannot be read (a directory left by a restore, another application's
  /// file) is said so on standard error, not shown as an empty queue; no file is no queue.
  @Test func statsSaysWhenTheQueuesFileCannotBeRead() throws {
    let directory = try storeDirectory()
    let quiet = try run([Self.locationctl, "track", "stats", "--state-dir", directory])
    #expect(quiet.status == 0, "\(quiet.error)")
    #expect(quiet.error.isEmpty, "\(quiet.error)")
    #expect(mkdir(directory + "/" + TrackStore.outboxFileName, 0o755) == 0)
    let stats = try run([Self.locationctl, "track", "stats", "--state-dir", directory])
    #expect(stats.status == 0, "\(stats.error)")
    #expect(stats.output.contains("points:   60"), "\(stats.output)")
    #expect(stats.error.contains("the MQTT queue's store cannot be read"), "\(stats.error)")
    #expect(stats.error.contains("not a regular file"), "\(stats.error)")
  }

  /// `track off` with --mqtt: no track store, but the queue's file is there and is counted
  /// (docs/mqtt.md); with neither, the store is missing (exit 1).
  @Test func statsWithoutATrackStoreCountsTheQueue() throws {
    let directory = try temporaryDirectory()
    let missing = try run([Self.locationctl, "track", "stats", "--state-dir", directory])
    #expect(missing.status == 1)
    #expect(missing.error.contains("no track store"), "\(missing.error)")
    let queue = try TrackStore(path: directory + "/" + TrackStore.outboxFileName)
    for index in 0..<4 { try queue.enqueueOutgoing(topic: "owntracks/a/b", payload: Array("\(index)".utf8)) }
    queue.close()
    let stats = try run([Self.locationctl, "--json", "track", "stats", "--state-dir", directory])
    #expect(stats.status == 0, "\(stats.error)")
    #expect(stats.error.contains("only the MQTT queue is counted"), "\(stats.error)")
    let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.output.utf8)) as? [String: Any])
    #expect(object["points"] as? Int == 0)
    #expect(object["outgoing"] as? Int == 4)
    #expect(object["first"] == nil)
    // --store names the history itself: a missing one stays an error.
    let named = try run([Self.locationctl, "track", "stats", "--store", directory + "/" + TrackStore.fileName])
    #expect(named.status == 1)
  }

  /// A store the user may not read: the kernel's reason, not SQLite's "unable to open".
  @Test func statsOnAnUnreadableStoreSaysPermissionDenied() throws {
    guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return }
    let directory = try storeDirectory()
    #expect(chmod(directory, 0o755) == 0)
    let stats = try run([
      "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", Self.locationctl, "track", "stats",
      "--store", directory + "/" + TrackStore.fileName,
    ])
    #expect(stats.status == 1)
    #expect(stats.error.contains("Permission denied"), "\(stats.error)")
    #expect(!stats.error.contains("unable to open"), "\(stats.error)")
  }
}

/// Stores the daemon did not write: rows that are not fixes are skipped and counted, never
/// written as 0,0 or as values outside their types, and no time arithmetic traps.
@Suite struct DamagedStoreTests {
  static let locationctl = packageRoot + "/.build/debug/locationctl"

  /// A store of 60 good fixes plus `rows` inserted as SQL (lat, lon, mode, time, alt, sats).
  func store(adding rows: [String]) throws -> String {
    let directory = try temporaryDirectory()
    let path = directory + "/" + TrackStore.fileName
    let store = try TrackStore(path: path)
    try store.append(syntheticTrack(count: 60, start: 1_556_712_000_000))
    store.close()
    let connection = try SQLiteConnection(path: path, readOnly: false)
    for row in rows {
      try connection.execute(
        "INSERT INTO fixes(time_ms, lat, lon, mode, source_id, alt_msl, satellites_used) VALUES (\(row))")
    }
    connection.close()
    return directory
  }

  static let badRows = [
    "1556712000500, 1000, 2000, 3, 1, 1e300, -7",  // out of range
    "1556712001500, 1e308, -1e308, 3, 1, NULL, NULL",  // out of range
    "1556712002500, 'abc', 'def', 3, 1, NULL, NULL",  // text, read by SQLite as 0
    "1556712003500, 10, 10, 1, 1, NULL, NULL",  // mode 1: no fix
    "-4611686018427387904, 1, 1, 3, 1, NULL, NULL",  // times 292 million years apart
    "4611686018427387904, 1, 1, 3, 1, NULL, NULL",
  ]

  @Test func statisticsAndExportSkipAndCountRowsThatAreNotFixes() throws {
    let directory = try store(adding: Self.badRows)
    let stats = try run([Self.locationctl, "--json", "track", "stats", "--state-dir", directory])
    #expect(stats.status == 0, "\(stats.error)")
    let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.output.utf8)) as? [String: Any])
    #expect(object["points"] as? Int == 60)
    #expect(object["duration"] as? Double == 59)
    #expect(stats.error.contains("skipped 6 stored rows that are not valid fixes"), "\(stats.error)")
    for format in ["gpx", "geojson", "csv"] {
      let export = try run([Self.locationctl, "track", "export", "--state-dir", directory, "--format", format])
      #expect(export.status == 0, "\(format): \(export.error)")
      #expect(export.error.contains("skipped 6 stored rows"), "\(format): \(export.error)")
      #expect(!export.output.contains("1000"), "\(format): an out-of-range latitude was written")
      #expect(!export.output.contains("-7"), "\(format): a negative satellite count was written")
      #expect(!export.output.contains("lat=\"0") && !export.output.contains("[0,0"), "\(format): 0,0 was written")
    }
    let store = try TrackStore(readingAt: directory + "/" + TrackStore.fileName)
    #expect(try store.invalidRowCount() == 6)
    #expect(try store.statistics().points == 60)
  }

  @Test func aGoodPointWithDamagedOptionalFieldsKeepsItsPositionAndLosesTheField() throws {
    let directory = try store(adding: ["1556712100000, 10.5, 20.5, 3, 1, 'high', 5000"])
    let store = try TrackStore(readingAt: directory + "/" + TrackStore.fileName)
    var last: TrackPoint?
    try store.forEachPoint { (point: TrackPoint) throws(Never) in last = point }
    #expect(last?.coordinate == Coordinate(latitude: 10.5, longitude: 20.5))
    #expect(last?.altitudeMSL == nil)
    #expect(last?.satellitesUsed == nil)
  }

  @Test func theNamesOfOpenDescriptorsAreWrittenIntoAsStandardOutput() throws {
    let directory = try store(adding: [])
    for name in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
      let export = try run([Self.locationctl, "track", "export", "--state-dir", directory, "--format", "csv", name])
      #expect(export.status == 0, "\(name): \(export.error)")
      #expect(export.output.split(separator: "\n").count == 61, "\(name)")
    }
  }
}

/// Store files that are not what they should be: a FIFO, an empty file, a copy with a wide mode.
@Suite struct StoreFileKindTests {
  static let locationctl = packageRoot + "/.build/debug/locationctl"

  @Test func aFIFOInPlaceOfTheStoreIsRefusedWithoutBlocking() throws {
    let directory = try temporaryDirectory()
    let path = directory + "/" + TrackStore.fileName
    #expect(mkfifo(path, 0o600) == 0)
    for arguments in [["track", "stats", "--store", path], ["track", "export", "--state-dir", directory, "-"], ["track", "clear", "--store", path]] {
      let result = try run([Self.locationctl] + arguments)
      #expect(result.status == 1, "\(arguments): \(result)")
      #expect(result.error.contains("not a regular file"), "\(arguments): \(result.error)")
    }
    // The daemon's open sets it aside by rename (still a FIFO, never opened) and starts fresh.
    let store = try TrackStore(path: path)
    defer { store.close() }
    #expect(store.rejections.map(\.reason) == ["not a regular file: a FIFO"])
    var info = stat()
    #expect(lstat(try #require(store.rejections.first?.keptAs), &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
  }

  @Test func clearRefusesAFileThatIsNotAStoreAndLeavesItAlone() throws {
    let directory = try temporaryDirectory()
    let path = directory + "/empty"
    #expect(FileManager.default.createFile(atPath: path, contents: Data()))
    let result = try run([Self.locationctl, "track", "clear", "--store", path])
    #expect(result.status == 1, "\(result)")
    #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0)
    #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
  }

  @Test func aStoreWithAWideModeIsMadeOwnerOnlyWhenTheDaemonOpensIt() throws {
    let directory = try temporaryDirectory()
    let path = directory + "/" + TrackStore.fileName
    let first = try TrackStore(path: path)
    try first.append(syntheticTrack(count: 3))
    first.close()
    #expect(chmod(path, 0o644) == 0)
    let store = try TrackStore(path: path)
    try store.append(syntheticTrack(count: 3, start: 1_700_000_000_000))
    for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
      var status = stat()
      #expect(stat(file, &status) == 0)
      #expect(status.st_mode & 0o777 == 0o600, "\(file): \(String(status.st_mode & 0o777, radix: 8))")
    }
    store.close()
  }
}
