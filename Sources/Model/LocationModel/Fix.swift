/// A position on the WGS84 ellipsoid, in signed decimal degrees.
///
/// `latitude` is in `-90...90` (south negative), `longitude` in `-180...180` (west negative).
/// This is the shape of gpsd TPV `lat`/`lon` and of CoreLocation's `CLLocationCoordinate2D`.
public struct Coordinate: Sendable, Hashable, Codable {
  /// Degrees north of the equator (WGS84), `-90...90`.
  public var latitude: Double
  /// Degrees east of Greenwich (WGS84), `-180...180`.
  public var longitude: Double

  /// Creates a coordinate from signed decimal degrees (WGS84); values are stored as given.
  public init(latitude: Double, longitude: Double) {
    self.latitude = latitude
    self.longitude = longitude
  }

  /// Whether both components are finite and within `-90...90` and `-180...180`.
  public var isValid: Bool {
    latitude.isFinite && longitude.isFinite && abs(latitude) <= 90 && abs(longitude) <= 180
  }
}

/// Fix mode as gpsd's TPV `mode` reports it: 0 not seen, 1 no fix, 2 two-dimensional, 3 three-dimensional.
///
/// From NMEA 0183 GSA field 2 ("mode: 1 = fix not available, 2 = 2D, 3 = 3D"), or derived from
/// GGA quality and altitude, or from RMC/GLL status when neither is present.
public enum FixMode: Int, Sendable, Hashable, Codable, Comparable {
  /// No sentence has yet said anything about the fix (gpsd mode 0).
  case unknown = 0
  /// The receiver reports no valid position (gpsd mode 1).
  case noFix = 1
  /// Latitude and longitude are valid, altitude is not (gpsd mode 2).
  case fix2D = 2
  /// Latitude, longitude and altitude are valid (gpsd mode 3).
  case fix3D = 3

  /// Orders modes by how much they fix: unknown < no fix < 2D < 3D.
  public static func < (lhs: FixMode, rhs: FixMode) -> Bool { lhs.rawValue < rhs.rawValue }

  /// Whether the mode carries a position (2D or 3D).
  public var hasPosition: Bool { self >= .fix2D }
}

/// How the position was obtained: NMEA 0183 GGA field 6 (quality indicator, 0-8),
/// or the RMC/GNS mode indicator letter when GGA is absent.
public enum FixQuality: Int, Sendable, Hashable, Codable {
  /// 0: fix not available or invalid.
  case invalid = 0
  /// 1: autonomous GNSS fix (SPS).
  case gps = 1
  /// 2: differential GNSS (DGPS, SBAS/WAAS).
  case dgps = 2
  /// 3: precise positioning service (PPS).
  case pps = 3
  /// 4: real-time kinematic, fixed integers.
  case rtkFixed = 4
  /// 5: real-time kinematic, float solution.
  case rtkFloat = 5
  /// 6: estimated (dead reckoning).
  case deadReckoning = 6
  /// 7: manual input.
  case manual = 7
  /// 8: simulator.
  case simulator = 8

  /// gpsd's TPV `status` value for this quality (gpsd JSON protocol: 0 unknown, 1 normal, 2 DGPS,
  /// 3 RTK fixed, 4 RTK float, 5 dead reckoning, 7 time only, 8 simulated).
  public var gpsdStatus: Int {
    switch self {
    case .invalid: return 0
    case .gps: return 1
    case .pps: return 9  // gpsd processGGA: quality 3 is STATUS_PPS_FIX
    case .dgps: return 2
    case .rtkFixed: return 3
    case .rtkFloat: return 4
    case .deadReckoning: return 5
    case .manual: return 7
    case .simulator: return 8
    }
  }
}

