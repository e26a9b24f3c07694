import Foundation
import LocationProtocol
import ServiceCore
import SocketFrontEnd
import LocationDaemon
@testable import FuzzTargets
import Testing
import LocationModel

/// The committed fuzz corpus: `Tests/FuzzCorpus/<target>/<file>`, one input per file (the
/// libFuzzer format: raw bytes, the first byte being the target's mode or chunk byte where it
/// has one). Files named `crash-*` are inputs that once broke an invariant.
struct CorpusInput: CustomTestStringConvertible, Sendable {
  var target: FuzzTarget
  var path: String
  var testDescription: String { "\(target.rawValue)/\((path as NSString).lastPathComponent)" }

  static let corpusDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("FuzzCorpus").path

  static func all() -> [CorpusInput] {
    var inputs: [CorpusInput] = []
    for target in FuzzTarget.allCases {
      let directory = corpusDirectory + "/" + target.rawValue
      let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
      for name in names.sorted() where !name.hasPrefix(".") {
        inputs.append(CorpusInput(target: target, path: directory + "/" + name))
      }
    }
    return inputs
  }
}

@Suite struct FuzzCorpusTests {
  @Test func everyTargetHasACorpus() {
    for target in FuzzTarget.allCases {
      let count = CorpusInput.all().filter { $0.target == target }.count
      #expect(count >= 3, "\(target.rawValue) has \(count) corpus files")
    }
  }

  /// One input at a time, as libFuzzer calls a target: the file-based harnesses (mapstate,
  /// regions) load from one directory per process.
  @Test(.serialized, arguments: CorpusInput.all())
  func replays(_ input: CorpusInput) throws {
    let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: input.path)))
    #expect(throws: Never.self) { try input.target.check(bytes) }
  }

  /// The real receiver logs, whole, through the NMEA target (chunk byte 0x3F: 64-byte chunks).
  @Test func sharedLogsKeepTheNMEAInvariants() throws {
    let directory = "../shared/nmea"
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
    var checked = 0
    for name in names.sorted() where name.hasSuffix(".log") {
      let log = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
      #expect(throws: Never.self, "\(name)") { try FuzzTarget.nmea.check([0x3F] + log) }
      checked += 1
    }
    #expect(checked > 0)
  }
}

/// The checks themselves must be able to fail: inputs that break each invariant are caught.
@Suite struct HarnessSelfTests {
  /// The monotonic-time check applies only where the input's own times never go backwards.
  @Test func inputTimeOrderIsReadFromTheSentences() {
    let rmc1 = "$GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W*6A\r\n"
    let rmc0 = "$GPRMC,123518,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W*6B\r\n"
    let otherDate = "$GPRMC,123520,A,4807.038,N,01131.000,E,022.4,084.4,240394,003.1,W*67\r\n"
    #expect(NMEAHarness.inputTimesNonDecreasing(Array((rmc0 + rmc1 + rmc1).utf8)))
    #expect(!NMEAHarness.inputTimesNonDecreasing(Array((rmc1 + rmc0).utf8)))
    #expect(!NMEAHarness.inputTimesNonDecreasing(Array((rmc1 + otherDate).utf8)))
  }

  @Test func requestRepliesAreCheckedForTheirID() {
    var checked = Set<ReplyText>()
    #expect(throws: FuzzFailure.self) {
      try RequestHarness.checkReply(Reply.error(.internal, message: "x").json(id: .string("a")), id: .string("b"), line: [], checked: &checked)
    }
    #expect(throws: FuzzFailure.self) {
      try RequestHarness.checkReply(.object([JSONMember("id", 1), JSONMember("class", "OK")]), id: nil, line: [], checked: &checked)
    }
    #expect(throws: Never.self) {
      try RequestHarness.checkReply(Reply.ok(.status).json(id: .number(7)), id: .number(7), line: [], checked: &checked)
    }
    // A reply already checked for this input is checked again for the line's own id.
    #expect(checked.contains(ReplyText(Reply.ok(.status).json(id: .number(7)).encoded)))
    #expect(throws: FuzzFailure.self) {
      try RequestHarness.checkReply(Reply.ok(.status).json(id: .number(7)), id: .number(8), line: [], checked: &checked)
    }
  }

  /// A reply that is not JSON fails every time it is met, not only the first.
  @Test func requestReplyTextIsCheckedUntilItPasses() {
    var checked = Set<ReplyText>()
    let broken = JSONValue.object([JSONMember("class", "ERROR"), JSONMember("n", .raw(Array("01".utf8)))])
    for _ in 0..<2 {
      #expect(throws: FuzzFailure.self) {
        try RequestHarness.checkReply(broken, id: nil, line: [], checked: &checked)
      }
    }
    #expect(!checked.contains(ReplyText(broken.encoded)))
  }

  @Test func strictJSONRejectsWhatJSONForbids() {
    for text in ["{\"a\":NaN}", "{\"a\":01}", "{\"a\":1.}", "[1,]", "{\"a\":\"\u{01}\"}", "{} {}", "\"\\x\""] {
      #expect(throws: StrictJSON.Invalid.self, "\(text)") { try StrictJSON.validate(Array(text.utf8)) }
    }
    #expect(throws: StrictJSON.Invalid.self) { try StrictJSON.validate([0x22, 0xC0, 0x80, 0x22]) }
    for text in ["{\"class\":\"TPV\",\"lat\":-1.5e-3,\"x\":[true,false,null],\"s\":\"\\u00e9\"}", " 0 ", "\"é\""] {
      #expect(throws: Never.self, "\(text)") { try StrictJSON.validate(Array(text.utf8)) }
    }
  }
}
