import Foundation
import NMEA
import Testing
import LocationModel
import LocationProtocol

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
    // The missing checksum is the reason counted: the line is refused for it before its fields
    // are read (a lost '*' also runs the checksum into the last field).
    #expect(stats.rejected == [.missingChecksum: 1])
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

  /// A multi-constellation epoch: GGA says 12 (its two-digit field, capped), the GSAs list 22.
  static func twentyTwoUsed() -> String {
    sentence("GNGGA,003956.00,4552.65403,S,17030.00668,E,1,12,0.64,14.2,M,1.8,M,,")
      + sentence("GNRMC,003956.00,A,4552.65403,S,17030.00668,E,0.025,,120419,,,A,V")
      + sentence("GNGSA,A,3,01,03,06,11,14,17,19,22,24,27,,,1.05,0.64,0.83,1")
      + sentence("GNGSA,A,3,66,67,75,76,82,,,,,,,,1.05,0.64,0.83,2")
      + sentence("GNGSA,A,3,02,07,30,,,,,,,,,,1.05,0.64,0.83,3")
      + sentence("GNGSA,A,3,06,27,29,35,,,,,,,,,1.05,0.64,0.83,4")
      + sentence("GPGSV,3,1,10,01,40,083,46,03,17,308,41,06,07,344,39,11,22,228,45,1")
      + sentence("GPGSV,3,2,10,14,40,083,46,17,17,308,41,19,07,344,39,22,22,228,45,1")
      + sentence("GPGSV,3,3,10,24,40,083,46,27,17,308,41,1")
      + sentence("GLGSV,2,1,05,66,40,083,46,67,17,308,41,75,07,344,39,76,22,228,45,1")
      + sentence("GLGSV,2,2,05,82,40,083,46,1")
      + sentence("GAGSV,1,1,03,02,40,083,46,07,17,308,41,30,07,344,39,7")
      + sentence("GBGSV,2,1,05,06,40,083,46,27,17,308,41,29,07,344,39,35,22,228,45,1")
      + sentence("GBGSV,2,2,05,40,40,083,,1")
  }

  static func skyObject(_ fix: Fix) throws -> [String: Any] {
    var out: [UInt8] = []
    GPSDJSON.appendSKY(fix, to: &out)
    return try #require(try JSONSerialization.jsonObject(with: Data(out)) as? [String: Any])
  }

  @Test("uSat counts every satellite the epoch's GSAs flag used, beyond GGA's 12, and equals SKY used:true")
  func satellitesUsedBeyondTwelve() throws {
    let fix = try #require(decode(Self.twentyTwoUsed()).0.first)
    #expect(fix.satellitesUsed == 22)
    let sky = try Self.skyObject(fix)
    let satellites = try #require(sky["satellites"] as? [[String: Any]])
    #expect(sky["uSat"] as? Int == 22)
    #expect(satellites.filter { $0["used"] as? Bool == true }.count == 22)
    #expect(satellites.count == 23)
  }

  @Test("GNS without GSA: its count, not GGA's capped one")
  func gnsCount() throws {
    let text =
      sentence("GNGNS,224749.00,3333.4268304,N,11153.3538273,W,DD,19,0.6,406.110,-26.294,,")
      + sentence("GNRMC,224749.00,A,3333.4268304,N,11153.3538273,W,0.0,,120419,,,D")
    #expect(decode(text).0.first?.satellitesUsed == 19)
  }

  @Test("SKY PRN uses gpsd's numbering per constellation, with gnssid and svid; GPS 27 and BeiDou 27 differ")
  func skyNumbering() throws {
    let fix = try #require(decode(Self.twentyTwoUsed()).0.first)
    let satellites = try #require(try Self.skyObject(fix)["satellites"] as? [[String: Any]])
    let prns = satellites.compactMap { $0["PRN"] as? Int }
    #expect(Set(prns).count == prns.count, "PRNs collide: \(prns)")
    func entry(gnssid: Int, svid: Int) -> [String: Any]? {
      satellites.first { $0["gnssid"] as? Int == gnssid && $0["svid"] as? Int == svid }
    }
    #expect(entry(gnssid: 0, svid: 27)?["PRN"] as? Int == 27)
    #expect(entry(gnssid: 3, svid: 27)?["PRN"] as? Int == 427)
    #expect(entry(gnssid: 2, svid: 30)?["PRN"] as? Int == 330)
    #expect(entry(gnssid: 6, svid: 2)?["PRN"] as? Int == 66)
    #expect(entry(gnssid: 3, svid: 40)?["used"] as? Bool == false)
    // NMEA 4.0 extended numbers name the same satellites: BeiDou 227 is BeiDou 27.
    #expect(Satellite(constellation: .beidou, prn: 227).gpsdPRN == 427)
    #expect(Satellite(constellation: .beidou, prn: 427).svid == 27)
    #expect(Satellite(constellation: .sbas, prn: 46).svid == 133)
    #expect(Satellite(constellation: .qzss, prn: 193).gpsdPRN == 193)
  }

  @Test("GLL-only fixes carry status from GLL's status and mode letters")
  func gllStatus() throws {
    let text =
      sentence("GPGLL,4916.45,N,12311.12,W,225444,A,D") + sentence("GPGLL,4916.46,N,12311.12,W,225445,A,A")
      + sentence("GPGLL,4916.47,N,12311.12,W,225446,A,N") + sentence("GPGLL,4916.48,N,12311.12,W,225447,A")
    let fixes = decode(text).0
    #expect(fixes.map(\.mode) == [.fix2D, .fix2D, .noFix, .fix2D])
    var statuses: [Int?] = []
    for fix in fixes {
      var out: [UInt8] = []
      GPSDJSON.appendTPV(fix, to: &out)
      let object = try #require(try JSONSerialization.jsonObject(with: Data(out)) as? [String: Any])
      statuses.append(object["status"] as? Int)
    }
    #expect(statuses == [2, 1, nil, 1])
  }
}
