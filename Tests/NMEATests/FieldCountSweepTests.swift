@testable import NMEA
import Testing
import LocationModel

/// Sentences with the wrong number of fields, or with fields that are empty, too long or garbage,
/// of every formatter the parser interprets: each is counted (accepted or rejected with a reason),
/// none crashes or reads outside the line, and the decoder still decodes the good epoch after it.
@Suite("NMEA field-count sweep")
struct FieldCountSweepTests {
  /// A valid sentence of each interpreted formatter, fields after the address.
  static let templates: [SentenceType: [String]] = [
    .gga: "120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,".fields,
    .rmc: "120000.00,A,4807.038,N,01131.000,E,0.5,54.7,230394,,,A".fields,
    .gll: "4807.038,N,01131.000,E,120000.00,A,A".fields,
    .gsa: "A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1,1".fields,
    .gsv: "2,1,08,01,40,083,46,02,17,308,41,12,07,344,39,14,22,228,45".fields,
    .vtg: "54.7,T,34.4,M,5.5,N,10.2,K,A".fields,
    .zda: "120000.00,23,03,1994,00,00".fields,
    .gns: "120000.00,4807.038,N,01131.000,E,AN,08,0.9,545.4,46.9,,,V".fields,
    .gst: "120000.00,1.0,2.0,1.5,45.0,1.2,1.6,2.4".fields,
  ]

  /// What a damaged field holds: empty, longer than any field (and most lines), or garbage.
  static let damage = ["", String(repeating: "9", count: 40), "-.,*$", "\u{7F}x", "1e308", "NaN", "-1", ".", "A5D"]

  /// One good epoch one second later than the templates, and the fix it gives.
  static let follower =
    sentence("GPGGA,120001.00,4807.040,N,01131.002,E,1,08,0.9,545.4,M,46.9,M,,")
    + sentence("GPRMC,120001.00,A,4807.040,N,01131.002,E,0.5,54.7,230394,,,A")

  static func address(_ type: SentenceType) -> String { "GP" + type.rawValue }

  /// Feeds `line` and then the follower epoch to a fresh decoder; records an issue unless the
  /// line was counted and the follower's fix came out intact.
  static func check(_ line: String, _ what: @autoclosure () -> String) -> NMEAStatistics {
    let (fixes, stats) = decode(line + follower)
    let counted = stats.read == stats.accepted + stats.rejectedTotal && stats.read >= 3
    let last = fixes.last
    let intact =
      last.map { fix in
        guard let c = fix.coordinate else { return false }
        return abs(c.latitude - (48 + 7.040 / 60)) < 1e-9 && abs(c.longitude - (11 + 31.002 / 60)) < 1e-9
      } ?? false
    if !counted || !intact {
      Issue.record("\(what()): \(fixes.count) fixes, last \(String(describing: last?.coordinate)), \(stats.summary)")
    }
    return stats
  }

  @Test("every formatter with 0 to 30 data fields, with and without checksum")
  func fieldCounts() {
    var checked = 0
    for (type, template) in Self.templates {
      for n in 0...30 {
        let fields = (0..<n).map { $0 < template.count ? template[$0] : "" }
        let body = ([Self.address(type)] + fields).joined(separator: ",")
        for withChecksum in [true, false] {
          let stats = Self.check(sentence(body, checksum: withChecksum), "\(type) with \(n) fields")
          if n + 1 < type.minimumFieldCount {
            #expect(stats.rejected[.tooFewFields] == 1, "\(type) with \(n) fields: \(stats.summary)")
          }
          checked += 1
        }
      }
    }
    #expect(checked == SentenceType.allCases.count * 31 * 2)
  }

  @Test("every field of every formatter empty, too long or garbage")
  func damagedFields() {
    var rejected = 0
    var total = 0
    for (type, template) in Self.templates {
      for k in template.indices {
        for bad in Self.damage {
          var fields = template
          fields[k] = bad
          let body = ([Self.address(type)] + fields).joined(separator: ",")
          for withChecksum in [true, false] {
            let stats = Self.check(sentence(body, checksum: withChecksum), "\(type) field \(k + 1) = \(bad)")
            rejected += stats.rejectedTotal
            total += 1
          }
        }
      }
    }
    // Most of these damages make the sentence invalid; all of them are counted either way.
    #expect(total > 1000)
    #expect(rejected > total / 2)
  }

  @Test("a sentence shorter than its formatter's minimum is rejected with the counts")
  func shortSentenceError() {
    for line in ["$GPGSA", "$GPGSA*42", "$GNGSA,A", "$GPGGA,120000", "$GPRMC*4B"] {
      #expect(throws: NMEAError.self, "\(line)") { try NMEAParser.parse(line) }
    }
    #expect(throws: NMEAError.tooFewFields(.gsa, count: 1, minimum: 18)) { try NMEAParser.parse("$GPGSA*42") }
    #expect(throws: NMEAError.tooFewFields(.gsa, count: 3, minimum: 18)) { try NMEAParser.parse("$GNGSA,A,3") }
  }

