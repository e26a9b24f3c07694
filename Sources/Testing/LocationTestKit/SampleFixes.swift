import LocationModel

/// Fixes with every field an NMEA 4.11 receiver reports, for encoder tests and the simulator's
/// benchmark.
public enum SampleFixes {
  /// A 3D multi-GNSS fix at `time` (ms since 1970) and `coordinate`: 10 GPS satellites (8 used),
  /// `glonass` GLONASS ones (all but the first used), 6 Galileo (all used) and 6 BeiDou (every
  /// second used), with DOPs (HDOP 0.8, VDOP 1.1, PDOP 1.36), GST error estimates (metres,
  /// degrees true), altitude 519.3 m MSL, geoid separation 47.1 m, 7.4 m/s due east.
  public static func multiGNSS(time: Int64, coordinate: Coordinate, glonass: Int = 7) -> Fix {
    var fix = Fix(mode: .fix3D)
    fix.time = time
    fix.quality = .gps
    fix.coordinate = coordinate
    fix.altitudeMSL = 519.3
    fix.geoidSeparation = 47.1
    fix.speedOverGround = 7.4
    fix.courseOverGround = 90
    fix.hdop = 0.8
    fix.vdop = 1.1
    fix.pdop = 1.36
    var errors = ErrorEstimates()
    errors.rangeRMS = 2.5
    errors.semiMajor = 1.9
    errors.semiMinor = 1.2
    errors.orientation = 30
    errors.latitude = 1.6
    errors.longitude = 1.4
    errors.altitude = 2.8
    fix.errorEstimates = errors
    fix.satellites =
      (1...10).map {
        Satellite(
          constellation: .gps, prn: $0 * 3, elevation: Double(5 * $0), azimuth: Double(33 * $0),
          snr: 40, used: $0 > 2)
      }
      + (0..<max(0, glonass)).map { index in
        let n = index + 1
        return Satellite(
          constellation: .glonass, prn: 64 + n * 3, elevation: Double(9 * n),
          azimuth: Double(45 * n), snr: 35, used: n > 1)
      }
      + (1...6).map {
        Satellite(
          constellation: .galileo, prn: $0 * 5, elevation: Double(11 * $0), azimuth: Double(50 * $0),
          snr: 38, used: true)
      }
      + (1...6).map {
        Satellite(
          constellation: .beidou, prn: $0 * 7, elevation: Double(12 * $0), azimuth: Double(55 * $0),
          snr: 33, used: $0 % 2 == 0)
      }
    fix.satellitesUsed = fix.satellites.filter(\.used).count
    return fix
  }
}
