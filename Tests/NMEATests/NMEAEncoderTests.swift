import Testing

@testable import NMEA
import LocationModel

/// Splits a framed sentence into its fields after checking the frame and the checksum.
private func fields(of line: String) throws -> [String] {
  let bytes = Array(line.utf8)
  try #require(bytes.first == UInt8(ascii: "$"))
  try #require(bytes.suffix(2) == [13, 10], "sentence must end in CRLF")
  let star = try #require(bytes.lastIndex(of: UInt8(ascii: "*")))
  let body = bytes[1..<star]
  let stated = String(decoding: bytes[(star + 1)..<(bytes.count - 2)], as: UTF8.self)
  let computed = body.reduce(UInt8(0), ^)
  let hex = String(computed, radix: 16, uppercase: true)
  #expect(stated == (hex.count == 1 ? "0" + hex : hex), "checksum of \(line)")
  return String(decoding: body, as: UTF8.self).split(
    separator: ",", omittingEmptySubsequences: false
  )
  .map(String.init)
}

/// Reads `ddmm.mmmmmm` / `dddmm.mmmmmm` plus hemisphere back into signed degrees.
private func degrees(_ text: String, _ hemisphere: String, degreeDigits: Int) throws -> Double {
  let degreePart = try #require(Double(text.prefix(degreeDigits)))
  let minutePart = try #require(Double(text.dropFirst(degreeDigits)))
  let value = degreePart + minutePart / 60
  return hemisphere == "S" || hemisphere == "W" ? -value : value
}

/// SplitMix64: a small seeded generator so random cases repeat exactly.
private struct SeededGenerator: RandomNumberGenerator {
  var state: UInt64
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// 2026-03-14T12:35:19.25Z in milliseconds since 1970.
private let sampleTime: Int64 = 1_773_491_719_250

private func sampleFix() -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.time = sampleTime
  fix.quality = .gps
  fix.coordinate = Coordinate(latitude: 48.1173, longitude: 11.516_666_7)
  fix.altitudeMSL = 545.4
  fix.geoidSeparation = 46.9
  fix.speedOverGround = 11.523_555_6  // 22.4 knots
  fix.courseOverGround = 84.4
  fix.magneticVariation = -3.1
  fix.hdop = 0.9
  fix.vdop = 1.2
  fix.pdop = 1.5
  fix.satellitesUsed = 8
  fix.satellites = [
    Satellite(constellation: .gps, prn: 4, elevation: 40, azimuth: 83, snr: 46, used: true),
    Satellite(constellation: .gps, prn: 5, elevation: nil, azimuth: nil, snr: nil, used: false),
    Satellite(constellation: .gps, prn: 9, elevation: 77, azimuth: 325, snr: 38, used: true),
    Satellite(constellation: .gps, prn: 12, elevation: 8, azimuth: 5, snr: 12, used: true),
    Satellite(constellation: .sbas, prn: 46, elevation: 30, azimuth: 171, snr: 40, used: false),
  ]
  return fix
}

@Suite struct NMEAEncoderTests {
  @Test(arguments: [
    (
      "GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
      "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47\r\n"
    ),
    (
      "GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W",
      "$GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W*6A\r\n"
    ),
    ("GPGSV,1,1,00", "$GPGSV,1,1,00*79\r\n"),
  ])
  func framesWithPublishedChecksums(_ body: String, _ framed: String) {
    #expect(NMEAEncoder.frame(body) == framed)
  }

  @Test func checksumIsUpperCaseHexWithLeadingZero() {
    // "AA" XORs to 0x00; "GPZ" to 0x47 ^ 0x50 ^ 0x5A = 0x4D; "G" alone is 0x47.
    #expect(NMEAEncoder.frame("AA") == "$AA*00\r\n")
    #expect(NMEAEncoder.frame("GPZ") == "$GPZ*4D\r\n")
    #expect(NMEAEncoder.frame("G") == "$G*47\r\n")
    #expect(NMEAEncoder.checksum("GPGSV,1,1,00".utf8) == 0x79)
  }