/// A GNSS constellation, with gpsd's `gnssid` numbering (gpsd JSON protocol, SKY satellites).
public enum Constellation: Int, Sendable, Hashable, Codable, CaseIterable {
  /// GPS (USA), NMEA talker GP, gnssid 0.
  case gps = 0
  /// SBAS augmentation satellites (WAAS, EGNOS, MSAS), NMEA PRN 33-64, gnssid 1.
  case sbas = 1
  /// Galileo (EU), talker GA, gnssid 2.
  case galileo = 2
  /// BeiDou (China), talker GB or BD, gnssid 3.
  case beidou = 3
  /// IMES, gnssid 4 (no NMEA talker).
  case imes = 4
  /// QZSS (Japan), talker GQ, gnssid 5.
  case qzss = 5
  /// GLONASS (Russia), talker GL, gnssid 6.
  case glonass = 6
  /// NavIC/IRNSS (India), talker GI, gnssid 7.
  case navic = 7
}

/// One satellite of the sky view, keyed by ``Constellation`` and PRN.
///
/// From NMEA 0183 GSV (elevation, azimuth, SNR) and GSA (used in the solution).
public struct Satellite: Sendable, Hashable, Codable {
  /// The constellation the satellite belongs to.
  public var constellation: Constellation
  /// The satellite number as the NMEA sentence gives it (NMEA PRN numbering, e.g. GLONASS 65-96).
  public var prn: Int
  /// Elevation above the horizon in degrees, `-90...90`; `nil` when the field was empty.
  public var elevation: Double?
  /// Azimuth in degrees true, `0..<360`; `nil` when the field was empty.
  public var azimuth: Double?
  /// Signal-to-noise ratio (C/N0) in dB-Hz, `0...99`; `nil` when not tracked.
  public var snr: Double?
  /// Whether the receiver used this satellite in the fix (listed in a GSA of the epoch).
  public var used: Bool
  /// NMEA 4.10+ GSV signal ID (e.g. 1 = GPS L1 C/A), `nil` before 4.10.
  public var signalID: Int?

  /// Creates a satellite entry; all angles in degrees, SNR in dB-Hz.
  public init(
    constellation: Constellation, prn: Int, elevation: Double? = nil, azimuth: Double? = nil,
    snr: Double? = nil, used: Bool = false, signalID: Int? = nil
  ) {
    self.constellation = constellation
    self.prn = prn
    self.elevation = elevation
    self.azimuth = azimuth
    self.snr = snr
    self.used = used
    self.signalID = signalID
  }
}

extension Satellite {
  /// The satellite's number within its constellation (gpsd SKY `svid`, u-blox numbering): GPS
  /// 1-32, SBAS 120-158, Galileo 1-36, BeiDou 1-63, IMES 1-10, QZSS 1-10, GLONASS 1-32, NavIC 1-14.
  public var svid: Int { Self.svid(constellation: constellation, nmeaID: prn) }

  /// gpsd's `PRN` for this satellite (gpsd 3.22 `nmeaid_to_prn` in drivers/driver_nmea0183.c),
  /// unique across constellations: GPS 1-32, SBAS 33-64 and 120-158 as sent, IMES 173-182,
  /// QZSS 193-202, GLONASS 65-96, Galileo 301-336, BeiDou 401-463, NavIC 501-514.
  public var gpsdPRN: Int {
    switch constellation {
    case .gps, .sbas, .imes: return prn
    case .glonass: return 64 + svid
    case .galileo: return 300 + svid
    case .beidou: return 400 + svid
    case .qzss: return 192 + svid
    case .navic: return 500 + svid
    }
  }

  /// The number within `constellation` of a satellite that NMEA 0183 numbers `nmeaID`: the
  /// NMEA 4.11 per-constellation numbers (1-99) as they are, and the extended ranges of NMEA 4.0
  /// and of u-blox, SiRF and Quectel firmware (GLONASS 65-96, Galileo 101-136 and 301-336,
  /// BeiDou 201-263 and 401-463, QZSS 193-202, SBAS 33-64) moved back to it.
  public static func svid(constellation: Constellation, nmeaID id: Int) -> Int {
    switch constellation {
    case .gps: return id
    case .sbas: return (33...64).contains(id) ? id + 87 : id
    case .imes: return (173...182).contains(id) ? id - 172 : id
    case .glonass: return id > 64 ? id - 64 : id
    case .galileo: return id > 300 ? id - 300 : id > 100 ? id - 100 : id
    case .beidou: return id > 400 ? id - 400 : id > 200 ? id - 200 : id
    case .qzss: return id > 192 ? id - 192 : id
    case .navic: return id > 500 ? id - 500 : id
    }
  }
}

