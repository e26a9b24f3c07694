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
///   GSA, flags that disagree leave the mode to the last of them (a void GGA, then a valid RMC:
///   a fix), and a valid GGA with altitude is 3D, any other valid position 2D, except that a GGA from
///   three satellites after a 3D RMC or GLL makes the epoch 2D unless gpsd's last timed fix had
///   an altitude. As in gpsd, GGA or GNS
///   with an altitude from four or more satellites makes the fix 3D, RMC and GLL do when the last
///   GSA listed more than three satellites or an altitude is known, and a later 2D does not
///   downgrade a 3D fix while an altitude is known. An RMC keeps the last epoch's 3D; a GLL keeps
///   it while gpsd's oldfix (the timed epoch before, or the one before that for the epoch's first
///   timed sentence) had an altitude, so GLL-only epochs after a GGA stay 3D twice.
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
/// - Models: a fix with a position gets the geoid separation and the magnetic variation the
///   receiver left out from gpsd's own models (``GPSDEarthModel``, gpsd/geoid.c), where gpsd's
///   processGGA and gpsd_error_model apply them; a receiver's value wins.
/// - Units: knots become m/s (x 1852/3600), the climb rate comes from the MSL altitude of
///   consecutive 3D epochs.
public struct FixAssembler: Sendable {
  static let fixTypes: UInt16 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 7  // GGA RMC GLL GNS
  static let knotsToMetresPerSecond = 1852.0 / 3600.0

  // The epoch being assembled.
  var started = false
  var line = 0
  var timeOfDay: Int32?
  var seen: UInt16 = 0
  var date: Int?
  var ggaCoordinate: Coordinate?
  var otherCoordinate: Coordinate?
  // The first position gpsd merged into the epoch's fix: where gpsd_error_model evaluates its
  // geoid and variation models when no sentence gave the value.
  var firstCoordinate: Coordinate?
  var latestCoordinate: Coordinate?
  var quality: FixQuality?
  var modeQuality: FixQuality?
  var gsaMode: FixMode?
  var positionSays3D = false
  var rmcOrGLLSays3D = false
  var ggaSays2D = false
  var gsaSays2D = false
  var rmcKeeps3D = false
  var gllKeeps3D = false
  var ggaKeeps3D = false
  var gllSays2D = false
  var valid = false { didSet { if valid { lastSaidVoid = false } } }
  var invalid = false { didSet { if invalid { lastSaidVoid = true } } }
  // Whether the epoch's last validity flag said void: gpsd's sentences each set the mode, so when
  // an epoch's flags disagree the last one wins.
  var lastSaidVoid = false
  var altitudeMSL: Double?
  var geoidSeparation: Double?
  var speedKnots: Double?
  var speedKmh: Double?
  var vtgKnots: Double?
  // gpsd gps_merge_fix: the last valid RMC or VTG of the epoch sets speed and course.
  var latestKnots: Double?
  var latestCourse: Double?
  var course: Double?
  var vtgCourse: Double?
  var magneticVariation: Double?
  var hdop: Double?
  var ggaHDOP: Double?
  var vdop: Double?
  var pdop: Double?
  var satellitesUsed: Int?
  var gnsSatellitesUsed: Int?
  var sky: [Satellite] = []
  var skySeen = false
  var used: [UInt32] = []
  var usedSeen = false
  var errors: ErrorEstimates?
  var navigationalStatus: UInt8?
  var dgpsAge: Double?
  var dgpsStation: Int?

  // Carried across epochs.
  var lastDate: Int?
  var lastReceivedDate: Int?
  var lastTimeOfDay: Int32?
  var lastSky: [Satellite] = []
  var lastDOPs: (hdop: Double?, vdop: Double?, pdop: Double?) = (nil, nil, nil)
  // The satellites the last epoch with a GSA listed (gpsd keeps `sats_used` until the next GSA).
  var lastUsed: [UInt32] = []
  var anyUsedSeen = false
  var lastAltitude: (time: Int64, altitude: Double)?
  // gpsd's state before an epoch's first sentence: whether the last epoch reported an altitude
  // (even without a fix), its mode, and how many satellites its GSAs listed as used.
  var previousHadAltitude = false
  // gpsd's lastfix/oldfix: whether the last epoch that had a time for gpsd (a date from a valid
  // RMC or a ZDA) had an altitude.
  var gpsdDateKnown = false
  var lastTimedHadAltitude = false
  // gpsd's oldfix as the first sentence of an epoch sees it: whether the timed epoch before the
  // last one had an altitude.
  var olderTimedHadAltitude = false
  var previousMode: FixMode = .unknown
  var previousUsedCount = 0
  // Whether a sentence of this epoch gave gpsd a time (driver_nmea0183.c: GGA, GLL, GNS and ZDA
  // with a time; RMC only with status A or D, a time and a date). An epoch without one (a void
  // RMC alone) starts no gpsd cycle: gpsd merges it into the last fix, which keeps its time and
  // altitude.
  var gpsdTimed = false
  // Whether a void RMC of this epoch lacked its time or its date: gpsd's processRMC then forces
  // a report with the time zeroed, and a fix without a time is not copied to `lastfix`
  // (gpsd_error_model), so the last fix's mode stays gpsd's `lastfix.mode`.
  var gpsdZeroedTime = false
  // The last epoch with a time (gpsd's oldfix): its time, mode and position.
  var previousTimed: (time: Int64, mode: FixMode, coordinate: Coordinate?)?