  @Test func ggaFields() throws {
    let gga = try fields(of: NMEAEncoder.frame(NMEAEncoder().ggaBody(sampleFix())))
    #expect(
      gga == [
        "GPGGA", "123519.25", "4807.038000", "N", "01131.000002", "E", "1", "08", "0.90", "545.40",
        "M",
        "46.90", "M", "", "",
      ])
  }

  @Test func rmcFieldsWithDateAndMagneticVariation() throws {
    let rmc = try fields(of: NMEAEncoder.frame(NMEAEncoder().rmcBody(sampleFix())))
    #expect(
      rmc == [
        "GPRMC", "123519.25", "A", "4807.038000", "N", "01131.000002", "E", "22.400", "84.40",
        "140326",
        "3.1", "W", "A",
      ])
  }

  @Test func vtgAndZdaFields() throws {
    let encoder = NMEAEncoder(talker: .multiGNSS, sentences: .all)
    let vtg = try fields(of: NMEAEncoder.frame(encoder.vtgBody(sampleFix())))
    #expect(vtg == ["GNVTG", "84.40", "T", "", "M", "22.400", "N", "41.485", "K", "A"])
    let zda = try fields(of: NMEAEncoder.frame(try #require(encoder.zdaBody(sampleFix()))))
    #expect(zda == ["GNZDA", "123519.25", "14", "03", "2026", "00", "00"])
  }

  @Test func southWestAndThreeDigitLongitude() throws {
    var fix = sampleFix()
    fix.coordinate = Coordinate(latitude: -33.856_785, longitude: -151.215_297)
    let gga = try fields(of: NMEAEncoder.frame(NMEAEncoder().ggaBody(fix)))
    #expect(Array(gga[2...5]) == ["3351.407100", "S", "15112.917820", "W"])
    fix.coordinate = Coordinate(latitude: 0.5, longitude: 179.999_999_99)
    let positions = NMEAEncoder.positionFields(fix.coordinate)
    #expect(positions == ["0030.000000", "N", "17959.999999", "E"])
  }

  @Test func roundingNeverWritesSixtyMinutes() {
    // 10.99999999999 degrees rounds up to 11 degrees 00 minutes, not 10 degrees 60 minutes.
    #expect(NMEAEncoder.angle(10.999_999_999_99, degreeDigits: 2) == "1100.000000")
    #expect(NMEAEncoder.angle(0, degreeDigits: 3) == "00000.000000")
  }

  @Test func unknownValuesAreEmptyFieldsNeverZero() throws {
    var fix = Fix(mode: .fix2D)
    fix.timeOfDay = 3_723_500  // 01:02:03.5, no date
    fix.coordinate = Coordinate(latitude: 1, longitude: 2)
    let encoder = NMEAEncoder(sentences: .all)
    let gga = try fields(of: NMEAEncoder.frame(encoder.ggaBody(fix)))
    #expect(
      gga == [
        "GPGGA", "010203.50", "0100.000000", "N", "00200.000000", "E", "1", "", "", "", "", "", "",
        "", "",
      ])
    let rmc = try fields(of: NMEAEncoder.frame(encoder.rmcBody(fix)))
    #expect(
      rmc == [
        "GPRMC", "010203.50", "A", "0100.000000", "N", "00200.000000", "E", "", "", "", "", "", "A",
      ])
    let vtg = try fields(of: NMEAEncoder.frame(encoder.vtgBody(fix)))
    #expect(vtg == ["GPVTG", "", "T", "", "M", "", "N", "", "K", "A"])
    let gsa = try fields(of: NMEAEncoder.frame(try #require(encoder.gsaBodies(fix).first)))
    #expect(gsa == ["GPGSA", "A", "2"] + Array(repeating: "", count: 15))
    #expect(encoder.zdaBody(fix) == nil, "ZDA needs a date")
    // The whole epoch: RMC, VTG, GGA, GSA, an empty GSV; no ZDA without a date.
    #expect(
      encoder.encode(fix).map { $0.dropFirst().prefix(5) } == [
        "GPRMC", "GPVTG", "GPGGA", "GPGSA", "GPGSV",
      ])
  }

  @Test func twoDimensionalFixLeavesAltitudeEmpty() throws {
    var fix = sampleFix()
    fix.mode = .fix2D
    let gga = try fields(of: NMEAEncoder.frame(NMEAEncoder().ggaBody(fix)))
    #expect(gga[9] == "" && gga[10] == "")
    #expect(gga[11] == "46.90")
  }

  @Test func noFixHasVoidStatusAndNoPosition() throws {
    var fix = Fix(mode: .noFix)
    fix.time = sampleTime
    fix.coordinate = Coordinate(latitude: 10, longitude: 10)  // stale; must not be written
    let rmc = try fields(of: NMEAEncoder.frame(NMEAEncoder().rmcBody(fix)))
    #expect(rmc[2] == "V" && rmc[3] == "" && rmc[5] == "" && rmc[12] == "N")
    let gga = try fields(of: NMEAEncoder.frame(NMEAEncoder().ggaBody(fix)))
    #expect(gga[6] == "0" && gga[2] == "")
  }

  @Test func timeFormats() {
    var fix = Fix()
    #expect(NMEAEncoder.timeField(fix) == "")
    fix.timeOfDay = 86_399_990
    #expect(NMEAEncoder.timeField(fix) == "235959.99")
    fix.timeOfDay = 86_400_500
    #expect(NMEAEncoder.timeField(fix) == "235960.50", "leap second")
    fix.time = sampleTime + 7  // millisecond precision needs a third decimal
    #expect(NMEAEncoder.timeField(fix) == "123519.257")
    #expect(NMEAEncoder.dateField(fix) == "140326")
  }

  @Test(arguments: [
    (Int64(0), 1970, 1, 1), (951_782_400_000, 2000, 2, 29), (4_107_542_399_000, 2100, 2, 28),
    (-86_400_000, 1969, 12, 31), (-1, 1969, 12, 31), (1_773_491_719_250, 2026, 3, 14),
  ])
  func civilDates(_ milliseconds: Int64, _ year: Int, _ month: Int, _ day: Int) {
    let date = CivilDate.civil(milliseconds: milliseconds)
    #expect(date.year == year && date.month == month && date.day == day)
  }

  @Test func gsvCountsSentencesAndSatellitesPerConstellation() throws {
    var fix = sampleFix()
    fix.satellites += (65...70).map {
      Satellite(
        constellation: .glonass, prn: $0, elevation: 10, azimuth: 200, snr: 30, used: $0 < 67)
    }
    let lines = try NMEAEncoder.gsvBodies(fix).map { try fields(of: NMEAEncoder.frame($0)) }
    // GPS + SBAS: 5 satellites -> 2 sentences (4 + 1); GLONASS: 6 -> 2 sentences (4 + 2).
    #expect(
      lines.map { $0.prefix(4) } == [
        ["GPGSV", "2", "1", "05"], ["GPGSV", "2", "2", "05"], ["GLGSV", "2", "1", "06"],
        ["GLGSV", "2", "2", "06"],
      ])
    #expect(lines.map(\.count) == [20, 8, 20, 12])
    #expect(Array(lines[0][4...11]) == ["04", "40", "083", "46", "05", "", "", ""])
    #expect(Array(lines[1][4...7]) == ["46", "30", "171", "40"])
  }

  @Test func gsaOnePerSystemWithSystemID() throws {
    var fix = sampleFix()
    fix.satellites += (65...80).map { Satellite(constellation: .glonass, prn: $0, used: true) }
    fix.satellites.append(Satellite(constellation: .galileo, prn: 7, used: true))
    let lines = try NMEAEncoder().gsaBodies(fix).map { try fields(of: NMEAEncoder.frame($0)) }
    // GPS (3 used), GLONASS (16 used: 12 + 4), Galileo (1 used).
    #expect(lines.map { $0[0] } == ["GNGSA", "GNGSA", "GNGSA", "GNGSA"])
    #expect(lines.map(\.last) == ["1", "2", "2", "3"])
    #expect(lines.allSatisfy { $0.count == 19 })
    #expect(Array(lines[0][3...6]) == ["04", "09", "12", ""])
    #expect(Array(lines[2][3...7]) == ["77", "78", "79", "80", ""])
    #expect(Array(lines[0][15...17]) == ["1.50", "0.90", "1.20"])
  }

  @Test func gpsOnlyGSAHasNoSystemID() throws {
    let lines = try NMEAEncoder().gsaBodies(sampleFix()).map {
      try fields(of: NMEAEncoder.frame($0))
    }
    #expect(lines.count == 1)
    #expect(lines.first?.count == 18)
    #expect(lines.first?.first == "GPGSA")
    let gn = NMEAEncoder(talker: .multiGNSS).gsaBodies(sampleFix())
    #expect(gn.count == 1 && gn[0].hasPrefix("GNGSA,A,3,") && gn[0].hasSuffix(",1"))
  }

  @Test func everySentenceFitsNMEALengthAndEndsInCRLF() {
    var fix = sampleFix()
    fix.satellites += (65...80).map {
      Satellite(constellation: .glonass, prn: $0, elevation: 45, azimuth: 359, snr: 50, used: true)
    }
    for line in NMEAEncoder(talker: .multiGNSS, sentences: .all).encode(fix) {
      #expect(line.utf8.count <= 82, "\(line)")
      #expect(line.utf8.suffix(2).elementsEqual([13, 10]))
    }
  }

  @Test(
    "a DGPS fix at altitude with millisecond times still fits 82 characters: fewer decimals, same values",
    arguments: [nil, NMEAVersion.v2_3, .v4_10, .v4_11])
  func longFieldsAreShortenedToFit(version: NMEAVersion?) throws {
    var generator = SeededGenerator(state: 0x82)
    for index in 0..<500 {
      var fix = sampleFix()
      fix.time = sampleTime + 789 + Int64(index) * 1001
      fix.coordinate = Coordinate(
        latitude: Double.random(in: -89.99...89.99, using: &generator),
        longitude: Double.random(in: -179.99...179.99, using: &generator))
      fix.altitudeMSL = Double.random(in: -999.99...99_999.99, using: &generator)
      fix.geoidSeparation = Double.random(in: -99.99...99.99, using: &generator)
      fix.hdop = Double.random(in: 0.5...99.99, using: &generator)
      fix.speedOverGround = Double.random(in: 0...999, using: &generator)
      fix.courseOverGround = Double.random(in: 0..<360, using: &generator)
      fix.magneticVariation = Double.random(in: -99...99, using: &generator)
      fix.quality = .dgps
      fix.dgpsAge = Double.random(in: 0...99.9, using: &generator)
      fix.dgpsStation = 1023
      fix.navigationalStatus = "S"
      fix.errorEstimates = nil
      let encoder = version.map { NMEAEncoder(version: $0) } ?? NMEAEncoder(talker: .gps, sentences: .all)
      var position: (Double, Double)?
      for line in encoder.encode(fix) {
        #expect(line.utf8.count <= NMEAEncoder.maximumSentenceLength, "\(line)")
        let f = try fields(of: line)
        if f[0].hasSuffix("GGA") {
          position = (try degrees(f[2], f[3], degreeDigits: 2), try degrees(f[4], f[5], degreeDigits: 3))
          // The altitude is still the fix's, to the decimals written.
          let altitude = try #require(Double(f[9]))
          #expect(abs(altitude - (fix.altitudeMSL ?? 0)) <= 0.5, "\(line)")
        }
      }
      let (latitude, longitude) = try #require(position)
      // Four decimals of minutes at least: within 19 cm (1.7e-6 degrees).
      #expect(abs(latitude - (fix.coordinate?.latitude ?? 0)) < 1.7e-6)
      #expect(abs(longitude - (fix.coordinate?.longitude ?? 0)) < 1.7e-6)
    }
  }

  @Test func anOrdinaryFixKeepsFullPrecision() throws {
    let lines = NMEAEncoder(talker: .gps, sentences: [.rmc, .gga]).encode(sampleFix())
    #expect(lines[0] == NMEAEncoder.frame(NMEAEncoder().rmcBody(sampleFix())))
    #expect(try fields(of: lines[1])[2] == "4807.038000")
    // The reviewer's case: a DGPS fix at 12,345.6 m with a millisecond time.
    var fix = sampleFix()
    fix.time = sampleTime + 539
    fix.quality = .dgps
    fix.satellitesUsed = 12
    fix.hdop = 12.3
    fix.altitudeMSL = 12_345.6
    fix.geoidSeparation = -34.5
    fix.dgpsAge = 12.3
    fix.dgpsStation = 1023
    let gga = try #require(NMEAEncoder(talker: .gps, sentences: [.gga]).encode(fix).first)
    #expect(gga.utf8.count <= 82, "\(gga)")
    #expect(try fields(of: gga)[9] == "12345.6" || (try fields(of: gga)[9]) == "12346", "\(gga)")
  }

  @Test func seededRandomPositionsRoundTripWithin1e7Degrees() throws {
    var generator = SeededGenerator(state: 0x6C6F_6361_7469_6F6E)
    var cases = (0..<2000).map { _ in
      (
        Double.random(in: -90...90, using: &generator),
        Double.random(in: -180...180, using: &generator)
      )
    }
    // Pinned edge cases: poles, antimeridian, just below a whole degree, tiny values.
    cases += [
      (90, 180), (-90, -180), (0, 0), (59.999_999_99, -0.000_000_01), (-0.000_000_4, 99.999_999_9),
    ]
    for (latitude, longitude) in cases {
      var fix = Fix(mode: .fix2D)
      fix.timeOfDay = 0
      fix.coordinate = Coordinate(latitude: latitude, longitude: longitude)
      let gga = try fields(of: NMEAEncoder.frame(NMEAEncoder().ggaBody(fix)))
      #expect(gga[2].count == 11 && gga[4].count == 12)
      let decodedLatitude = try degrees(gga[2], gga[3], degreeDigits: 2)
      let decodedLongitude = try degrees(gga[4], gga[5], degreeDigits: 3)
      #expect(abs(decodedLatitude - latitude) < 1e-7, "latitude \(latitude) -> \(gga[2])")
      #expect(abs(decodedLongitude - longitude) < 1e-7, "longitude \(longitude) -> \(gga[4])")
    }
  }

  @Test func decimalFormatting() {
    #expect(NMEAEncoder.decimal(-3.14159, places: 2) == "-3.14")
    #expect(NMEAEncoder.decimal(-0.001, places: 2) == "0.00")
    #expect(NMEAEncoder.decimal(2.5, places: 0) == "3")
    #expect(NMEAEncoder.decimal(.nan, places: 1) == "")
    #expect(NMEAEncoder.padded(7, width: 3) == "007")
  }
}