/// Pseudorange error statistics from NMEA 0183 GST, all one-sigma, in metres.
public struct ErrorEstimates: Sendable, Hashable, Codable {
  /// RMS of the standard deviation of the range inputs, metres.
  public var rangeRMS: Double?
  /// Standard deviation of the semi-major axis of the error ellipse, metres.
  public var semiMajor: Double?
  /// Standard deviation of the semi-minor axis of the error ellipse, metres.
  public var semiMinor: Double?
  /// Orientation of the semi-major axis, degrees true.
  public var orientation: Double?
  /// Standard deviation of latitude error, metres (one sigma).
  public var latitude: Double?
  /// Standard deviation of longitude error, metres (one sigma).
  public var longitude: Double?
  /// Standard deviation of altitude error, metres (one sigma).
  public var altitude: Double?

  /// Creates an empty set of estimates.
  public init() {}
}

/// One position/velocity solution for one epoch: gpsd's TPV and SKY in one value.
///
/// Units are SI throughout: degrees (WGS84) for position, metres for altitude and errors,
/// m/s for speed and climb, degrees true for course. Every field the receiver did not send is
/// `nil`, never zero: an empty NMEA field is an absent value.
public struct Fix: Sendable, Hashable, Codable {
  /// UTC time of the epoch in milliseconds since 1970-01-01T00:00:00Z; `nil` until a date is
  /// known (GGA carries only the time of day; RMC or ZDA supply the date).
  public var time: Int64?
  /// UTC time of day of the epoch in milliseconds since midnight, `0..<86_400_000` (a leap second
  /// may reach 86_400_999); `nil` when no sentence of the epoch carried a time.
  public var timeOfDay: Int32?
  /// Fix mode (gpsd TPV `mode`).
  public var mode: FixMode
  /// Fix quality (GGA quality indicator); `nil` when no sentence said.
  public var quality: FixQuality?
  /// Position in WGS84 degrees; `nil` when ``mode`` has no position.
  public var coordinate: Coordinate?
  /// Altitude above mean sea level (geoid), metres; gpsd `altMSL`.
  public var altitudeMSL: Double?
  /// Geoid separation (height of the geoid above the WGS84 ellipsoid), metres; gpsd `geoidSep`.
  /// The receiver's (GGA field 11, GNS field 10), else, for a fix decoded from NMEA with a
  /// position, gpsd 3.22's model value (``GPSDEarthModel``), as gpsd fills it.
  public var geoidSeparation: Double?
  /// Speed over ground, m/s; gpsd `speed`. From the last RMC or VTG of the epoch; when the
  /// receiver sent none, the geodesic distance from the previous timed fix over the time between
  /// (as gpsd derives it).
  public var speedOverGround: Double?
  /// Course over ground ("track made good"), degrees true, `0..<360`; gpsd `track`.
  public var courseOverGround: Double?
  /// Vertical speed, m/s, positive upwards; derived from the altitude of consecutive epochs.
  public var climb: Double?
  /// Magnetic variation, degrees, east positive (RMC fields 10-11); gpsd `magvar`. For a fix
  /// decoded from NMEA with a position and no variation above 0.09 degrees, gpsd 3.22's model value
  /// (``GPSDEarthModel``), as gpsd fills it.
  public var magneticVariation: Double?
  /// Horizontal dilution of precision (GSA or GGA).
  public var hdop: Double?
  /// Vertical dilution of precision (GSA).
  public var vdop: Double?
  /// Position (3D) dilution of precision (GSA).
  public var pdop: Double?
  /// Number of satellites used in the solution: the satellites the epoch's GSAs list (all
  /// constellations), as flagged in ``satellites``; GNS field 7 or GGA field 7 only without GSA.
  public var satellitesUsed: Int?
  /// The sky view: satellites in view keyed by constellation and PRN, in the order first seen.
  public var satellites: [Satellite]
  /// NMEA 0183 GST error statistics, when the receiver sent GST for this epoch.
  public var errorEstimates: ErrorEstimates?
  /// NMEA 4.10 navigational status (RMC field 13: S safe, C caution, U unsafe, V not valid).
  public var navigationalStatus: String?
  /// Age of differential corrections, seconds (GGA field 13).
  public var dgpsAge: Double?
  /// Differential reference station ID (GGA field 14).
  public var dgpsStation: Int?
  /// Horizontal position error the producer states itself, metres, radius of the circle holding
  /// 95% of errors, `>= 0`; ``eph`` returns it instead of gpsd's HDOP model. Set by the simulated
  /// receiver (the 95% radius of its own error distribution); `nil` for fixes decoded from NMEA
  /// 0183, which carries no 95% figure (GST gives one-sigma values, which gpsd 3.22 does not turn
  /// into `eph`).
  public var reportedEPH: Double?
  /// Vertical position error the producer states itself, metres, half-width of the interval
  /// holding 95% of errors, `>= 0`; ``epv`` returns it instead of gpsd's VDOP model. `nil` for
  /// fixes decoded from NMEA 0183.
  public var reportedEPV: Double?
  /// Height above the WGS84 ellipsoid the producer states itself, metres; ``altitudeHAE`` returns
  /// it instead of ``altitudeMSL`` plus ``geoidSeparation``. Set from gpsd's own `altHAE` (gpsd
  /// prints `geoidSep` to 3 decimals and the heights to 4: their sum is not gpsd's figure); `nil`
  /// for fixes decoded from NMEA 0183, whose GGA gives the two parts.
  public var reportedHAE: Double?

