import LocationModel
// RMC: Recommended minimum specific GNSS data (NMEA 0183 v4.11).
//
//         1         2 3       4 5        6 7   8   9      10  11 12 13
//         |         | |       | |        | |   |   |      |   |  |  |
//  $--RMC,hhmmss.ss,A,ddmm.mm,a,dddmm.mm,a,x.x,x.x,ddmmyy,x.x,a,m,s*hh
//  NMEA 2.0 ends at field 11; 2.3 adds the mode indicator (12); 4.10 the navigational status (13).
//
//  $GPRMC,202640.000,A,4404.1306,N,12118.8515,W,0.03,225.97,130415,,,D*73               (MT3339)
//  $GNRMC,003956.00,A,4552.65403,S,17030.00668,E,0.025,,120419,,,A,V*1F                  (ZED-F9P)

/// RMC: time, date, status, position, speed and course over ground (NMEA 0183 v4.11).
public struct RMC: Sendable, Hashable {
  /// Field 1: UTC time of day, milliseconds since midnight.
  public var timeOfDay: Int32?
  /// Field 2: status, `true` for `A` (data valid), `false` for `V` (void).
  public var isValid: Bool?
  /// Fields 3-6: position, signed decimal degrees (WGS84).
  public var coordinate: Coordinate?
  /// Field 7: speed over ground, knots (wire unit).
  public var speedOverGroundKnots: Double?
  /// Field 8: course over ground, degrees true.
  public var courseOverGround: Double?
  /// Field 9: UTC date, days since 1970-01-01.
  public var date: Int?
  /// Fields 10-11: magnetic variation, degrees, east positive, -180...180 (a field beyond 180
  /// degrees, or not a number, rejects the sentence).
  public var magneticVariation: Double?
  /// Field 12 (NMEA 2.3+): mode indicator `A` autonomous, `D` differential, `E` estimated,
  /// `F` float RTK, `M` manual, `N` not valid, `P` precise, `R` RTK, `S` simulator.
  public var modeIndicator: UInt8?
  /// Field 13 (NMEA 4.10+): navigational status `S` safe, `C` caution, `U` unsafe, `V` not valid.
  public var navigationalStatus: UInt8?

  init(_ f: FieldReader) throws(NMEAError) {
    timeOfDay = try f.timeOfDay(1)
    switch try f.character(2, "status") {
    case 0x41?: isValid = true
    case 0x56?: isValid = false
    case nil: isValid = nil
    default: throw f.invalid(2, "status")
    }
    coordinate = try f.coordinate(latitude: 3, longitude: 5)
    speedOverGroundKnots = try f.double(7, "speed over ground", in: FieldReader.nonNegative)
    courseOverGround = try f.double(8, "course over ground", in: FieldReader.compass)
    date = try f.date(9)
    // The variation is a number like every other field (text that is not one, or a magnitude
    // beyond 180 degrees, rejects the sentence); a letter other than E or W (Motorola T805 sends
    // "0,N": the direction left out before the mode indicator) means no usable variation, as in
    // gpsd's processRMC.
    let variation = try f.double(10, "magnetic variation", in: FieldReader.variation)
    let direction = try f.letter(11, "variation direction")
    if let variation, direction == 0x45 || direction == 0x57 {
      magneticVariation = direction == 0x57 ? -variation : variation
    }
    modeIndicator = try f.letter(12, "mode indicator")
    navigationalStatus = try f.letter(13, "navigational status")
  }
}
