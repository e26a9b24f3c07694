import Foundation
import NMEA
import Testing
import LocationModel
import LocationProtocol

@Suite("NMEA sentences")
struct SentenceTests {
  // MARK: Checksums and framing of single sentences

  @Test("checksum examples from real receivers, either hex case, and *00")
  func checksums() throws {
    let mt3339 = "$GPGGA,202640.000,4404.1306,N,12118.8515,W,2,10,0.98,1127.7,M,-19.6,M,0000,0000*6C"
    #expect(try NMEAParser.parse(mt3339).hasChecksum)
    // Magellan EC-10X writes lower-case hex.
    #expect(try NMEAParser.parse("$GPRMC,205150.00,V,,,,,,,,,,,V*4a").hasChecksum)
    // A body whose XOR is zero has the real checksum 00.
    let zero = sentence("GPZDA,000000,01,01,2000,,")
    let body = "GPZDA,000000,01,01,2000,,"
    let xor = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
    // Find a body with XOR 0 by appending one balancing character in the free local-zone field.
    let balanced = body + String(UnicodeScalar(xor))
    #expect(balanced.utf8.reduce(UInt8(0)) { $0 ^ $1 } == 0)
    #expect(!zero.isEmpty)
    let parsed = try NMEAParser.parse("$\(balanced)*00")
    #expect(parsed.hasChecksum)
  }

  @Test(
    "rejections carry the reason",
    arguments: [
      ("$GPRMC,225446,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,E*00", NMEAError.checksumMismatch(stated: 0x00, computed: 0x68)),
      ("GPRMC,225446,A*68", .notASentence),
      ("$GPRMC,225446,A*6", .malformedChecksum),
      ("$GPRMC,225446,A*6G", .malformedChecksum),
      ("$GP,1,2*14", .malformedAddress),
      ("$gpgga,1*6B", .malformedAddress),
    ])
  func rejects(_ line: String, _ error: NMEAError) {
    #expect(throws: error) { try NMEAParser.parse(line) }
  }

  @Test("a sentence without a checksum is accepted and counted as unchecked")
  func unchecked() throws {
    let (fixes, stats) = decode(sentence("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,", checksum: false))
    #expect(stats.accepted == 1)
    #expect(stats.unchecked == 1)
    #expect(fixes.count == 1)
    #expect(fixes.first?.mode == .fix3D)
  }

  @Test("proprietary sentences are recognised and skipped; unknown talkers accepted")
  func proprietaryAndTalkers() throws {
    let p = try NMEAParser.parse("$PGRME,15.0,M,45.0,M,25.0,M*1C")
    #expect(p.payload == .proprietary("PGRME"))
    #expect(p.talker == nil)
    let talkers: [(String, TalkerID)] = [
      ("GP", .gps), ("GL", .glonass), ("GA", .galileo), ("GB", .beidou), ("BD", .beidou), ("GQ", .qzss), ("GI", .navic),
      ("GN", .multiGNSS), ("XX", .other("XX")),
    ]
    for (letters, talker) in talkers {
      let s = try NMEAParser.parse(sentence("\(letters)ZDA,201530.00,04,07,2002,00,00"))
      #expect(s.talker == talker)
      #expect(TalkerID(letters: letters) == talker)
      // The encoder writes the one spelling of each talker (BeiDou as GB), which parses back.
      let written = try NMEAParser.parse(sentence("\(talker.letters)ZDA,201530.00,04,07,2002,00,00"))
      #expect(written.talker == talker)
    }
    #expect(TalkerID.beidou.letters == "GB")
    #expect(TalkerID(letters: "G") == nil && TalkerID(letters: "GPS") == nil && TalkerID(letters: "G$") == nil)
    for constellation in Constellation.allCases {
      let talker = TalkerID(constellation: constellation)
      #expect(talker?.constellation == (constellation == .sbas ? .gps : constellation == .imes ? nil : constellation))
    }
    let (_, stats) = decode(sentence("PGRMT,GPS 15x-W software ver. 4.20,,,,,,,") + sentence("GPTXT,01,01,02,ANTENNA OK"))
    #expect(stats.proprietary == 1)
    #expect(stats.unsupported == 1)
  }

  // MARK: GGA