  /// Creates a fix; only the mode is required, everything else defaults to unknown.
  public init(mode: FixMode = .unknown) {
    self.mode = mode
    self.satellites = []
  }

  /// Altitude above the WGS84 ellipsoid (height above ellipsoid), metres: ``reportedHAE`` when
  /// the producer stated it, else MSL + geoid separation. gpsd `altHAE`. `nil` unless one of
  /// them is known.
  public var altitudeHAE: Double? {
    if let reportedHAE, reportedHAE.isFinite { return reportedHAE }
    guard let msl = altitudeMSL, let separation = geoidSeparation else { return nil }
    return msl + separation
  }

  /// Estimated horizontal position error, metres, 95% confidence (gpsd `eph`).
  ///
  /// ``reportedEPH`` when the producer states it (as gpsd keeps an `eph` its driver set), else
  /// gpsd's error model for NMEA receivers (gpsd 3.22 `gpsd_error_model`, gpsd/libgpsd_core.c):
  /// HDOP times a user equivalent range error of 19 m, 4.75 m for a DGPS fix (status 2 only: RTK
  /// and PPS use 19 m, as gpsd). gpsd does not derive `eph` from GST, and neither does this. `nil`
  /// without a position, or without HDOP and a reported value.
  public var eph: Double? {
    guard mode.hasPosition else { return nil }
    if let reportedEPH, reportedEPH.isFinite, reportedEPH >= 0 { return reportedEPH }
    guard let hdop else { return nil }
    return hdop * (quality == .dgps ? 4.75 : 19.0)
  }

  /// Estimated vertical position error, metres, 95% confidence (gpsd `epv`): ``reportedEPV``
  /// when the producer states it, else VDOP times 23 m (5.75 m for a DGPS fix, status 2 only), as
  /// gpsd 3.22's `gpsd_error_model`. `nil` without a 3D fix, or without VDOP and a reported value.
  public var epv: Double? {
    guard mode == .fix3D else { return nil }
    if let reportedEPV, reportedEPV.isFinite, reportedEPV >= 0 { return reportedEPV }
    guard let vdop else { return nil }
    return vdop * (quality == .dgps ? 5.75 : 23.0)
  }

  /// Whether differential corrections (DGPS, SBAS, RTK) were applied.
  public var isDifferential: Bool {
    switch quality {
    case .dgps?, .rtkFixed?, .rtkFloat?: return true
    default: return false
    }
  }

  /// Number of satellites in view (gpsd SKY `nSat`).
  public var satellitesInView: Int { satellites.count }
}
