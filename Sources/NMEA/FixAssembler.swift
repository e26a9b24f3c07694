import LocationModel
/// Assembles parsed sentences into one ``Fix`` per epoch.
///
/// An epoch is the set of sentences that share one UTC time of day (GGA, RMC, GLL, GNS, ZDA and
/// GST carry it); sentences without a time field (GSA, GSV, VTG) join the epoch in progress, or
/// the next timed one if no time has been seen yet. An epoch ends when a fix sentence (GGA, RMC,
/// GLL, GNS) with another time arrives, or when a fix sentence without any time (a receiver with no
/// fix) repeats. ZDA and GST complete the epoch in progress when their time is within half a second
/// of it, and otherwise start the epoch of their own time.
///
/// The rules are gpsd 3.22's (drivers/driver_nmea0183.c, gpsd/libgpsd_core.c); docs/nmea-vs-gpsd.md
/// lists each with the test that pins it, and where we deliberately differ.
///
/// - Date: from a valid RMC or a ZDA (a void RMC's date is not used, as in gpsd); carried to
///   later epochs, and advanced by a day when the time of day wraps past midnight with no new
///   date. A date more than a day before the last one received is ignored (GPS week-rollover
///   garbage such as 1999 or 2006 after 2019). With a rollover floor, dates before it then move
///   forward in 1024-week steps.
/// - Mode: GSA's fix mode, reconciled with the validity flags (RMC/GLL status, GGA quality, GNS
///   mode letters): a receiver that says "void" everywhere has no fix whatever GSA says; without
///   GSA, a valid GGA with altitude is 3D, any other valid position 2D, except that a GGA from
///   three satellites after a 3D RMC or GLL makes the epoch 2D unless gpsd's last timed fix had
///   an altitude. As in gpsd, GGA or GNS
///   with an altitude from four or more satellites makes the fix 3D, RMC and GLL do when the last
///   GSA listed more than three satellites or an altitude is known, and a later 2D does not
///   downgrade a 3D fix while an altitude is known.
/// - Values: the last valid position, speed and course of the epoch win (gpsd's merge); a fix
///   without a speed gets one from the distance to the previous timed fix.
/// - Reporting: as gpsd, the epoch's fix values (position, mode, altitude, speed, course) are
///   those merged up to the last sentence at which gpsd reports the epoch: one of the sentence
///   types it has learned to end a cycle (the last one with a time before the time changed), any
///   sentence it decodes after a DBT (its cycle continuer), or, while no end of cycle is known,
///   every sentence with a position or a mode. What arrives later in the epoch does not change
///   them; the date, the sky view, the DOPs and the GST errors keep the whole epoch.
/// - Satellites used: the sky view's entries flagged used by the last GSAs (kept across epochs
///   without GSA, as gpsd); without a sky view the GSAs' count, else the larger of GNS's and
///   GGA's.
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
  private var ggaSays2D = false
  private var rmcKeeps3D = false
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
  private var gnsSatellitesUsed: Int?
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
  private var lastReceivedDate: Int?
  private var lastTimeOfDay: Int32?
  private var lastSky: [Satellite] = []
  private var lastDOPs: (hdop: Double?, vdop: Double?, pdop: Double?) = (nil, nil, nil)
  // The satellites the last epoch with a GSA listed (gpsd keeps `sats_used` until the next GSA).
  private var lastUsed: [UInt32] = []
  private var anyUsedSeen = false
  private var lastAltitude: (time: Int64, altitude: Double)?
  // gpsd's state before an epoch's first sentence: whether the last epoch reported an altitude
  // (even without a fix), its mode, and how many satellites its GSAs listed as used.
  private var previousHadAltitude = false
  // gpsd's lastfix/oldfix: whether the last epoch that had a time for gpsd (a date from a valid
  // RMC or a ZDA) had an altitude.
  private var gpsdDateKnown = false
  private var lastTimedHadAltitude = false
  private var previousMode: FixMode = .unknown
  private var previousUsedCount = 0
  // The last epoch with a time (gpsd's oldfix): its time, mode and position.
  private var previousTimed: (time: Int64, mode: FixMode, coordinate: Coordinate?)?

  // gpsd's end-of-cycle detector (driver_nmea0183.c nmea_parse): the sentence types learned to
  // end a reporting cycle, the last sentence that latched a time, that time, whether a cycle
  // continuer (DBT) has been seen, and whether an end of cycle is known at all (gpsd.c reports
  // every position or mode change until it is).
  private var cycleEnders: UInt16 = 0
  private var lastTag: UInt16 = 0
  private var lastLatchedTime: Int32 = 0
  private var cycleContinue = false
  private var cycleEndReliable = false
  // The epoch as it stood at its last report (gpsd prints a TPV only there), and whether a
  // sentence has been merged since.
  private var reportedEpoch: [FixAssembler] = []
  private var mergedSinceReport = false

  /// The GPS week-rollover floor, days since 1970-01-01, or `nil` for none.
  private let rolloverFloor: Int?
  /// Whether satellite data without a time or fix sentence makes epochs of its own.
  private let skyOnlyEpochs: Bool
  /// The GSV sets (talker and signal) begun in the epoch in progress, for ``skyOnlyEpochs``.
  private var gsvSetsBegun: [String] = []
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
    self.init(rolloverFloor: rolloverFloor, skyOnlyEpochs: false)
  }

  /// Creates an assembler as ``init(rolloverFloor:)``. With `skyOnlyEpochs`, satellite sentences
  /// (GSV, GSA) that no time or fix sentence joins still make epochs, marked
  /// ``DecodedFix/isSkyOnly``: such a run ends where its GSV cycle begins again (a GSV numbered 1
  /// for a talker and signal already begun in it) and at the end of the input, as gpsd reports
  /// a SKY for each complete set of GSV sentences. Without it (the default, and gpsd's TPV rule)
  /// satellite data waits for the next timed epoch.
  public init(rolloverFloor: Int?, skyOnlyEpochs: Bool) {
    self.rolloverFloor = rolloverFloor
    self.skyOnlyEpochs = skyOnlyEpochs
  }

  /// Adds one sentence; calls `emit` when it completes the previous epoch.
  /// - Parameter line: 1-based input line of the sentence, reported as the epoch's first line.
  public mutating func apply(_ sentence: NMEASentence, line: Int, _ emit: (DecodedFix) -> Void) {
    let (bit, timed) = sentence.payload.epochInfo
    let time = sentence.timeOfDay
    guard bit != 0 else {
      detectCycleEnd(sentence, timed: false, time: nil)
      return
    }
    if skyOnlyEpochs, case .gsv(let gsv) = sentence.payload, gsv.messageNumber == 1 {
      let set = "\(sentence.talker.map { "\($0)" } ?? "")/\(gsv.signalID ?? 0)"
      if started && timeOfDay == nil && seen & Self.fixTypes == 0 && gsvSetsBegun.contains(set) {
        flush(emit)
      }
      gsvSetsBegun.append(set)
    }
    if let time {
      if let current = timeOfDay {
        // ZDA and GST report when they were sent, which some receivers (Trimble) stamp a few
        // milliseconds after the epoch: within half a second they complete the epoch in
        // progress. Further off they belong to another second (a ZDA sent before the position
        // it dates), and start that epoch: gpsd processZDA dates the ZDA's own time.
        if current != time && (timed || seen & Self.fixTypes == 0 || !Self.sameEpoch(current, time)) { flush(emit) }
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
    // GSV, GST and ZDA change no fix value (the sky view, the errors and the date come from the
    // whole epoch).
    if bit & (1 << 4 | 1 << 6 | 1 << 8) == 0 { mergedSinceReport = true }
    detectCycleEnd(sentence, timed: timed, time: time)
  }

  /// Whether two times of day (ms) lie within half a second of each other, across midnight too.
  private static func sameEpoch(_ a: Int32, _ b: Int32) -> Bool {
    let d = abs(Int(a) - Int(b))
    return min(d, 86_400_000 - d) < 500
  }

  /// gpsd 3.22's end-of-cycle detector (drivers/driver_nmea0183.c `nmea_parse`) and its report
  /// rule (gpsd/gpsd.c `all_reports`): gpsd prints a TPV only at a sentence that ends a cycle, so
  /// what a sentence merges after the cycle's last report never reaches a TPV of that time.
  private mutating func detectCycleEnd(_ sentence: NMEASentence, timed: Bool, time: Int32?) {
    let tag = Self.cycleTag(sentence.payload, timed: timed)
    if tag == Self.dbtTag { cycleContinue = true }
    // Sentences that register a fractional time: GGA, GLL, GNS with a time field, RMC only when
    // valid (status A or D) with a time and a date (processRMC), and GBS, PASHR, PSRFEPE (not
    // decoded here: taken to carry the epoch's time).
    var latched: Int32?
    if tag == Self.rmcTag {
      if case .rmc(let s) = sentence.payload, s.isValid == true, s.date != nil { latched = time }
    } else if timed {
      latched = time
    } else if tag & Self.otherTimedTags != 0 {
      latched = timeOfDay ?? lastLatchedTime
    }
    var report = false
    if let latched {
      if latched != lastLatchedTime, lastTag != 0, cycleEnders & lastTag == 0, !cycleContinue {
        cycleEnders |= lastTag
        cycleEndReliable = true
      }
    } else if cycleContinue {
      cycleEnders &= ~lastTag
      cycleEnders |= tag
      cycleEndReliable = true
    }
    if latched != nil || cycleContinue, cycleEnders & tag != 0 { report = true }
    if let latched {
      lastTag = tag
      lastLatchedTime = latched
    }
    // processRMC, processGGA: a fix sentence without a time breaks the detector; gpsd.c reports
    // every sentence that sets a position or a mode until an end of cycle is known.
    if timed && time == nil { cycleEndReliable = false }
    if !cycleEndReliable, timed || tag == Self.gsaTag { report = true }
    if report, tag != 0, started {
      reportedEpoch.removeAll(keepingCapacity: true)
      mergedSinceReport = false
      reportedEpoch.append(self)
      // The sky view and the satellites used always come from the whole epoch: drop them from
      // the copy, so that the epoch's arrays stay uniquely referenced.
      reportedEpoch[0].sky = []
      reportedEpoch[0].used = []
      reportedEpoch[0].lastSky = []
      reportedEpoch[0].lastUsed = []
    }
  }

  // gpsd's sentence table as bits: the sentences decoded here by their epoch bit, then DBT, the
  // three other sentences that carry a time for the detector, and every other one gpsd decodes.
  private static let rmcTag: UInt16 = 1 << 1
  private static let gsaTag: UInt16 = 1 << 3
  private static let dbtTag: UInt16 = 1 << 9
  private static let otherTimedTags: UInt16 = 1 << 10 | 1 << 11 | 1 << 12
  private static let otherDecodedTag: UInt16 = 1 << 13

  /// The sentence's entry in gpsd's sentence table as a bit, 0 when gpsd has no decoder for it.
  private static func cycleTag(_ payload: NMEASentence.Payload, timed: Bool) -> UInt16 {
    switch payload {
    case .unsupported(let name), .proprietary(let name):
      switch name {
      case "DBT": return dbtTag
      case "GBS": return 1 << 10
      case "PASHR": return 1 << 11
      case "PSRFEPE": return 1 << 12
      default: return gpsdDecoded.contains(name) ? otherDecodedTag : 0
      }
    default:
      return payload.epochInfo.bit
    }
  }

  /// The other sentences gpsd 3.22 decodes (`nmea_phrase[]` entries with a decoder).
  private static let gpsdDecoded: Set<SentenceName> = [
    "DTM", "HDG", "HDT", "MWD", "MWV", "TXT", "STI", "OHPR", "PMGNST", "PMTK",
    "PMTK001", "PMTK424", "PMTK705", "PTNTHTM", "PTNTA", "PSTI", "PGLOR", "PGRME", "PGRMF",
    "PGRMM", "PGRMZ",
  ]

  /// Emits the epoch in progress, if it holds a time or a fix sentence.
  public mutating func flush(_ emit: (DecodedFix) -> Void) {
    defer { resetEpoch() }
    guard started else { return }
    guard timeOfDay != nil || seen & Self.fixTypes != 0 else {
      // Satellite data alone: a sky view, when asked for.
      if skyOnlyEpochs && skySeen {
        let fix = buildFix()
        emit(DecodedFix(fix: fix, line: line, isSkyOnly: true))
      }
      return
    }
    var fix: Fix
    if mergedSinceReport, !reportedEpoch.isEmpty {
      // gpsd prints the epoch's TPV at its last end-of-cycle sentence and clears the fix when the
      // next cycle starts, so what came later never reaches a TPV. The sky view, the satellites
      // used, the DOPs, the GST error estimates and the date (a ZDA of this very time) are not
      // part of the cleared fix: they keep everything the epoch sent.
      reportedEpoch[0].date = date
      reportedEpoch[0].rolloverWeeks = rolloverWeeks
      fix = reportedEpoch[0].buildFix()
      if fix.mode >= .fix2D { fix.errorEstimates = errors }
      let full = buildFix()
      fix.satellites = full.satellites
      fix.satellitesUsed = full.satellitesUsed
      fix.hdop = full.hdop
      fix.vdop = full.vdop
      fix.pdop = full.pdop
    } else {
      fix = buildFix()
    }
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
      // gpsd processGGA calls a position from three satellites, or without an altitude, 2D; the
      // end of nmea_parse keeps an earlier 3D of the cycle (RMC, GLL) against it only when gpsd's
      // last timed fix (this cycle's so far, or the last one with a time) had an altitude.
      let ggaSatellites = s.satellitesUsed ?? 0
      if s.coordinate != nil, let q = s.quality, q != .invalid, ggaSatellites >= 3,
        !(s.altitudeMSL != nil && ggaSatellites >= 4),
        !((rmcOrGLLSays3D || positionSays3D) && (altitudeMSL != nil || lastTimedHadAltitude))
      {
        rmcOrGLLSays3D = false
        positionSays3D = false
        ggaSays2D = true
      }
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
      // Navigational status U (NMEA 0183 v4.11: unsafe, the integrity monitor says the position
      // is not to be used): as gpsd processGNS does for GNS, the sentence gives only its date.
      if s.navigationalStatus == Self.unsafe {
        navigationalStatus = s.navigationalStatus
        if let d = s.date, s.isValid == true {
          acceptDate(d)
          gpsdDateKnown = true
        }
        break
      }
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
      // gpsd processRMC: a valid position keeps the last fix's 3D ("this may be cycle starter").
      if s.isValid == true, s.coordinate != nil, previousMode == .fix3D { rmcKeeps3D = true }
      if let v = s.speedOverGroundKnots { speedKnots = v }
      if let c = s.courseOverGround { course = c }
      if s.isValid == true {
        if let v = s.speedOverGroundKnots { latestKnots = v }
        if let c = s.courseOverGround { latestCourse = c }
      }
      // gpsd processRMC merges the date only from a valid RMC (status A or D): a void one's is
      // whatever the receiver's clock holds after a cold start (2030, 2006...).
      if let d = s.date, s.isValid == true {
        acceptDate(d)
        gpsdDateKnown = true
      }
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
      // gpsd processGNS: navigational status U (unsafe) or V gives no position. V means the
      // equipment gives no status indication (NMEA 0183 v4.11), which u-blox and Quectel send
      // with every fix: only U drops the position here.
      if s.navigationalStatus == Self.unsafe { break }
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
      // GNS counts every constellation in two or more digits (NMEA 0183 v4.11: "00-99"), where
      // many receivers cap GGA's at 12; a per-system GNS counts one system, never more than the
      // total: the larger count wins.
      if sentence.talker == .multiGNSS || s.coordinate != nil, let n = s.satellitesUsed {
        gnsSatellitesUsed = max(gnsSatellitesUsed ?? 0, n)
      }
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
        // One satellite sent under two numbers (QZSS as GPGSV 193 and GQGSV 01) is one entry.
        let svid = Satellite.svid(constellation: constellation, nmeaID: entry.id)
        if let index = sky.firstIndex(where: { $0.constellation == constellation && $0.svid == svid }) {
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
      if let d = s.date {
        acceptDate(d)
        gpsdDateKnown = true
      }
    case .gst(let s):
      errors = s.estimates
    case .proprietary, .unsupported:
      break
    }
  }

  private mutating func acceptDate(_ received: Int) {
    // A date more than a day before the last one received is ignored. The dates are compared as
    // received, before the rollover floor moves either.
    if let last = lastReceivedDate, received < last - 1 { return }
    lastReceivedDate = received
    var candidate = received
    var weeks = 0
    if let floor = rolloverFloor {
      while candidate < floor {
        candidate += Self.rolloverDays
        weeks += 1024
      }
    }
    date = candidate
    rolloverWeeks = weeks
  }

  /// Navigational status letter `U` (unsafe), NMEA 0183 v4.11 GNS and RMC field 13.
  private static let unsafe: UInt8 = 0x55

  private static func key(_ constellation: Constellation, _ prn: Int) -> UInt32 {
    UInt32(constellation.rawValue) << 16 | UInt32(truncatingIfNeeded: prn & 0xFFFF)
  }

  /// The constellation of satellite `id` given the sentence's talker (or GSA system ID).
  static func constellation(of id: Int, talker: Constellation?, isGSA: Bool) -> Constellation? {
    switch talker {
    case .gps?:
      // gpsd nmeaid_to_prn: a GP talker (no system ID) carries other systems in their NMEA
      // numbers above 32: SBAS 33-64 and 120-158, GLONASS 65-96, IMES 173-182, QZSS 193-200
      // (gpsd stops at 197; u-blox goes to 200), BeiDou 201-237 and 401-437, Galileo 301-356.
      // Any other number above 32 is no satellite (gpsd's PRN 0).
      switch id {
      case ...32: return .gps
      case 33...64, 120...158: return .sbas
      case 65...96: return .glonass
      case 173...182: return .imes
      case 193...200: return .qzss
      case 201...237, 401...437: return .beidou
      case 301...356: return .galileo
      default: return nil
      }
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
      mode = altitudeMSL != nil && (quality != nil || seen & (1 << 7) != 0) && !ggaSays2D ? .fix3D : .fix2D
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
    let satellites3D = (rmcOrGLLSays3D || rmcKeeps3D) && gsaMode == nil
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
    if gpsdDateKnown && timeOfDay != nil { lastTimedHadAltitude = altitudeMSL != nil }
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
      } else if altitudeMSL == nil {
        // gpsd gpsd_error_model: climb only between consecutive fixes with an altitude.
        lastAltitude = nil
      }
    } else {
      lastAltitude = nil
    }
    // gpsd keeps the DOPs of the last GSA (gpsdata.dop) until the next one: an epoch without GSA
    // reports them. GGA's HDOP serves when no GSA gave one.
    if usedSeen {
      lastDOPs = (hdop, vdop, pdop)
    }
    fix.hdop = hdop ?? ggaHDOP ?? lastDOPs.hdop
    fix.vdop = vdop ?? (usedSeen ? nil : lastDOPs.vdop)
    fix.pdop = pdop ?? (usedSeen ? nil : lastDOPs.pdop)

    if skySeen { lastSky = sky }
    var satellites = lastSky
    // gpsd processGSA keeps the used list until the next GSA, and processGSV flags each new sky
    // view from it: an epoch without GSA keeps the last GSA's flags.
    if usedSeen {
      lastUsed = used
      anyUsedSeen = true
    }
    if anyUsedSeen {
      for i in satellites.indices {
        satellites[i].used = lastUsed.contains(Self.key(satellites[i].constellation, satellites[i].svid))
      }
      lastSky = satellites
    }
    fix.satellites = satellites
    // Satellites used: whenever a sky view is listed, the entries it flags used (gpsd
    // json_sky_dump counts the skyview entries marked used), so uSat always equals the SKY
    // entries with "used": true. Without a sky view: the epoch's GSAs, across every
    // constellation, else the larger of GNS's and GGA's counts (GGA's two digits are capped at
    // 12 by many multi-GNSS receivers).
    if !satellites.isEmpty {
      fix.satellitesUsed = satellites.reduce(0) { $0 + ($1.used ? 1 : 0) }
    } else if usedSeen {
      fix.satellitesUsed = used.count
    } else if let gns = gnsSatellitesUsed {
      fix.satellitesUsed = max(gns, satellitesUsed ?? 0)
    } else {
      fix.satellitesUsed = satellitesUsed
    }
    return fix
  }

  private mutating func resetEpoch() {
    reportedEpoch.removeAll(keepingCapacity: true)
    mergedSinceReport = false
    started = false
    timeOfDay = nil
    seen = 0
    gsvSetsBegun.removeAll(keepingCapacity: true)
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
    ggaSays2D = false
    rmcKeeps3D = false
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
    gnsSatellitesUsed = nil
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
