import Foundation
import Glibc
import LocationCore
import NMEA
import Synchronization
import Testing
import LocationModel

private func temporaryPath(_ name: String) -> String {
  NSTemporaryDirectory() + "locationd-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
}

private func sampleFix(_ index: Int) -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.time = 1_773_489_600_000 + Int64(index) * 100
  fix.coordinate = Coordinate(latitude: 52.5 + Double(index) * 1e-5, longitude: 13.4)
  fix.altitudeMSL = 34
  return fix
}

/// Opens the pty link for reading without blocking (the receiver writes only while it is open).
private func openDevice(_ path: String) throws -> Int32 {
  let fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK)
  try #require(fd >= 0, "open \(path): errno \(errno)")
  return fd
}

/// Reads from `fd` until `done` holds for everything read so far, sleeping with `Task.sleep` in
/// between so it never blocks a thread of the concurrency pool. The 30 s limit only ends a wait
/// that would otherwise hang; nothing here depends on how fast the machine is.
private func readDevice(_ fd: Int32, until done: ([UInt8]) -> Bool) async throws -> [UInt8] {
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 4096)
  let deadline = ContinuousClock.now + .seconds(30)
  while !done(bytes) {
    let count = read(fd, &buffer, buffer.count)
    if count > 0 {
      bytes += buffer[0..<count]
      continue
    }
    if ContinuousClock.now >= deadline { break }
    try await Task.sleep(for: .milliseconds(5))
  }
  return bytes
}

/// Waits until `condition` holds (30 s limit against a hang); returns whether it held.
private func waitUntil(_ condition: () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now + .seconds(30)
  while !condition() {
    if ContinuousClock.now >= deadline { return false }
    try? await Task.sleep(for: .milliseconds(5))
  }
  return true
}

