import Foundation
import NMEA
import Testing
import LocationModel
import LocationProtocol

/// One hand-made input for each rule of docs/nmea-vs-gpsd.md that gpsd 3.22's NMEA driver
/// (drivers/driver_nmea0183.c) and core (gpsd/libgpsd_core.c) apply, and that we follow.
@Suite("gpsd rules")
struct GPSDRuleTests {
  /// Three epochs as an MTK/SiRF/Quectel part sends them: GGA with an altitude, GSA saying 2D.
  static func ggaAltitudeGSA2D() -> String {
    var text = ""
    for (second, altitude) in [(0, "56.1"), (1, "56.2"), (2, "56.3")] {
      let time = "10150\(second).00"
      text += sentence("GPGGA,\(time),4807.038000,N,01131.000000,E,1,07,1.1,\(altitude),M,37.0,M,,")
      text += sentence("GPVTG,301.9,T,283.6,M,0.0,N,0.0,K,A")
      text += sentence("GPRMC,\(time),A,4807.038000,N,01131.000000,E,0.0,301.9,071020,18.3,E,A,V")
      text += sentence("GPGSA,A,2,06,07,11,19,22,28,30,,,,,,1.4,1.1,0.8,1")
    }
    return text
  }

  @Test("GSA saying 2D does not downgrade a GGA fix with an altitude from 4+ satellites (nmea_parse)")
  func gsa2DKeeps3DWithAltitude() throws {
    let (fixes, stats) = decode(Self.ggaAltitudeGSA2D())
    #expect(stats.rejectedTotal == 0)
    #expect(fixes.count == 3)
    #expect(fixes.map(\.mode) == [.fix3D, .fix3D, .fix3D])
    #expect(fixes.map(\.altitudeMSL) == [56.1, 56.2, 56.3])
    let second = try #require(fixes.dropFirst().first)
    #expect(second.time == utc(2020, 10, 7, 10, 15, 1))
    var json: [UInt8] = []
    GPSDJSON.appendTPV(second, to: &json)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
    #expect(object["mode"] as? Int == 3)
    #expect(object["altMSL"] as? Double == 56.2)
    #expect(object["altHAE"] as? Double == 93.2)
    #expect(object["epv"] as? Double == 18.4)  // VDOP 0.8 x 23 m
  }

  @Test("GSA saying 2D stays 2D when GGA has no altitude or fewer than four satellites")
  func gsa2DStays2D() throws {
    let noAltitude =
      sentence("GPGGA,101500.00,4807.038,N,01131.000,E,1,07,1.1,,M,,M,,")
      + sentence("GPRMC,101500.00,A,4807.038,N,01131.000,E,0.0,301.9,071020,,,A")
      + sentence("GPGSA,A,2,06,07,11,19,22,28,30,,,,,,1.4,1.1,0.8")
    let fix = try #require(decode(noAltitude).0.first)
    #expect(fix.mode == .fix2D)
    #expect(fix.altitudeMSL == nil)
    // RMC first, with no altitude known yet, then GGA from three satellites: 2D throughout.
    let threeSatellites =
      sentence("GPRMC,101500.00,A,4807.038,N,01131.000,E,0.0,301.9,071020,,,A")
      + sentence("GPGGA,101500.00,4807.038,N,01131.000,E,1,03,1.1,56.1,M,37.0,M,,")
      + sentence("GPGSA,A,2,06,07,11,,,,,,,,,,1.4,1.1,0.8")
    #expect(decode(threeSatellites).0.first?.mode == .fix2D)
  }

  @Test("RMC after an altitude is known is 3D, and a later 2D keeps it 3D (processRMC, nmea_parse)")
  func rmcWithKnownAltitude() throws {
    // GGA from three satellites is 2D by itself; the RMC that follows it sees the altitude.
    let sameEpoch =
      sentence("GPGGA,101500.00,4807.038,N,01131.000,E,1,03,1.1,56.1,M,37.0,M,,")
      + sentence("GPRMC,101500.00,A,4807.038,N,01131.000,E,0.0,301.9,071020,,,A")
      + sentence("GPGSA,A,2,06,07,11,,,,,,,,,,1.4,1.1,0.8")
    #expect(decode(sameEpoch).0.first?.mode == .fix3D)
    // The altitude of an epoch without a fix (no satellites) makes the next RMC 3D.
    let nextEpoch =
      sentence("GPRMC,120326,A,4221.3871,N,01322.0800,E,000.0,000.0,150305,001.4,E")
      + sentence("GPGGA,120326,4221.3871,N,01322.0800,E,1,00,3.1,746.1,M,44.2,M,,")
      + sentence("GPRMC,120327,A,4221.3872,N,01322.0800,E,000.0,000.0,150305,001.4,E")
      + sentence("GPGGA,120327,4221.3872,N,01322.0800,E,1,03,3.1,746.1,M,44.2,M,,")
      + sentence("GPGSA,A,2,01,03,14,,,,,,,,,,3.1,3.1,")
    let fixes = decode(nextEpoch).0
    #expect(fixes.last?.mode == .fix3D)
    #expect(fixes.last?.altitudeMSL == 746.1)
  }

