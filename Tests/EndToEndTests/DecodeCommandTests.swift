import Foundation
import Testing

/// `locationctl decode --rollover-floor DATE`, run as built.
@Suite(.timeLimit(.minutes(1)))
struct DecodeCommandTests {
  @Test func rolloverFloorMovesEarlyDatesAndSaysSo() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let log = scratch.file("early.nmea")
    try "$GPRMC,120000,A,4808.9993,N,01135.0798,E,0.0,0.0,251099,,*16\r\n".write(
      toFile: log, atomically: true, encoding: .utf8)
    let tool = try Products.path("locationctl")
    let moved = try await runTool(tool, ["decode", "--rollover-floor", "2019-04-07", log])
    #expect(moved.status == 0)
    let tpv = try #require(moved.lines.first.flatMap(parseObject))
    #expect(tpv["time"] as? String == "2019-06-10T12:00:00.000Z")
    #expect(tpv["rolloverWeeks"] as? Int == 1024)
    let recorded = try await runTool(tool, ["decode", log])
    let plain = try #require(recorded.lines.first.flatMap(parseObject))
    #expect(plain["time"] as? String == "1999-10-25T12:00:00.000Z")
    #expect(plain["rolloverWeeks"] == nil)
    let bad = try await runTool(tool, ["decode", "--rollover-floor", "2019", log])
    #expect(bad.status == 64)
  }
}