  @Test("the field reader answers nil for indices on both sides of its fields")
  func fieldReaderBounds() throws {
    // Offsets before the reader's own buffers hold a valid-looking field, so an unchecked read
    // of index -1 would return "12" instead of nil.
    let text = Array("GPGSA,12".utf8)
    let storage = UnsafeMutableBufferPointer<Int32>.allocate(capacity: 2 * FieldReader.maximumFields + 2)
    defer { storage.deallocate() }
    storage.initialize(repeating: 0)
    storage[0] = 6
    storage[1] = 8
    try text.withUnsafeBufferPointer { bytes in
      let starts = UnsafeMutableBufferPointer(rebasing: storage[2..<(2 + FieldReader.maximumFields)])
      let ends = UnsafeMutableBufferPointer(rebasing: storage[(2 + FieldReader.maximumFields)...])
      starts[0] = 0
      ends[0] = 5
      starts[1] = 6
      ends[1] = 8
      let reader = FieldReader(bytes: bytes, starts: starts, ends: ends, count: 2, type: .gsa)
      #expect(reader.range(-1) == nil)
      #expect(reader.range(Int.min) == nil)
      #expect(reader.range(2) == nil)
      let twelve = try reader.int(1, "x")
      #expect(twelve == 12)
      let before = try reader.int(-2, "x")
      #expect(before == nil)
      // A count larger than the offset buffers is clamped to them.
      let wide = FieldReader(bytes: bytes, starts: starts, ends: ends, count: 1000, type: .gsa)
      #expect(wide.count == FieldReader.maximumFields)
      // Offsets past the bytes are refused.
      ends[1] = 9
      #expect(reader.range(1) == nil)
    }
  }
}

extension String {
  /// The comma-separated fields, empty ones kept.
  fileprivate var fields: [String] { split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
}

/// Values outside the ranges NMEA 0183 gives a field are invalid fields, as text that is not a
/// number is: a course beyond 360 degrees or a negative speed is damage, not a measurement.
@Suite("NMEA field ranges")
struct FieldRangeTests {
  @Test("course, speed, elevation, azimuth and SNR outside their ranges reject the sentence")
  func outOfRange() {
    let rejected = [
      ("GPRMC,120000.00,A,4807.038,N,01131.000,E,0.5,3086220.78,230394,,,A", 8, "course over ground"),
      ("GPRMC,120000.00,A,4807.038,N,01131.000,E,-0.5,54.7,230394,,,A", 7, "speed over ground"),
      ("GPVTG,361.0,T,,M,0.5,N,0.9,K,A", 1, "course over ground"),
      ("GPVTG,54.7,T,,M,-1,N,0.9,K,A", 5, "speed over ground (knots)"),
      ("GPGSV,1,1,01,07,91,083,46", 5, "elevation"),
      ("GPGSV,1,1,01,07,40,999999999999999999,46", 6, "azimuth"),
      ("GPGSV,1,1,01,07,40,-1,46", 6, "azimuth"),
      ("GPGSV,1,1,01,07,40,083,4546759.5", 7, "SNR"),
    ]
    for (body, index, name) in rejected {
      do {
        _ = try NMEAParser.parse(sentence(body))
        Issue.record("accepted \(body)")
      } catch {
        guard case .invalidField(_, let i, let n, _) = error else {
          Issue.record("\(body): \(error)")
          continue
        }
        #expect(i == index && n == name, "\(body): \(error)")
      }
    }
    // The edges are values: a course of 360 (north), an elevation of -5 below the horizon.
    for body in [
      "GPRMC,120000.00,A,4807.038,N,01131.000,E,0.0,360.0,230394,,,A", "GPGSV,1,1,01,07,-5,0,0",
      "GPVTG,0.0,T,,M,0.0,N,0.0,K,A",
    ] {
      #expect(throws: Never.self, "\(body)") { try NMEAParser.parse(sentence(body)) }
    }
  }

  @Test("minutes of 60 or more, a latitude beyond 90 or a longitude beyond 180 reject the sentence (where gpsd makes 49.25 degrees of 4875.0)")
  func positionsThatAreNotPositions() throws {
    for body in [
      "GPGGA,120000.00,4875.0000,N,01131.000,E,1,08,1.0,545.4,M,46.9,M,,",
      "GPGGA,120000.00,4807.038,N,01160.000,E,1,08,1.0,545.4,M,46.9,M,,",
      "GPGGA,120000.00,9100.000,N,01131.000,E,1,08,1.0,545.4,M,46.9,M,,",
      "GPRMC,120000.00,A,4807.038,N,18100.000,W,0.0,,230394,,,A",
      "GPGLL,4807.038,S,18000.001,E,120000.00,A,A",
    ] {
      let (fixes, statistics) = decode(sentence(body))
      #expect(statistics.rejected[.invalidField] == 1, "\(body)")
      #expect(fixes.allSatisfy { $0.coordinate == nil }, "\(body)")
    }
    // The edges are positions: the poles and the antimeridian.
    let (fixes, statistics) = decode(
      sentence("GPGGA,120000.00,9000.000,S,18000.000,W,1,08,1.0,545.4,M,46.9,M,,"))
    #expect(statistics.rejectedTotal == 0)
    let pole = try #require(fixes.first?.coordinate)
    #expect(pole.latitude == -90 && pole.longitude == -180)
  }
}
