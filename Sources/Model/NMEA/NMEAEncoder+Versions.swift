import LocationModel

/// An NMEA 0183 version whose rules a receiver follows for multi-GNSS output.
///
/// What changes between the versions, as NMEA 0183 and the receivers that follow it (u-blox M8
/// in 2.3 and 4.10 mode, u-blox F9 in 4.11 mode) write it, and as gpsd 3.22
/// (`drivers/driver_nmea0183.c`) reads it:
///
/// | | 2.3 | 4.10 | 4.11 |
/// |---|---|---|---|
/// | systems carried | GPS, SBAS, GLONASS, QZSS | + Galileo, BeiDou | + NavIC |
/// | satellite numbers | GPS 1-32, SBAS 33-64, GLONASS 65-96, QZSS 193-202 | + Galileo 1-36, BeiDou 1-63 | QZSS 1-10 (`GQ`), NavIC 1-14 (`GI`) |
/// | GSA | one per system, `GN` talker when several are used, no system ID | + field 18 system ID (1-4; QZSS as 1) | system IDs 1-6 |
/// | GSV | per system (`GP`, `GL`) | + `GA`, `GB`, signal ID last | + `GQ`, `GI` |
/// | GNS | not sent | 4 mode letters (GPS, GLONASS, Galileo, BeiDou) | 6 (+ QZSS, NavIC) |
/// | RMC, GNS field 13 | none | navigational status | navigational status |
/// | GGA satellites used | capped at 12 (`00-12`) | the count, two digits | the count, two digits |
///
/// A satellite of a system the version cannot name (Galileo or BeiDou in 2.3, NavIC before 4.11,
/// IMES) is not listed in GSA or GSV, as u-blox receivers in "strict" numbering leave it out;
/// it still counts in GGA's and GNS's number of satellites used.
public enum NMEAVersion: String, Sendable, Hashable, CaseIterable {
  /// NMEA 0183 v2.3 (2001): FAA mode indicator, no system or signal IDs.
  case v2_3 = "2.3"
  /// NMEA 0183 v4.10 (2012): system ID in GSA, signal ID in GSV, GNS, navigational status.
  case v4_10 = "4.10"
  /// NMEA 0183 v4.11 (2018): QZSS and NavIC as systems of their own (IDs 5 and 6).
  case v4_11 = "4.11"

  /// Whether GSA carries the system ID (field 18) and GSV the signal ID (last field).
  public var hasSystemIDs: Bool { self != .v2_3 }
}

extension NMEAEncoder {
  /// The NMEA number, talker and system ID of a satellite in `version`, or `nil` when the
  /// version has no number for it. `satellite.prn` may be in any numbering ``Satellite/svid``
  /// understands (NMEA 4.11's per-system numbers or the extended ranges).
  public static func numbering(
    of satellite: Satellite, version: NMEAVersion
  ) -> (number: Int, talker: TalkerID, system: Int)? {
    let svid = satellite.svid
    switch satellite.constellation {
    case .gps:
      guard (1...32).contains(svid) else { return nil }
      return (svid, .gps, 1)
    case .sbas:
      // SBAS PRN 120-151 is NMEA 33-64; 152-158 are sent as they are (gpsd reads both).
      if (120...151).contains(svid) { return (svid - 87, .gps, 1) }
      if (152...158).contains(svid) { return (svid, .gps, 1) }
      return nil
    case .glonass:
      guard (1...32).contains(svid) else { return nil }
      return (64 + svid, .glonass, 2)
    case .galileo:
      guard version != .v2_3, (1...36).contains(svid) else { return nil }
      return (svid, .galileo, 3)
    case .beidou:
      guard version != .v2_3, (1...63).contains(svid) else { return nil }
      return (svid, .beidou, 4)
    case .qzss:
      guard (1...10).contains(svid) else { return nil }
      return version == .v4_11 ? (svid, .qzss, 5) : (192 + svid, .gps, 1)
    case .navic:
      guard version == .v4_11, (1...14).contains(svid) else { return nil }
      return (svid, .navic, 6)
    case .imes:
      return nil
    }
  }