  // gpsd's end-of-cycle detector (driver_nmea0183.c nmea_parse): the sentence types learned to
  // end a reporting cycle, the last sentence that latched a time, that time, whether a cycle
  // continuer (DBT) has been seen, and whether an end of cycle is known at all (gpsd.c reports
  // every position or mode change until it is).
  var cycleEnders: UInt16 = 0
  var lastTag: UInt16 = 0
  var lastLatchedTime: Int32 = 0
  var cycleContinue = false
  var cycleEndReliable = false
  // The epoch as it stood at its last report (gpsd prints a TPV only there), and whether a
  // sentence has been merged since.
  var reportedEpoch: [FixAssembler] = []
  var mergedSinceReport = false
  /// Whether the last sentence applied is the one that ended the previous epochs (learned, two
  /// epochs in a row): the epoch in progress is then complete.
  var atCycleEnd = false
  /// The kind of the last sentence applied (its epoch bit or gpsd table bit, its talker, and for
  /// GSV whether it closed its set), and that of the last sentence of the previous epochs.
  var lastSentenceKind = 0
  var endingKind = 0
  /// Consecutive epochs that ended with ``endingKind``.
  var endingRepeats = 0
  /// Whether the assembler learns which sentence ends an epoch, for ``epochAtCycleEnd()`` (live
  /// sources); off for logs, where it would only cost time.
  public var learnsEpochEnd = false

  /// The GPS week-rollover floor, days since 1970-01-01, or `nil` for none.
  let rolloverFloor: Int?
  /// Whether satellite data without a time or fix sentence makes epochs of its own.
  let skyOnlyEpochs: Bool
  /// The GSV sets (talker and signal) begun in the epoch in progress, for ``skyOnlyEpochs``.
  var gsvSetsBegun: [String] = []
  var rolloverWeeks = 0
  var lastRolloverWeeks = 0

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
    applyKeepingKind(sentence, line: line, emit)
    guard learnsEpochEnd else { return }
    lastSentenceKind = Self.kind(of: sentence)
    atCycleEnd = started && endingRepeats >= 2 && lastSentenceKind == endingKind
  }

  /// The kind of a sentence for learning which one ends an epoch: its table bit, its talker, and
  /// for GSV whether it is the last message of its set (a set of three GSV ends at the third).
  static func kind(of sentence: NMEASentence) -> Int {
    var kind = Int(cycleTag(sentence.payload, timed: sentence.payload.epochInfo.timed)) << 8
    kind |= (sentence.talker?.hashValue ?? 0) & 0x7F
    if case .gsv(let gsv) = sentence.payload, gsv.messageNumber != gsv.messageCount { kind |= 0x80 }
    return kind
  }

  private mutating func applyKeepingKind(
    _ sentence: NMEASentence, line: Int, _ emit: (DecodedFix) -> Void
  ) {
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
        if current != time && (timed || seen & Self.fixTypes == 0 || !Self.sameEpoch(current, time))
        {
          flush(emit)
        }
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
  static func sameEpoch(_ a: Int32, _ b: Int32) -> Bool {
    let d = abs(Int(a) - Int(b))
    return min(d, 86_400_000 - d) < 500
  }

  /// The epoch in progress as ``flush(_:)`` would emit it, when the last sentence applied is the
  /// kind that ended the two epochs before (learned from the stream); `nil` otherwise.
  /// Nothing changes: a live source reports the epoch at once with it, instead of when the next
  /// epoch begins, and the later ``flush(_:)`` of the same epoch gives the same value unless more
  /// sentences of that epoch followed.
  public func epochAtCycleEnd() -> DecodedFix? {
    guard atCycleEnd, started, timeOfDay != nil || seen & Self.fixTypes != 0 else { return nil }
    var copy = self
    var result: DecodedFix?
    copy.flush { result = $0 }
    return result
  }

  /// Whether ``epochInProgress()`` has an epoch to give (cheap: nothing is built).
  public var hasEpochInProgress: Bool { started && (timeOfDay != nil || seen & Self.fixTypes != 0) }

  /// The epoch in progress as ``flush(_:)`` would emit it now, wherever its cycle stands; `nil`
  /// when nothing of an epoch has come. Nothing changes: a live source that went silent reports
  /// the epoch with it rather than when the next epoch begins.
  public func epochInProgress() -> DecodedFix? {
    guard hasEpochInProgress else { return nil }
    var copy = self
    var result: DecodedFix?
    copy.flush { result = $0 }
    return result
  }

  /// Emits the epoch in progress, if it holds a time or a fix sentence.
  public mutating func flush(_ emit: (DecodedFix) -> Void) {
    defer { resetEpoch() }
    guard started else { return }
    if !learnsEpochEnd {
    } else if lastSentenceKind == endingKind {
      endingRepeats += 1
    } else {
      endingKind = lastSentenceKind
      endingRepeats = 1
    }
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

  mutating func resetEpoch() {
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
    firstCoordinate = nil
    latestCoordinate = nil
    quality = nil
    modeQuality = nil
    gsaMode = nil
    positionSays3D = false
    rmcOrGLLSays3D = false
    ggaSays2D = false
    gsaSays2D = false
    rmcKeeps3D = false
    gllKeeps3D = false
    ggaKeeps3D = false
    gllSays2D = false
    valid = false
    invalid = false
    gpsdTimed = false
    gpsdZeroedTime = false
    lastSaidVoid = false
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