/// The complete lines (ending in CR LF, without the LF) in `bytes` that start with `prefix`.
private func completeLines(_ bytes: [UInt8], _ prefix: String = "$") -> [[UInt8]] {
  guard let lastNewline = bytes.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
  let lines = bytes[..<lastNewline].split(
    separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
  return lines.map { Array($0) }.filter { $0.starts(with: Array(prefix.utf8)) && $0.last == 13 }
}

/// The UTC time of day of an RMC line in milliseconds (field 1, `hhmmss.ss`).
private func rmcMilliseconds(_ line: [UInt8]) -> Int? {
  let fields = line.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
  guard fields.count > 1 else { return nil }
  let text = String(decoding: fields[1], as: UTF8.self)
  guard text.count >= 6, let hours = Int(text.prefix(2)),
    let minutes = Int(text.dropFirst(2).prefix(2)), let seconds = Double(text.dropFirst(4))
  else { return nil }
  return hours * 3_600_000 + minutes * 60_000 + Int((seconds * 1000).rounded())
}

@Suite(.serialized, .timeLimit(.minutes(3)))
struct SimulatedReceiverTests {
  @Test func writesFramedSentencesAtTheRateThroughTheLink() async throws {
    let path = temporaryPath("pty")
    let receiver = try SimulatedReceiver(linkPath: path)
    defer { receiver.stop() }
    var info = stat()
    #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
    #expect(receiver.slavePath.hasPrefix("/dev/pts/"))
    let fd = try openDevice(path)
    defer { close(fd) }
    try receiver.start(rate: 10) { elapsed in sampleFix(Int((elapsed * 10).rounded())) }
    let bytes = try await readDevice(fd) { completeLines($0, "$GPRMC").count >= 10 }
    let lines = completeLines(bytes)
    #expect(!lines.isEmpty, "\(receiver.statistics)")
    // Every line is "$...*HH\r" with a correct checksum (CR kept: raw mode, no translation).
    for line in lines {
      #expect(line.first == UInt8(ascii: "$") && line.last == 13)
      let star = try #require(line.lastIndex(of: UInt8(ascii: "*")))
      let stated = UInt8(
        String(decoding: line[(star + 1)..<(line.count - 1)], as: UTF8.self), radix: 16)
      #expect(stated == line[1..<star].reduce(0, ^))
    }
    // One RMC per epoch, and the epochs are 1/rate apart: the closure is called with the exact
    // elapsed time of each epoch (0, 0.1, 0.2 s ...), so consecutive fixes are 100 ms apart
    // (more only where an epoch was dropped for a full buffer).
    let times = completeLines(bytes, "$GPRMC").compactMap(rmcMilliseconds)
    try #require(times.count >= 10, "\(receiver.statistics)")
    let steps = zip(times, times.dropFirst()).map { $1 - $0 }
    if receiver.statistics.epochsDropped == 0 {
      #expect(steps.allSatisfy { $0 == 100 }, "\(steps)")
    } else {
      #expect(steps.allSatisfy { $0 > 0 && $0 % 100 == 0 }, "\(steps)")
    }
  }

  @Test func survivesTheReaderClosingAndReopening() async throws {
    let path = temporaryPath("reopen")
    let written = Mutex<[SimulatedReceiver.WrittenEpoch]>([])
    let receiver = try SimulatedReceiver(
      linkPath: path, onWrite: { epoch in written.withLock { $0.append(epoch) } })
    defer { receiver.stop() }
    var fd = try openDevice(path)
    try receiver.start(rate: 10) { elapsed in sampleFix(Int((elapsed * 10).rounded())) }
    let first = try await readDevice(fd) { !completeLines($0, "$GPGGA,").isEmpty }
    close(fd)
    #expect(!completeLines(first, "$GPGGA,").isEmpty)
    // Nobody reading: epochs pass without being written.
    let withoutReaderBefore = receiver.statistics.epochsWithoutReader
    #expect(
      await waitUntil { receiver.statistics.epochsWithoutReader >= withoutReaderBefore + 2 },
      "\(receiver.statistics)")
    let lastWrittenBeforeReopen = written.withLock { $0.last?.fix.time } ?? .min
    fd = try openDevice(path)
    defer { close(fd) }
    let second = try await readDevice(fd) {
      !completeLines($0, "$GPGGA,").isEmpty && !completeLines($0, "$GPRMC,").isEmpty
    }
    #expect(String(decoding: second, as: UTF8.self).contains("$GPGGA,"))
    // Nothing is written while nobody has the device open, and what the first reader left
    // unread is discarded: the first sentence the next reader gets is from an epoch written
    // after it opened the device, never a stale one.
    let firstLine = try #require(completeLines(second).first)
    let sentence = String(decoding: firstLine, as: UTF8.self) + "\n"
    // onWrite runs on the writer thread after the write, so the reader may see the bytes first.
    #expect(await waitUntil { written.withLock { $0.contains { $0.sentences.contains(sentence) } } })
    let epoch = try #require(
      written.withLock { $0.first { $0.sentences.contains(sentence) } }, "\(sentence)")
    #expect((epoch.fix.time ?? .min) > lastWrittenBeforeReopen, "a stale epoch was read")
  }

  @Test func writesNothingUntilAReaderOpensAndKeepsDataForASlowReader() async throws {
    let path = temporaryPath("slow")
    let receiver = try SimulatedReceiver(linkPath: path)
    defer { receiver.stop() }
    try receiver.start(rate: 10) { elapsed in sampleFix(Int((elapsed * 10).rounded())) }
    #expect(
      await waitUntil { receiver.statistics.epochsWithoutReader >= 3 }, "\(receiver.statistics)")
    #expect(receiver.statistics.epochsWritten == 0)
    // A reader that opens the device and reads nothing until four epochs were written gets
    // every one of them, in order (the pty passes written bytes on to the reader's side a moment
    // later, from a kernel worker: read until they are all there).
    let fd = try openDevice(path)
    defer { close(fd) }
    #expect(await waitUntil { receiver.statistics.epochsWritten >= 4 }, "\(receiver.statistics)")
    let writtenBeforeRead = receiver.statistics.epochsWritten
    let bytes = try await readDevice(fd) {
      completeLines($0, "$GPRMC").count >= writtenBeforeRead
    }
    let times = completeLines(bytes, "$GPRMC").compactMap(rmcMilliseconds)
    #expect(times.count >= writtenBeforeRead, "\(times.count) epochs kept for a slow reader")
    #expect(zip(times, times.dropFirst()).allSatisfy { $1 - $0 == 100 }, "\(times)")
    #expect(receiver.statistics.epochsDropped == 0)
  }

  @Test func nilFromTheClosureIsAnOutage() async throws {
    let path = temporaryPath("outage")
    let receiver = try SimulatedReceiver(linkPath: path)
    defer { receiver.stop() }
    let fd = try openDevice(path)
    defer { close(fd) }
    // Epochs at 0, 0.1 ... 0.4 s are silent, the ones from 0.5 s on are written.
    try receiver.start(rate: 10) { elapsed in elapsed < 0.45 ? nil : sampleFix(0) }
    let late = try await readDevice(fd) { !completeLines($0, "$GPRMC").isEmpty }
    #expect(!completeLines(late, "$GPRMC").isEmpty)
    #expect(receiver.statistics.epochsSilent == 5, "\(receiver.statistics)")
  }

  @Test func writesTheFixesOfAnAsyncSequence() async throws {
    let path = temporaryPath("sequence")
    let written = Mutex<[Int64]>([])
    let receiver = try SimulatedReceiver(
      linkPath: path,
      onWrite: { epoch in
        written.withLock { $0.append(epoch.fix.time ?? -1) }
      })
    // A reader holds the device open (the simulator writes only while someone listens).
    let reader = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK)
    try #require(reader >= 0)
    defer { close(reader) }
    let fixes = AsyncStream<Fix> { continuation in
      for index in 0..<5 { continuation.yield(sampleFix(index)) }
      continuation.finish()
    }
    try receiver.start(rate: 10, fixes: fixes)
    await receiver.waitUntilFinished()
    #expect(written.withLock { $0 } == (0..<5).map { 1_773_489_600_000 + Int64($0) * 100 })
    var info = stat()
    #expect(lstat(path, &info) != 0, "the link is removed when the sequence ends")
  }

  @Test func replacesASymlinkButNeverARegularFile() throws {
    let path = temporaryPath("existing")
    #expect(symlink("/nonexistent", path) == 0)
    let receiver = try SimulatedReceiver(linkPath: path)
    var buffer = [CChar](repeating: 0, count: 256)
    let length = readlink(path, &buffer, 255)
    #expect(length > 0 && String(cString: Array(buffer[0..<length]) + [0]) == receiver.slavePath)
    receiver.stop()
    #expect(access(path, F_OK) != 0, "stop removes the link")

    #expect(FileManager.default.createFile(atPath: path, contents: Data("keep".utf8)))
    defer { unlink(path) }
    #expect(throws: SimulatedReceiverError.pathIsNotASymlink(path: path)) {
      try SimulatedReceiver(linkPath: path)
    }
    #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep")
  }

  @Test func rejectsRatesOutsideOneToTenHertz() throws {
    let receiver = try SimulatedReceiver(linkPath: temporaryPath("rate"))
    defer { receiver.stop() }
    #expect(throws: SimulatedReceiverError.invalidRate(20)) {
      try receiver.start(rate: 20) { _ in nil }
    }
    #expect(throws: SimulatedReceiverError.invalidRate(0.5)) {
      try receiver.start(rate: 0.5) { _ in nil }
    }
  }
}
