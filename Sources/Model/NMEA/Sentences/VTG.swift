import LocationModel
// VTG: Course over ground and ground speed (NMEA 0183 v4.11).
//
//         1   2 3   4 5   6 7   8 9
//  $--VTG,x.x,T,x.x,M,x.x,N,x.x,K,a*hh
//
//  $GPVTG,225.97,T,,M,0.03,N,0.06,K,D*3A                                                   (MT3339)
//  $GNVTG,,T,,M,0.025,N,0.046,K,A*3A                                                        (ZED-F9P)

/// VTG: course and speed over ground (NMEA 0183 v4.11).
public struct VTG: Sendable, Hashable {
  /// Field 1: course over ground, degrees true.
  public var courseOverGround: Double?
  /// Field 5: speed over ground, knots (wire unit).
  public var speedOverGroundKnots: Double?
  /// Field 7: speed over ground, km/h (wire unit).
  public var speedOverGroundKmh: Double?
  /// Field 9 (NMEA 2.3+): mode indicator, as in ``RMC/modeIndicator``.
  public var modeIndicator: UInt8?

  init(_ f: FieldReader) throws(NMEAError) {
    courseOverGround = try f.double(1, "course over ground", in: FieldReader.compass)
    if f.count <= 5 && (try? f.character(2, "")) != 0x54 {
      // Pre-2.0 layout without unit letters: course true, course magnetic, knots, km/h.
      speedOverGroundKnots = try f.double(3, "speed over ground (knots)", in: FieldReader.nonNegative)
      speedOverGroundKmh = try f.double(4, "speed over ground (km/h)", in: FieldReader.nonNegative)
      return
    }
    speedOverGroundKnots = try f.double(5, "speed over ground (knots)", in: FieldReader.nonNegative)
    speedOverGroundKmh = try f.double(7, "speed over ground (km/h)", in: FieldReader.nonNegative)
    modeIndicator = try f.letter(9, "mode indicator")
  }
}
