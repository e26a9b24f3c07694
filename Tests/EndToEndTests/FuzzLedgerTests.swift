import Foundation
import Testing

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  .deletingLastPathComponent()
  .deletingLastPathComponent().path

/// `scripts/fuzz ledger`: the totals of a ledger of runs, and a clear refusal of a ledger with a
/// line that is not a run (wrong totals would otherwise pass unnoticed).
@Suite("scripts/fuzz ledger", .timeLimit(.minutes(2)))
struct FuzzLedgerTests {
  static let header = "date,commit,target,executions,cov,ft,crashes,seconds,sanitizer"

  /// Runs `scripts/fuzz ledger` on a ledger holding `lines` after `header`.
  static func summary(_ lines: [String], header: String? = FuzzLedgerTests.header) async throws -> ToolRun {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let file = scratch.file("ledger.csv")
    try ((header.map { [$0] } ?? []) + lines).map { $0 + "\n" }.joined()
      .write(toFile: file, atomically: true, encoding: .utf8)
    var environment = ProcessInfo.processInfo.environment
    environment["FUZZ_LEDGER"] = file
    return try await runTool(packageRoot + "/scripts/fuzz", ["ledger"], environment: environment)
  }

  static func run(_ second: Int, target: String = "nmea", executions: String = "150000000", cov: Int = 1800)
    -> String
  {
    String(format: "2026-12-03T10:00:%02dZ,abcdef123456,%@,%@,%d,11000,0,600,none", second, target, executions, cov)
  }

  @Test func totalsPastTwoToTheThirtyOneAreExact() async throws {
    // Sixteen runs of 150 million: 2.4 billion, beyond awk's %d; the coverage grew in the
    // seventh run and not after it, so the best before the last tenth equals the best of all.
    let lines = (0..<16).map { Self.run($0, cov: $0 < 7 ? 1800 + $0 : 1806) }
    let result = try await Self.summary(lines)
    #expect(result.status == 0, "\(result.stderr)")
    let row = try #require(result.lines.first { $0.hasPrefix("nmea ") })
    let fields = row.split(separator: " ", omittingEmptySubsequences: true)
    #expect(fields.count >= 8)
    #expect(Array(fields.prefix(8)) == ["nmea", "16", "2400000000", "0", "1806", "1806", "11000", "11000"])
    let curve = try #require(result.lines.first { $0.hasPrefix("nmea:") })
    #expect(curve.hasSuffix(" 2400000000=11000"), "\(curve)")
  }

  @Test(arguments: [
    (run(1, executions: "12x34"), "field 4 \"12x34\" is not a whole number"),
    (run(1, executions: "-5"), "field 4 \"-5\" is not a whole number"),
    (run(1) + ",extra", "a run has 9 fields"),
    ("2026-12-03T10:00:01Z,abcdef123456,nmea,5", "a run has 9 fields"),
    (run(1, target: "nmea "), "unknown target \"nmea \""),
    (run(1, target: "bogus"), "unknown target \"bogus\""),
    (run(0), "repeats line 2"),
    (run(1, executions: "99999999999999999999999"), "field 4 \"99999999999999999999999\" is not a whole number of at most 15 digits"),
    (run(1) + "\r", "the line ends with CR"),
  ])
  func aLineThatIsNotARunStopsTheSummary(_ line: String, _ reason: String) async throws {
    let result = try await Self.summary([Self.run(0), line, Self.run(2)])
    #expect(result.status == 65)
    #expect(result.stderr.contains("ledger.csv:3: \(reason)"), "\(result.stderr)")
    #expect(result.stderr.contains("1 bad line(s); no totals"))
    #expect(!result.stdout.contains("nmea "), "no totals are printed: \(result.stdout)")
  }

  @Test func anEmptyLedgerOrAMissingHeaderIsRefused() async throws {
    let empty = try await Self.summary([], header: nil)
    #expect(empty.status == 65)
    #expect(empty.stderr.contains("empty, not even the header"))
    let headless = try await Self.summary([Self.run(0)], header: nil)
    #expect(headless.status == 65)
    #expect(headless.stderr.contains("ledger.csv:1: the first line is not the header"))
    let fresh = try await Self.summary([])
    #expect(fresh.status == 0)
    #expect(fresh.stdout.contains("(no runs yet)"))
    // Blank lines carry nothing and are skipped.
    let blank = try await Self.summary([Self.run(0), "", Self.run(1), ""])
    #expect(blank.status == 0, "\(blank.stderr)")
    #expect(blank.stdout.contains("nmea          2      300000000"), "\(blank.stdout)")
    // Totals of 2^53 or more are not summed exactly by awk: refused.
    let huge = try await Self.summary((0..<10).map { Self.run($0, executions: "999999999999999") })
    #expect(huge.status == 65)
    #expect(huge.stderr.contains("nmea totals 2^53 executions or more"), "\(huge.stderr)")
  }
}
