import Foundation
import NMEA
import Testing

/// Faults reported against NMEA decoders elsewhere, each pinned with a hand-made input.
@Suite("reported decoder faults")
struct ReportedFaultTests {
  @Test("a sentence that lost its '*' from a source that sends checksums is rejected and counted")
  func lostStar() throws {
    let text =
      "$GPRMC,120000.00,A,4530.0000,N,01015.0000,E,000.00,0.0,020124,,,A*6F\r\n"
      + "$GPRMC,120001.00,A,4530.0100,N,01915.0100,E,000.00,0.0,020124,,,A5D\r\n"
      + "$GPRMC,120002.00,A,4530.0200,N,01015.0200,E,000.00,0.0,020124,,,A*6D\r\n"
    let (fixes, stats) = decode(text)
    #expect(fixes.count == 2)
    #expect(fixes.compactMap { $0.coordinate?.longitude }.allSatisfy { abs($0 - 10.25) < 0.001 })
    #expect(stats.rejectedTotal == 1)
    #expect(stats.unchecked == 0)
  }

  @Test("the same line without its '*' is rejected for its mode field, whatever the source")
  func modeIndicatorMustBeOneLetter() {
    #expect(throws: NMEAError.invalidField(.rmc, index: 12, name: "mode indicator", value: "A5D")) {
      try NMEAParser.parse("$GPRMC,120001.00,A,4530.0100,N,01915.0100,E,000.00,0.0,020124,,,A5D")
    }
    // The kind: every one-letter field of every sentence.
    let bad = [
      ("GPGLL,4916.45,N,12311.12,W,225444,A,A5", SentenceType.gll, 7),
      ("GPVTG,054.7,T,034.4,M,005.5,N,010.2,K,A7", .vtg, 9),
      ("GPRMC,225446,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,5,A", .rmc, 11),
      ("GPRMC,225446,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,E,A,5", .rmc, 13),
      ("GNGNS,224749.00,3333.4268304,N,11153.3538273,W,D5,19,0.6,406.110,-26.294,6.0,0138", .gns, 6),
    ]
    for (body, type, index) in bad {
      do {
        _ = try NMEAParser.parse(sentence(body))
        Issue.record("\(body) was accepted")
      } catch {
        guard case .invalidField(let t, let i, _, _) = error else {
          Issue.record("\(body): \(error)")
          continue
        }
        #expect(t == type && i == index, "\(body)")
      }
    }
  }

  @Test("a source that never sends checksums keeps its unchecked sentences")
  func sourceWithoutChecksums() throws {
    let text =
      sentence("GPRMC,120000.00,A,4530.0000,N,01015.0000,E,000.00,0.0,020124,,,A", checksum: false)
      + sentence("GPRMC,120001.00,A,4530.0100,N,01015.0100,E,000.00,0.0,020124,,,A", checksum: false)
    let (fixes, stats) = decode(text)
    #expect(fixes.count == 2)
    #expect(stats.unchecked == 2)
    #expect(stats.rejectedTotal == 0)
  }
}