/// Encoder -> ``NMEADecoder`` round trips: what the simulated hardware writes decodes back to
/// the fix it was made from.
@Suite struct NMEAEncoderDecoderRoundTripTests {
  private func decode(_ fixes: [Fix], encoder: NMEAEncoder) -> [Fix] {
    var bytes: [UInt8] = []
    for fix in fixes { encoder.encode(fix, into: &bytes) }
    var decoder = NMEADecoder()
    var decoded: [Fix] = []
    decoder.feed(bytes) { decoded.append($0.fix) }
    decoder.finish { decoded.append($0.fix) }
    #expect(decoder.statistics.rejectedTotal == 0)
    return decoded
  }

  @Test(arguments: [TalkerID.gps, .multiGNSS])
  func seededRandomEpochsDecodeBackWithin1e7Degrees(_ talker: TalkerID) throws {
    var generator = SeededGenerator(state: 0x5EED_0000_0000_0001)
    let fixes: [Fix] = (0..<500).map { index in
      var fix = sampleFix()
      fix.time = sampleTime + Int64(index) * 100
      fix.coordinate = Coordinate(
        latitude: Double.random(in: -89.9...89.9, using: &generator),
        longitude: Double.random(in: -179.9...179.9, using: &generator))
      fix.altitudeMSL = Double.random(in: -400...9000, using: &generator)
      fix.speedOverGround = index % 3 == 0 ? nil : Double.random(in: 0...300, using: &generator)
      fix.courseOverGround = index % 3 == 0 ? nil : Double.random(in: 0..<360, using: &generator)
      return fix
    }
    let decoded = decode(fixes, encoder: NMEAEncoder(talker: talker, sentences: .all))
    try #require(decoded.count == fixes.count)
    for (original, back) in zip(fixes, decoded) {
      #expect(back.time == original.time)
      #expect(back.mode == .fix3D)
      let a = try #require(original.coordinate)
      let b = try #require(back.coordinate)
      #expect(
        abs(a.latitude - b.latitude) < 1e-7 && abs(a.longitude - b.longitude) < 1e-7, "\(a) -> \(b)"
      )
      #expect(abs((back.altitudeMSL ?? .nan) - (original.altitudeMSL ?? 0)) <= 0.005 + 1e-9)
      #expect(back.geoidSeparation == original.geoidSeparation)
      if let speed = original.speedOverGround {
        #expect(abs((back.speedOverGround ?? .nan) - speed) < 0.0006)
        #expect(
          abs((back.courseOverGround ?? .nan) - (original.courseOverGround ?? 0)) <= 0.005 + 1e-9)
      } else {
        #expect(
          back.speedOverGround == nil && back.courseOverGround == nil, "unknown stays unknown")
      }
      #expect(
        back.hdop == original.hdop && back.vdop == original.vdop && back.pdop == original.pdop)
      // Satellites used come from the GSAs (those flagged used in the sky view), not GGA's count.
      #expect(back.satellitesUsed == original.satellites.filter(\.used).count)
      #expect(back.magneticVariation == original.magneticVariation)
      #expect(back.satellites.map(\.prn) == original.satellites.map(\.prn))
      #expect(back.satellites.map(\.used) == original.satellites.map(\.used))
    }
  }

  @Test func multiConstellationSkyViewDecodesBack() throws {
    var fix = sampleFix()
    fix.satellites += (65...70).map {
      Satellite(
        constellation: .glonass, prn: $0, elevation: 12, azimuth: 300, snr: 33, used: $0 % 2 == 0)
    }
    fix.satellites.append(
      Satellite(constellation: .galileo, prn: 11, elevation: 50, azimuth: 10, snr: 45, used: true))
    let back = try #require(decode([fix], encoder: NMEAEncoder(talker: .multiGNSS)).first)
    let key = { (s: Satellite) in
      "\(s.constellation)-\(s.prn)-\(s.used)-\(s.elevation ?? -1)-\(s.snr ?? -1)"
    }
    #expect(Set(back.satellites.map(key)) == Set(fix.satellites.map(key)))
  }

  @Test func twoDimensionalAndNoFixEpochsDecodeBack() throws {
    var twoD = sampleFix()
    twoD.mode = .fix2D
    var none = Fix(mode: .noFix)
    none.time = sampleTime + 1000
    let decoded = decode([twoD, none], encoder: NMEAEncoder())
    try #require(decoded.count == 2)
    #expect(
      decoded[0].mode == .fix2D && decoded[0].altitudeMSL == nil && decoded[0].coordinate != nil)
    #expect(decoded[1].mode == .noFix && decoded[1].coordinate == nil)
  }
}
