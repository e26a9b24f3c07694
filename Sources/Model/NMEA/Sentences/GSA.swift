import LocationModel
// GSA: GNSS DOP and active satellites (NMEA 0183 v4.11).
//
//         1 2 3-14 (12 satellite IDs)   15  16  17  18
//  $--GSA,a,x,xx,xx,xx,xx,xx,xx,...,xx,x.x,x.x,x.x,h*hh
//  Field 18, the GNSS system ID, exists from NMEA 4.10 (1 GPS, 2 GLONASS, 3 Galileo, 4 BeiDou,
//  5 QZSS from 4.11, 6 NavIC).
//
//  $GPGSA,A,3,20,16,09,03,07,10,23,19,27,30,,,1.64,0.98,1.31*05                           (MT3339)
//  $GNGSA,A,3,02,05,06,12,13,15,19,24,25,29,,,1.05,0.64,0.83,1*00                         (ZED-F9P)

/// GSA: fix mode, satellites used and DOPs (NMEA 0183 v4.11).
public struct GSA: Sendable, Hashable {
  /// Field 2: fix mode 1 (none), 2 (2D) or 3 (3D).
  public var mode: FixMode?
  /// Fields 3-14: satellite IDs used in the solution (NMEA numbering), at most 16.
  public var satelliteIDs: [Int] { (0..<satelliteCount).map { Int(storedIDs[$0]) } }
  /// Number of satellite IDs, `0...16`.
  public private(set) var satelliteCount = 0
  private var storedIDs = SIMD16<UInt16>()

  /// The satellite ID at `index` (`0..<satelliteCount`), without allocating.
  public func satelliteID(at index: Int) -> Int { Int(storedIDs[index & 15]) }
  /// Field 15: position dilution of precision.
  public var pdop: Double?
  /// Field 16: horizontal dilution of precision.
  public var hdop: Double?
  /// Field 17: vertical dilution of precision.
  public var vdop: Double?
  /// Field 18 (NMEA 4.10+): GNSS system ID, mapped to a constellation; `nil` when absent or
  /// not a system ID (some BeiDou receivers put a float there).
  public var system: Constellation?

  init(_ f: FieldReader) throws(NMEAError) {
    switch try f.int(2, "fix mode") {
    case 1?: mode = .noFix
    case 2?: mode = .fix2D
    case 3?: mode = .fix3D
    case nil: mode = nil
    default: throw f.invalid(2, "fix mode")
    }
    // Receivers differ in how many ID slots they send (12 in the standard, more on some GNSS
    // chips); the three DOPs always follow the IDs, so count from the end.
    let hasSystemID = f.count >= 19
    let dopStart = hasSystemID ? f.count - 4 : f.count - 3
    if dopStart > 3 {
      for i in 3..<dopStart {
        if let id = try f.int(i, "satellite ID"), satelliteCount < 16 {
          storedIDs[satelliteCount] = UInt16(clamping: id)
          satelliteCount += 1
        }
      }
    }
    pdop = try f.double(dopStart, "PDOP")
    hdop = try f.double(dopStart + 1, "HDOP")
    vdop = try f.double(dopStart + 2, "VDOP")
    if hasSystemID, let id = try? f.hexInt(f.count - 1, "system ID") {
      system = Constellation(nmeaSystemID: id)
    }
  }
}

extension Constellation {
  /// The constellation of an NMEA 4.10/4.11 GNSS system ID (GSA field 18, GSV talker-less IDs):
  /// 1 GPS, 2 GLONASS, 3 Galileo, 4 BeiDou, 5 QZSS, 6 NavIC; `nil` for anything else.
  public init?(nmeaSystemID id: Int) {
    switch id {
    case 1: self = .gps
    case 2: self = .glonass
    case 3: self = .galileo
    case 4: self = .beidou
    case 5: self = .qzss
    case 6: self = .navic
    default: return nil
    }
  }

  /// The constellation an NMEA satellite ID belongs to when the talker does not say (GN talker):
  /// 1-32 GPS, 33-64 SBAS, 65-96 GLONASS, 193-202 QZSS, 201-263 BeiDou (as u-blox and others
  /// number them in NMEA 4.0 mode), 301-336 Galileo, 401-437 BeiDou; otherwise `nil`.
  public init?(nmeaSatelliteID id: Int) {
    switch id {
    case 1...32: self = .gps
    case 33...64, 120...158: self = .sbas
    case 65...96: self = .glonass
    case 193...200: self = .qzss
    case 201...263, 401...437: self = .beidou
    case 301...336: self = .galileo
    default: return nil
    }
  }
}
