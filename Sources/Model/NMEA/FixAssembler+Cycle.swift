import LocationModel

// The reporting-cycle detector: gpsd's end-of-cycle rule, which decides at which sentence
// the epoch's fix values are taken (see ``FixAssembler``).
extension FixAssembler {
  /// gpsd 3.22's end-of-cycle detector (drivers/driver_nmea0183.c `nmea_parse`) and its report
  /// rule (gpsd/gpsd.c `all_reports`): gpsd prints a TPV only at a sentence that ends a cycle, so
  /// what a sentence merges after the cycle's last report never reaches a TPV of that time.
  mutating func detectCycleEnd(_ sentence: NMEASentence, timed: Bool, time: Int32?) {
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
  static let rmcTag: UInt16 = 1 << 1
  static let gsaTag: UInt16 = 1 << 3
  static let dbtTag: UInt16 = 1 << 9
  static let otherTimedTags: UInt16 = 1 << 10 | 1 << 11 | 1 << 12
  static let otherDecodedTag: UInt16 = 1 << 13

  /// The sentence's entry in gpsd's sentence table as a bit, 0 when gpsd has no decoder for it.
  static func cycleTag(_ payload: NMEASentence.Payload, timed: Bool) -> UInt16 {
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
  static let gpsdDecoded: Set<SentenceName> = [
    "DTM", "HDG", "HDT", "MWD", "MWV", "TXT", "STI", "OHPR", "PMGNST", "PMTK",
    "PMTK001", "PMTK424", "PMTK705", "PTNTHTM", "PTNTA", "PSTI", "PGLOR", "PGRME", "PGRMF",
    "PGRMM", "PGRMZ",
  ]
}
