import Foundation
import NMEA
import Testing
import LocationModel

/// Satellites used (`uSat`) and the SKY entries flagged used (gpsd 3.22 processGSA, processGSV,
/// json_sky_dump).
@Suite("satellites used")
struct SatellitesUsedTests {
  static func gsv(_ ids: [Int]) -> String {
    let entries = ids.map { String(format: "%02d,40,083,46", $0) }.joined(separator: ",")
    return sentence("GPGSV,1,1,\(String(format: "%02d", ids.count)),\(entries)")
  }

  @Test("an epoch without GSA: the sky view keeps the last GSA's flags and uSat counts them")
  func epochWithoutGSA() throws {
    let text =
      sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,03,0.9,545.4,M,46.9,M,,")
      + sentence("GPGSA,A,3,01,03,06,11,,,,,,,,,1.5,0.9,1.2")
      + Self.gsv([1, 3, 6, 11, 14, 17])
      + sentence("GPGGA,120001.00,4807.039,N,01131.000,E,1,03,0.9,545.4,M,46.9,M,,")
      + Self.gsv([1, 3, 6, 11, 14, 17])
    let fixes = decode(text).0
    #expect(fixes.count == 2)
    for fix in fixes {
      #expect(fix.satellitesUsed == fix.satellites.filter(\.used).count)
      #expect(fix.satellites.filter(\.used).map(\.prn) == [1, 3, 6, 11])
    }
  }

  @Test("whenever satellites are listed uSat equals the SKY entries with used:true")
  func invariantWithSkyButNoGSA() throws {
    // A receiver that sends no GSA at all: no satellite is flagged, so none is counted.
    let text =
      sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,") + Self.gsv([1, 3, 6, 11])
    let fix = try #require(decode(text).0.first)
    #expect(fix.satellites.count == 4)
    #expect(fix.satellitesUsed == 0)
  }

  @Test("GNS's count wins over GGA's capped one; without a sky view uSat is that count")
  func gnsOverGGA() throws {
    let text =
      sentence("GNGGA,120000.00,4807.038,N,01131.000,E,1,12,0.9,545.4,M,46.9,M,,")
      + sentence("GNGNS,120000.00,4807.038,N,01131.000,E,AAN,22,0.6,545.4,46.9,,,S")
    let fix = try #require(decode(text).0.first)
    #expect(fix.satellites.isEmpty)
    #expect(fix.satellitesUsed == 22)
    // GNS first, then GGA: the same.
    let reversed =
      sentence("GNGNS,120000.00,4807.038,N,01131.000,E,AAN,22,0.6,545.4,46.9,,,S")
      + sentence("GNGGA,120000.00,4807.038,N,01131.000,E,1,12,0.9,545.4,M,46.9,M,,")
    #expect(decode(reversed).0.first?.satellitesUsed == 22)
  }
}

/// Satellite numbering in SKY (gpsd 3.22 nmeaid_to_prn).
@Suite("satellite numbering")
struct SatelliteNumberingTests {
  @Test("a GP talker carrying other systems' NMEA numbers: gpsd's ranges decide the constellation")
  func gpTalkerOtherSystems() throws {
    let text =
      sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
      + sentence("GPGSA,A,3,05,65,201,302,,,,,,,,,1.5,0.9,1.2")
      + sentence("GPGSV,2,1,06,05,40,083,46,65,40,083,46,201,40,083,46,302,40,083,46")
      + sentence("GPGSV,2,2,06,193,40,083,46,100,40,083,46")
      + sentence("GQGSV,1,1,01,01,40,083,46")
    let fix = try #require(decode(text).0.first)
    let sky = try ReportedFaultTests.skyObject(fix)
    let satellites = try #require(sky["satellites"] as? [[String: Any]])
    let triples = satellites.map { [$0["PRN"] as? Int ?? -1, $0["gnssid"] as? Int ?? -1, $0["svid"] as? Int ?? -1] }
    // 100 is no satellite for gpsd (PRN 0); QZSS 193 and GQ 01 are one satellite.
    #expect(triples == [[5, 0, 5], [65, 6, 1], [401, 3, 1], [302, 2, 2], [193, 5, 1]])
    #expect(satellites.map { $0["used"] as? Bool } == [true, true, true, true, false])
    #expect(fix.satellitesUsed == 4)
  }
}