  @Test("GGA: hemispheres, 3-digit longitude, altitude, quality, DGPS fields")
  func gga() throws {
    let s = try NMEAParser.parse(sentence("GPGGA,202640.000,4404.1306,N,12118.8515,W,2,10,0.98,1127.7,M,-19.6,M,3.5,0120"))
    guard case .gga(let gga) = s.payload else {
      Issue.record("not GGA")
      return
    }
    #expect(gga.timeOfDay.map { Int($0) } == (20 * 3600 + 26 * 60 + 40) * 1000)
    #expect(abs((gga.coordinate?.latitude ?? 0) - (44 + 4.1306 / 60)) < 1e-12)
    #expect(abs((gga.coordinate?.longitude ?? 0) - -(121 + 18.8515 / 60)) < 1e-12)
    #expect(gga.quality == .dgps)
    #expect(gga.satellitesUsed == 10)
    #expect(gga.hdop == 0.98)
    #expect(gga.altitudeMSL == 1127.7)
    #expect(gga.geoidSeparation == -19.6)
    #expect(gga.dgpsAge == 3.5)
    #expect(gga.dgpsStation == 120)

    let south = try NMEAParser.parse(sentence("GNGGA,003956.00,4552.65403,S,17030.00668,E,1,12,0.64,14.2,M,1.8,M,,"))
    guard case .gga(let g2) = south.payload else {
      Issue.record("not GGA")
      return
    }
    #expect(abs((g2.coordinate?.latitude ?? 0) - -(45 + 52.65403 / 60)) < 1e-12)
    #expect(abs((g2.coordinate?.longitude ?? 0) - (170 + 30.00668 / 60)) < 1e-12)
    #expect(g2.dgpsAge == nil)
  }

  @Test("GGA quality 0 with empty fields gives no fix and no values, never zeros")
  func ggaNoFix() throws {
    let s = try NMEAParser.parse("$GPGGA,,,,,,0,,,,,,,,*66")
    guard case .gga(let gga) = s.payload else {
      Issue.record("not GGA")
      return
    }
    #expect(gga.quality == .invalid)
    #expect(gga.coordinate == nil)
    #expect(gga.altitudeMSL == nil)
    #expect(gga.hdop == nil)
    #expect(gga.timeOfDay.map { Int($0) } == nil)
    let (fixes, _) = decode(sentence("GPGGA,120000.00,,,,,0,00,99.99,,,,,,"))
    #expect(fixes.count == 1)
    #expect(fixes.first?.mode == .noFix)
    #expect(fixes.first?.coordinate == nil)
    #expect(fixes.first?.altitudeMSL == nil)
  }

  @Test(
    "invalid GGA fields are rejected with their index and name",
    arguments: [
      ("GPGGA,126000,4404.1306,N,12118.8515,W,1,10,0.98,1127.7,M,-19.6,M,,", 1, "UTC time"),
      ("GPGGA,120000,4404.1306,X,12118.8515,W,1,10,0.98,1127.7,M,-19.6,M,,", 3, "latitude hemisphere"),
      ("GPGGA,120000,4460.0000,N,12118.8515,W,1,10,0.98,1127.7,M,-19.6,M,,", 2, "latitude"),
      ("GPGGA,120000,4404.1306,N,18118.8515,W,1,10,0.98,1127.7,M,-19.6,M,,", 4, "longitude"),
      ("GPGGA,120000,4404.1306,N,12118.8515,W,9,10,0.98,1127.7,M,-19.6,M,,", 6, "quality indicator"),
      ("GPGGA,120000,4404.1306,N,12118.8515,W,1,10,0.98,11x7.7,M,-19.6,M,,", 9, "altitude"),
    ])
  func ggaInvalid(_ body: String, _ index: Int, _ name: String) {
    expectInvalidField(body, .gga, index, name)
  }

  /// Parses `body` (a sentence without `$` and checksum) and expects `NMEAError.invalidField` for
  /// the field at `index` (1-based, as the standard counts) named `name`.
  private func expectInvalidField(
    _ body: String, _ type: SentenceType, _ index: Int, _ name: String,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    do {
      _ = try NMEAParser.parse(sentence(body))
      Issue.record("accepted \(body)", sourceLocation: sourceLocation)
    } catch {
      guard case .invalidField(let t, let i, let n, _) = error else {
        Issue.record("wrong error \(error)", sourceLocation: sourceLocation)
        return
      }
      #expect(t == type, sourceLocation: sourceLocation)
      #expect(i == index, sourceLocation: sourceLocation)
      #expect(n == name, sourceLocation: sourceLocation)
    }
  }

