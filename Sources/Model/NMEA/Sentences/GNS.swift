import LocationModel
// GNS: GNSS fix data (NMEA 0183 v4.11).
//
//         1         2       3 4        5 6    7  8   9   10  11  12   13
//  $--GNS,hhmmss.ss,ddmm.mm,a,dddmm.mm,a,c--c,xx,x.x,x.x,x.x,x.x,xxxx,a*hh
//  Field 6 holds one mode letter per constellation (GPS, GLONASS, Galileo, BeiDou, QZSS, NavIC).
//
//  $GNGNS,235647.00,3403.47162394,N,11711.80927093,W,FFNNN,10,1.2,403.600,-32.133,,*2E       (Trimble R2)
//  $GPGNS,235647.00,,,,,,6,,,,1.0,0*4B                                                      (Trimble R2)

/// GNS: multi-constellation fix data (NMEA 0183 v4.11).
public struct GNS: Sendable, Hashable {
  /// Field 1: UTC time of day, milliseconds since midnight.
  public var timeOfDay: Int32?
  /// Fields 2-5: position, signed decimal degrees (WGS84).
  public var coordinate: Coordinate?
  /// Field 6: whether any constellation's mode letter is a fix (anything but `N`); `nil` if empty.
  public var isValid: Bool?
  /// The strongest quality the mode letters state (`D` DGPS, `R` RTK fixed, `F` RTK float, `E`
  /// dead reckoning, `M` manual, `S` simulator, `A`/`P` autonomous).
  public var quality: FixQuality?
  /// Field 7: satellites in use.
  public var satellitesUsed: Int?
  /// Field 8: HDOP.
  public var hdop: Double?
  /// Field 9: altitude above mean sea level, metres.
  public var altitudeMSL: Double?
  /// Field 10: geoid separation, metres.
  public var geoidSeparation: Double?
  /// Field 13 (NMEA 4.10+): navigational status `S` safe, `C` caution, `U` unsafe, `V` not valid
  /// (the equipment gives no status indication); `nil` when absent.
  public var navigationalStatus: UInt8?

  init(_ f: FieldReader) throws(NMEAError) {
    timeOfDay = try f.timeOfDay(1)
    coordinate = try f.coordinate(latitude: 2, longitude: 4)
    if let (s, e) = f.range(6) {
      var valid = false
      var best: FixQuality = .invalid
      for k in s..<e {
        guard (0x41...0x5A).contains(f.bytes[k]) else { throw f.invalid(6, "mode indicator") }
        let q = FixQuality(modeIndicator: f.bytes[k])
        if q != .invalid { valid = true }
        if q.rank > best.rank { best = q }
      }
      isValid = valid
      quality = best
    }
    satellitesUsed = try? f.int(7, "satellites in use")
    hdop = try f.double(8, "HDOP")
    altitudeMSL = try f.double(9, "altitude")
    geoidSeparation = try f.double(10, "geoid separation")
    navigationalStatus = try f.letter(13, "navigational status")
  }
}

extension FixQuality {
  /// The quality a mode-indicator letter (RMC 12, GLL 7, VTG 9, GNS 6) states, NMEA 0183 v4.11.
  public init(modeIndicator letter: UInt8) {
    switch letter {
    case 0x41, 0x50: self = .gps  // A autonomous, P precise
    case 0x44: self = .dgps  // D differential
    case 0x52: self = .rtkFixed  // R
    case 0x46: self = .rtkFloat  // F
    case 0x45: self = .deadReckoning  // E estimated
    case 0x4D: self = .manual  // M
    case 0x53: self = .simulator  // S
    default: self = .invalid  // N not valid, anything else
    }
  }

  var rank: Int {
    switch self {
    case .invalid: return 0
    case .manual, .simulator: return 1
    case .deadReckoning: return 2
    case .gps, .pps: return 3
    case .dgps: return 4
    case .rtkFloat: return 5
    case .rtkFixed: return 6
    }
  }
}