  /// The NMEA 4.10+ GSV signal ID a satellite is sent with when ``Satellite/signalID`` is `nil`:
  /// the civil L1/E1/B1 signal of its system (GPS L1 C/A 1, GLONASS L1 OF 1, Galileo E1 7,
  /// BeiDou B1I 1, QZSS L1 C/A 1, NavIC L5 SPS 1).
  public static func defaultSignalID(_ constellation: Constellation) -> Int {
    constellation == .galileo ? 7 : 1
  }

  /// The talker of the epoch's combined sentences (RMC, VTG, GGA, GNS, GST, ZDA): `GN` when the
  /// satellites used belong to more than one system (counting the satellites in view when none
  /// is used), else that system's talker, `GP` when there are none.
  public static func solutionTalker(_ fix: Fix, version: NMEAVersion) -> TalkerID {
    var systems: [Int] = []
    var talkers: [TalkerID] = []
    let used = fix.satellites.contains(where: \.used)
    for satellite in fix.satellites where satellite.used || !used {
      guard let n = numbering(of: satellite, version: version), !systems.contains(n.system) else {
        continue
      }
      systems.append(n.system)
      talkers.append(n.talker)
    }
    if systems.count > 1 { return .multiGNSS }
    return talkers.first ?? .gps
  }

  func encode(_ fix: Fix, version: NMEAVersion) -> [String] {
    var copy = self
    copy.version = nil
    copy.talker = Self.solutionTalker(fix, version: version)
    let talker = copy.talker
    var lines: [String] = []
    if sentences.contains(.rmc) {
      lines.append(
        Self.fitted { precision in
          var body = copy.rmcBody(fix, precision: precision)
          // rmcBody appends a navigational status the fix carries; a versioned encoder decides.
          if fix.navigationalStatus != nil {
            body = String(body[..<(body.lastIndex(of: ",") ?? body.endIndex)])
          }
          if version.hasSystemIDs { body += "," + Self.navigationalStatus(fix) }
          return body
        })
    }
    if sentences.contains(.vtg) { lines.append(Self.fitted { copy.vtgBody(fix, precision: $0) }) }
    // GNS before GGA: gpsd takes position and altitude from the epoch's last fix sentence, and
    // GGA, which carries them with the most decimals, is then that sentence for gpsd too.
    if sentences.contains(.gns), version.hasSystemIDs {
      lines.append(
        Self.fitted(steps: Precision.gnsSteps) { Self.gnsBody(fix, talker: talker, version: version, precision: $0) })
    }
    if sentences.contains(.gga) {
      var gga = fix
      if version == .v2_3, let used = gga.satellitesUsed { gga.satellitesUsed = min(used, 12) }
      lines.append(Self.fitted { copy.ggaBody(gga, precision: $0) })
    }
    if sentences.contains(.gsa) { lines += Self.gsaBodies(fix, version: version).map(Self.frame) }
    if sentences.contains(.gsv) { lines += Self.gsvBodies(fix, version: version).map(Self.frame) }
    if sentences.contains(.gst), let errors = fix.errorEstimates {
      lines.append(Self.frame(Self.gstBody(fix, errors: errors, talker: talker)))
    }
    if sentences.contains(.zda), let body = copy.zdaBody(fix) { lines.append(Self.frame(body)) }
    return lines
  }

  /// RMC and GNS field 13 (NMEA 4.10+): the fix's own status letter when it carries one, else
  /// `S` (safe) with a position and `V` (not valid for navigation) without.
  static func navigationalStatus(_ fix: Fix) -> String {
    if let status = fix.navigationalStatus { return status }
    return fix.mode.hasPosition && fix.coordinate != nil ? "S" : "V"
  }