  // MARK: RMC

  @Test("RMC: NMEA 2.0, 2.3 and 4.10 layouts, speed, course, date, variation, status")
  func rmc() throws {
    let v2 = try NMEAParser.parse("$GPRMC,225446,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,E*68")
    guard case .rmc(let r) = v2.payload else {
      Issue.record("not RMC")
      return
    }
    #expect(r.timeOfDay.map { Int($0) } == (22 * 3600 + 54 * 60 + 46) * 1000)
    #expect(r.isValid == true)
    #expect(r.speedOverGroundKnots == 0.5)
    #expect(r.courseOverGround == 54.7)
    #expect(r.date == CivilDate.days(year: 1994, month: 11, day: 19))
    #expect(r.magneticVariation == 20.3)
    #expect(r.modeIndicator == nil)

    let v41 = try NMEAParser.parse(sentence("GNRMC,003956.00,A,4552.65403,S,17030.00668,E,0.025,,120419,5.5,W,A,V"))
    guard case .rmc(let r4) = v41.payload else {
      Issue.record("not RMC")
      return
    }
    #expect(r4.courseOverGround == nil)
    #expect(r4.magneticVariation == -5.5)
    #expect(r4.modeIndicator == UInt8(ascii: "A"))
    #expect(r4.navigationalStatus == UInt8(ascii: "V"))
    #expect(r4.date == CivilDate.days(year: 2019, month: 4, day: 12))
  }

  @Test(
    "RMC: a variation that is not a number, or beyond 180 degrees, is an invalid field like any other; a direction other than E or W leaves it out",
    arguments: ["abc", "inf", "nan", "1e3", "1e309", "99999999999999999999999", "200.0", "-3.0", "3..0"])
  func rmcInvalidVariation(_ variation: String) {
    expectInvalidField(
      "GPRMC,120000.00,A,3000.000,N,06000.000,E,1.0,45.0,010125,\(variation),W,A", .rmc, 10,
      "magnetic variation")
  }

  @Test("RMC: variation 180.0 W is -180; with direction N (Motorola T805) or none it is left out")
  func rmcVariationLimits() throws {
    for (fields, expected) in [("180.0,W", -180.0), ("0.5,E", 0.5), ("3.0,N", nil), ("3.0,", nil), (",W", nil)] as [(String, Double?)] {
      let parsed = try NMEAParser.parse(sentence("GPRMC,120000.00,A,3000.000,N,06000.000,E,1.0,45.0,010125,\(fields),A"))
      guard case .rmc(let r) = parsed.payload else {
        Issue.record("not RMC")
        return
      }
      #expect(r.magneticVariation == expected, "\(fields)")
    }
  }

  @Test("RMC status V and an all-empty RMC give no fix and no position")
  func rmcVoid() throws {
    let (fixes, stats) = decode(
      sentence("GPRMC,205150.00,V,,,,,,,,,,,V") + sentence("GPRMC,,V,,,,,,,,,,N") + sentence("GPRMC,,,,,,,,,,,,"))
    #expect(stats.rejectedTotal == 0)
    #expect(fixes.count == 3)
    #expect(fixes.map(\.mode) == [.noFix, .noFix, .unknown])
    #expect(fixes.allSatisfy { $0.coordinate == nil && $0.speedOverGround == nil && $0.courseOverGround == nil })
    #expect(fixes.first?.timeOfDay.map { Int($0) } == (20 * 3600 + 51 * 60 + 50) * 1000)
  }

  @Test("two-digit years: 80-99 are 1980-1999, 00-79 are 2000-2079")
  func twoDigitYears() throws {
    for (yy, year) in [("99", 1999), ("80", 1980), ("00", 2000), ("26", 2026), ("79", 2079)] {
      let s = try NMEAParser.parse(sentence("GPRMC,120000,A,4807.038,N,01131.000,E,0.0,0.0,0101\(yy),,"))
      guard case .rmc(let r) = s.payload else {
        Issue.record("not RMC")
        continue
      }
      #expect(r.date == CivilDate.days(year: year, month: 1, day: 1))
    }
    #expect(throws: NMEAError.self) { try NMEAParser.parse(sentence("GPRMC,120000,A,4807.038,N,01131.000,E,0.0,0.0,300223,,")) }
  }

  // MARK: GLL, VTG, ZDA, GNS, GST

