/// Assembles parsed sentences into one ``Fix`` per epoch.
///
/// An epoch is the set of sentences that share one UTC time of day (GGA, RMC, GLL, GNS, ZDA and
/// GST carry it); sentences without a time field (GSA, GSV, VTG) join the epoch in progress, or
/// the next timed one if no time has been seen yet. An epoch ends when a fix sentence (GGA, RMC,
/// GLL, GNS) with another time arrives, or when a fix sentence without any time (a receiver with no
/// fix) repeats. ZDA and GST complete the epoch in progress even when their time differs slightly.
///
/// The rules are gpsd 3.22's (drivers/driver_nmea0183.c, gpsd/libgpsd_core.c); docs/nmea-vs-gpsd.md
/// lists each with the test that pins it, and where we deliberately differ.
///
/// - Date: from RMC or ZDA; carried to later epochs, and advanced by a day when the time of day
///   wraps past midnight with no new date. A date more than a day before the established one is
///   ignored (GPS week-rollover garbage such as 1999 or 2006 after 2019). With a rollover floor,
///   dates before it move forward in 1024-week steps first.
/// - Mode: GSA's fix mode, reconciled with the validity flags (RMC/GLL status, GGA quality, GNS
///   mode letters): a receiver that says "void" everywhere has no fix whatever GSA says; without
///   GSA, a valid GGA with altitude is 3D, any other valid position 2D. As in gpsd, GGA or GNS
///   with an altitude from four or more satellites makes the fix 3D, RMC and GLL do when the last
///   GSA listed more than three satellites or an altitude is known, and a later 2D does not
///   downgrade a 3D fix while an altitude is known.
/// - Values: the last valid position, speed and course of the epoch win (gpsd's merge); a fix
///   without a speed gets one from the distance to the previous timed fix.
/// - Satellites used: those the epoch's GSAs list, as the sky view flags them.
/// - Units: knots become m/s (x 1852/3600), the climb rate comes from the MSL altitude of
///   consecutive 3D epochs.
public struct FixAssembler: Sendable {
  private static let fixTypes: UInt16 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 7  // GGA RMC GLL GNS
  private static let knotsToMetresPerSecond = 1852.0 / 3600.0

  // The epoch being assembled.
  private var started = false
  private var line = 0
  private var timeOfDay: Int32?
  private var seen: UInt16 = 0
  private var date: Int?
  private var ggaCoordinate: Coordinate?
  private var otherCoordinate: Coordinate?
  private var latestCoordinate: Coordinate?
  private var quality: FixQuality?
  private var modeQuality: FixQuality?
  private var gsaMode: FixMode?
  private var positionSays3D = false
  private var rmcOrGLLSays3D = false
  private var valid = false
  private var invalid = false
  private var altitudeMSL: Double?
  private var geoidSeparation: Double?
  private var speedKnots: Double?
  private var speedKmh: Double?
  private var vtgKnots: Double?
  // gpsd gps_merge_fix: the last valid RMC or VTG of the epoch sets speed and course.
  private var latestKnots: Double?
  private var latestCourse: Double?
  private var course: Double?
  private var vtgCourse: Double?
  private var magneticVariation: Double?
  private var hdop: Double?
  private var ggaHDOP: Double?
  private var vdop: Double?
  private var pdop: Double?
  private var satellitesUsed: Int?
  private var sky: [Satellite] = []
  private var skySeen = false
  private var used: [UInt32] = []
  private var usedSeen = false
  private var errors: ErrorEstimates?
  private var navigationalStatus: UInt8?
  private var dgpsAge: Double?
  private var dgpsStation: Int?

  // Carried across epochs.
  private var lastDate: Int?
  private var lastTimeOfDay: Int32?
  private var lastSky: [Satellite] = []
  private var lastAltitude: (time: Int64, altitude: Double)?
  // gpsd's state before an epoch's first sentence: whether the last epoch reported an altitude
  // (even without a fix), its mode, and how many satellites its GSAs listed as used.
  private var previousHadAltitude = false
  private var previousMode: FixMode = .unknown
  private var previousUsedCount = 0
  // The last epoch with a time (gpsd's oldfix): its time, mode and position.
  private var previousTimed: (time: Int64, mode: FixMode, coordinate: Coordinate?)?

  /// The GPS week-rollover floor, days since 1970-01-01, or `nil` for none.
  private let rolloverFloor: Int?
  private var rolloverWeeks = 0
  private var lastRolloverWeeks = 0

