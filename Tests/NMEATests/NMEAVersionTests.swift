import LocationModel
import Testing

@testable import NMEA

/// 2026-03-14T12:35:19.20Z in milliseconds since 1970.
private let epochTime: Int64 = 1_773_491_719_200

/// A multi-GNSS epoch as the simulator's sky gives it: GPS, SBAS, GLONASS, Galileo, BeiDou,
/// QZSS and NavIC satellites, some used, with GST error estimates.
private func multiGNSSFix() -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.time = epochTime
  fix.quality = .gps
  fix.coordinate = Coordinate(latitude: 52.516_275, longitude: 13.377_704)
  fix.altitudeMSL = 34.5
  fix.geoidSeparation = 39.42
  fix.speedOverGround = 13.5
  fix.courseOverGround = 271.25
  fix.hdop = 0.71
  fix.vdop = 1.12
  fix.pdop = 1.33
  var errors = ErrorEstimates()
  errors.rangeRMS = 3.25
  errors.semiMajor = 2.5
  errors.semiMinor = 1.75
  errors.orientation = 47.5
  errors.latitude = 2.12
  errors.longitude = 1.98
  errors.altitude = 3.6
  fix.errorEstimates = errors
  var satellites: [Satellite] = []
  for (i, prn) in [2, 5, 12, 13, 15, 18, 20, 25, 29].enumerated() {
    satellites.append(
      Satellite(
        constellation: .gps, prn: prn, elevation: Double(10 + 8 * i), azimuth: Double(40 * i),
        snr: Double(30 + i), used: i % 4 != 3))
  }
  satellites.append(
    Satellite(constellation: .sbas, prn: 123, elevation: 28, azimuth: 160, snr: 40, used: false))
  for (i, slot) in [1, 7, 8, 22, 23].enumerated() {
    satellites.append(
      Satellite(
        constellation: .glonass, prn: 64 + slot, elevation: Double(15 + 11 * i),
        azimuth: Double(300 - 20 * i), snr: Double(28 + i), used: i != 2))
  }
  for (i, svid) in [3, 11, 24, 36].enumerated() {
    satellites.append(
      Satellite(
        constellation: .galileo, prn: svid, elevation: Double(20 + 9 * i),
        azimuth: Double(90 + 25 * i), snr: Double(35 + i), used: i < 3))
  }
  for (i, svid) in [6, 19, 45, 59].enumerated() {
    satellites.append(
      Satellite(
        constellation: .beidou, prn: svid, elevation: Double(12 + 14 * i),
        azimuth: Double(200 + 30 * i), snr: Double(31 + i), used: i != 0))
  }
  satellites.append(
    Satellite(constellation: .qzss, prn: 2, elevation: 33, azimuth: 170, snr: 41, used: true))
  satellites.append(
    Satellite(constellation: .navic, prn: 5, elevation: 9, azimuth: 110, snr: 22, used: false))
  fix.satellites = satellites
  fix.satellitesUsed = satellites.filter(\.used).count
  return fix
}

/// The satellites `version` can name, keyed as the decoder reports them.
private func skyKeys(_ satellites: [Satellite]) -> Set<String> {
  Set(
    satellites.map {
      "\($0.constellation)-\($0.svid)-\($0.elevation ?? -1)-\($0.azimuth ?? -1)-\($0.snr ?? -1)-\($0.used)"
    })
}

private func decodeAll(_ bytes: [UInt8]) -> ([Fix], NMEAStatistics) {
  var decoder = NMEADecoder()
  var fixes: [Fix] = []
  decoder.feed(bytes) { fixes.append($0.fix) }
  decoder.finish { fixes.append($0.fix) }
  return (fixes, decoder.statistics)
}

private func fields(_ line: String) -> [String] {
  let body = line.dropFirst().prefix { $0 != "*" }
  return body.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
}

@Suite struct NMEAVersionTests {
  @Test(arguments: NMEAVersion.allCases)
  func everyVersionDecodesBackToTheSameFix(_ version: NMEAVersion) throws {
    let fix = multiGNSSFix()
    var bytes: [UInt8] = []
    NMEAEncoder(version: version).encode(fix, into: &bytes)
    var next = fix
    next.time = epochTime + 1000
    NMEAEncoder(version: version).encode(next, into: &bytes)
    let (decoded, statistics) = decodeAll(bytes)
    #expect(statistics.rejectedTotal == 0 && statistics.unsupported == 0, "\(statistics.summary)")
    try #require(decoded.count == 2)
    let back = decoded[0]
    let nameable = fix.satellites.filter { NMEAEncoder.numbering(of: $0, version: version) != nil }
    #expect(back.time == fix.time)
    #expect(back.mode == .fix3D)
    #expect(back.quality == .gps)
    let a = try #require(fix.coordinate)
    let b = try #require(back.coordinate)
    #expect(abs(a.latitude - b.latitude) < 2e-8 && abs(a.longitude - b.longitude) < 2e-8)
    #expect(back.altitudeMSL == fix.altitudeMSL && back.geoidSeparation == fix.geoidSeparation)
    #expect(abs((back.speedOverGround ?? .nan) - 13.5) < 0.0006)
    #expect(back.courseOverGround == fix.courseOverGround)
    #expect(back.hdop == fix.hdop && back.vdop == fix.vdop && back.pdop == fix.pdop)
    #expect(back.errorEstimates == fix.errorEstimates)
    #expect(skyKeys(back.satellites) == skyKeys(nameable))
    #expect(back.satellitesUsed == nameable.filter(\.used).count)
    #expect(back.navigationalStatus == (version == .v2_3 ? nil : "S"))
    #expect(decoded[1].time == next.time)
  }

