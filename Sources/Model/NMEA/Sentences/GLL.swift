import LocationModel
// GLL: Geographic position, latitude/longitude (NMEA 0183 v4.11).
//
//         1       2 3        4 5         6 7
//  $--GLL,ddmm.mm,a,dddmm.mm,a,hhmmss.ss,A,a*hh
//
//  $GPGLL,4808.9993,N,01135.0798,E,000345.03,A,A*66                                      (GPS-320FW)

/// GLL: position with time and status (NMEA 0183 v4.11).
public struct GLL: Sendable, Hashable {
  /// Fields 1-4: position, signed decimal degrees (WGS84).
  public var coordinate: Coordinate?
  /// Field 5: UTC time of day, milliseconds since midnight.
  public var timeOfDay: Int32?
  /// Field 6: `true` for `A` (valid), `false` for `V`.
  public var isValid: Bool?
  /// Field 7 (NMEA 2.3+): mode indicator, as in ``RMC/modeIndicator``.
  public var modeIndicator: UInt8?

  init(_ f: FieldReader) throws(NMEAError) {
    coordinate = try f.coordinate(latitude: 1, longitude: 3)
    timeOfDay = try f.timeOfDay(5)
    switch try f.character(6, "status") {
    case 0x41?: isValid = true
    case 0x56?: isValid = false
    case nil: isValid = nil
    default: throw f.invalid(6, "status")
    }
    modeIndicator = try f.letter(7, "mode indicator")
  }
}
