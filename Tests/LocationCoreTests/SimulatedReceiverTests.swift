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

/// Reads from the pty link for `seconds`, returning the bytes. Polls without waiting and sleeps
/// with `Task.sleep` in between, so it never blocks a thread of the concurrency pool.
private func readDevice(_ path: String, seconds: Double) async throws -> [UInt8] {
  let fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK)
  try #require(fd >= 0, "open \(path): errno \(errno)")
  defer { close(fd) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 4096)
  let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
  while ContinuousClock.now < deadline {
    let count = read(fd, &buffer, buffer.count)
    if count > 0 {
      bytes += buffer[0..<count]
    } else {
      try await Task.sleep(for: .milliseconds(5))
    }
  }
  return bytes
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct SimulatedReceiverTests {
  @Test func writesFramedSentencesAtTheRateThroughTheLink() async throws {
    let path = temporaryPath("pty")
    let receiver = try SimulatedReceiver(linkPath: path)
    defer { receiver.stop() }
    var info = stat()
    #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
    #expect(receiver.slavePath.hasPrefix("/dev/pts/"))
    try receiver.start(rate: 10) { elapsed in sampleFix(Int((elapsed * 10).rounded())) }
    let bytes = try await readDevice(path, seconds: 1.05)
    let lines = bytes.split(separator: UInt8(ascii: "\n")).map { Array($0) }
    #expect(!lines.isEmpty, "\(receiver.statistics)")
    // Every line is "$...*HH\r" with a correct checksum (CR kept: raw mode, no translation).
    for line in lines.dropFirst().dropLast() {
      #expect(line.first == UInt8(ascii: "$") && line.last == 13)
      let star = try #require(line.lastIndex(of: UInt8(ascii: "*")))
      let stated = UInt8(
        String(decoding: line[(star + 1)..<(line.count - 1)], as: UTF8.self), radix: 16)
      #expect(stated == line[1..<star].reduce(0, ^))
    }
    // About ten epochs in a second (one RMC each).
    let rmcCount = lines.filter { $0.starts(with: Array("$GPRMC".utf8)) }.count
    #expect((8...12).contains(rmcCount), "\(rmcCount) RMC sentences in 1.05 s at 10 Hz")
  }

  @Test func survivesTheReaderClosingAndReopening() async throws {
    let path = temporaryPath("reopen")
    let receiver = try SimulatedReceiver(linkPath: path)
    defer { receiver.stop() }
    try receiver.start(rate: 10) { elapsed in sampleFix(Int((elapsed * 10).rounded())) }
    let first = try await readDevice(path, seconds: 0.3)
    try await Task.sleep(for: .milliseconds(300))  // nobody reading
    let second = try await readDevice(path, seconds: 0.5)
    #expect(!first.isEmpty)
    #expect(String(decoding: second, as: UTF8.self).contains("$GPGGA,"))
    // Nothing is written while nobody has the device open, so nothing stale reaches the next
    // reader: at most the epochs of the 0.5 s read plus one.
    #expect(receiver.statistics.epochsWithoutReader >= 2)
    let rmcCount = second.split(separator: UInt8(ascii: "\n")).filter {
      $0.starts(with: Array("$GPRMC".utf8))
    }.count
    #expect((3...6).contains(rmcCount), "\(rmcCount) epochs read in 0.5 s at 10 Hz")
  }

  @Test func writesNothingUntilAReaderOpensAndKeepsDataForASlowReader() async throws {
    let path = temporaryPath("slow")
    let receiver = try SimulatedReceiver(linkPath: path)
    defer { receiver.stop() }
    try receiver.start(rate: 10) { elapsed in sampleFix(Int((elapsed * 10).rounded())) }
    try await Task.sleep(for: .milliseconds(350))
    #expect(receiver.statistics.epochsWritten == 0)
    #expect(receiver.statistics.epochsWithoutReader >= 3)
    // A reader that opens the device and reads only once, half a second later, gets every epoch.
    let fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK)
    try #require(fd >= 0)
    defer { close(fd) }
    try await Task.sleep(for: .milliseconds(550))
    var buffer = [UInt8](repeating: 0, count: 65536)
    let count = read(fd, &buffer, buffer.count)
    try #require(count > 0)
    let rmcCount = buffer[0..<count].split(separator: UInt8(ascii: "\n")).filter {
      $0.starts(with: Array("$GPRMC".utf8))
    }.count
    #expect(rmcCount >= 4, "\(rmcCount) epochs kept for a reader that read once after 0.55 s")
    #expect(receiver.statistics.epochsDropped == 0)
  }

  @Test func nilFromTheClosureIsAnOutage() async throws {
    let path = temporaryPath("outage")
    let receiver = try SimulatedReceiver(linkPath: path)
    defer { receiver.stop() }
    try receiver.start(rate: 10) { elapsed in elapsed < 0.45 ? nil : sampleFix(0) }
    let early = try await readDevice(path, seconds: 0.3)
    #expect(early.isEmpty, "silent during the outage")
    let late = try await readDevice(path, seconds: 0.5)
    #expect(!late.isEmpty)
    #expect(receiver.statistics.epochsSilent >= 4)
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
