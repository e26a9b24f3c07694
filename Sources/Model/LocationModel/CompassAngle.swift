/// Courses, bearings and azimuths as they are written out: degrees clockwise from true north in
/// `[0, 360)` (NMEA 0183 RMC/VTG course, GSV azimuth; gpsd TPV `track`, SKY `az`).
public enum CompassAngle {
  /// `degrees` reduced to `[0, 360)` and rounded to `places` decimals (`0...9`); a value that
  /// would round to 360 (359.99999 at 4 places, say) is 0, so no field ever reads 360. A value
  /// that is not finite is returned unchanged.
  public static func rounded(_ degrees: Double, places: Int) -> Double {
    guard degrees.isFinite else { return degrees }
    var reduced = degrees.truncatingRemainder(dividingBy: 360)
    if reduced < 0 { reduced += 360 }
    var scale = 1.0
    for _ in 0..<max(0, min(9, places)) { scale *= 10 }
    let result = (reduced * scale).rounded() / scale
    return result >= 360 ? 0 : result
  }
}
