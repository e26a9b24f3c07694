import Foundation
import NMEA
import Testing

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
