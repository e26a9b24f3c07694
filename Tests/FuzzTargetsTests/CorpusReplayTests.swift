import Foundation
import FuzzTargets
import Testing

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

  @Test(arguments: CorpusInput.all())
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