  @Test("GLL: position, time, status")
  func gll() throws {
    let s = try NMEAParser.parse("$GPGLL,4808.9993,N,01135.0798,E,000345.03,A,A*66")
    guard case .gll(let g) = s.payload else {
      Issue.record("not GLL")
      return
    }
    #expect(g.timeOfDay.map { Int($0) } == 3 * 60_000 + 45_030)
    #expect(g.isValid == true)
    #expect(abs((g.coordinate?.longitude ?? 0) - (11 + 35.0798 / 60)) < 1e-12)
    let (fixes, _) = decode(sentence("GPGLL,4808.9993,N,01135.0798,E,000345.03,A,A"))
    #expect(fixes.first?.mode == .fix2D)
  }

  @Test("VTG: course true and speed in knots, km/h fallback, empty course stays unknown")
  func vtg() throws {
    let s = try NMEAParser.parse(sentence("GPVTG,225.97,T,,M,0.03,N,0.06,K,D"))
    guard case .vtg(let v) = s.payload else {
      Issue.record("not VTG")
      return
    }
    #expect(v.courseOverGround == 225.97)
    #expect(v.speedOverGroundKnots == 0.03)
    #expect(v.speedOverGroundKmh == 0.06)
    let (fixes, _) = decode(
      sentence("GPVTG,,T,,M,,N,36.0,K,A") + sentence("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"))
    #expect(fixes.first?.courseOverGround == nil)
    #expect(abs((fixes.first?.speedOverGround ?? 0) - 10) < 1e-12)
  }

  @Test("ZDA: four-digit year gives the date to GGA epochs")
  func zda() throws {
    let (fixes, _) = decode(
      sentence("GPGGA,202640.000,4404.1306,N,12118.8515,W,2,10,0.98,1127.7,M,-19.6,M,0000,0000")
        + sentence("GPZDA,202640.000,13,04,2015,,"))
    #expect(fixes.count == 1)
    #expect(fixes.first?.time == utc(2015, 4, 13, 20, 26, 40))
    #expect(throws: NMEAError.self) { try NMEAParser.parse(sentence("GPZDA,202640.000,31,04,2015,,")) }
  }

  @Test("GNS: mode letters per constellation, per-talker lines without position")
  func gns() throws {
    let (fixes, stats) = decode(
      "$GNGNS,235647.00,3403.47162394,N,11711.80927093,W,FFNNN,10,1.2,403.600,-32.133,,*2E\r\n"
        + "$GPGNS,235647.00,,,,,,6,,,,1.0,0*4B\r\n$GLGNS,235647.00,,,,,,4,,,,1.0,0*55\r\n")
    #expect(stats.rejectedTotal == 0)
    #expect(fixes.count == 1)
    let fix = try #require(fixes.first)
    #expect(fix.mode == .fix3D)
    #expect(fix.quality == .rtkFloat)
    #expect(fix.satellitesUsed == 10)
    #expect(fix.altitudeMSL == 403.6)
    #expect(abs((fix.altitudeHAE ?? 0) - 371.467) < 1e-9)
    #expect(abs((fix.coordinate?.latitude ?? 0) - (34 + 3.47162394 / 60)) < 1e-12)
  }

  @Test("GST: one-sigma errors reach the fix")
  func gst() throws {
    let (fixes, _) = decode(
      sentence("GNGGA,003956.00,4552.65403,S,17030.00668,E,1,12,0.64,14.2,M,1.8,M,,")
        + sentence("GNGST,003956.00,17,6.6,4.4,90,4.4,6.6,7.4"))
    let estimates = try #require(fixes.first?.errorEstimates)
    #expect(estimates.rangeRMS == 17)
    #expect(estimates.latitude == 4.4)
    #expect(estimates.longitude == 6.6)
    #expect(estimates.altitude == 7.4)
    #expect(estimates.orientation == 90)
  }

  // MARK: GSA, GSV and the sky view

