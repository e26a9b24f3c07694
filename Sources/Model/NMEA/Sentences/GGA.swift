import LocationModel
// GGA: Global Positioning System fix data (NMEA 0183 v4.11).
//
//         1         2       3 4        5 6 7  8   9  10 11 12 13  14
//         |         |       | |        | | |  |   |  |  |  |  |   |
//  $--GGA,hhmmss.ss,ddmm.mm,a,dddmm.mm,a,x,xx,x.x,x.x,M,x.x,M,x.x,xxxx*hh
//
//  $GPGGA,202640.000,4404.1306,N,12118.8515,W,2,10,0.98,1127.7,M,-19.6,M,0000,0000*6C  (MediaTek MT3339)
//  $GNGGA,003956.00,4552.65403,S,17030.00668,E,1,12,0.64,14.2,M,1.8,M,,*69             (u-blox ZED-F9P)

/// GGA: time, position, fix quality, satellites used, HDOP and altitude (NMEA 0183 v4.11).
public struct GGA: Sendable, Hashable {
  /// Field 1: UTC time of day, milliseconds since midnight.
  public var timeOfDay: Int32?
  /// Fields 2-5: position, signed decimal degrees (WGS84).
  public var coordinate: Coordinate?
  /// Field 6: quality indicator 0-8.
  public var quality: FixQuality?
  /// Field 7: number of satellites in use.
  public var satellitesUsed: Int?
  /// Field 8: horizontal dilution of precision.
  public var hdop: Double?
  /// Field 9: altitude above mean sea level (geoid), metres.
  public var altitudeMSL: Double?
  /// Field 11: geoid separation (geoid above WGS84 ellipsoid), metres.
  public var geoidSeparation: Double?
  /// Field 13: age of differential corrections, seconds.
  public var dgpsAge: Double?
  /// Field 14: differential reference station ID, 0-1023.
  public var dgpsStation: Int?

  init(_ f: FieldReader) throws(NMEAError) {
    timeOfDay = try f.timeOfDay(1)
    coordinate = try f.coordinate(latitude: 2, longitude: 4)
    if let q = try f.int(6, "quality indicator") {
      guard let quality = FixQuality(rawValue: q) else { throw f.invalid(6, "quality indicator") }
      self.quality = quality
    }
    satellitesUsed = try f.int(7, "satellites in use")
    hdop = try f.double(8, "HDOP")
    altitudeMSL = try f.double(9, "altitude")
    geoidSeparation = try f.double(11, "geoid separation")
    dgpsAge = try? f.double(13, "age of differential data")
    dgpsStation = try? f.int(14, "differential station ID")
  }
}
