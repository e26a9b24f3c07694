import Foundation
import Glibc
import Testing

@testable import TrackStore

/// The real locationd recording a replay, and killed with SIGKILL while it records.
@Suite(.serialized) struct DaemonRecordingTests {
  static let locationd = packageRoot + "/.build/debug/locationd"
  static let locationctl = packageRoot + "/.build/debug/locationctl"
  static let log = packageRoot + "/../shared/nmea/aerorust-nmea1.log"

  struct Daemon {
    let process: Process
    let directory: String
    var socket: String { directory + "/s.sock" }
    var store: String { directory + "/state/track.sqlite" }
  }

  func startDaemon(_ backend: String, track: String = "all") async throws -> Daemon {
    let directory = try temporaryDirectory()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.locationd)
    process.arguments = ["--backend", backend, "--socket", directory + "/s.sock", "--state-dir", directory + "/state", "--group", "", "--track", track]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    let daemon = Daemon(process: process, directory: directory)
    // Wait for the socket (polling, not a timing assertion: the limit only ends a hung start).
    for _ in 0..<500 where access(daemon.socket, F_OK) != 0 { try await Task.sleep(nanoseconds: 10_000_000) }
    let start = try run([Self.locationctl, "--socket", daemon.socket, "start"])
    #expect(start.status == 0, "\(start.error)")
    return daemon
  }

  func storedCount(_ path: String) throws -> Int64 {
    let store = try TrackStore(readingAt: path)
    defer { store.close() }
    return try store.state.withLock { (state: inout TrackStore.State) throws(TrackStoreError) -> Int64 in
      try state.connection.integer("SELECT count(*) FROM fixes") ?? 0
    }
  }

  @Test(.timeLimit(.minutes(2))) func recordsEveryFixWithATimeAndAPosition() async throws {
    try #require(FileManager.default.fileExists(atPath: Self.log), "the NMEA corpus (../shared/nmea) is missing")
    // The oracle: the TPVs locationctl decode assembles from the same log, with a fix mode of 2D
    // or 3D, a time and a position.
    let decoded = try run([Self.locationctl, "decode", Self.log])
    let expected = decoded.output.split(separator: "\n").filter {
      ($0.contains(#""mode":2"#) || $0.contains(#""mode":3"#)) && $0.contains(#""time":"#) && $0.contains(#""lat":"#)
    }.count
    #expect(expected > 900)
    let daemon = try await startDaemon("replay:\(Self.log)?speed=0")
    var count: Int64 = 0
    for _ in 0..<3000 {
      if access(daemon.store, F_OK) == 0, let stored = try? storedCount(daemon.store) {
        count = stored
        if count >= Int64(expected) { break }
      }
      try await Task.sleep(nanoseconds: 10_000_000)
    }
    daemon.process.terminate()
    await exited(daemon.process)
    #expect(count == Int64(expected))
    let csv = try run([Self.locationctl, "track", "export", "--format", "csv", "--store", daemon.store])
    let rows = csv.output.split(separator: "\n").dropFirst()
    #expect(rows.count == expected)
    #expect(rows.allSatisfy { $0.hasSuffix(",\(Self.log),true") })  // source: the log; a replay is simulated
    #expect(rows.first?.contains("replay:") == true)
  }

  /// A looping replay recorded with `--track all`: each fix once, however many passes, with the
  /// log's times or with times shifted to now at each pass; the passes after the first are
  /// skipped and logged (`trackRepeatSkipped`).
  @Test(.timeLimit(.minutes(2)), arguments: ["original", "shifted"])
  func aLoopingReplayIsRecordedOnce(_ timestamps: String) async throws {
    try #require(FileManager.default.fileExists(atPath: Self.log), "the NMEA corpus (../shared/nmea) is missing")
    let decoded = try run([Self.locationctl, "decode", Self.log])
    let expected = decoded.output.split(separator: "\n").filter {
      ($0.contains(#""mode":2"#) || $0.contains(#""mode":3"#)) && $0.contains(#""time":"#) && $0.contains(#""lat":"#)
    }.count
    #expect((513...1024).contains(expected), "a log of \(expected) fixes: a skip count of 1024 is then past one pass")
    let directory = try temporaryDirectory()
    let logFile = directory + "/locationd.log"
    #expect(FileManager.default.createFile(atPath: logFile, contents: nil))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.locationd)
    process.arguments = [
      "--backend", "replay:\(Self.log)?speed=0&loop=true&timestamps=\(timestamps)", "--socket", directory + "/s.sock", "--state-dir",
      directory + "/state", "--group", "", "--track", "all",
    ]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle(forWritingAtPath: logFile)
    try process.run()
    for _ in 0..<500 where access(directory + "/s.sock", F_OK) != 0 { try await Task.sleep(nanoseconds: 10_000_000) }
    let start = try run([Self.locationctl, "--socket", directory + "/s.sock", "start"])
    #expect(start.status == 0, "\(start.error)")
    // Wait (a guard against a hang, not a timing assertion) until more than a whole pass was skipped.
    var log = ""
    for _ in 0..<6000 {
      log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
      if log.contains("trackRepeatSkipped count=1024 ") { break }
      try await Task.sleep(nanoseconds: 10_000_000)
    }
    #expect(log.contains("trackRepeatSkipped count=1024 "), "\(log.suffix(2000))")
    process.terminate()
    await exited(process)
    let store = directory + "/state/track.sqlite"
    #expect(try storedCount(store) == Int64(expected))
    let csv = try run([Self.locationctl, "track", "export", "--format", "csv", "--store", store])
    let times = csv.output.split(separator: "\n").dropFirst().map { $0.prefix { $0 != "," } }
    #expect(times.count == expected)
    #expect(Set(times).count == times.count, "a fix time was recorded twice")
  }

  /// A restore that mixed files: a link planted as the track store and a directory in place of
  /// the MQTT queue's file. Both are set aside (the link's target and the directory's contents
  /// untouched), recording and queueing go on on disk, and `status` says so.
  @Test(.timeLimit(.minutes(2))) func mixedStateFilesAreSetAsideAndStatusSaysWhatHappened() async throws {
    try #require(FileManager.default.fileExists(atPath: Self.log), "the NMEA corpus (../shared/nmea) is missing")
    let directory = try temporaryDirectory()
    let state = directory + "/state"
    #expect(mkdir(state, 0o700) == 0)
    let operators = directory + "/operators-file"
    try Data("operator's data".utf8).write(to: URL(fileURLWithPath: operators))
    #expect(symlink(operators, state + "/track.sqlite") == 0)
    #expect(mkdir(state + "/" + TrackStore.outboxFileName, 0o700) == 0)
    try Data("kept".utf8).write(to: URL(fileURLWithPath: state + "/" + TrackStore.outboxFileName + "/inside"))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.locationd)
    // A broker port where nothing listens: every message waits in the queue.
    process.arguments = [
      "--backend", "replay:\(Self.log)?speed=0", "--socket", directory + "/s.sock", "--state-dir", state,
      "--group", "", "--track", "all", "--mqtt", "mqtt://127.0.0.1:9",
    ]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    defer {
      process.terminate()
      process.waitUntilExit()  // after SIGTERM: a moment
    }
    for _ in 0..<500 where access(directory + "/s.sock", F_OK) != 0 { try await Task.sleep(nanoseconds: 10_000_000) }
    #expect(try run([Self.locationctl, "--socket", directory + "/s.sock", "start"]).status == 0)
    var storage: [String: Any] = [:]
    for _ in 0..<3000 {
      let status = try run([Self.locationctl, "--json", "--socket", directory + "/s.sock", "status"])
      if let object = try? JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any],
        let found = object["storage"] as? [String: Any], let track = found["track"] as? [String: Any],
        let queue = found["queue"] as? [String: Any], (track["recorded"] as? Int ?? 0) > 0,
        (queue["waiting"] as? Int ?? 0) > 0
      {
        storage = found
        break
      }
      try await Task.sleep(nanoseconds: 10_000_000)
    }
    let track = try #require(storage["track"] as? [String: Any], "\(storage)")
    let queue = try #require(storage["queue"] as? [String: Any], "\(storage)")
    #expect(track["state"] as? String == "recording")
    #expect(track["failed"] as? Int == 0)
    let rejected = try #require(track["rejected"] as? [String])
    #expect(rejected.count == 1)
    #expect(rejected.first?.hasPrefix(state + "/track.sqlite.rejected-2") == true, "\(rejected)")
    #expect(queue["state"] as? String == "disk")
    #expect(queue["detail"] is NSNull)
    let text = try run([Self.locationctl, "--socket", directory + "/s.sock", "status"])
    #expect(text.output.contains("\ntrack store: recording, "), "\(text.output)")
    #expect(text.output.contains("\n  set aside this run: \(state)/track.sqlite.rejected-"), "\(text.output)")
    #expect(text.output.contains("\nMQTT queue: on disk, "), "\(text.output)")
    // Nothing of the operator's was followed, written or deleted.
    #expect(try String(contentsOfFile: operators, encoding: .utf8) == "operator's data")
    let names = try FileManager.default.contentsOfDirectory(atPath: state)
    let keptDirectory = try #require(names.first { $0.hasPrefix(TrackStore.outboxFileName + ".rejected-") }, "\(names)")
    #expect(try String(contentsOfFile: state + "/" + keptDirectory + "/inside", encoding: .utf8) == "kept")
  }

  /// A file in the state directory that is not a track store: set aside with one log line, the
  /// operator's bytes kept, and recording goes on in a fresh store.
  @Test(.timeLimit(.minutes(2))) func aForeignStoreIsSetAsideAndRecordingGoesOn() async throws {
    try #require(FileManager.default.fileExists(atPath: Self.log), "the NMEA corpus (../shared/nmea) is missing")
    let directory = try temporaryDirectory()
    #expect(mkdir(directory + "/state", 0o700) == 0)
    let garbage = Data(repeating: 0x5A, count: 5000)
    #expect(FileManager.default.createFile(atPath: directory + "/state/track.sqlite", contents: garbage))
    let errors = directory + "/stderr"
    #expect(FileManager.default.createFile(atPath: errors, contents: nil))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.locationd)
    process.arguments = [
      "--backend", "replay:\(Self.log)?speed=0", "--socket", directory + "/s.sock", "--state-dir", directory + "/state",
      "--group", "", "--track", "all",
    ]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
    try process.run()
    for _ in 0..<500 where access(directory + "/s.sock", F_OK) != 0 { try await Task.sleep(nanoseconds: 10_000_000) }
    #expect(try run([Self.locationctl, "--socket", directory + "/s.sock", "start"]).status == 0)
    var count: Int64 = 0
    for _ in 0..<3000 {
      if let stored = try? storedCount(directory + "/state/track.sqlite"), stored > 0 {
        count = stored
        break
      }
      try await Task.sleep(nanoseconds: 10_000_000)
    }
    process.terminate()
    await exited(process)
    #expect(count > 0)
    let log = try String(contentsOfFile: errors, encoding: .utf8)
    let lines = log.split(separator: "\n").filter { $0.contains("trackStoreRejected") }
    #expect(lines.count == 1, "\(log)")
    #expect(lines.first?.contains("not an SQLite database") == true, "\(log)")
    let kept = try FileManager.default.contentsOfDirectory(atPath: directory + "/state").filter {
      $0.hasPrefix("track.sqlite.rejected-")
    }
    #expect(kept.count == 1)
    if let name = kept.first {
      #expect(FileManager.default.contents(atPath: directory + "/state/" + name) == garbage)
    }
  }

  @Test(.timeLimit(.minutes(2))) func aReplayIsNotHistoryByDefault() async throws {
    try #require(FileManager.default.fileExists(atPath: Self.log), "the NMEA corpus (../shared/nmea) is missing")
    // --track live (the default): the replay's fixes reach the client but never the store.
    let daemon = try await startDaemon("replay:\(Self.log)?speed=0", track: "live")
    var ended = false
    for _ in 0..<3000 {
      let status = try run([Self.locationctl, "--socket", daemon.socket, "--json", "status"])
      if status.output.contains(#""state":"endOfData""#) {
        ended = true
        #expect(status.output.contains(#""current":{"class":"TPV""#))
        break
      }
      try await Task.sleep(nanoseconds: 10_000_000)
    }
    daemon.process.terminate()
    await exited(daemon.process)
    #expect(ended)
    #expect(access(daemon.store, F_OK) != 0, "a store was created for a replay with --track live")
  }

  @Test(.timeLimit(.minutes(3))) func killNineWhileRecordingNeverCorrupts() async throws {
    try #require(FileManager.default.fileExists(atPath: Self.log), "the NMEA corpus (../shared/nmea) is missing")
    var generator = SplitMix(seed: 9)
    for round in 0..<10 {
      let daemon = try await startDaemon("replay:\(Self.log)?speed=0&loop=true")
      try await Task.sleep(nanoseconds: UInt64(UInt32(50_000 + generator.next() % 400_000)) * 1000)
      kill(daemon.process.processIdentifier, SIGKILL)
      await exited(daemon.process)
      guard access(daemon.store, F_OK) == 0 else { continue }
      let store = try TrackStore(path: daemon.store)
      #expect(try store.integrityCheck() == "ok", "round \(round)")
      store.close()
      try? FileManager.default.removeItem(atPath: daemon.directory)
    }
  }
}

/// Waits for `process` to exit without holding a thread of the concurrency pool (two threads on a
/// 2-core machine: a test that blocks one for a minute starves the in-process servers of the
/// suites that run beside it).
private func exited(_ process: Process) async {
  while process.isRunning { try? await Task.sleep(nanoseconds: 10_000_000) }
}