  @Test("a GGA from three satellites after a 3D RMC is 2D unless gpsd's last timed fix had an altitude (processGGA, nmea_parse)")
  func ggaThreeSatellitesAfterRMC() throws {
    // The void epoch's GGA altitude makes the next RMC 3D, but that epoch had no time for gpsd
    // (no date from a void RMC), so no timed fix had an altitude: the GGA from three satellites
    // makes 10:21:43 2D. 10:21:43 itself had a time and an altitude, so 10:21:44 stays 3D.
    let text =
      sentence("GPRMC,102142.000,V,3340.8472,S,15117.3205,E,0.0,0.0,251112,0.0,W")
      + sentence("GPGGA,102142.000,3340.8472,S,15117.3205,E,0,02,99.0,064.19,M,22.4,M,,")
      + sentence("GPRMC,102143.000,A,3340.7732,S,15117.4478,E,6.7,155.1,251112,0.0,W")
      + sentence("GPGGA,102143.000,3340.7732,S,15117.4478,E,1,03,4.1,063.76,M,22.4,M,,")
      + sentence("GPRMC,102144.000,A,3340.7753,S,15117.4473,E,6.6,155.8,251112,0.0,W")
      + sentence("GPGGA,102144.000,3340.7753,S,15117.4473,E,1,03,4.1,063.79,M,22.4,M,,")
    let fixes = decode(text).0
    #expect(fixes.map(\.mode) == [.noFix, .fix2D, .fix3D])
    #expect(fixes.last?.altitudeMSL == 63.79)
  }
}

@Suite("gpsd rules: derived values")
struct GPSDDerivedValueTests {
  @Test("no speed sent: distance from the previous timed fix over the time between (gpsd_error_model)")
  func speedFromPositions() throws {
    // Ten-hertz GGA only, after one RMC for the date: 0.001 minute of latitude is 1.853 m here.
    let text =
      sentence("GPRMC,204132.00,A,4205.733000,N,08802.041000,W,9.415,21.404,190214,,,D")
      + sentence("GPGGA,204132.10,4205.734000,N,08802.041000,W,2,08,1.0,221.9,M,,,3,0138")
      + sentence("GPGGA,204132.20,4205.735000,N,08802.041000,W,2,08,1.0,221.9,M,,,3,0138")
      + sentence("GPGGA,204132.30,4205.735000,N,08802.041000,W,2,08,1.0,221.9,M,,,3,0138")
    let fixes = decode(text).0
    #expect(fixes.count == 4)
    #expect(abs((fixes[0].speedOverGround ?? 0) - 9.415 * 1852 / 3600) < 1e-9)  // as sent
    let first = try #require(fixes[1].speedOverGround)
    let here = try #require(fixes[1].coordinate)
    let there = try #require(fixes[0].coordinate)
    let metres = try #require(WGS84Geodesic.distance(here, there))
    #expect(abs(first - metres / 0.1) < 1e-9)
    #expect(abs(first - 18.53) < 0.05)
    #expect(fixes[3].speedOverGround == 0)
    #expect(fixes[1].courseOverGround == nil)  // gpsd 3.22 derives no course
  }

  @Test("Vincenty distance: one degree of latitude at the equator, and zero")
  func vincenty() throws {
    let d = try #require(WGS84Geodesic.distance(Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 1, longitude: 0)))
    #expect(abs(d - 110_574.389) < 0.01)
    #expect(WGS84Geodesic.distance(Coordinate(latitude: 45, longitude: 7), Coordinate(latitude: 45, longitude: 7)) == 0)
  }
}

@Suite("gpsd rules: merging an epoch")
struct GPSDMergeRuleTests {
  @Test("the last valid position of the epoch wins: GLL after GGA (gps_merge_fix)")
  func lastPositionWins() throws {
    let text =
      sentence("GPRMC,094737,A,5251.0093,N,00518.8170,E,5.6,230.5,200818,1.4,E,A")
      + sentence("GPGGA,094737,5251.0085,N,00518.8151,E,1,12,0.60,-4,M,46.8,M,,")
      + sentence("GPGLL,5251.0084,N,00518.8149,E,094737,A,A")
    let fix = try #require(decode(text).0.first)
    let c = try #require(fix.coordinate)
    #expect(abs(c.latitude - (52 + 51.0084 / 60)) < 1e-9)
    #expect(abs(c.longitude - (5 + 18.8149 / 60)) < 1e-9)
  }

