import Foundation
import NMEA
import Testing
import LocationModel
import LocationProtocol

/// Satellite data without any time or fix sentence (a GSV-only capture) as sky-only epochs.
@Suite("sky-only epochs")
struct SkyOnlyEpochTests {
  static func decode(_ bytes: [UInt8], skyOnly: Bool) -> [DecodedFix] {
    var decoder = NMEADecoder(rolloverFloor: nil, skyOnlyEpochs: skyOnly)
    var fixes: [DecodedFix] = []
    decoder.feed(bytes) { fixes.append($0) }
    decoder.finish { fixes.append($0) }
    return fixes
  }

  static let cycle =
    sentence("GPGSV,2,1,05,09,88,089,31,07,60,281,44,23,55,123,33,10,44,274,32")
    + sentence("GPGSV,2,2,05,16,39,051,29")
    + sentence("GLGSV,1,1,02,65,20,100,30,66,40,200,35")

  @Test("each GSV cycle is one sky-only epoch; the default assembler waits for a timed epoch")
  func gsvOnlyCyclesBecomeSkyOnlyEpochs() throws {
    let second =
      sentence("GPGSV,2,1,05,09,88,089,21,07,60,281,44,23,55,123,33,10,44,274,32")
      + sentence("GPGSV,2,2,05,16,39,051,29")
      + sentence("GLGSV,1,1,02,65,20,100,30,66,40,200,35")
    let bytes = Array((Self.cycle + second).utf8)
    let epochs = Self.decode(bytes, skyOnly: true)
    #expect(epochs.count == 2)
    #expect(epochs.allSatisfy { $0.isSkyOnly && $0.fix.mode == .unknown && $0.fix.time == nil })
    #expect(epochs.map { $0.fix.satellites.count } == [7, 7])
    #expect(epochs.map(\.line) == [1, 4])
    #expect(epochs[0].fix.satellites.first { $0.prn == 9 }?.snr == 31)
    #expect(epochs[1].fix.satellites.first { $0.prn == 9 }?.snr == 21)
    var sky: [UInt8] = []
    GPSDJSON.appendSKY(epochs[0].fix, to: &sky)
    #expect(String(decoding: sky, as: UTF8.self).contains("\"PRN\":65"))
    #expect(Self.decode(bytes, skyOnly: false).isEmpty)
  }

  /// A log with times and fixes decodes exactly as before: satellite data joins timed epochs.
  @Test("a log with fix sentences gives the same epochs either way")
  func logsWithFixesAreUnchanged() throws {
    let text =
      Self.cycle + sentence("GPGGA,120001,4808.9993,N,01135.0798,E,1,05,1.0,500.0,M,47.0,M,,")
      + sentence("GPRMC,120001,A,4808.9993,N,01135.0798,E,0.0,0.0,251099,,") + Self.cycle
      + sentence("GPGGA,120002,4808.9993,N,01135.0798,E,1,05,1.0,500.0,M,47.0,M,,")
    let bytes = Array(text.utf8)
    let with = Self.decode(bytes, skyOnly: true)
    #expect(with == Self.decode(bytes, skyOnly: false))
    #expect(with.count == 2 && with.allSatisfy { !$0.isSkyOnly })
    let path = "../shared/nmea/mt3339.log"
    if let data = FileManager.default.contents(atPath: path) {
      let corpus = Self.decode(Array(data), skyOnly: true)
      #expect(!corpus.isEmpty)
      #expect(corpus == Self.decode(Array(data), skyOnly: false))
    }
  }
}