  /// The GNS body (NMEA 4.10+):
  /// `xxGNS,time,lat,N/S,lon,E/W,modes,used,hdop,alt,sep,age,station,navstatus`.
  ///
  /// Sent before GGA, with GGA's altitude: gpsd takes the last fix sentence's position and
  /// altitude, this package's decoder GGA's, so both read GGA's even where GNS's position had to
  /// drop decimals (``Precision/gnsSteps``); gpsd's `altHAE` comes from GNS's altitude and
  /// separation, which keep GGA's decimals.
  ///
  /// `modes` has one letter per system (GPS, GLONASS, Galileo, BeiDou; QZSS and NavIC too in
  /// 4.11): the fix's mode indicator for a system with satellites used, `N` for the others (all
  /// `N` without a fix). gpsd 3.22 `processGNS` takes a leading `N` as no fix, so a fix without
  /// GPS satellites reads as none from GNS alone (GGA and RMC still carry it).
  public static func gnsBody(
    _ fix: Fix, talker: TalkerID, version: NMEAVersion, precision: Precision = .full
  ) -> String {
    let position = fix.mode.hasPosition ? fix.coordinate : nil
    var fields = [talker.letters + "GNS", timeField(fix)]
    fields += positionFields(position, minuteDecimals: precision.minuteDecimals)
    let letters = version == .v4_11 ? 6 : 4
    let usedSystems = Set(
      fix.satellites.filter(\.used).compactMap { numbering(of: $0, version: version)?.system })
    let mode = modeIndicator(fix)
    let noSatellites = fix.satellites.isEmpty
    fields.append(
      (1...letters).map { system in
        // A fix without a sky view: the mode letter for GPS, N for the rest.
        usedSystems.contains(system) || (noSatellites && system == 1) ? mode : "N"
      }.joined())
    let used = fix.satellitesUsed ?? fix.satellites.filter(\.used).count
    fields.append(padded(used, width: 2))
    // HDOP, altitude and geoid separation with the decimals of `precision` (GGA's unless the
    // line cannot hold them even with 4-decimal minutes).
    let altitude = fix.mode == .fix3D && position != nil ? fix.altitudeMSL : nil
    func tail(_ places: Int, _ hdopPlaces: Int) -> [String] {
      [
        fix.hdop.map { decimal($0, places: hdopPlaces) } ?? "",
        altitude.map { decimal($0, places: places) } ?? "",
        fix.geoidSeparation.map { decimal($0, places: places) } ?? "",
        fix.dgpsAge.map { decimal($0, places: places) } ?? "",
        fix.dgpsStation.map { padded($0, width: 4) } ?? "",
        navigationalStatus(fix),
      ]
    }
    return (fields + tail(precision.heightPlaces, precision.hdopPlaces)).joined(separator: ",")
  }

  /// The GST body: `xxGST,time,rms,semiMajor,semiMinor,orientation,latSigma,lonSigma,altSigma`
  /// (metres with two decimals, orientation in degrees true with one); unknown values empty.
  public static func gstBody(_ fix: Fix, errors: ErrorEstimates, talker: TalkerID) -> String {
    let metres = { (value: Double?) in value.map { decimal($0, places: 2) } ?? "" }
    return [
      talker.letters + "GST", timeField(fix), metres(errors.rangeRMS), metres(errors.semiMajor),
      metres(errors.semiMinor), errors.orientation.map { decimal($0, places: 1) } ?? "",
      metres(errors.latitude), metres(errors.longitude), metres(errors.altitude),
    ].joined(separator: ",")
  }

