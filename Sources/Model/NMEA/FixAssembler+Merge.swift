import LocationModel

// Merging one sentence into the epoch in progress, and accepting its date.
extension FixAssembler {
  /// Whether the sentence of `bit` (already in `seen`) is the epoch's first with a time (GGA,
  /// RMC, GLL, GNS or ZDA): gpsd's fix, `lastfix` and `oldfix` are then still the last epoch's.
  func isFirstTimed(_ bit: UInt16) -> Bool {
    seen & ~bit & (Self.fixTypes | 1 << 6) == 0
  }

  /// gpsd's `satellites_used` as a sentence finds it: the count of this epoch's GSAs so far, or
  /// the last epoch's with a GSA.
  var satellitesUsedSoFar: Int { usedSeen ? used.count : previousUsedCount }

  /// Whether gpsd merges a time from the sentence (driver_nmea0183.c: processGGA, processGLL,
  /// processGNS and processZDA whenever the time field is there; processRMC only for status A or
  /// D with a time and a date, since a void RMC's clock may be anything).
  static func givesGPSDTime(_ payload: NMEASentence.Payload) -> Bool {
    switch payload {
    case .gga(let s): return s.timeOfDay != nil
    case .gll(let s): return s.timeOfDay != nil
    case .gns(let s): return s.timeOfDay != nil
    case .zda(let s): return s.timeOfDay != nil
    case .rmc(let s): return s.isValid == true && s.timeOfDay != nil && s.date != nil
    default: return false
    }
  }

  /// Whether RMC, GLL or GGA made or kept the epoch's fix 3D without an altitude of its own (the
  /// 3D the end of gpsd's nmea_parse keeps against a later 2D while an altitude is known).
  var carries3D: Bool { rmcOrGLLSays3D || rmcKeeps3D || gllKeeps3D || ggaKeeps3D }

  /// Drops the 3D that ``carries3D`` reports, when a sentence's 2D ends it.
  mutating func dropCarried3D() {
    rmcOrGLLSays3D = false
    rmcKeeps3D = false
    gllKeeps3D = false
    ggaKeeps3D = false
  }

