import Foundation
import NMEA
import Testing
import LocationModel

/// The GPS week-rollover floor (IS-GPS-200's 10-bit week number wraps every 1024 weeks).
@Suite("week-rollover floor")
struct RolloverFloorTests {
  static func decode(_ text: String, floor: String?) -> [DecodedFix] {
    var decoder = NMEADecoder(rolloverFloor: floor.flatMap { CivilDate.days(iso: $0) })
    var fixes: [DecodedFix] = []
    decoder.feed(Array(text.utf8)) { fixes.append($0) }
    decoder.finish { fixes.append($0) }
    return fixes
  }

  @Test("1999-08-22 rollover: a receiver reporting 1980-01-06 on 1999-08-22 is moved 1024 weeks")
  func rollover1999() throws {
    let text =
      sentence("GPRMC,000345,A,4808.9993,N,01135.0798,E,0.0,0.0,060180,,")
      + sentence("GPGGA,000346,4808.9993,N,01135.0798,E,1,05,1.0,500.0,M,47.0,M,,")
    let fixes = Self.decode(text, floor: "1995-01-01")
    #expect(fixes.map(\.fix.time) == [utc(1999, 8, 22, 0, 3, 45), utc(1999, 8, 22, 0, 3, 46)])
    #expect(fixes.map(\.rolloverWeeks) == [1024, 1024])
  }

  @Test("2019-04-07 rollover: 1999-08-22 becomes 2019-04-07, 1999-10-25 becomes 2019-06-10, ZDA too")
  func rollover2019() throws {
    let text =
      sentence("GPRMC,000345.03,A,4808.9993,N,01135.0798,E,0.0,0.0,220899,,")
      + sentence("GPRMC,120000,A,4808.9993,N,01135.0798,E,0.0,0.0,251099,,")
      + sentence("GPGGA,120001,4808.9993,N,01135.0798,E,1,05,1.0,500.0,M,47.0,M,,")
      + sentence("GPZDA,120001,25,10,1999,,")
    let fixes = Self.decode(text, floor: "2010-01-01")
    #expect(fixes.map(\.fix.time) == [utc(2019, 4, 7, 0, 3, 45, ms: 30), utc(2019, 6, 10, 12, 0, 0), utc(2019, 6, 10, 12, 0, 1)])
    #expect(fixes.allSatisfy { $0.rolloverWeeks == 1024 })
    // ZDA's four-digit year is moved the same way.
    let zda = Self.decode(
      sentence("GPGGA,120001,4808.9993,N,01135.0798,E,1,05,1.0,500.0,M,47.0,M,,") + sentence("GPZDA,120001,25,10,1999,,"),
      floor: "2010-01-01")
    #expect(zda.first?.fix.time == utc(2019, 6, 10, 12, 0, 1))
    #expect(zda.first?.rolloverWeeks == 1024)
    // A floor after two rollovers moves a date 2048 weeks.
    let twice = Self.decode(sentence("GPRMC,120000,A,4808.9993,N,01135.0798,E,0.0,0.0,251099,,"), floor: "2026-01-01")
    #expect(twice.first?.fix.time == utc(2039, 1, 24, 12, 0, 0))
    #expect(twice.first?.rolloverWeeks == 2048)
  }

  @Test("a genuine 2014 log keeps its dates: no floor by default, and none moved above the floor")
  func genuineOldLog() throws {
    let text =
      sentence("GPRMC,202640.000,A,4404.1306,N,12118.8515,W,0.03,225.97,150314,,,D")
      + sentence("GPRMC,202641.000,A,4404.1306,N,12118.8515,W,0.03,225.97,150314,,,D")
    for floor in [nil, "2010-01-01"] {
      let fixes = Self.decode(text, floor: floor)
      #expect(fixes.map(\.fix.time) == [utc(2014, 3, 15, 20, 26, 40), utc(2014, 3, 15, 20, 26, 41)])
      #expect(fixes.allSatisfy { $0.rolloverWeeks == 0 })
    }
    var plain = NMEADecoder()
    var fixes: [DecodedFix] = []
    plain.feed(Array(text.utf8)) { fixes.append($0) }
    plain.finish { fixes.append($0) }
    #expect(fixes.first?.fix.time == utc(2014, 3, 15, 20, 26, 40))
  }

  @Test("ISO dates for the floor: valid calendar dates from 1980 to 2079 only")
  func isoDates() {
    #expect(CivilDate.days(iso: "2019-04-07") == CivilDate.days(year: 2019, month: 4, day: 7))
    #expect(CivilDate.days(iso: "2079-12-31") == CivilDate.days(year: 2079, month: 12, day: 31))
    // After 2079 a floor would move dates past any year NMEA's two-digit year can name (and
    // 9999-12-31 past year 9999).
    let bad = [
      "2019-4-07", "2019-02-30", "1979-12-31", "2080-01-01", "9999-12-31", "yesterday", "2019-04-07T00:00", "",
    ]
    for bad in bad {
      #expect(CivilDate.days(iso: bad) == nil, "\(bad)")
    }
  }
}
