import Foundation
import NMEA
import Testing
import LocationModel

/// The date of each epoch: which sentence dates which time (gpsd 3.22 processZDA, processRMC).
@Suite("epoch dates")
struct EpochDateTests {
  @Test("a ZDA sent before the position dates its own second, also across midnight")
  func zdaBeforePositionAtMidnight() throws {
    let text =
      sentence("GPZDA,235959.00,15,03,2024,00,00")
      + sentence("GPGLL,4807.039,N,01131.000,E,235959.00,A,A")
      + sentence("GPZDA,000000.00,16,03,2024,00,00")
      + sentence("GPGLL,4807.040,N,01131.000,E,000000.00,A,A")
      + sentence("GPGLL,4807.041,N,01131.000,E,000001.00,A,A")
    let fixes = decode(text).0
    #expect(fixes.map(\.time) == [utc(2024, 3, 15, 23, 59, 59), utc(2024, 3, 16, 0, 0, 0), utc(2024, 3, 16, 0, 0, 1)])
  }

  @Test("a ZDA every second with GGA: no epoch a day off, no speed over a day")
  func zdaEverySecondWithGGA() throws {
    var text = ""
    for (tod, day, lat) in [
      ("235958", "15", "4807.038"), ("235959", "15", "4807.039"), ("000000", "16", "4807.040"),
      ("000001", "16", "4807.041"),
    ] {
      text += sentence("GPZDA,\(tod).00,\(day),03,2024,00,00")
      text += sentence("GPGGA,\(tod).00,\(lat),N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
    }
    let fixes = decode(text).0
    #expect(
      fixes.map(\.time) == [
        utc(2024, 3, 15, 23, 59, 58), utc(2024, 3, 15, 23, 59, 59), utc(2024, 3, 16, 0, 0, 0),
        utc(2024, 3, 16, 0, 0, 1),
      ])
    // 0.001' of latitude a second: about 1.85 m/s, never that over 86,401 s.
    for fix in fixes.dropFirst() {
      let speed = try #require(fix.speedOverGround)
      #expect(abs(speed - 1.85) < 0.02)
    }
  }

  @Test("a ZDA of the next second does not date the epoch before it")
  func zdaOfNextSecond() throws {
    let text =
      sentence("GPGLL,4807.044,N,01131.000,E,120006.00,A,A")
      + sentence("GPZDA,120007.00,15,03,2024,00,00")
      + sentence("GPGLL,4807.045,N,01131.000,E,120007.00,A,A")
    let fixes = decode(text).0
    #expect(fixes.count == 2)
    #expect(fixes.first?.time == nil)
    #expect(fixes.first?.timeOfDay == 43_206_000)
    #expect(fixes.last?.time == utc(2024, 3, 15, 12, 0, 7))
  }

  @Test("a void RMC's date (cold start) dates nothing and does not hold back the true date")
  func voidRMCDate() throws {
    let text =
      sentence("GPRMC,000010.00,V,,,,,,,010130,,,N")
      + sentence("GPRMC,120000.00,A,4807.0380,N,01131.0000,E,2.0,90.0,150324,,,A")
      + sentence("GPRMC,120001.00,A,4807.0390,N,01131.0000,E,2.0,90.0,150324,,,A")
    let fixes = decode(text).0
    #expect(fixes.map(\.time) == [nil, utc(2024, 3, 15, 12, 0, 0), utc(2024, 3, 15, 12, 0, 1)])
  }

  @Test("with a rollover floor, a void RMC's date moved forward does not hold back the true date")
  func voidRMCDateWithFloor() throws {
    let text =
      sentence("GPRMC,235959.00,V,,,,,,,161206,,,N")
      + sentence("GPRMC,000000.00,V,,,,,,,171206,,,N")
      + sentence("GPRMC,120000.00,A,4807.0380,N,01131.0000,E,2.0,90.0,230899,,,A")
      + sentence("GPRMC,120001.00,A,4807.0390,N,01131.0000,E,2.0,90.0,230899,,,A")
    let fixes = RolloverFloorTests.decode(text, floor: "2019-04-07")
    #expect(fixes.map(\.fix.time) == [nil, nil, utc(2019, 4, 8, 12, 0, 0), utc(2019, 4, 8, 12, 0, 1)])
    #expect(fixes.map(\.rolloverWeeks) == [0, 0, 1024, 1024])
  }

  @Test("the backwards-date check compares the dates as received, before the rollover floor")
  func backwardsCheckBeforeFloor() throws {
    // A valid ZDA of the day before the floor, then the floor's day: one day forward as
    // received, so the second is taken (moving the first by 1024 weeks must not refuse it).
    let text =
      sentence("GPZDA,235959.00,06,04,2019,00,00")
      + sentence("GPGGA,235959.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
      + sentence("GPZDA,000000.00,07,04,2019,00,00")
      + sentence("GPGGA,000000.00,4807.039,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
    let fixes = RolloverFloorTests.decode(text, floor: "2019-04-07")
    #expect(fixes.last?.fix.time == utc(2019, 4, 7, 0, 0, 0))
  }
}
