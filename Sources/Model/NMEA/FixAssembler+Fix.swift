import LocationModel

// Building the epoch's fix: mode reconciliation, the carried date, and gpsd's error model.
extension FixAssembler {
  mutating func buildFix() -> Fix {
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
      // gpsd's processGGA, processRMC, processGLL and processGNS each set the mode, so when the
      // epoch's flags disagree the last one says whether there is a fix.
      mode = invalid && (!valid || lastSaidVoid) ? .noFix : .fix2D
    } else if seen & 1 << 0 != 0 {
      // gpsd processGGA sets the mode whatever the quality field says: a GGA without a position
      // (an all-empty one, or one with no quality) reports no fix, not an unknown mode.
      mode = .noFix
    } else {
      mode = .unknown
    }
    // gpsd nmea_parse (end): a sentence saying 2D does not downgrade a 3D fix while an altitude
    // is known. The fix is 3D when a sentence of this epoch made it so (GGA/GNS with an altitude
    // from four or more satellites, RMC/GLL by their rule above) or the last epoch was 3D.
    // Without GSA in the epoch, gpsd's processRMC/processGLL call a fix 3D by their rule above
    // (the last GSA listed four or more satellites, or an altitude is known) even when this
    // epoch sends no altitude.
    let satellites3D = carries3D && (gsaMode == nil || gsaMode == .fix2D)
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
    // An epoch that gave gpsd no time (a void RMC alone) was merged into gpsd's last fix, whose
    // altitude, lastfix and oldfix it leaves as they were; when a void RMC without its time or
    // date zeroed gpsd's fix time, lastfix keeps its mode too.
    if gpsdTimed || !gpsdZeroedTime { previousMode = mode }
    previousHadAltitude = altitudeMSL != nil || (!gpsdTimed && previousHadAltitude)
    if gpsdDateKnown && timeOfDay != nil && gpsdTimed {
      olderTimedHadAltitude = lastTimedHadAltitude
      lastTimedHadAltitude = altitudeMSL != nil
    }
    if usedSeen { previousUsedCount = used.count }
    fix.quality = quality ?? modeQuality ?? (invalid && !valid ? .invalid : nil)
    // A void GGA before the valid sentence that made the fix: its quality is not the fix's.
    if fix.quality == .invalid, mode >= .fix2D { fix.quality = modeQuality ?? .gps }
    if let n = navigationalStatus { fix.navigationalStatus = String(UnicodeScalar(n)) }

    if mode >= .fix2D {
      fix.coordinate = coordinate
      if let knots = latestKnots ?? speedKnots ?? vtgKnots {
        fix.speedOverGround = knots * Self.knotsToMetresPerSecond
      } else if let kmh = speedKmh {
        fix.speedOverGround = kmh / 3.6
      }
      fix.courseOverGround = latestCourse ?? course ?? vtgCourse
      // gpsd gpsd_error_model (libgpsd_core.c): a fix with a position and no separation or
      // variation from the receiver gets them from gpsd's models (gpsd/geoid.c), evaluated at
      // the first position merged into the epoch; altHAE is then altMSL plus the separation.
      let modelAt = firstCoordinate ?? coordinate
      fix.magneticVariation =
        magneticVariation ?? modelAt.map(GPSDEarthModel.magneticVariation(at:))
      fix.geoidSeparation = geoidSeparation ?? modelAt.map(GPSDEarthModel.geoidSeparation(at:))
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
}
