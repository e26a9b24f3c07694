import Foundation
import Testing

/// `locationctl decode --rollover-floor DATE`, run as built.
@Suite(.timeLimit(.minutes(3)))
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
    // The --option=VALUE form; a floor given twice or past 2079 is a usage error.
    let joined = try await runTool(tool, ["decode", "--rollover-floor=2019-04-07", log])
    #expect(joined.status == 0)
    #expect(joined.lines.first.flatMap(parseObject)?["time"] as? String == "2019-06-10T12:00:00.000Z")
    let twice = try await runTool(
      tool, ["decode", "--rollover-floor", "2019-04-07", "--rollover-floor", "1999-08-22", log])
    #expect(twice.status == 64)
    let late = try await runTool(tool, ["decode", "--rollover-floor", "9999-12-31", log])
    #expect(late.status == 64)
  }

  /// A capture of GSV sentences alone gives SKY objects with --sky (as gpsdecode does), nothing
  /// without it.
  @Test func gsvOnlyInputGivesSkyWithSky() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let log = scratch.file("gsv.nmea")
    try
      ("$GPGSV,2,1,05,09,88,089,31,07,60,281,44,23,55,123,33,10,44,274,32*7F\r\n"
      + "$GPGSV,2,2,05,16,39,051,29*4E\r\n")
      .write(toFile: log, atomically: true, encoding: .utf8)
    let tool = try Products.path("locationctl")
    let sky = try await runTool(tool, ["decode", "--sky", log])
    #expect(sky.status == 0, "\(sky.stderr)")
    let objects = sky.lines.compactMap(parseObject)
    #expect(objects.count == 1, "\(sky.stdout)")
    #expect(objects.first?["class"] as? String == "SKY")
    #expect((objects.first?["satellites"] as? [Any])?.count == 5)
    let plain = try await runTool(tool, ["decode", log])
    #expect(plain.status == 0 && plain.lines.isEmpty)
  }

  /// Sentences that were all rejected are not "no NMEA": the message says they were rejected.
  @Test func inputWhoseSentencesAreAllRejectedSaysSo() async throws {
    let tool = try Products.path("locationctl")
    let path = "/tmp/locationd-rejected-\(getpid()).nmea"
    #expect(FileManager.default.createFile(atPath: path, contents: Data("$GPGSA\r\n$GNGSA*42\r\n".utf8)))
    defer { unlink(path) }
    let run = try await runTool(tool, ["decode", path])
    #expect(run.status == 1)
    #expect(run.stderr.contains("tooFewFields=1"), "\(run.stderr)")
    #expect(run.stderr.contains("no valid NMEA sentences in \(path): all 2 rejected"), "\(run.stderr)")
  }

  /// `--` ends the options, as the README says for every command: `-` after it is standard input.
  @Test func doubleDashEndsTheOptions() async throws {
    let tool = try Products.path("locationctl")
    let run = try await runTool(tool, ["decode", "--", "-"])
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("no NMEA sentences found in standard input (it is empty)"), "\(run.stderr)")
    let two = try await runTool(tool, ["decode", "--", "-", "-"])
    #expect(two.status == 64)
  }

  /// An empty `--socket=` is bad usage (64), not an unreachable daemon (1); the help's
  /// continuation lines line up under their description.
  @Test func emptySocketIsBadUsageAndHelpLinesAlign() async throws {
    let tool = try Products.path("locationctl")
    for arguments in [["--socket=", "status"], ["--socket", "", "status"]] {
      let run = try await runTool(tool, arguments)
      #expect(run.status == 64, "\(arguments): \(run.stderr)")
    }
    let help = try await runTool(tool, ["--help"])
    let lines = help.stdout.split(separator: "\n")
    let description = try #require(lines.first { $0.contains("track on this connection") })
    let column = try #require(description.range(of: "track on this connection")).lowerBound
    let offset = description.distance(from: description.startIndex, to: column)
    let continuation = try #require(lines.first { $0.contains("(--every:") })
    #expect(continuation.prefix { $0 == " " }.count == offset, "\(help.stdout)")
  }
}