  /// The number of days in 1024 GPS weeks: a receiver whose firmware predates a week rollover
  /// reports dates exactly this much too early.
  public static let rolloverDays = 7168

  /// Creates an assembler with no date or sky view known.
  ///
  /// - Parameter rolloverFloor: days since 1970-01-01 before which no date from this source can
  ///   be genuine (GPS week rollover: the 10-bit week number of IS-GPS-200 wraps every 1024 weeks,
  ///   last on 1999-08-22 and 2019-04-07). A date from RMC or ZDA before the floor moves forward
  ///   in steps of 1024 weeks (7168 days) until it is not; the fix says so in
  ///   ``DecodedFix/rolloverWeeks``. `nil` (the default) keeps dates as the receiver sent them.
  public init(rolloverFloor: Int? = nil) {
    self.rolloverFloor = rolloverFloor
  }

  /// Adds one sentence; calls `emit` when it completes the previous epoch.
  /// - Parameter line: 1-based input line of the sentence, reported as the epoch's first line.
  public mutating func apply(_ sentence: NMEASentence, line: Int, _ emit: (DecodedFix) -> Void) {
    let (bit, timed) = sentence.payload.epochInfo
    let time = sentence.timeOfDay
    guard bit != 0 else { return }
    if let time {
      if let current = timeOfDay {
        // ZDA and GST report when they were sent, which some receivers (Trimble) stamp a few
        // milliseconds after the epoch: they complete the epoch in progress, never start one.
        if current != time && (timed || seen & Self.fixTypes == 0) { flush(emit) }
      } else if seen & Self.fixTypes != 0 {
        flush(emit)  // a time-less no-fix epoch ends where timed data begins
      }
      if timeOfDay == nil || timed { timeOfDay = time }
    } else if timed {
      // A fix sentence with an empty time field: a receiver without a fix.
      if timeOfDay != nil || seen & bit != 0 { flush(emit) }
    }
    if !started {
      started = true
      self.line = line
    }
    seen |= bit
    merge(sentence)
  }

  /// Emits the epoch in progress, if it holds a time or a fix sentence.
  public mutating func flush(_ emit: (DecodedFix) -> Void) {
    defer { resetEpoch() }
    guard started, timeOfDay != nil || seen & Self.fixTypes != 0 else { return }
    let fix = buildFix()
    emit(DecodedFix(fix: fix, line: line, rolloverWeeks: fix.time == nil ? 0 : lastRolloverWeeks))
  }

