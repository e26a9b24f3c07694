import Foundation
import Glibc
import Testing

@testable import TrackStore

/// `kill -9` of a process recording through ``TrackRecorder`` at 100 different moments: the store
/// is never corrupt, every fix the writer saw committed is there, and a batch is kept whole or not
/// at all (no hole in the row ids).
@Suite struct CrashTests {
  static let writer = packageRoot + "/.build/debug/track-bench"

  @Test(.timeLimit(.minutes(5))) func killNineNeverCorruptsAndKeepsEveryCommittedFix() throws {
    try #require(FileManager.default.isExecutableFile(atPath: Self.writer), "build track-bench first (swift build)")
    var generator = SplitMix(seed: 2026)
    var survivedBeyondCommitted = 0
    for round in 0..<100 {
      let directory = try temporaryDirectory()
      let path = directory + "/track.sqlite"
      let output = Pipe()
      let process = Process()
      process.executableURL = URL(fileURLWithPath: Self.writer)
      process.arguments = ["writer", path]
      process.standardOutput = output
      process.standardInput = FileHandle.nullDevice
      try process.run()
      // Let it commit a random number of times, then kill it a random few hundred microseconds
      // later: sometimes between commits, sometimes inside one.
      let commits = 1 + Int(generator.next() % 40)
      var seen = 0
      var lastCommitted = 0
      var pending: [UInt8] = []
      let fd = output.fileHandleForReading.fileDescriptor
      var buffer = [UInt8](repeating: 0, count: 4096)
      reading: while seen < commits {
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { break }
        pending += buffer[0..<count]
        while let newline = pending.firstIndex(of: 10) {
          let line = String(decoding: pending[..<newline], as: UTF8.self)
          pending.removeSubrange(...newline)
          if line.hasPrefix("committed "), let value = Int(line.dropFirst(10)) {
            lastCommitted = value
            seen += 1
            if seen >= commits { break reading }
          }
        }
      }
      usleep(UInt32(generator.next() % 3000))
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
      #expect(process.terminationReason == .uncaughtSignal, "round \(round)")

      let store = try TrackStore(path: path)  // as the daemon opens it on restart
      #expect(try store.integrityCheck() == "ok", "round \(round)")
      let (count, first, last) = try store.state.withLock {
        (state: inout TrackStore.State) throws(TrackStoreError) -> (Int64, Int64, Int64) in
        (
          try state.connection.integer("SELECT count(*) FROM fixes") ?? 0,
          try state.connection.integer("SELECT min(id) FROM fixes") ?? 0,
          try state.connection.integer("SELECT max(id) FROM fixes") ?? 0
        )
      }
      #expect(count >= Int64(lastCommitted), "round \(round): \(count) stored, \(lastCommitted) committed")
      #expect(count == 0 || last - first + 1 == count, "round \(round): a hole in the ids")
      if count > Int64(lastCommitted) { survivedBeyondCommitted += 1 }
      store.close()
      try? FileManager.default.removeItem(atPath: directory)
    }
    // Not an assertion on timing: a record of how often the kill came after a commit the writer
    // had not yet reported.
    print("kill -9 rounds where the store held more than the last reported commit: \(survivedBeyondCommitted)/100")
  }
}