  @Test func versionsNameTheSystemsTheyDefine() {
    let fix = multiGNSSFix()
    let constellations = { (version: NMEAVersion) in
      Set(
        fix.satellites.filter { NMEAEncoder.numbering(of: $0, version: version) != nil }.map(
          \.constellation))
    }
    #expect(constellations(.v2_3) == [.gps, .sbas, .glonass, .qzss])
    #expect(constellations(.v4_10) == [.gps, .sbas, .glonass, .qzss, .galileo, .beidou])
    #expect(constellations(.v4_11) == [.gps, .sbas, .glonass, .qzss, .galileo, .beidou, .navic])
    let qzss = Satellite(constellation: .qzss, prn: 2)
    #expect(
      NMEAEncoder.numbering(of: qzss, version: .v4_10).map { [$0.number, $0.system] } == [194, 1])
    #expect(
      NMEAEncoder.numbering(of: qzss, version: .v4_11).map { [$0.number, $0.system] } == [2, 5])
    let sbas = Satellite(constellation: .sbas, prn: 123)
    #expect(NMEAEncoder.numbering(of: sbas, version: .v2_3)?.number == 36)
    let glonass = Satellite(constellation: .glonass, prn: 3)
    #expect(NMEAEncoder.numbering(of: glonass, version: .v4_11)?.number == 67)
  }

  @Test func gsaAndGSVCarrySystemAndSignalIDsFrom4_10() {
    let fix = multiGNSSFix()
    for version in NMEAVersion.allCases {
      let lines = NMEAEncoder(version: version).encode(fix)
      let gsa = lines.filter { $0.dropFirst(3).hasPrefix("GSA") }.map(fields)
      #expect(gsa.allSatisfy { $0[0] == "GNGSA" })
      let gsv = lines.filter { $0.dropFirst(3).hasPrefix("GSV") }.map(fields)
      switch version {
      case .v2_3:
        #expect(gsa.count == 2 && gsa.allSatisfy { $0.count == 18 })
        #expect(Set(gsv.map { $0[0] }) == ["GPGSV", "GLGSV"])
        #expect(gsv.allSatisfy { ($0.count - 4) % 4 == 0 })
      case .v4_10:
        #expect(gsa.map(\.last) == ["1", "2", "3", "4"])
        #expect(Set(gsv.map { $0[0] }) == ["GPGSV", "GLGSV", "GAGSV", "GBGSV"])
        #expect(gsv.allSatisfy { ($0.count - 4) % 4 == 1 })
        #expect(gsv.filter { $0[0] == "GAGSV" }.allSatisfy { $0.last == "7" })
      case .v4_11:
        #expect(gsa.map(\.last) == ["1", "2", "3", "4", "5"])
        #expect(Set(gsv.map { $0[0] }) == ["GPGSV", "GLGSV", "GAGSV", "GBGSV", "GQGSV", "GIGSV"])
      }
      // Every GSA of the epoch gives the combined solution's DOPs.
      #expect(gsa.allSatisfy { Array($0[15...17]) == ["1.33", "0.71", "1.12"] })
    }
  }

  @Test func gnsAndNavigationalStatusFollowTheVersion() throws {
    let fix = multiGNSSFix()
    let v23 = NMEAEncoder(version: .v2_3).encode(fix)
    #expect(!v23.contains { $0.hasPrefix("$GNGNS") })
    let rmc23 = fields(try #require(v23.first { $0.hasPrefix("$GNRMC") }))
    #expect(rmc23.count == 13 && rmc23.last == "A")
    let gga23 = fields(try #require(v23.first { $0.hasPrefix("$GNGGA") }))
    #expect(gga23[7] == "12", "2.3 GGA counts 00-12")
    for (version, letters) in [(NMEAVersion.v4_10, "AAAA"), (.v4_11, "AAAAAN")] {
      let lines = NMEAEncoder(version: version).encode(fix)
      let gns = fields(try #require(lines.first { $0.hasPrefix("$GNGNS") }))
      #expect(gns[6] == letters)
      #expect(gns[7] == String(fix.satellitesUsed ?? 0))
      #expect(gns.last == "S")
      // HDOP, altitude and separation as GGA writes them, and GGA after GNS: gpsd reads the
      // altitude of the epoch's last sentence with one.
      let gga = fields(try #require(lines.first { $0.hasPrefix("$GNGGA") }))
      let order = lines.map { String($0.dropFirst(3).prefix(3)) }
      #expect(Array(order.prefix(4)) == ["RMC", "VTG", "GNS", "GGA"])
      #expect(gns[8] == gga[8] && gns[8] == "0.71")
      #expect(gns[9] == gga[9] && gns[9] == "34.50")
      #expect(gns[10] == gga[11] && gns[10] == "39.42")
      #expect(lines.allSatisfy { $0.utf8.count <= NMEAEncoder.maximumSentenceLength })
      let rmc = fields(try #require(lines.first { $0.hasPrefix("$GNRMC") }))
      #expect(rmc.count == 14 && rmc.last == "S")
    }
  }

  @Test func oneSystemUsesItsOwnTalkerAndNoFixSaysV() throws {
    var fix = multiGNSSFix()
    fix.satellites = fix.satellites.filter { $0.constellation == .glonass }
    let lines = NMEAEncoder(version: .v4_11).encode(fix)
    #expect(lines.contains { $0.hasPrefix("$GLRMC") } && lines.contains { $0.hasPrefix("$GLGSA") })
    var none = Fix(mode: .noFix)
    none.time = epochTime
    let empty = NMEAEncoder(version: .v4_11).encode(none)
    let rmc = fields(try #require(empty.first { $0.hasPrefix("$GPRMC") }))
    #expect(rmc[2] == "V" && rmc.last == "V")
    let gns = fields(try #require(empty.first { $0.hasPrefix("$GPGNS") }))
    #expect(gns[6] == "NNNNNN")
    let (decoded, statistics) = decodeAll(empty.flatMap { Array($0.utf8) })
    #expect(statistics.rejectedTotal == 0)
    #expect(decoded.first?.mode == .noFix && decoded.first?.coordinate == nil)
  }

  /// At 6-decimal minutes an altitude of 1000 m or more with a negative separation does not fit
  /// 4.11's GNS: its position drops a decimal of the minutes and its altitude and separation keep
  /// GGA's (gpsd computes altHAE from them), the GGA after it keeps everything, and the decode
  /// (as gpsd, which reads the last sentence's position and altitude) has GGA's values.
  @Test(arguments: [NMEAVersion.v4_10, .v4_11])
  func aGNSThatDropsADecimalIsFollowedByTheGGAThatKeepsIt(_ version: NMEAVersion) throws {
    var fix = multiGNSSFix()
    fix.coordinate = Coordinate(latitude: -33.8567844, longitude: -151.2152967)
    fix.altitudeMSL = 1543.78
    fix.geoidSeparation = -61.86
    let lines = NMEAEncoder(version: version).encode(fix)
    let gns = try #require(lines.firstIndex { $0.hasPrefix("$GNGNS") })
    let gga = try #require(lines.firstIndex { $0.hasPrefix("$GNGGA") })
    #expect(gns < gga)
    // 4.11's six mode letters make the line two characters longer than 4.10's four.
    let latitude = fields(lines[gns])[2]
    #expect(latitude == (version == .v4_11 ? "3351.40706" : "3351.407064"))
    #expect(fields(lines[gns])[9] == "1543.78" && fields(lines[gns])[10] == "-61.86")
    #expect(fields(lines[gga])[2] == "3351.407064")
    #expect(fields(lines[gga])[9] == "1543.78" && fields(lines[gga])[11] == "-61.86")
    #expect(lines.allSatisfy { $0.utf8.count <= NMEAEncoder.maximumSentenceLength })
    var decoder = NMEADecoder()
    var decoded: [Fix] = []
    decoder.feed(Array(lines.joined().utf8)) { decoded.append($0.fix) }
    decoder.finish { decoded.append($0.fix) }
    let back = try #require(decoded.first)
    #expect(decoded.count == 1 && back.altitudeMSL == 1543.78 && back.geoidSeparation == -61.86)
  }

  @Test(arguments: NMEAVersion.allCases)
  func everySentenceFitsEightyTwoCharacters(_ version: NMEAVersion) {
    var fix = multiGNSSFix()
    // A full sky: three-digit numbers (SBAS 152-158, QZSS 193-202 before 4.11) and wide fields.
    fix.satellites += (152...158).map {
      Satellite(constellation: .sbas, prn: $0, elevation: -5, azimuth: 359, snr: 99, used: true)
    }
    fix.satellites += (1...10).map {
      Satellite(constellation: .qzss, prn: $0, elevation: 88, azimuth: 359, snr: 99, used: true)
    }
    fix.pdop = 99.99
    fix.hdop = 99.99
    fix.vdop = 99.99
    fix.altitudeMSL = -412.25
    for line in NMEAEncoder(version: version).encode(fix) {
      #expect(line.utf8.count <= 82, "\(line)")
    }
  }
}