  private mutating func merge(_ sentence: NMEASentence) {
    switch sentence.payload {
    case .gga(let s):
      if let c = s.coordinate {
        ggaCoordinate = c
        latestCoordinate = c
      }
      if let q = s.quality {
        quality = q
        if q == .invalid { invalid = true } else { valid = true }
      }
      if let n = s.satellitesUsed { satellitesUsed = n }
      // gpsd processGGA: a position with an altitude from at least four satellites is 3D.
      if s.coordinate != nil, s.altitudeMSL != nil, let q = s.quality, q != .invalid, (s.satellitesUsed ?? 0) >= 4 {
        positionSays3D = true
      }
      if let h = s.hdop { ggaHDOP = h }
      if let a = s.altitudeMSL { altitudeMSL = a }
      if let g = s.geoidSeparation { geoidSeparation = g }
      dgpsAge = s.dgpsAge ?? dgpsAge
      dgpsStation = s.dgpsStation ?? dgpsStation
    case .rmc(let s):
      if let v = s.isValid {
        if v { valid = true } else { invalid = true }
      }
      if let m = s.modeIndicator {
        let q = FixQuality(modeIndicator: m)
        if q == .invalid { invalid = true } else if modeQuality == nil { modeQuality = q }
      }
      if let c = s.coordinate {
        otherCoordinate = c
        if s.isValid == true { latestCoordinate = c }
      }
      // gpsd processRMC: a valid position is 3D when the last GSA listed more than three
      // satellites or an altitude is known (the previous epoch's, or this epoch's GGA).
      if s.isValid == true, s.coordinate != nil, previousUsedCount > 3 || previousHadAltitude || altitudeMSL != nil {
        positionSays3D = true
        rmcOrGLLSays3D = true
      }
      if let v = s.speedOverGroundKnots { speedKnots = v }
      if let c = s.courseOverGround { course = c }
      if s.isValid == true {
        if let v = s.speedOverGroundKnots { latestKnots = v }
        if let c = s.courseOverGround { latestCourse = c }
      }
      if let d = s.date { acceptDate(d) }
      if let m = s.magneticVariation { magneticVariation = m }
      if let n = s.navigationalStatus { navigationalStatus = n }
    case .gll(let s):
      if let v = s.isValid {
        if v { valid = true } else { invalid = true }
      }
      if otherCoordinate == nil, let c = s.coordinate { otherCoordinate = c }
      if let c = s.coordinate, s.isValid == true, s.modeIndicator != 0x4E { latestCoordinate = c }
      // gpsd processGLL: the status from the mode letter (FAA mode), or a plain fix without one.
      if s.isValid == true, s.coordinate != nil, modeQuality == nil {
        let q = s.modeIndicator.map { FixQuality(modeIndicator: $0) } ?? .gps
        if q != .invalid { modeQuality = q }
      }
      if s.modeIndicator.map({ FixQuality(modeIndicator: $0) }) == .invalid { invalid = true }
      // gpsd processGLL: the same rule as RMC's.
      if s.isValid == true, s.coordinate != nil, previousUsedCount > 3 || previousHadAltitude || altitudeMSL != nil {
        positionSays3D = true
        rmcOrGLLSays3D = true
      }
    case .gns(let s):
      if let v = s.isValid {
        if v {
          valid = true
          if modeQuality == nil, let q = s.quality { modeQuality = q }
        } else if s.coordinate != nil || sentence.talker == .multiGNSS {
          invalid = true
        }
      }
      if let c = s.coordinate, ggaCoordinate == nil { ggaCoordinate = c }
      if let c = s.coordinate, s.isValid == true { latestCoordinate = c }
      // gpsd processGNS: the same with "more than three" satellites.
      if s.isValid == true, s.coordinate != nil, s.altitudeMSL != nil, (s.satellitesUsed ?? 0) > 3 {
        positionSays3D = true
      }
      if altitudeMSL == nil { altitudeMSL = s.altitudeMSL }
      if geoidSeparation == nil { geoidSeparation = s.geoidSeparation }
      if ggaHDOP == nil { ggaHDOP = s.hdop }
      if satellitesUsed == nil, sentence.talker == .multiGNSS || s.coordinate != nil { satellitesUsed = s.satellitesUsed }
    case .gsa(let s):
      if let m = s.mode { gsaMode = max(gsaMode ?? .unknown, m) }
      if let p = s.pdop { pdop = p }
      if let h = s.hdop { hdop = h }
      if let v = s.vdop { vdop = v }
      usedSeen = true
      let system = s.system ?? sentence.talker?.constellation
      for index in 0..<s.satelliteCount {
        let id = s.satelliteID(at: index)
        guard let constellation = Self.constellation(of: id, talker: system, isGSA: true) else { continue }
        let key = Self.key(constellation, Satellite.svid(constellation: constellation, nmeaID: id))
        if !used.contains(key) { used.append(key) }
      }
    case .gsv(let s):
      skySeen = true
      for index in 0..<s.entryCount {
        guard let entry = s.entry(at: index),
          let constellation = Self.constellation(of: entry.id, talker: sentence.talker?.constellation, isGSA: false)
        else { continue }
        if let index = sky.firstIndex(where: { $0.constellation == constellation && $0.prn == entry.id }) {
          if let snr = entry.snr, snr > (sky[index].snr ?? -1) { sky[index].snr = snr }
          if sky[index].elevation == nil { sky[index].elevation = entry.elevation }
          if sky[index].azimuth == nil { sky[index].azimuth = entry.azimuth }
        } else {
          sky.append(
            Satellite(
              constellation: constellation, prn: entry.id, elevation: entry.elevation, azimuth: entry.azimuth,
              snr: entry.snr, signalID: s.signalID))
        }
      }
    case .vtg(let s):
      if let c = s.courseOverGround { vtgCourse = c }
      if let k = s.speedOverGroundKnots { vtgKnots = k }
      if let k = s.speedOverGroundKmh { speedKmh = k }
      // gpsd processVTG: used only with both course and knots, and not when the mode letter is
      // N (not valid) or E (dead reckoning).
      if let c = s.courseOverGround, let k = s.speedOverGroundKnots, s.modeIndicator != 0x4E, s.modeIndicator != 0x45 {
        latestKnots = k
        latestCourse = c
      }
    case .zda(let s):
      if let d = s.date { acceptDate(d) }
    case .gst(let s):
      errors = s.estimates
    case .proprietary, .unsupported:
      break
    }
  }