  mutating func merge(_ sentence: NMEASentence) {
    if Self.givesGPSDTime(sentence.payload) { gpsdTimed = true }
    if case .rmc(let s) = sentence.payload, s.isValid != true, s.timeOfDay == nil || s.date == nil {
      gpsdZeroedTime = true
    }
    switch sentence.payload {
    case .gga(let s):
      if let c = s.coordinate {
        ggaCoordinate = c
        latestCoordinate = c
        if firstCoordinate == nil { firstCoordinate = c }
        // gpsd processGGA: a GGA with a position sets the separation, the receiver's or, when
        // its field is empty, the geoid model's at the GGA's own position (wgs84_separation).
        geoidSeparation = s.geoidSeparation ?? GPSDEarthModel.geoidSeparation(at: c)
      }
      if let q = s.quality {
        quality = q
        if q == .invalid { invalid = true } else { valid = true }
      }
      if let n = s.satellitesUsed { satellitesUsed = n }
      // gpsd processGGA calls a position from three satellites, or without an altitude, 2D; the
      // end of nmea_parse keeps the 3D of the fix so far against it only while gpsd's lastfix or
      // oldfix has an altitude. While the GGA is the epoch's first timed sentence, the fix so far
      // and lastfix are the last timed epoch's and oldfix the one before; after another timed
      // sentence of the epoch, they are this epoch's so far and oldfix the last timed epoch.
      let ggaSatellites = s.satellitesUsed ?? 0
      if s.coordinate != nil, let q = s.quality, q != .invalid, ggaSatellites >= 3,
        !(s.altitudeMSL != nil && ggaSatellites >= 4)
      {
        let first = isFirstTimed(1 << 0)
        let fix3D = first ? previousMode == .fix3D : carries3D || positionSays3D
        let altitudeKnown =
          first ? lastTimedHadAltitude || olderTimedHadAltitude : altitudeMSL != nil || lastTimedHadAltitude
        if fix3D && altitudeKnown {
          ggaKeeps3D = true
        } else {
          dropCarried3D()
          positionSays3D = false
          ggaSays2D = true
        }
      }
      // gpsd processGGA: a position with an altitude from at least four satellites is 3D.
      if s.coordinate != nil, s.altitudeMSL != nil, let q = s.quality, q != .invalid, (s.satellitesUsed ?? 0) >= 4 {
        positionSays3D = true
      }
      if let h = s.hdop { ggaHDOP = h }
      if let a = s.altitudeMSL { altitudeMSL = a }
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
        if s.isValid == true {
          latestCoordinate = c
          if firstCoordinate == nil { firstCoordinate = c }
        }
      }
      // gpsd processRMC reads the fix as it stands: the previous epoch's while the RMC is the
      // epoch's first timed sentence, else this epoch's so far (its first sentence cleared it).
      let firstTimed = isFirstTimed(1 << 1)
      // gpsd processRMC: a valid position is 3D when the last GSA listed more than three
      // satellites or the fix holds an altitude (the previous epoch's, or this epoch's GGA).
      let altitudeKnown = firstTimed ? previousHadAltitude || altitudeMSL != nil : altitudeMSL != nil
      if s.isValid == true, s.coordinate != nil, satellitesUsedSoFar > 3 || altitudeKnown {
        positionSays3D = true
        rmcOrGLLSays3D = true
      }
      // gpsd processRMC: a valid position keeps the last fix's 3D ("this may be cycle starter"),
      // unless a GLL, GGA or GSA earlier in this epoch made gpsd's last fix 2D, or a void sentence
      // earlier in it left gpsd's last fix without one.
      if s.isValid == true, s.coordinate != nil, previousMode == .fix3D, !gllSays2D,
        firstTimed || (!invalid && !ggaSays2D && !gsaSays2D)
      {
        rmcKeeps3D = true
      }
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
      // gpsd processRMC reads the variation of a valid RMC only, and takes 0.09 degrees or less
      // for an empty field ("some GPS set 0.0,E, or 0,W instead of blank").
      if s.isValid == true, let m = s.magneticVariation, abs(m) > 0.09 { magneticVariation = m }
      if let n = s.navigationalStatus { navigationalStatus = n }
    case .gll(let s):
      if let v = s.isValid {
        if v { valid = true } else { invalid = true }
      }
      if otherCoordinate == nil, let c = s.coordinate { otherCoordinate = c }
      if let c = s.coordinate, s.isValid == true, s.modeIndicator != 0x4E {
        latestCoordinate = c
        if firstCoordinate == nil { firstCoordinate = c }
      }
      // gpsd processGLL: the status from the mode letter (FAA mode), or a plain fix without one.
      if s.isValid == true, s.coordinate != nil, modeQuality == nil {
        let q = s.modeIndicator.map { FixQuality(modeIndicator: $0) } ?? .gps
        if q != .invalid { modeQuality = q }
      }
      if s.modeIndicator.map({ FixQuality(modeIndicator: $0) }) == .invalid { invalid = true }
      // gpsd processGLL: the same rule as RMC's.
      if s.isValid == true, s.coordinate != nil, satellitesUsedSoFar > 3 || previousHadAltitude || altitudeMSL != nil {
        positionSays3D = true
        rmcOrGLLSays3D = true
      } else if s.isValid == true, s.coordinate != nil, s.modeIndicator != 0x4E {
        // Otherwise processGLL leaves a 3D fix alone while gpsd's oldfix has an altitude, and the
        // end of nmea_parse keeps it 3D; without that altitude it says 2D. oldfix is the timed
        // epoch before the last one while the GLL is the epoch's first timed sentence, and the
        // last epoch once another timed sentence of this epoch came first. So GLL epochs after a
        // 3D epoch with an altitude stay 3D twice, and the third is 2D.
        let first = isFirstTimed(1 << 2)
        let fix3D = first ? previousMode == .fix3D : (rmcKeeps3D || positionSays3D || gllKeeps3D)
        let oldfixHadAltitude = first ? olderTimedHadAltitude : lastTimedHadAltitude
        if fix3D && oldfixHadAltitude {
          gllKeeps3D = true
        } else {
          gllSays2D = true
          dropCarried3D()
        }
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
      if let c = s.coordinate, s.isValid == true {
        latestCoordinate = c
        if firstCoordinate == nil { firstCoordinate = c }
      }
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
      // gpsd processGSA sets the mode GSA says; the end of nmea_parse keeps the 3D that RMC, GLL
      // or GGA gave the fix so far against a 2D only while lastfix or oldfix has an altitude.
      // Otherwise the fix is 2D, and an RMC after it reads that 2D as lastfix's mode.
      if s.mode == .fix2D, !(carries3D && (altitudeMSL != nil || lastTimedHadAltitude)) {
        dropCarried3D()
        if altitudeMSL == nil { positionSays3D = false }
        gsaSays2D = true
      }
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

  mutating func acceptDate(_ received: Int) {
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
  static let unsafe: UInt8 = 0x55

  static func key(_ constellation: Constellation, _ prn: Int) -> UInt32 {
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
}
