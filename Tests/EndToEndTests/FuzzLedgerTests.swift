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

  /// Runs `scripts/fuzz ARGUMENTS` (by default `ledger`) on a ledger holding `lines` after `header`.
  static func summary(
    _ lines: [String], header: String? = FuzzLedgerTests.header, arguments: [String] = ["ledger"]
  ) async throws -> ToolRun {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let file = scratch.file("ledger.csv")
    try ((header.map { [$0] } ?? []) + lines).map { $0 + "\n" }.joined()
      .write(toFile: file, atomically: true, encoding: .utf8)
    var environment = ProcessInfo.processInfo.environment
    environment["FUZZ_LEDGER"] = file
    return try await runTool(packageRoot + "/scripts/fuzz", arguments, environment: environment)
  }

  static func run(
    _ second: Int, target: String = "nmea", executions: String = "150000000", cov: Int = 1800,
    crashes: Int = 0
  ) -> String {
    String(
      format: "2026-12-03T10:00:%02dZ,abcdef123456,%@,%@,%d,11000,%d,600,none", second, target,
      executions, cov, crashes)
  }

  /// The summary row of `target`, split into its columns.
  static func row(_ result: ToolRun, _ target: String = "nmea") throws -> [Substring] {
    let row = try #require(result.lines.first { $0.hasPrefix(target + " ") }, "\(result.stdout)")
    return row.split(separator: " ", omittingEmptySubsequences: true)
  }

  @Test func totalsPastTwoToTheThirtyOneAreExact() async throws {
    // Sixteen runs of 150 million: 2.4 billion, beyond awk's %d; the coverage grew in the
    // seventh run and not after it, so the best before the last tenth equals the best of all.
    let lines = (0..<16).map { Self.run($0, cov: $0 < 7 ? 1800 + $0 : 1806) }
    let result = try await Self.summary(lines)
    #expect(result.status == 0, "\(result.stderr)")
    let fields = try Self.row(result)
    // target, runs, executions, crashes, since crash, cov@90%, cov, ft@90%, ft, hours, done
    #expect(
      Array(fields.prefix(11))
        == ["nmea", "16", "2400000000", "0", "2400000000", "1806", "1806", "11000", "11000", "2.7", "yes"])
    let curve = try #require(result.lines.first { $0.hasPrefix("nmea:") })
    #expect(curve.hasPrefix("nmea: 150000000=1800/11000 300000000=1801/11000 "), "\(curve)")
    #expect(curve.hasSuffix(" 2400000000=1806/11000"), "\(curve)")
  }

  /// A line that is not a run, and the reason the summary gives for it.
  static let badLines: [(String, String)] = {
    let rest = run(1).dropFirst(20)  // the line after its date
    return [
      (run(1, executions: "12x34"), "field 4 \"12x34\" is not a whole number"),
      (run(1, executions: "-5"), "field 4 \"-5\" is not a whole number"),
      (run(1) + ",extra", "a run has 9 fields"),
      ("2026-12-03T10:00:01Z,abcdef123456,nmea,5", "a run has 9 fields"),
      (run(1, target: "nmea "), "unknown target \"nmea \""),
      (run(1, target: "bogus"), "unknown target \"bogus\""),
      (run(0), "repeats line 2"),
      (run(1, executions: "99999999999999999999999"), "field 4 \"99999999999999999999999\" is not a whole number of at most 15 digits"),
      (run(1) + "\r", "the line holds a CR"),
      (run(1, crashes: 2), "crashes \"2\" is not 0 or 1"),
      ("2026-13-45T99:99:99Z" + rest, "date \"2026-13-45T99:99:99Z\" is not a UTC date"),
      ("2026-02-29T10:00:00Z" + rest, "date \"2026-02-29T10:00:00Z\" is not a UTC date"),
      ("2026-12-03T24:00:00Z" + rest, "date \"2026-12-03T24:00:00Z\" is not a UTC date"),
    ]
  }()

  @Test(arguments: badLines)
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

  @Test func runsAreTakenInTheOrderOfTheirDatesNotOfTheLines() async throws {
    // Ten runs; the last by date found two more edges. Moved to the top of the file (as a ledger
    // merged by hand may hold it), it must still count as the last tenth, not as the first run.
    let lines = (0..<10).map { Self.run($0, executions: "20000000", cov: $0 == 9 ? 1802 : 1800) }
    let inOrder = try await Self.summary(lines)
    let moved = try await Self.summary([lines[9]] + lines.dropLast())
    #expect(inOrder.status == 0 && moved.status == 0, "\(inOrder.stderr) \(moved.stderr)")
    #expect(moved.stdout == inOrder.stdout)
    let fields = try Self.row(moved)
    #expect(fields[5] == "1800" && fields[6] == "1802", "cov@90% and cov: \(fields)")
    #expect(fields[10] == "no", "coverage grew in the last tenth: \(fields)")
    #expect(moved.stdout.contains("2026-12-03T10:00:09Z (abcdef123456)"), "the newest run: \(moved.stdout)")
  }

  @Test func executionsCountFromTheLastCrash() async throws {
    // 150 million, a crash, then 99 million on the fixed code: not yet done; one million more is.
    var lines = [
      Self.run(0), Self.run(1, executions: "1000000", crashes: 1), Self.run(2, executions: "99000000"),
    ]
    let short = try Self.row(try await Self.summary(lines))
    #expect(Array(short.prefix(5)) == ["nmea", "3", "250000000", "1", "99000000"])
    #expect(short[10] == "no")
    lines.append(Self.run(3, executions: "1000000"))
    let done = try Self.row(try await Self.summary(lines))
    #expect(Array(done.prefix(5)) == ["nmea", "4", "251000000", "1", "100000000"])
    #expect(done[10] == "yes")
  }

  /// A run's settings are checked before anything is built: libFuzzer would read "1e8" as 1 and
  /// "-5" as no limit.
  struct Setting: Sendable, CustomTestStringConvertible {
    var arguments: [String]
    var environment: [String: String] = [:]
    var status: Int32 = 64
    var reason: String
    var testDescription: String { "\(arguments) \(environment)" }
  }

  static let badSettings: [Setting] = [
    Setting(arguments: ["gpx", "-5"], reason: "SECONDS \"-5\" is not a whole number of seconds"),
    Setting(arguments: ["gpx", "1m"], reason: "SECONDS \"1m\" is not a whole number of seconds"),
    Setting(arguments: ["gpx", "0"], reason: "SECONDS 0 (no time limit) needs FUZZ_RUNS"),
    Setting(arguments: ["gpx", "00"], reason: "SECONDS 0 (no time limit) needs FUZZ_RUNS"),
    Setting(
      arguments: ["gpx", "8"], environment: ["FUZZ_KEEP": "/dev/null"], status: 73,
      reason: "FUZZ_KEEP /dev/null is not a directory"),
    Setting(arguments: [""], reason: "unknown target \"\""),
    Setting(
      arguments: ["gpx", "8"], environment: ["FUZZ_RUNS": "1e8"],
      reason: "FUZZ_RUNS \"1e8\" is not a whole number of executions"),
    Setting(arguments: ["gpx", "8"], environment: ["FUZZ_NICE": "abc"], reason: "FUZZ_NICE \"abc\" is not a niceness"),
    Setting(
      arguments: ["gpx", "8"], environment: ["FUZZ_SANITIZER": "asan"],
      reason: "FUZZ_SANITIZER \"asan\" is not address"),
    Setting(
      arguments: ["gpx", "8"], environment: ["FUZZ_LEDGER": "/nonexistent-dir/ledger.csv"], status: 73,
      reason: "cannot be created"),
  ]

  @Test(arguments: badSettings)
  func badSettingsAreRefusedBeforeTheBuild(_ setting: Setting) async throws {
    var environment = ProcessInfo.processInfo.environment
    environment["FUZZ_LEDGER"] = "none"
    environment.merge(setting.environment) { $1 }
    let result = try await runTool(packageRoot + "/scripts/fuzz", setting.arguments, environment: environment)
    #expect(result.status == setting.status, "\(result.stderr)")
    #expect(result.stderr.contains(setting.reason), "\(result.stderr)")
    #expect(!result.stderr.contains("building"), "nothing is built: \(result.stderr)")
  }

  @Test func aRunRefusesABadLedgerBeforeTheBuild() async throws {
    let result = try await Self.summary([Self.run(0, crashes: 3)], arguments: ["gpx", "5"])
    #expect(result.status == 65)
    #expect(result.stderr.contains("ledger.csv:2: crashes \"3\" is not 0 or 1"), "\(result.stderr)")
    #expect(!result.stderr.contains("building"), "\(result.stderr)")
  }
}
