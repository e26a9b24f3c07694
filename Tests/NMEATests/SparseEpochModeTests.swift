import Foundation
import LocationModel
import LocationProtocol
import NMEA
import Testing

/// How long gpsd 3.22 keeps a 3D fix mode through epochs that carry no GGA or GSA, each case
/// worked out by hand from drivers/driver_nmea0183.c (`processRMC`, `processGLL`, the end of
/// `nmea_parse`) and gpsd/libgpsd_core.c (`gpsd_error_model`: `lastfix` is the fix after the last
/// sentence with a time, `oldfix` the last fix of the time before).
@Suite("fix mode across epochs without GGA")
struct SparseEpochModeTests {
  static let date = "071020"

  /// A GGA with an altitude from eight satellites and the RMC that dates it: a 3D epoch.
  static func ggaEpoch(_ second: Int) -> String {
    let time = String(format: "1200%02d.00", second)
    return sentence("GPGGA,\(time),4807.038,N,01131.000,E,1,08,1.0,545.4,M,46.9,M,,")
      + sentence("GPRMC,\(time),A,4807.038,N,01131.000,E,0.0,,\(date),,,A")
  }

  static func rmc(_ second: Int) -> String {
    sentence(
      "GPRMC,\(String(format: "1200%02d.00", second)),A,4807.038,N,01131.000,E,0.0,,\(date),,,A")
  }

  static func gll(_ second: Int) -> String {
    sentence("GPGLL,4807.038,N,01131.000,E,\(String(format: "1200%02d.00", second)),A,A")
  }