  @Test("a VTG after the sentence that ends the cycle does not reach the epoch (nmea_parse cycle_enders)")
  func sentenceAfterCycleEnd() throws {
    // GGA is the last sentence with a time before the time changes, so gpsd learns that it ends
    // the cycle and reports there; each VTG arrives after the report, and the next GGA clears it.
    let text =
      sentence("GPRMC,120000,A,4807.0000,N,01131.0000,E,,,071020,,,A")
      + sentence("GPGGA,120000,4807.0000,N,01131.0000,E,1,07,1.1,56.1,M,37.0,M,,")
      + sentence("GPVTG,301.9,T,283.6,M,9.0,N,16.7,K,A")
      + sentence("GPGGA,120001,4807.0010,N,01131.0000,E,1,07,1.1,56.1,M,37.0,M,,")
      + sentence("GPVTG,301.9,T,283.6,M,9.0,N,16.7,K,A")
      + sentence("GPGGA,120002,4807.0020,N,01131.0000,E,1,07,1.1,56.1,M,37.0,M,,")
      + sentence("GPVTG,301.9,T,283.6,M,9.0,N,16.7,K,A")
    let fixes = decode(text).0
    #expect(fixes.count == 3)
    // No VTG speed (9 knots) and no course: the speed comes from the positions 1 s apart.
    for index in 1...2 {
      let here = try #require(fixes[index].coordinate)
      let there = try #require(fixes[index - 1].coordinate)
      let metres = try #require(WGS84Geodesic.distance(here, there))
      #expect(abs((fixes[index].speedOverGround ?? 0) - metres) < 1e-9)
      #expect(abs(metres - 1.853) < 0.01)
      #expect(fixes[index].courseOverGround == nil)
    }
  }

  @Test("a void RMC does not mark the end of a cycle: only GGA does until a valid RMC follows it (processRMC)")
  func voidRMCDoesNotEndCycle() throws {
    // Two void epochs (GGA quality 0, RMC status V): the void RMC registers no time, so gpsd
    // learns that GGA ends the cycle and reports 12:00:02 at its GGA, before the VTG and RMC;
    // the valid RMC then teaches it that RMC ends the cycle too, and 12:00:03 has RMC's speed.
    let text =
      sentence("GPGGA,120000,,,,,0,00,99.0,,M,,M,,") + sentence("GPRMC,120000,V,,,,,,,071020,,,N")
      + sentence("GPGGA,120001,,,,,0,00,99.0,,M,,M,,") + sentence("GPRMC,120001,V,,,,,,,071020,,,N")
      + sentence("GPGGA,120002,4807.0000,N,01131.0000,E,1,07,1.1,56.1,M,37.0,M,,")
      + sentence("GPVTG,301.9,T,283.6,M,9.0,N,16.7,K,A")
      + sentence("GPRMC,120002,A,4807.0000,N,01131.0000,E,9.0,301.9,071020,,,A")
      + sentence("GPGGA,120003,4807.0010,N,01131.0000,E,1,07,1.1,56.1,M,37.0,M,,")
      + sentence("GPVTG,301.9,T,283.6,M,9.0,N,16.7,K,A")
      + sentence("GPRMC,120003,A,4807.0010,N,01131.0000,E,9.0,301.9,071020,,,A")
    let fixes = decode(text).0
    #expect(fixes.count == 4)
    #expect(fixes[2].mode == .fix3D)
    #expect(fixes[2].speedOverGround == nil)
    #expect(fixes[2].courseOverGround == nil)
    #expect(abs((fixes[3].speedOverGround ?? 0) - 9.0 * 1852 / 3600) < 1e-9)
    #expect(fixes[3].courseOverGround == 301.9)
  }

