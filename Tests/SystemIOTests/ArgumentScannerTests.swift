import SystemIO
import Testing

@Suite("ArgumentScanner")
struct ArgumentScannerTests {
  /// Every word of `arguments` as the scanner classifies it, options with their values taken
  /// for the names in `valued`.
  private func words(_ arguments: [String], valued: Set<String> = []) throws(ArgumentScanner
    .Failure)
    -> [String]
  {
    var scanner = ArgumentScanner(arguments)
    var result: [String] = []
    while let word = scanner.next() {
      switch word {
      case .option(let name) where valued.contains(name):
        result.append("option \(name)=\(try scanner.value())")
      case .option(let name): result.append("option \(name)")
      case .operand(let operand): result.append("operand \(operand)")
      case .endOfOptions: result.append("end")
      }
    }
    return result
  }

  @Test("separate and joined values, flags, operands and -- in one line")
  func mixedLine() throws {
    let parsed = try ArgumentScanner.parse(
      ["--socket", "/tmp/a.sock", "--json", "center", "--timeout=5", "--", "-33.9", "--json"],
      valued: ["--socket", "--timeout"], flags: ["--json"])
    #expect(parsed.values == ["--socket": "/tmp/a.sock", "--timeout": "5"])
    #expect(parsed.flags == ["--json"])
    #expect(parsed.operands == ["center", "-33.9", "--json"])
    #expect(parsed.endedOptions)
    #expect(parsed.options.map(\.name) == ["--socket", "--json", "--timeout"])
  }

  @Test("--x= is the option --x with an empty value; the program decides whether empty is allowed")
  func emptyJoinedValue() throws {
    let parsed = try ArgumentScanner.parse(["--x="], valued: ["--x"])
    #expect(parsed.values == ["--x": ""])
    #expect(throws: ArgumentScanner.Failure.unexpectedValue(option: "--x", written: "--x=")) {
      try ArgumentScanner.parse(["--x="], flags: ["--x"])
    }
  }

  @Test("--= is an option without a name: unknown, named as written")
  func optionWithoutName() throws {
    #expect(try words(["--="]) == ["option --="])
    #expect(throws: ArgumentScanner.Failure.unknownOption("--=")) {
      try ArgumentScanner.parse(["--="], valued: ["--"], flags: [""])
    }
  }

  @Test("- and other single-dash words are operands: standard input, negative numbers, -h")
  func singleDash() throws {
    #expect(
      try words(["-", "-5", "-h", "-x=1"]) == [
        "operand -", "operand -5", "operand -h", "operand -x=1",
      ])
    // A single-dash word is a value as usual.
    #expect(try words(["--rate", "-"], valued: ["--rate"]) == ["option --rate=-"])
    #expect(try words(["--lat", "-33.9"], valued: ["--lat"]) == ["option --lat=-33.9"])
  }

  @Test("a repeated option is returned each time; the last value wins in Parsed")
  func repeatedOptions() throws {
    let parsed = try ArgumentScanner.parse(
      ["--rate", "1", "--json", "--rate=2", "--json"], valued: ["--rate"], flags: ["--json"])
    #expect(parsed.values == ["--rate": "2"])
    #expect(
      parsed.options.map { "\($0.name)=\($0.value ?? "-")" } == [
        "--rate=1", "--json=-", "--rate=2", "--json=-",
      ])
    #expect(parsed.flags == ["--json"])
  }

  @Test("a separate value that looks like an option is refused; joined it is a value")
  func valueThatLooksLikeAnOption() throws {
    #expect(throws: ArgumentScanner.Failure.optionAsValue(option: "--group", next: "--backend")) {
      try ArgumentScanner.parse(["--group", "--backend", "X"], valued: ["--group", "--backend"])
    }
    #expect(throws: ArgumentScanner.Failure.optionAsValue(option: "--group", next: "--")) {
      try ArgumentScanner.parse(["--group", "--"], valued: ["--group"])
    }
    let parsed = try ArgumentScanner.parse(["--group=--x"], valued: ["--group"])
    #expect(parsed.values == ["--group": "--x"])
    let message = ArgumentScanner.Failure.optionAsValue(option: "--group", next: "--backend")
      .description
    #expect(
      message
        == "option --group needs a value, but --backend follows it; write --group=--backend for a value that starts with --"
    )
  }

  @Test("a missing value is reported with the option's name; an unknown option as written")
  func missingAndUnknown() throws {
    #expect(throws: ArgumentScanner.Failure.missingValue(option: "--socket")) {
      try ArgumentScanner.parse(["--socket"], valued: ["--socket"])
    }
    #expect(
      ArgumentScanner.Failure.missingValue(option: "--socket").description
        == "option --socket needs a value")
    #expect(throws: ArgumentScanner.Failure.unknownOption("--bogus=1")) {
      try ArgumentScanner.parse(["--json", "--bogus=1", "--also-bogus"], flags: ["--json"])
    }
    #expect(throws: ArgumentScanner.Failure.unknownOption("--bogus")) {
      try ArgumentScanner.parse(["--bogus", "x"], valued: ["--socket"])
    }
  }

  @Test("after -- every word is an operand, -- itself included")
  func endOfOptions() throws {
    #expect(
      try words(["a", "--", "--json", "--", "-"]) == [
        "operand a", "end", "operand --json", "operand --", "operand -",
      ])
    var scanner = ArgumentScanner(["--x", "1", "b", "c"])
    #expect(scanner.next() == .option("--x"))
    #expect(try scanner.value() == "1")
    #expect(scanner.next() == .operand("b"))
    #expect(scanner.rest() == ["c"])
    #expect(scanner.isAtEnd)
    #expect(scanner.next() == nil)
  }

  @Test("arguments that were not UTF-8 arrive with U+FFFD and are scanned as any other text")
  func nonUTF8() throws {
    // What CommandLine.arguments makes of the bytes `--na\xFFme=\xC3` and `\xFE\xFF`.
    let badName = String(
      decoding: Array("--na".utf8) + [0xFF] + Array("me=".utf8) + [0xC3], as: UTF8.self)
    let badOperand = String(decoding: [0xFE, 0xFF] as [UInt8], as: UTF8.self)
    #expect(badName == "--na\u{FFFD}me=\u{FFFD}")
    #expect(throws: ArgumentScanner.Failure.unknownOption(badName)) {
      try ArgumentScanner.parse([badName], valued: ["--name"])
    }
    let parsed = try ArgumentScanner.parse(
      ["--name=" + badOperand, badOperand], valued: ["--name"])
    #expect(parsed.values == ["--name": "\u{FFFD}\u{FFFD}"])
    #expect(parsed.operands == ["\u{FFFD}\u{FFFD}"])
  }

  @Test("value() without an option just read is a missing value, never a crash")
  func valueWithoutOption() throws {
    var scanner = ArgumentScanner([])
    #expect(throws: ArgumentScanner.Failure.missingValue(option: "")) { try scanner.value() }
    #expect(scanner.next() == nil)
    #expect(scanner.rest() == [])
  }
}