  @Test(
    "GLL epochs after a GGA epoch stay 3D twice, the third is 2D (processGLL, nmea_parse, gpsd_error_model)"
  )
  func gllAfterGGA() throws {
    // Second 1: the GLL sees the GGA's altitude in gpsd's fix. Second 2: the fix is 3D and oldfix
    // (second 0) has an altitude, so processGLL leaves the mode and nmea_parse keeps the 3D.
    // Second 3: oldfix is second 1, without an altitude: 2D. A new GGA starts it again.
    var text = Self.ggaEpoch(0)
    for second in 1...4 { text += Self.gll(second) }
    text += sentence("GPGGA,120005.00,4807.038,N,01131.000,E,1,08,1.0,545.4,M,46.9,M,,")
    for second in 6...8 { text += Self.gll(second) }
    let (fixes, stats) = decode(text)
    #expect(stats.rejectedTotal == 0)
    #expect(
      fixes.map(\.mode) == [.fix3D, .fix3D, .fix3D, .fix2D, .fix2D, .fix3D, .fix3D, .fix3D, .fix2D])
    // The GLL epochs have no altitude: mode 3 without altMSL or altHAE, as gpsd prints them.
    let kept = try #require(fixes.dropFirst(2).first)
    #expect(kept.altitudeMSL == nil && kept.altitudeHAE == nil)
    #expect(kept.coordinate != nil)
  }

  @Test("RMC epochs after a GGA epoch keep its 3D as long as they come (processRMC lastfix.mode)")
  func rmcAfterGGA() throws {
    var text = Self.ggaEpoch(0)
    for second in 1...6 { text += Self.rmc(second) }
    let (fixes, _) = decode(text)
    #expect(fixes.map(\.mode) == Array(repeating: .fix3D, count: 7))
    #expect(fixes.dropFirst().allSatisfy { $0.altitudeMSL == nil })
  }

  @Test(
    "RMC then GLL each second after a GGA epoch: 3D once, then 2D (processGLL oldfix, processRMC)")
  func rmcThenGLL() {
    // Second 1: RMC keeps 3D (lastfix.mode), the GLL after it leaves it (oldfix = second 0 has
    // an altitude). Second 2: oldfix is second 1, without an altitude, so the GLL says 2D and the
    // epoch is reported 2D; from second 3 the RMC sees a 2D lastfix.
    var text = Self.ggaEpoch(0)
    for second in 1...4 { text += Self.rmc(second) + Self.gll(second) }
    #expect(decode(text).0.map(\.mode) == [.fix3D, .fix3D, .fix2D, .fix2D, .fix2D])
  }

  @Test("GLL then RMC each second after a GGA epoch: 3D twice, then 2D (processGLL, processRMC)")
  func gllThenRMC() {
    // Second 2: the GLL comes first, so oldfix is still second 0 (an altitude): 3D, and the RMC
    // keeps it. Second 3: oldfix is second 1: the GLL says 2D, and the RMC after it sees a 2D
    // lastfix.
    var text = Self.ggaEpoch(0)
    for second in 1...4 { text += Self.gll(second) + Self.rmc(second) }
    #expect(decode(text).0.map(\.mode) == [.fix3D, .fix3D, .fix3D, .fix2D, .fix2D])
  }

  @Test(
    "a GSA that listed four satellites keeps RMC and GLL epochs 3D until the next GSA (satellites_used)"
  )
  func gsaSatellitesKeep3D() {
    var text =
      sentence("GPRMC,120000.00,A,4807.038,N,01131.000,E,0.0,,\(Self.date),,,A")
      + sentence("GPGSA,A,3,06,07,11,19,,,,,,,,,1.4,1.1,0.8")
    for second in 1...4 { text += Self.gll(second) }
    for second in 5...7 { text += Self.rmc(second) }
    #expect(decode(text).0.map(\.mode) == Array(repeating: .fix3D, count: 8))
  }

  /// A void GGA without a position, then a valid RMC of the same second. gpsd 3.22: processGGA sets
  /// MODE_NO_FIX, gpsd_error_model saves that fix as lastfix, so processRMC's "MODE_2D >=
  /// lastfix.mode" makes the fix 2D at the RMC's position, and the fix (cleared when the GGA began
  /// the cycle) holds no altitude to make it 3D. The report at the RMC prints it.
  @Test("a void GGA then a valid RMC of one second: a 2D fix at the RMC's position, as gpsd's last sentence says")
  func voidGGAThenValidRMC() throws {
    var text = Self.ggaEpoch(0) + Self.ggaEpoch(1)
    text += sentence("GPGGA,120002.00,,,,,0,00,,,M,,M,,")
    text += sentence("GPRMC,120002.00,A,4807.100,N,01131.000,E,1.0,45.0,\(Self.date),,,A")
    text += Self.ggaEpoch(3)
    let (fixes, stats) = decode(text)
    #expect(stats.rejectedTotal == 0)
    #expect(fixes.map(\.mode) == [.fix3D, .fix3D, .fix2D, .fix3D])
    let mixed = try #require(fixes.dropFirst(2).first)
    let coordinate = try #require(mixed.coordinate)
    #expect(abs(coordinate.latitude - (48 + 7.1 / 60)) < 1e-9)
    #expect(mixed.speedOverGround.map { abs($0 - 1852.0 / 3600) < 1e-9 } == true)
    #expect(mixed.courseOverGround == 45)
    #expect(mixed.quality != .invalid)
    #expect(mixed.altitudeMSL == nil)
  }

  /// Epochs sent RMC first, then GGA, so that GGA ends gpsd's cycles and reports them. Second 1:
  /// the valid RMC makes a fix, then processGGA, with no position, sets MODE_NO_FIX, and the
  /// report at the GGA prints no fix.
  @Test("a valid RMC then a void GGA of one second, reported at the GGA: no fix, as gpsd's last sentence says")
  func validRMCThenVoidGGA() throws {
    func gga(_ second: Int) -> String {
      sentence("GPGGA,1200\(String(format: "%02d", second)).00,4807.038,N,01131.000,E,1,08,1.0,545.4,M,46.9,M,,")
    }
    var text = Self.rmc(0) + gga(0)
    text += sentence("GPRMC,120001.00,A,4807.100,N,01131.000,E,1.0,45.0,\(Self.date),,,A")
    text += sentence("GPGGA,120001.00,,,,,0,00,,,M,,M,,")
    text += Self.rmc(2) + gga(2)
    let (fixes, stats) = decode(text)
    #expect(stats.rejectedTotal == 0)
    #expect(fixes.map(\.mode) == [.fix3D, .noFix, .fix3D])
    #expect(fixes.dropFirst().first?.coordinate == nil)
  }

  /// A GGA of `second` from `satellites` satellites, with an altitude or without one.
  static func gga(_ second: Int, altitude: Bool, satellites: Int = 8) -> String {
    let alt = altitude ? "545.4" : ""
    return sentence(
      "GPGGA,\(String(format: "1200%02d.00", second)),4807.038,N,01131.000,E,1,"
        + "\(String(format: "%02d", satellites)),1.0,\(alt),M,,M,,")
  }

  @Test(
    "RMC then a GGA without an altitude each second: 3D while gpsd's oldfix has an altitude, then 2D (processGGA, nmea_parse)"
  )
  func rmcThenGGAWithoutAltitude() {
    // Second 1: the RMC keeps the last 3D; the GGA says 2D, but oldfix (second 0) has an
    // altitude, so the end of nmea_parse keeps the 3D. Second 2: lastfix (this second's RMC) and
    // oldfix (second 1) have none: the GGA makes it 2D, and the RMCs after it stay 2D.
    var text = Self.rmc(0) + Self.gga(0, altitude: true)
    for second in 1...3 { text += Self.rmc(second) + Self.gga(second, altitude: false) }
    let (fixes, _) = decode(text)
    #expect(fixes.map(\.mode) == [.fix3D, .fix3D, .fix2D, .fix2D])
  }

  @Test(
    "GGA first each second, then RMC: a GGA without an altitude keeps the 3D twice, as gpsd's lastfix then oldfix had one"
  )
  func ggaFirstWithoutAltitude() {
    // The GGA is the epoch's first timed sentence: gpsd's fix, lastfix and oldfix are still the
    // last epochs'. Second 1: lastfix (second 0) has an altitude; second 2: oldfix (second 0)
    // has one; second 3: neither, 2D, and the RMC after it reads lastfix's 2D.
    var text = ""
    for second in 0...4 { text += Self.gga(second, altitude: second == 0) + Self.rmc(second) }
    let (fixes, _) = decode(text)
    #expect(fixes.map(\.mode) == [.fix3D, .fix3D, .fix3D, .fix2D, .fix2D])
  }

  @Test(
    "a GGA from three satellites after RMC-only epochs without an altitude is 2D; the RMC after it is 3D again (processGGA, processRMC)"
  )
  func threeSatelliteGGAAfterRMCOnlyEpochs() {
    // Seconds 1 and 2 keep the 3D (processRMC, lastfix.mode); at second 3 neither lastfix (the
    // RMC of second 3) nor oldfix (second 2) has an altitude, so the GGA's 2D stands. At second
    // 4 the RMC finds second 3's altitude in gpsd's fix and says 3D again.
    var text = Self.rmc(0) + Self.gga(0, altitude: true)
    text += Self.rmc(1) + Self.rmc(2)
    text += Self.rmc(3) + Self.gga(3, altitude: true, satellites: 3)
    text += Self.rmc(4)
    let (fixes, _) = decode(text)
    #expect(fixes.map(\.mode) == [.fix3D, .fix3D, .fix3D, .fix2D, .fix3D])
  }

  @Test("a timed GGA with every other field empty reports no fix, not an unknown mode (processGGA)")
  func emptyGGAIsNoFix() {
    let text = Self.ggaEpoch(0) + sentence("GPGGA,120001.00,,,,,,,,,,,,,") + Self.ggaEpoch(2)
    let (fixes, stats) = decode(text)
    #expect(stats.rejectedTotal == 0)
    #expect(fixes.map(\.mode) == [.fix3D, .noFix, .fix3D])
    #expect(fixes.dropFirst().first?.coordinate == nil)
  }

  static func gsa2D(_ satellites: Int) -> String {
    let ids = (1...12).map { $0 <= satellites ? String(format: "%02d", $0) : "" }
    return sentence("GPGSA,A,2,\(ids.joined(separator: ",")),1.8,0.9,1.5")
  }

  @Test(
    "RMC and GLL after a GSA of their own epoch read its satellites: more than three make the fix 3D though the GSA said 2D (processRMC, processGLL satellites_used)"
  )
  func satellitesOfThisEpochsGSA() {
    // GGA without an altitude (2D), GSA 2D listing five, then RMC: gpsd_data.satellites_used is
    // already five, so processRMC says 3D. With three listed the RMC stays 2D.
    var text = ""
    for (second, count) in [(0, 5), (1, 5), (2, 3), (3, 3)] {
      text += Self.gga(second, altitude: false, satellites: count) + Self.gsa2D(count) + Self.rmc(second)
    }
    #expect(decode(text).0.map(\.mode) == [.fix3D, .fix3D, .fix2D, .fix2D])
    // RMC, GSA 2D, GLL each second, no altitude anywhere: the GLL reads the GSA before it (five:
    // 3D; three: 2D), and the RMC of the next second keeps only a 3D that GLL left.
    text = ""
    for (second, count) in [(0, 5), (1, 3), (2, 3), (3, 5)] {
      text += Self.rmc(second) + Self.gsa2D(count) + Self.gll(second)
    }
    #expect(decode(text).0.map(\.mode) == [.fix3D, .fix2D, .fix2D, .fix3D])
  }

  @Test(
    "GLL, GSA saying 2D, RMC each second: the GSA ends the GLL's 3D once no altitude is known, and the RMC reads its 2D (processGSA, nmea_parse, processRMC lastfix)"
  )
  func gsa2DBetweenGLLAndRMC() {
    // Second 1: the GLL is 3D (the fix held second 0's altitude); the GSA's 2D does not end it,
    // as oldfix (second 0) has an altitude. Second 2: the GLL is 3D by the eight satellites of
    // the last GSA; the GSA lists three and no altitude is known, so the fix is 2D, and the RMC
    // after it keeps lastfix's 2D. Second 3: 2D throughout.
    var text = Self.rmc(0) + Self.gga(0, altitude: true)
    for (second, count) in [(1, 8), (2, 3), (3, 3)] {
      text += Self.gll(second) + Self.gsa2D(count) + Self.rmc(second)
    }
    #expect(decode(text).0.map(\.mode) == [.fix3D, .fix3D, .fix2D, .fix2D])
  }

  @Test(
    "a void RMC alone in its second gives gpsd no time: its fix keeps the last altitude, and the RMCs after it are 3D (processRMC, gpsd_error_model)"
  )
  func voidRMCBetweenValidRMCs() throws {
    // processRMC merges no time from a void RMC, so gpsd starts no cycle: it merges the void's
    // no-fix mode into the fix of second 1, which keeps second 1's altitude. Second 3's RMC finds
    // that altitude in gpsd's fix and says 3D; seconds 4 and 5 keep lastfix's 3D.
    var text = Self.rmc(0) + Self.gga(0, altitude: true) + Self.rmc(1) + Self.gga(1, altitude: true)
    text += sentence("GPRMC,120002.00,V,4807.038,N,01131.000,E,0.0,,\(Self.date),,,N")
    for second in 3...5 { text += Self.rmc(second) }
    let (fixes, stats) = decode(text)
    #expect(stats.rejectedTotal == 0)
    #expect(fixes.map(\.mode) == [.fix3D, .fix3D, .noFix, .fix3D, .fix3D, .fix3D])
    #expect(fixes.dropFirst(3).allSatisfy { $0.altitudeMSL == nil && $0.coordinate != nil })
    // An empty void RMC does the same; a void GLL gives gpsd a time, so after it the RMCs find
    // no altitude and the 3D ends.
    text = Self.rmc(0) + Self.gga(0, altitude: true) + Self.rmc(1) + Self.gga(1, altitude: true)
    text += sentence("GPRMC,120002.00,V,,,,,,,\(Self.date),,,N")
    for second in 3...5 { text += Self.rmc(second) }
    #expect(decode(text).0.map(\.mode) == [.fix3D, .fix3D, .noFix, .fix3D, .fix3D, .fix3D])
    text = Self.rmc(0) + Self.gga(0, altitude: true) + Self.rmc(1) + Self.gga(1, altitude: true)
    text += sentence("GPGLL,4807.038,N,01131.000,E,120002.00,V,N")
    for second in 3...5 { text += Self.rmc(second) }
    #expect(decode(text).0.map(\.mode) == [.fix3D, .fix3D, .noFix, .fix2D, .fix2D, .fix2D])
  }

  @Test(
    "a void RMC without its date or time zeroes gpsd's fix time, so lastfix keeps the RMCs' 3D (processRMC forced report, gpsd_error_model)"
  )
  func voidRMCWithoutDateOrTime() {
    // Second 0 is 3D with an altitude; seconds 1 and 2 keep it (lastfix.mode). The void RMC of
    // second 3 lacks its date (or its time): processRMC zeroes the date and forces a report of a
    // fix whose time is 0, which gpsd_error_model does not copy to lastfix. Seconds 4-6 still
    // find lastfix 3D. A void RMC with both (second 3 of the test above) leaves lastfix no fix.
    for void in [
      "GPRMC,120003.00,V,,,,,,,,,,N", "GPRMC,,V,,,,,,,\(Self.date),,,N", "GPRMC,,V,,,,,,,,,,N",
    ] {
      var text = Self.gga(0, altitude: true) + Self.rmc(0)
      for second in 1...2 { text += Self.rmc(second) }
      text += sentence(void)
      for second in 4...6 { text += Self.rmc(second) }
      let modes = decode(text).0.map(\.mode)
      #expect(modes.prefix(3) == [.fix3D, .fix3D, .fix3D] && modes.suffix(3) == [.fix3D, .fix3D, .fix3D], "\(void): \(modes)")
    }
  }
}