  private mutating func acceptDate(_ received: Int) {
    var candidate = received
    var weeks = 0
    if let floor = rolloverFloor {
      while candidate < floor {
        candidate += Self.rolloverDays
        weeks += 1024
      }
    }
    if let last = lastDate, candidate < last - 1 { return }
    date = candidate
    rolloverWeeks = weeks
  }

  private static func key(_ constellation: Constellation, _ prn: Int) -> UInt32 {
    UInt32(constellation.rawValue) << 16 | UInt32(truncatingIfNeeded: prn & 0xFFFF)
  }

  /// The constellation of satellite `id` given the sentence's talker (or GSA system ID).
  static func constellation(of id: Int, talker: Constellation?, isGSA: Bool) -> Constellation? {
    switch talker {
    case .gps?:
      // GPS talkers also report SBAS (33-64) and, on some receivers, QZSS (193-200).
      if (33...64).contains(id) || (120...158).contains(id) { return .sbas }
      if (193...200).contains(id) { return .qzss }
      return .gps
    case let c?:
      return c
    case nil:
      return Constellation(nmeaSatelliteID: id)
    }
  }

  private mutating func buildFix() -> Fix {
    var fix = Fix()
    fix.timeOfDay = timeOfDay
    // Date: this epoch's, or the last one carried over midnight.
    var day = date
    if day == nil, let lastDate, let lastTimeOfDay, let tod = timeOfDay {
      day = tod < lastTimeOfDay - 43_200_000 ? lastDate + 1 : lastDate
    }
    if date != nil { lastRolloverWeeks = rolloverWeeks }
    if let day, let tod = timeOfDay {
      fix.time = Int64(day) * 86_400_000 + Int64(tod)
      lastDate = day
      lastTimeOfDay = tod
    } else if let day {
      lastDate = day
    }

    // gpsd gps_merge_fix: every sentence with a valid position replaces the one before, so the
    // epoch's position is the last one sent (GGA's, or a valid RMC/GLL/GNS after it).
    let coordinate = latestCoordinate ?? ggaCoordinate ?? otherCoordinate
    var mode: FixMode
    if let gsaMode {
      if gsaMode >= .fix2D && invalid && !valid {
        mode = .noFix
      } else if gsaMode == .noFix && valid && !invalid {
        mode = altitudeMSL != nil && quality != nil ? .fix3D : .fix2D
      } else {
        mode = gsaMode
      }
    } else if valid && !invalid {
      mode = altitudeMSL != nil && (quality != nil || seen & (1 << 7) != 0) ? .fix3D : .fix2D
    } else if valid || invalid {
      mode = invalid ? .noFix : .fix2D
    } else {
      mode = .unknown
    }
    // gpsd nmea_parse (end): a sentence saying 2D does not downgrade a 3D fix while an altitude
    // is known. The fix is 3D when a sentence of this epoch made it so (GGA/GNS with an altitude
    // from four or more satellites, RMC/GLL by their rule above) or the last epoch was 3D.
    // Without GSA in the epoch, gpsd's processRMC/processGLL call a fix 3D by their rule above
    // (the last GSA listed four or more satellites, or an altitude is known) even when this
    // epoch sends no altitude.
    let satellites3D = rmcOrGLLSays3D && gsaMode == nil
    if mode == .fix2D,
      satellites3D || (altitudeMSL != nil && (positionSays3D || (previousMode == .fix3D && previousHadAltitude)))
    {
      mode = .fix3D
    }
    if mode >= .fix2D && coordinate == nil { mode = .noFix }
    // A 3D fix needs an altitude, unless the receiver's GSA says 3D itself (a receiver that
    // sends RMC and GSA only): gpsd keeps GSA's mode, and so does NMEA 0183 (GSA field 2).
    if mode == .fix3D && altitudeMSL == nil && gsaMode != .fix3D && !satellites3D { mode = .fix2D }
    fix.mode = mode
    previousMode = mode
    previousHadAltitude = altitudeMSL != nil
    if usedSeen { previousUsedCount = used.count }
    fix.quality = quality ?? modeQuality ?? (invalid && !valid ? .invalid : nil)
    if let n = navigationalStatus { fix.navigationalStatus = String(UnicodeScalar(n)) }

    if mode >= .fix2D {
      fix.coordinate = coordinate
      if let knots = latestKnots ?? speedKnots ?? vtgKnots {
        fix.speedOverGround = knots * Self.knotsToMetresPerSecond
      } else if let kmh = speedKmh {
        fix.speedOverGround = kmh / 3.6
      }
      fix.courseOverGround = latestCourse ?? course ?? vtgCourse
      fix.magneticVariation = magneticVariation
      fix.geoidSeparation = geoidSeparation
      fix.dgpsAge = dgpsAge
      fix.dgpsStation = dgpsStation
      fix.errorEstimates = errors
    }
    // gpsd gpsd_error_model (libgpsd_core.c): a receiver that sent no speed gets the distance
    // from the previous timed fix (both 2D or better) over the time between them.
    if let time = fix.time {
      if fix.speedOverGround == nil, mode >= .fix2D, let here = fix.coordinate, let last = previousTimed,
        last.mode >= .fix2D, let there = last.coordinate, time > last.time,
        let metres = WGS84Geodesic.distance(here, there)
      {
        let speed = metres * 1000 / Double(time - last.time)
        if speed <= 9999.9 { fix.speedOverGround = speed }
      }
      previousTimed = (time, mode, fix.coordinate)
    }
    if mode == .fix3D {
      fix.altitudeMSL = altitudeMSL
      if let time = fix.time, let altitude = altitudeMSL {
        if let last = lastAltitude, time > last.time, time - last.time <= 60_000 {
          fix.climb = (altitude - last.altitude) * 1000 / Double(time - last.time)
        }
        lastAltitude = (time, altitude)
      }
    } else {
      lastAltitude = nil
    }
    fix.hdop = hdop ?? ggaHDOP
    fix.vdop = vdop
    fix.pdop = pdop

    if skySeen { lastSky = sky }
    var satellites = lastSky
    if usedSeen {
      for i in satellites.indices {
        satellites[i].used = used.contains(Self.key(satellites[i].constellation, satellites[i].svid))
      }
      lastSky = satellites
    }
    fix.satellites = satellites
    // Satellites used: those the epoch's GSAs list, across every constellation, counted as the
    // sky view flags them (gpsd json_sky_dump counts the skyview entries marked used), so that
    // uSat always equals the SKY entries with "used": true. GGA's two-digit count (capped at 12
    // by many multi-GNSS receivers) and GNS's count serve only when no GSA was sent.
    if usedSeen {
      fix.satellitesUsed = satellites.isEmpty ? used.count : satellites.reduce(0) { $0 + ($1.used ? 1 : 0) }
    } else {
      fix.satellitesUsed = satellitesUsed
    }
    return fix
  }