/// Navigational status (NMEA 0183 v4.11 GNS field 13, RMC field 13).
@Suite("navigational status")
struct NavigationalStatusTests {
  @Test("GNS or RMC navigational status U (unsafe) gives no position; V (no status indication) keeps it")
  func unsafeDropsPosition() throws {
    let gns =
      sentence("GNGNS,120000.00,4807.038,N,01131.000,E,AA,10,0.9,545.4,46.9,,,U")
      + sentence("GNGNS,120001.00,4807.039,N,01131.000,E,AA,10,0.9,545.4,46.9,,,V")
      + sentence("GNGNS,120002.00,4807.040,N,01131.000,E,AA,10,0.9,545.4,46.9,,,S")
      + sentence("GNGNS,120003.00,4807.041,N,01131.000,E,AA,10,0.9,545.4,46.9,,,C")
    let fixes = decode(gns).0
    #expect(fixes.map { $0.coordinate != nil } == [false, true, true, true])
    #expect(fixes.first?.mode ?? .fix3D < .fix2D)
    let rmc =
      sentence("GNRMC,120000.00,A,4807.038,N,01131.000,E,2.0,90.0,150324,,,A,U")
      + sentence("GNRMC,120001.00,A,4807.039,N,01131.000,E,2.0,90.0,150324,,,A,V")
    let rmcFixes = decode(rmc).0
    #expect(rmcFixes.map { $0.coordinate != nil } == [false, true])
    // The date and time still count.
    #expect(rmcFixes.first?.time == utc(2024, 3, 15, 12, 0, 0))
  }
}

/// The mode of epochs a receiver reports with RMC alone (gpsd 3.22 processRMC).
@Suite("RMC-only mode")
struct RMCOnlyModeTests {
  @Test("an RMC-only epoch after a 3D epoch stays 3D; after a 2D one it is 2D")
  func keepsLast3D() throws {
    var text = ""
    for second in 0..<6 {
      text += sentence(
        String(format: "GPRMC,12000%d.00,A,4807.0%d80,N,01131.0000,E,2.0,90.0,150324,,,A", second, 3 + second))
      if second % 3 == 0 { text += sentence("GPGSA,A,3,01,03,06,,,,,,,,,,1.2,0.8,0.9") }
    }
    let fixes = decode(text).0
    #expect(fixes.count == 6)
    // gpsd keeps the last fix's 3D for every RMC after the first GSA's 3D.
    #expect(fixes.dropFirst().map(\.mode) == [.fix3D, .fix3D, .fix3D, .fix3D, .fix3D])
    let twoD =
      sentence("GPRMC,120000.00,A,4807.0380,N,01131.0000,E,2.0,90.0,150324,,,A")
      + sentence("GPGSA,A,2,01,03,06,,,,,,,,,,1.2,0.8,0.9")
      + sentence("GPRMC,120001.00,A,4807.0390,N,01131.0000,E,2.0,90.0,150324,,,A")
    #expect(decode(twoD).0.map(\.mode) == [.fix2D, .fix2D])
  }
}

/// Error estimates and status (gpsd 3.22 gpsd_error_model, processGGA).
@Suite("error model")
struct ErrorModelTests {
  @Test("only DGPS (status 2) uses the DGPS error factors; RTK and PPS use the plain ones; PPS is status 9")
  func uereFactors() throws {
    for (quality, factor, status) in [(1, 19.0, 1), (2, 4.75, 2), (3, 19.0, 9), (4, 19.0, 3), (5, 19.0, 4)] {
      let text = sentence("GPGGA,120000.00,4807.038,N,01131.000,E,\(quality),08,0.9,545.4,M,46.9,M,,")
      let fix = try #require(decode(text).0.first)
      #expect(fix.eph.map { abs($0 - 0.9 * factor) < 1e-9 } == true, "quality \(quality)")
      #expect(fix.quality?.gpsdStatus == status, "quality \(quality)")
    }
  }

  @Test("an epoch without GSA keeps the last GSA's DOPs, so eph and epv stay")
  func dopsCarried() throws {
    let text =
      sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
      + sentence("GPGSA,A,3,01,03,06,11,,,,,,,,,1.5,1.0,1.2")
      + sentence("GPGGA,120001.00,4807.039,N,01131.000,E,1,08,,545.4,M,46.9,M,,")
    let fixes = decode(text).0
    #expect(fixes.count == 2)
    #expect(fixes.last?.hdop == 1.0)
    #expect(fixes.last?.vdop == 1.2)
    #expect(fixes.last?.epv.map { abs($0 - 1.2 * 23) < 1e-9 } == true)
  }

  @Test("no climb across an epoch without an altitude")
  func climbNeedsConsecutiveAltitudes() throws {
    let text =
      sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
      + sentence("GPRMC,120000.00,A,4807.038,N,01131.000,E,2.0,90.0,150324,,,A")
      + sentence("GPRMC,120001.00,A,4807.039,N,01131.000,E,2.0,90.0,150324,,,A")
      + sentence("GPGSA,A,3,01,03,06,11,,,,,,,,,1.5,1.0,1.2")
      + sentence("GPGGA,120002.00,4807.040,N,01131.000,E,1,08,0.9,547.4,M,46.9,M,,")
      + sentence("GPRMC,120002.00,A,4807.040,N,01131.000,E,2.0,90.0,150324,,,A")
    let fixes = decode(text).0
    #expect(fixes.count == 3)
    #expect(fixes[1].mode == .fix3D && fixes[1].altitudeMSL == nil)
    #expect(fixes[2].climb == nil)
  }
}
