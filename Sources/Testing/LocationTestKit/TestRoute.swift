import NMEA
import LocationModel

/// A deterministic test route for the simulated GPS hardware and gpsd tests: 10 Hz epochs heading
/// north-east from Munich, with centimetre-scale wiggles so that no two epochs share a coordinate
/// digit pattern.
public enum TestRoute {
  /// UTC time of epoch 0, milliseconds since 1970 (2026-03-14T12:00:00Z).
  public static let start: Int64 = 1_773_489_600_000

  /// Epoch `index` (>= 0), `periodMilliseconds` after the previous one: a 3D fix with altitude,
  /// speed, course, DOPs and five satellites (four used).
  public static func fix(_ index: Int, periodMilliseconds: Int64 = 100) -> Fix {
    var fix = Fix(mode: .fix3D)
    fix.time = start + Int64(index) * periodMilliseconds
    fix.quality = .gps
    let wiggle = Double((index * 7919) % 101) * 1.3e-7
    fix.coordinate = Coordinate(
      latitude: 48.137_154 + Double(index) * 8.1e-6 + wiggle,
      longitude: 11.576_124 + Double(index) * 1.21e-5 - wiggle)
    fix.altitudeMSL = 519.5 + Double(index % 50) * 0.1
    fix.geoidSeparation = 47.3
    fix.speedOverGround = 12.5
    fix.courseOverGround = 45.0
    fix.hdop = 0.9
    fix.vdop = 1.3
    fix.pdop = 1.6
    fix.satellitesUsed = 4
    fix.satellites = [
      Satellite(constellation: .gps, prn: 3, elevation: 61, azimuth: 120, snr: 44, used: true),
      Satellite(constellation: .gps, prn: 8, elevation: 35, azimuth: 250, snr: 40, used: true),
      Satellite(constellation: .gps, prn: 14, elevation: 20, azimuth: 40, snr: 35, used: true),
      Satellite(constellation: .gps, prn: 22, elevation: 75, azimuth: 310, snr: 47, used: true),
      Satellite(constellation: .gps, prn: 31, elevation: 5, azimuth: 180, snr: 20, used: false),
    ]
    return fix
  }

  /// Parses a TPV `time` such as `2026-03-14T12:00:00.100Z` into milliseconds since 1970 (UTC);
  /// `nil` when it is not in that form (``UTCTime/Syntax/tpv``).
  public static func milliseconds(iso8601 text: String) -> Int64? {
    UTCTime(iso8601: text, syntax: .tpv)?.milliseconds
  }
}