  @Test("a GGA of the reported time that comes after the report does not change the epoch (DBT continues the cycle)")
  func lateGGA() throws {
    // After a DBT (gpsd's only cycle continuer) every later sentence without a time ends the
    // cycle; GGA 10:00:01 comes after those (VTG, ZDA), and the GLL after it is already stamped
    // 10:00:02, so gpsd's TPV for 10:00:01 keeps RMC's position.
    let text =
      sentence("GPGGA,100000,5251.0000,N,00518.0000,E,1,08,0.9,-4.0,M,46.8,M,,")
      + sentence("GPGLL,5251.0000,N,00518.0000,E,100000,A,A")
      + sentence("GPGSA,A,3,07,08,10,16,20,21,26,27,,,,,1.1,0.6,0.9")
      + sentence("SDDBT,18.0,f,5.4,M,3.0,F")
      + sentence("GPRMC,100001,A,5251.0010,N,00518.0010,E,5.6,230.5,200818,1.4,E,A")
      + sentence("GPVTG,230.5,T,229.1,M,5.6,N,10.4,K,A")
      + sentence("GPZDA,100001,20,08,2018,-01,00")
      + sentence("GPGGA,100001,5251.0020,N,00518.0020,E,1,08,0.9,-4.0,M,46.8,M,,")
      + sentence("GPGLL,5251.0030,N,00518.0030,E,100002,A,A")
      + sentence("GPGSA,A,3,07,08,10,16,20,21,26,27,,,,,1.1,0.6,0.9")
    let fixes = decode(text).0
    #expect(fixes.count == 3)
    let fix = try #require(fixes.dropFirst().first)
    #expect(fix.timeOfDay == 36_001_000)
    let c = try #require(fix.coordinate)
    #expect(abs(c.latitude - (52 + 51.0010 / 60)) < 1e-9)
    #expect(abs(c.longitude - (5 + 18.0010 / 60)) < 1e-9)
    #expect(fix.mode == .fix3D)
    #expect(fix.altitudeMSL == nil)  // GGA's altitude never reached a TPV of this time either
    #expect(abs((fix.speedOverGround ?? 0) - 5.6 * 1852 / 3600) < 1e-9)
    // The GLL stamped 10:00:02 starts the next epoch with its own position.
    #expect(fixes[2].coordinate.map { abs($0.latitude - (52 + 51.0030 / 60)) < 1e-9 } == true)
  }

  @Test("the last RMC or VTG sets speed and course; a VTG marked N or without speed does not (processVTG)")
  func lastSpeedWins() throws {
    let text =
      sentence("GPRMC,094855,A,5250.9358,N,00518.6506,E,6.3,232.6,200818,1.4,E,A")
      + sentence("GPVTG,222.3,T,220.9,M,6.6,N,12.2,K,A")
      + sentence("GPVTG,100.0,T,,M,9.9,N,18.3,K,N")
      + sentence("GPVTG,101.0,T,,M,,N,,K,A")
      // gpsd prints the epoch at a position sentence (no end of cycle is known yet): the VTGs
      // must come before it to reach the epoch's TPV.
      + sentence("GPGGA,094855,5250.9358,N,00518.6506,E,1,12,0.60,-4,M,46.8,M,,")
    let fix = try #require(decode(text).0.first)
    #expect(fix.courseOverGround == 222.3)
    #expect(abs((fix.speedOverGround ?? 0) - 6.6 * 1852 / 3600) < 1e-9)
  }

  @Test("RMC without GSA is 3D when the last GSA listed 4+ satellites or an altitude is known (processRMC)")
  func rmcThreeDWithoutAltitude() throws {
    let afterGSA =
      sentence("GPRMC,045849.000,A,3519.9048,N,13640.2631,E,0.10,92.17,270705,,")
      + sentence("GPGSA,A,3,09,05,14,26,,,,,,,,,2.9,2.2,1.9")
      + sentence("GPRMC,045850.000,A,3519.9047,N,13640.2631,E,0.11,99.12,270705,,")
    let fixes = decode(afterGSA).0
    #expect(fixes.map(\.mode) == [.fix3D, .fix3D])  // GSA's own 3D, then RMC's rule
    #expect(fixes.allSatisfy { $0.altitudeMSL == nil })
    let afterAltitude =
      sentence("GPGGA,230153,3348.607,N,11821.124,W,1,05,1.7,49.1,M,-32.4,M,,")
      + sentence("GPRMC,230154,A,3348.607,N,11821.124,W,000.0,209.4,261002,013.8,E")
    #expect(decode(afterAltitude).0.last?.mode == .fix3D)
    // With neither, RMC alone is 2D.
    #expect(decode(sentence("GPRMC,230154,A,3348.607,N,11821.124,W,000.0,209.4,261002,013.8,E")).0.first?.mode == .fix2D)
  }

  @Test("a GGA whose time does not advance adds nothing: one fix per time, as gpsd's latch_mode reports none")
  func nonAdvancingTimestamp() throws {
    let text =
      sentence("GPRMC,120000,A,4807.038,N,01131.000,E,0.0,0.0,010120,,")
      + sentence("GPGGA,120000,4807.038,N,01131.000,E,1,05,1.0,500.0,M,47.0,M,,")
      + sentence("GPGGA,120000,4807.038,N,01131.000,E,1,05,1.0,500.0,M,47.0,M,,")
      + sentence("GPGSA,A,3,01,02,03,04,05,,,,,,,,2.0,1.0,1.7")
    let fixes = decode(text).0
    #expect(fixes.count == 1)
    #expect(fixes.first?.time == utc(2020, 1, 1, 12, 0, 0))
  }
}