  /// The GSA bodies of one epoch in `version`: one sentence per system with satellites used
  /// (12 satellite slots each; more satellites take more sentences), in the order the systems
  /// first appear. The talker is `GN` when several systems are used, else the system's own;
  /// 4.10 and 4.11 add the system ID (hexadecimal) as field 18. Without satellites used, one
  /// sentence per system in view (empty slots), or a single GP sentence with no sky view.
  /// Every GSA carries the same PDOP, HDOP and VDOP: those of the combined solution.
  public static func gsaBodies(_ fix: Fix, version: NMEAVersion) -> [String] {
    let mode: Int
    switch fix.mode {
    case .fix3D: mode = 3
    case .fix2D: mode = 2
    case .unknown, .noFix: mode = 1
    }
    let dops = [fix.pdop, fix.hdop, fix.vdop].map { $0.map { decimal($0, places: 2) } ?? "" }
    let anyUsed = fix.satellites.contains(where: \.used)
    var bySystem: [(system: Int, talker: TalkerID, numbers: [Int])] = []
    for satellite in fix.satellites where satellite.used || !anyUsed {
      guard let n = numbering(of: satellite, version: version) else { continue }
      if let index = bySystem.firstIndex(where: { $0.system == n.system }) {
        if satellite.used { bySystem[index].numbers.append(n.number) }
      } else {
        bySystem.append((n.system, n.talker, satellite.used ? [n.number] : []))
      }
    }
    if bySystem.isEmpty { bySystem = [(1, .gps, [])] }
    let multi = bySystem.count > 1
    var bodies: [String] = []
    for (system, talker, numbers) in bySystem {
      // At most 12 numbers a sentence, and fewer when three-digit numbers would take the
      // sentence past NMEA's 82 characters.
      let fixedLength =
        6 + "GNGSA,A,1".count + 12 + dops.joined(separator: ",").count + 1
        + (version.hasSystemIDs ? 2 : 0)
      var chunks: [[Int]] = [[]]
      var length = fixedLength
      for number in numbers {
        let width = max(2, String(number).count)
        if chunks[chunks.count - 1].count == 12 || length + width > 82 {
          chunks.append([])
          length = fixedLength
        }
        chunks[chunks.count - 1].append(number)
        length += width
      }
      for chunk in chunks {
        var fields = [(multi ? "GN" : talker.letters) + "GSA", "A", String(mode)]
        for slot in 0..<12 {
          fields.append(slot < chunk.count ? padded(chunk[slot], width: 2) : "")
        }
        fields += dops
        if version.hasSystemIDs { fields.append(String(system, radix: 16, uppercase: true)) }
        bodies.append(fields.joined(separator: ","))
      }
    }
    return bodies
  }

  /// The GSV bodies of one epoch in `version`: per talker (and, in 4.10+, per signal ID) in the
  /// order first seen, at most four satellites a sentence, `inView` counting the group's
  /// satellites; 4.10+ ends each sentence with the signal ID (``Satellite/signalID`` or
  /// ``defaultSignalID(_:)``). An epoch without satellites gives `GPGSV,1,1,00`.
  public static func gsvBodies(_ fix: Fix, version: NMEAVersion) -> [String] {
    var groups: [(talker: TalkerID, signal: Int?, entries: [(Int, Satellite)])] = []
    for satellite in fix.satellites {
      guard let n = numbering(of: satellite, version: version) else { continue }
      let signal =
        version.hasSystemIDs
        ? (satellite.signalID ?? defaultSignalID(satellite.constellation)) : nil
      if let index = groups.firstIndex(where: { $0.talker == n.talker && $0.signal == signal }) {
        groups[index].entries.append((n.number, satellite))
      } else {
        groups.append((n.talker, signal, [(n.number, satellite)]))
      }
    }
    if groups.isEmpty { return ["GPGSV,1,1,00" + (version.hasSystemIDs ? ",1" : "")] }
    var bodies: [String] = []
    for (talker, signal, entries) in groups {
      let total = (entries.count + 3) / 4
      for number in 1...total {
        var fields = [
          talker.letters + "GSV", String(total), String(number), padded(entries.count, width: 2),
        ]
        for (id, satellite) in entries[((number - 1) * 4)..<min(number * 4, entries.count)] {
          fields.append(padded(id, width: 2))
          fields.append(integerField(satellite.elevation, width: 2))
          fields.append(
            integerField(satellite.azimuth.map { CompassAngle.rounded($0, places: 0) }, width: 3))
          fields.append(integerField(satellite.snr, width: 2))
        }
        if let signal { fields.append(String(signal, radix: 16, uppercase: true)) }
        bodies.append(fields.joined(separator: ","))
      }
    }
    return bodies
  }
}