  @Test("one GSA per constellation in the same epoch: all used satellites, keyed by constellation")
  func multiGSA() throws {
    let text =
      sentence("GNGGA,003956.00,4552.65403,S,17030.00668,E,1,12,0.64,14.2,M,1.8,M,,")
      + sentence("GNGSA,A,3,02,05,,,,,,,,,,,1.05,0.64,0.83,1")
      + sentence("GNGSA,A,3,65,,,,,,,,,,,,1.05,0.64,0.83,2")
      + sentence("GNGSA,A,3,05,,,,,,,,,,,,1.05,0.64,0.83,3")
      + sentence("GPGSV,1,1,03,02,26,314,29,05,50,265,37,07,10,020,,1")
      + sentence("GLGSV,1,1,01,65,40,100,30,1")
      + sentence("GAGSV,1,1,02,05,60,200,41,07,11,300,22,7")
    let (fixes, stats) = decode(text)
    #expect(stats.rejectedTotal == 0)
    let fix = try #require(fixes.first)
    #expect(fix.pdop == 1.05)
    #expect(fix.hdop == 0.64)
    #expect(fix.vdop == 0.83)
    #expect(fix.satellitesInView == 6)
    let used = Set(fix.satellites.filter(\.used).map { "\($0.constellation)-\($0.prn)" })
    #expect(used == ["gps-2", "gps-5", "glonass-65", "galileo-5"])
    let gps7 = fix.satellites.first { $0.constellation == .gps && $0.prn == 7 }
    #expect(gps7?.snr == nil)
    #expect(gps7?.elevation == 10)
    #expect(gps7?.used == false)
    #expect(fix.satellites.first { $0.constellation == .galileo && $0.prn == 5 }?.signalID == 7)
  }

  @Test("GSV: a sequence split over talkers is keyed by constellation, not talker")
  func gsvAcrossTalkers() throws {
    let text =
      sentence("GNGGA,235647.00,3403.47162394,N,11711.80927093,W,5,10,1.2,403.600,M,-32.133,M,1.0,0000")
      + sentence("GPGSV,4,1,13,26,33,050,38,9,40,314,43,3,55,188,44,23,68,354,50")
      + sentence("GLGSV,4,3,13,73,52,022,52,74,62,247,50")
      + sentence("GAGSV,4,4,13,19,82,349,44")
    let (fixes, _) = decode(text)
    let sats = try #require(fixes.first).satellites
    #expect(sats.count == 7)
    #expect(sats.filter { $0.constellation == .glonass }.map(\.prn) == [73, 74])
    #expect(sats.first { $0.constellation == .galileo }?.prn == 19)
    #expect(sats.first { $0.prn == 9 }?.azimuth == 314)
  }

  // MARK: Time and epochs

  @Test("time with and without fraction; sentences of one time form one epoch")
  func epochs() throws {
    let text =
      sentence("GPGGA,113258,3238.9156,N,10822.4477,W,2,09,0.9,1578.8,M,-24.6,M,,")
      + sentence("GPRMC,113258,A,3238.9156,N,10822.4477,W,005.0,246.2,181022,009.3,E")
      + sentence("GPGGA,113258.5,3238.9150,N,10822.4490,W,2,09,0.9,1578.9,M,-24.6,M,,")
      + sentence("GPRMC,113258.5,A,3238.9150,N,10822.4490,W,005.0,246.0,181022,009.3,E")
    let (fixes, _) = decode(text)
    #expect(fixes.count == 2)
    #expect(fixes.map(\.time) == [utc(2022, 10, 18, 11, 32, 58), utc(2022, 10, 18, 11, 32, 58, ms: 500)])
    #expect(fixes.allSatisfy { $0.mode == .fix3D })
    #expect(abs((fixes[0].speedOverGround ?? 0) - 5 * 1852 / 3600) < 1e-12)
    #expect(fixes[0].courseOverGround == 246.2)
    // Climb from the altitude change over half a second.
    #expect(abs((fixes[1].climb ?? 0) - 0.2) < 1e-9)
  }

