import LocationModel
import NMEA

/// Maps gpsd reports into the domain model.
public enum GPSDMapping {
  /// `fix` with its time moved forward in 1024-week steps (7168 days) until it is not before
  /// `floor` (days since 1970-01-01), and the number of weeks added (0 when none, or without a
  /// floor or a time).
  public static func applyingRolloverFloor(_ floor: Int?, to fix: Fix) -> (fix: Fix, weeks: Int) {
    guard let floor, var time = fix.time else { return (fix, 0) }
    var fix = fix
    var weeks = 0
    let floorTime = Int64(floor) * 86_400_000
    while time < floorTime {
      time += Int64(FixAssembler.rolloverDays) * 86_400_000
      weeks += 1024
    }
    fix.time = time
    return (fix, weeks)
  }

  /// A TPV as a ``Fix``, with the sky view and DOPs of `sky` and the estimates of `gst` (when its
  /// time matches). Fields gpsd did not send stay `nil`; a position is set only in mode 2 or 3.
  public static func fix(from tpv: GPSDTPV, sky: GPSDSky?, gst: GPSDGST?) -> Fix {
    var fix = Fix(mode: FixMode(rawValue: max(0, min(3, tpv.mode))) ?? .unknown)
    fix.time = tpv.time
    if let time = tpv.time {
      fix.timeOfDay = Int32(((time % 86_400_000) + 86_400_000) % 86_400_000)
    }
    if fix.mode.hasPosition, let latitude = tpv.latitude, let longitude = tpv.longitude {
      let coordinate = Coordinate(latitude: latitude, longitude: longitude)
      if coordinate.isValid { fix.coordinate = coordinate }
    }
    if fix.coordinate == nil && fix.mode.hasPosition { fix.mode = .noFix }
    fix.quality = quality(status: tpv.status, mode: fix.mode)
    if fix.mode == .fix3D {
      fix.geoidSeparation = tpv.geoidSeparation
      // gpsd's own height, not the sum of its rounded parts.
      fix.reportedHAE = tpv.altitudeHAE
      if let msl = tpv.altitudeMSL {
        fix.altitudeMSL = msl
      } else if let hae = tpv.altitudeHAE, let separation = tpv.geoidSeparation {
        fix.altitudeMSL = hae - separation
      }
      fix.climb = tpv.climb
    } else {
      fix.geoidSeparation = tpv.geoidSeparation
    }
    if fix.mode.hasPosition {
      fix.speedOverGround = tpv.speed
      fix.courseOverGround = tpv.track
    }
    fix.magneticVariation = tpv.magneticVariation
    fix.dgpsAge = tpv.dgpsAge
    fix.dgpsStation = tpv.dgpsStation
    if let sky {
      fix.hdop = sky.hdop
      fix.vdop = sky.vdop
      fix.pdop = sky.pdop
      fix.satellites = sky.satellites.map { satellite in
        Satellite(
          constellation: Constellation(rawValue: satellite.gnssID) ?? .gps, prn: satellite.prn,
          elevation: satellite.elevation, azimuth: satellite.azimuth, snr: satellite.snr,
          used: satellite.used)
      }
      let used = sky.satellites.filter(\.used).count
      fix.satellitesUsed = sky.satellitesUsed ?? (sky.satellites.isEmpty ? nil : used)
    }
    if let gst, gst.time == tpv.time { fix.errorEstimates = gst.estimates }
    return fix
  }

  /// gpsd `status` as a GGA-style quality; `nil` when unknown.
  public static func quality(status: Int?, mode: FixMode) -> FixQuality? {
    guard mode.hasPosition else { return status == nil ? nil : .invalid }
    switch status {
    case nil: return nil
    case 0?, 1?: return .gps
    case 2?: return .dgps
    case 3?: return .rtkFixed
    case 4?: return .rtkFloat
    case 5?, 6?: return .deadReckoning
    case 7?: return .manual
    case 8?: return .simulator
    case 9?: return .pps
    default: return nil
    }
  }
}
