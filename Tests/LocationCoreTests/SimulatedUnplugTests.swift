import Foundation
import Glibc
import LocationModel
import LocationTestKit
import NMEA
import SystemIO
import Testing

@testable import LocationCore

/// Polls every 10 ms until `condition` holds or `timeout` seconds pass (a bound on a hang, not
/// a timing assertion).
private func eventually(_ timeout: Double, _ condition: () -> Bool) async -> Bool {
  let deadline = MonotonicClock.nanoseconds() + UInt64(timeout * 1e9)
  while MonotonicClock.nanoseconds() < deadline {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(10))
  }
  return condition()
}

private func target(of link: String) -> String? {
  var buffer = [CChar](repeating: 0, count: 256)
  let length = readlink(link, &buffer, buffer.count - 1)
  guard length > 0 else { return nil }
  return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct SimulatedUnplugTests {
  /// An unplug window closes the pty (the reader sees the hang-up) and removes the link; when it
  /// ends a new pty is linked at the same path and a new reader gets sentences again.
  @Test func unplugClosesThePTYAndReplugLinksANewOneAtTheSamePath() async throws {
    let link = NSTemporaryDirectory() + "locationd-unplug-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let faults = try NMEAFaultSchedule.parse("unplug@0.5-1")
    let receiver = try SimulatedReceiver(
      linkPath: link, encoder: NMEAEncoder(version: .v4_11), output: try SimulatedOutput(faults: faults))
    defer { receiver.stop() }
    let firstSlave = receiver.slavePath
    // Blocking reads on a thread of its own: a loaded machine may not run a polling task for
    // seconds, and what the slave holds unread is lost at the hang-up.
    let reader = open(link, O_RDONLY | O_NOCTTY)
    try #require(reader >= 0)
    // Closed once the reading thread has returned; after a timeout it may still block in read(2)
    // on `reader`, so the number stays open rather than be reused under it.
    var readerReturned = false
    defer { if readerReturned { close(reader) } }
    try receiver.start(rate: 10) { elapsed in
      var fix = Fix(mode: .fix3D)
      fix.time = 1_773_489_600_000 + Int64((elapsed * 1000).rounded())
      fix.coordinate = Coordinate(latitude: 10, longitude: 20)
      fix.altitudeMSL = 5
      return fix
    }
    let outcome = await resultOnItsOwnThread(within: 30) { () -> (bytes: [UInt8], hungUp: Bool) in
      var bytes: [UInt8] = []
      var chunk = [UInt8](repeating: 0, count: 4096)
      while true {
        let n = Glibc.read(reader, &chunk, chunk.count)
        if n > 0 {
          bytes += chunk[0..<n]
        } else if n == 0 || errno == EIO {
          return (bytes, true)
        } else if errno != EINTR {
          return (bytes, false)
        }
      }
    }
    readerReturned = outcome != nil
    let bytes = outcome?.bytes ?? []
    #expect(outcome?.hungUp == true, "the reader sees the device go")
    var decoder = NMEADecoder()
    var fixes: [Fix] = []
    decoder.feed(bytes) { fixes.append($0.fix) }
    #expect(fixes.count >= 3 && decoder.statistics.rejectedTotal == 0)
    #expect(receiver.outputStatistics.faults.unplugs == 1)
    // Plugged back: the link points to a new slave.
    #expect(await eventually(10) { target(of: link).map { $0 != firstSlave } ?? false })
    #expect(receiver.slavePath != firstSlave && target(of: link) == receiver.slavePath)
    let again = open(link, O_RDONLY | O_NOCTTY | O_NONBLOCK)
    try #require(again >= 0)
    defer { close(again) }
    var text = ""
    #expect(
      await eventually(10) {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = read(again, &chunk, chunk.count)
        if n > 0 { text += String(decoding: chunk[0..<n], as: UTF8.self) }
        return text.contains("RMC,")
      })
    #expect(receiver.outputStatistics.epochsUnplugged == 5)
  }
}