  @Test("midnight rollover carries the date when only time-of-day sentences follow")
  func midnight() throws {
    let text =
      sentence("GPRMC,235959,A,4807.038,N,01131.000,E,0.0,0.0,311299,,")
      + sentence("GPGGA,235959,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
      + sentence("GPGGA,000000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
      + sentence("GPGGA,000001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
    let (fixes, _) = decode(text)
    // Year rollover too: 1999-12-31 -> 2000-01-01.
    #expect(fixes.map(\.time) == [utc(1999, 12, 31, 23, 59, 59), utc(2000, 1, 1, 0, 0, 0), utc(2000, 1, 1, 0, 0, 1)])
  }

  @Test("GGA before any date gives a fix with time of day only")
  func noDateYet() throws {
    let (fixes, _) = decode(sentence("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"))
    #expect(fixes.first?.time == nil)
    #expect(fixes.first?.timeOfDay.map { Int($0) } == 12 * 3_600_000)
    #expect(fixes.first?.altitudeHAE == 545.4 + 46.9)
  }

  @Test("a date long before the established one (week-rollover garbage) is not accepted")
  func weekRollover() throws {
    let text =
      sentence("GPRMC,000345.03,A,4808.9993,N,01135.0798,E,0.0,0.0,070419,,")
      + sentence("GPRMC,000429.00,V,,,,,,,220899,,")
    let (fixes, _) = decode(text)
    #expect(fixes.map(\.time) == [utc(2019, 4, 7, 0, 3, 45, ms: 30), utc(2019, 4, 7, 0, 4, 29)])
  }

  @Test("GSA 2D wins over a GGA from three satellites, a void RMC wins over GSA")
  func modeReconciliation() throws {
    let twoD =
      sentence("GPGGA,120000,4807.038,N,01131.000,E,1,03,2.0,545.4,M,46.9,M,,")
      + sentence("GPGSA,A,2,01,02,03,,,,,,,,,,2.5,2.0,1.5")
    #expect(decode(twoD).0.first?.mode == .fix2D)
    let voided =
      sentence("GPRMC,120000,V,4807.038,N,01131.000,E,0.0,0.0,010120,,")
      + sentence("GPGSA,A,3,01,02,03,04,,,,,,,,,2.5,2.0,1.5")
    let fix = try #require(decode(voided).0.first)
    #expect(fix.mode == .noFix)
    #expect(fix.coordinate == nil)
  }

  @Test("TPV JSON: gpsd field names, milliseconds, unknown fields left out")
  func tpvJSON() throws {
    let (fixes, _) = decode(
      sentence("GPGGA,202640.000,4404.1306,N,12118.8515,W,2,10,0.98,1127.7,M,-19.6,M,0000,0000")
        + sentence("GPRMC,202640.000,A,4404.1306,N,12118.8515,W,0.03,225.97,130415,,,D"))
    var out: [UInt8] = []
    GPSDJSON.appendTPV(try #require(fixes.first), to: &out)
    let text = String(decoding: out, as: UTF8.self)
    // magvar is gpsd's model value for an RMC without one (mt3339.log.chk prints the same 14.4).
    #expect(
      text
        == #"{"class":"TPV","mode":3,"status":2,"time":"2015-04-13T20:26:40.000Z","lat":44.068843333,"lon":-121.314191667,"altHAE":1108.100,"altMSL":1127.700,"track":225.9700,"magvar":14.4,"speed":0.015,"geoidSep":-19.600,"eph":4.655}"#
    )
    var noFix: [UInt8] = []
    GPSDJSON.appendTPV(Fix(mode: .noFix), to: &noFix)
    #expect(String(decoding: noFix, as: UTF8.self) == #"{"class":"TPV","mode":1}"#)
  }

  @Test("SKY JSON: DOPs, counts and satellites with gnssid and used flags")
  func skyJSON() throws {
    let (fixes, _) = decode(
      sentence("GNGGA,003956.00,4552.65403,S,17030.00668,E,1,12,0.64,14.2,M,1.8,M,,")
        + sentence("GNGSA,A,3,02,65,,,,,,,,,,,1.05,0.64,0.83")
        + sentence("GPGSV,1,1,02,02,26,314,29,07,10,020,")
        + sentence("GLGSV,1,1,01,65,40,100,30"))
    var out: [UInt8] = []
    GPSDJSON.appendSKY(try #require(fixes.first), to: &out)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(out)) as? [String: Any])
    #expect(object["class"] as? String == "SKY")
    #expect(object["nSat"] as? Int == 3)
    #expect(object["uSat"] as? Int == 2)  // the GSA's two, not GGA's 12
    #expect(object["pdop"] as? Double == 1.05)
    let satellites = try #require(object["satellites"] as? [[String: Any]])
    #expect(satellites.map { $0["PRN"] as? Int } == [2, 7, 65])
    #expect(satellites.map { $0["gnssid"] as? Int } == [0, 0, 6])
    #expect(satellites.map { $0["used"] as? Bool } == [true, false, true])
    #expect(satellites[1]["ss"] == nil)
    #expect(satellites[0]["az"] as? Double == 314)
  }
}