  private mutating func resetEpoch() {
    started = false
    timeOfDay = nil
    seen = 0
    date = nil
    rolloverWeeks = 0
    ggaCoordinate = nil
    otherCoordinate = nil
    latestCoordinate = nil
    quality = nil
    modeQuality = nil
    gsaMode = nil
    positionSays3D = false
    rmcOrGLLSays3D = false
    valid = false
    invalid = false
    altitudeMSL = nil
    geoidSeparation = nil
    speedKnots = nil
    speedKmh = nil
    vtgKnots = nil
    latestKnots = nil
    latestCourse = nil
    course = nil
    vtgCourse = nil
    magneticVariation = nil
    hdop = nil
    ggaHDOP = nil
    vdop = nil
    pdop = nil
    satellitesUsed = nil
    sky.removeAll(keepingCapacity: true)
    skySeen = false
    used.removeAll(keepingCapacity: true)
    usedSeen = false
    errors = nil
    navigationalStatus = nil
    dgpsAge = nil
    dgpsStation = nil
  }
}

extension NMEASentence.Payload {
  /// The sentence's bit in the epoch's "seen" mask and whether its type is a fix sentence that
  /// carries a time field. Reads only the case, so no payload is copied.
  var epochInfo: (bit: UInt16, timed: Bool) {
    switch self {
    case .gga: return (1 << 0, true)
    case .rmc: return (1 << 1, true)
    case .gll: return (1 << 2, true)
    case .gns: return (1 << 7, true)
    case .zda: return (1 << 6, false)
    case .gst: return (1 << 8, false)
    case .gsa: return (1 << 3, false)
    case .gsv: return (1 << 4, false)
    case .vtg: return (1 << 5, false)
    case .proprietary, .unsupported: return (0, false)
    }
  }
}
