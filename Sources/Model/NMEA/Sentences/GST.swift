import LocationModel
// GST: GNSS pseudorange error statistics (NMEA 0183 v4.11).
//
//         1         2   3   4   5   6   7   8
//  $--GST,hhmmss.ss,x.x,x.x,x.x,x.x,x.x,x.x,x.x*hh
//
//  $GNGST,003956.00,17,6.6,4.4,90,4.4,6.6,7.4*5C                                             (ZED-F9P)

/// GST: one-sigma error estimates of the position solution, metres (NMEA 0183 v4.11).
public struct GST: Sendable, Hashable {
  /// Field 1: UTC time of day, milliseconds since midnight.
  public var timeOfDay: Int32?
  /// Fields 2-8: RMS, error ellipse, orientation and per-axis standard deviations.
  public var estimates: ErrorEstimates

  init(_ f: FieldReader) throws(NMEAError) {
    timeOfDay = try f.timeOfDay(1)
    estimates = ErrorEstimates()
    estimates.rangeRMS = try f.double(2, "RMS")
    estimates.semiMajor = try f.double(3, "semi-major axis")
    estimates.semiMinor = try f.double(4, "semi-minor axis")
    estimates.orientation = try f.double(5, "orientation")
    estimates.latitude = try f.double(6, "latitude error")
    estimates.longitude = try f.double(7, "longitude error")
    estimates.altitude = try f.double(8, "altitude error")
  }
}
