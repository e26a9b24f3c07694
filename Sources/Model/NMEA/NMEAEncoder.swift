import LocationModel
/// Writes a ``Fix`` as the NMEA 0183 sentences a serial GNSS receiver sends for one epoch.
///
/// Output per epoch, in the order u-blox receivers use: RMC, VTG, GGA, GSA (one per constellation
/// used), GSV (per constellation in view), then ZDA when enabled. Every sentence is framed as
/// `$<talker><formatter>,<fields>*<checksum>\r\n`: the checksum is the XOR of all bytes between
/// `$` and `*`, in two upper-case hexadecimal digits.
///
/// Field formats follow NMEA 0183 4.10 as receivers send them:
/// - latitude `ddmm.mmmmmm`, longitude `dddmm.mmmmmm` (six decimals of minutes, so the position
///   survives a round trip within 2e-8 degrees), hemisphere `N`/`S`, `E`/`W`;
/// - time of day `hhmmss.ss` (three decimals when the time has a millisecond part), date `ddmmyy`;
/// - speed over ground in knots (RMC, VTG) and km/h (VTG), course over ground in degrees true;
/// - every value the ``Fix`` does not know (`nil`) is an empty field, never `0`;
/// - no sentence is longer than NMEA 0183's 82 characters (`$` to CR LF): when RMC, GGA or GNS
///   would be, it is written again with fewer decimals (``Precision``), as receivers do.
///
/// The encoder is pure: no I/O, no clock. A ``Fix`` without a position still produces RMC (status
/// `V`), GGA (quality 0) and GSA (mode 1), as a receiver without a fix does.
public struct NMEAEncoder: Sendable, Hashable {
  /// The sentence types the encoder writes for an epoch.
  public struct SentenceSet: OptionSet, Sendable, Hashable {
    /// Bit mask value.
    public let rawValue: Int
    /// Creates a set from its bit mask.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// RMC: recommended minimum (time, date, status, position, speed, course, magnetic variation).
    public static let rmc = SentenceSet(rawValue: 1 << 0)
    /// VTG: course and speed over ground.
    public static let vtg = SentenceSet(rawValue: 1 << 1)
    /// GGA: time, position, quality, satellites used, HDOP, altitude, geoid separation.
    public static let gga = SentenceSet(rawValue: 1 << 2)
    /// GSA: fix mode, satellites used, PDOP/HDOP/VDOP.
    public static let gsa = SentenceSet(rawValue: 1 << 3)
    /// GSV: satellites in view with elevation, azimuth and SNR.
    public static let gsv = SentenceSet(rawValue: 1 << 4)
    /// ZDA: time and date.
    public static let zda = SentenceSet(rawValue: 1 << 5)
    /// GNS: GNSS fix data with one mode letter per system (written only by a versioned encoder
    /// for NMEA 4.10 and later).
    public static let gns = SentenceSet(rawValue: 1 << 6)
    /// GST: pseudorange error statistics (written when the fix carries ``Fix/errorEstimates``).
    public static let gst = SentenceSet(rawValue: 1 << 7)
    /// RMC, VTG, GGA, GSA, GSV: what a typical receiver sends by default.
    public static let standard: SentenceSet = [.rmc, .vtg, .gga, .gsa, .gsv]
    /// ``standard`` plus ZDA.
    public static let all: SentenceSet = [.standard, .zda]
    /// What a multi-GNSS receiver sends: ``all`` plus GNS and GST.
    public static let receiver: SentenceSet = [.all, .gns, .gst]
  }

  /// Talker of the position sentences (RMC, VTG, GGA, ZDA) and of a single-system GSA:
  /// ``TalkerID/gps`` (`GP`, a GPS-only receiver, NMEA 0183 up to 4.00 style) or
  /// ``TalkerID/multiGNSS`` (`GN`, a receiver combining constellations, NMEA 0183 4.10 style).
  /// GSV always uses each constellation's own talker.
  public var talker: TalkerID
  /// Which sentences to write per epoch.
  public var sentences: SentenceSet
  /// The NMEA 0183 version whose rules the output follows (talkers, satellite numbering, system
  /// and signal IDs, GNS, navigational status); `nil` for the unversioned output of
  /// ``init(talker:sentences:)`` (the caller picks the talker).
  public var version: NMEAVersion?

  /// Creates an encoder.
  ///
  /// - Parameters:
  ///   - talker: `GP` (default) or `GN`. With `GN`, or whenever satellites of more than one
  ///     system are used, GSA is written once per system with the NMEA 4.10 system ID field.
  ///   - sentences: the sentence types to write, ``SentenceSet/standard`` by default.
  public init(talker: TalkerID = .gps, sentences: SentenceSet = .standard) {
    self.talker = talker
    self.sentences = sentences
    self.version = nil
  }

  /// Creates an encoder that follows the rules of one NMEA 0183 version (see ``NMEAVersion``).
  ///
  /// - Parameters:
  ///   - version: 2.3, 4.10 or 4.11.
  ///   - sentences: the sentence types to write; ``SentenceSet/receiver`` (RMC, VTG, GNS, GGA,
  ///     GSA, GSV, GST, ZDA) by default. GNS is left out for 2.3, which does not define it.
  public init(version: NMEAVersion, sentences: SentenceSet = .receiver) {
    self.talker = .gps
    self.sentences = sentences
    self.version = version
  }

  /// Encodes one epoch as framed sentences, each ending in CRLF, in output order.
  public func encode(_ fix: Fix) -> [String] {
    if let version { return encode(fix, version: version) }
    var lines: [String] = []
    if sentences.contains(.rmc) { lines.append(Self.fitted { rmcBody(fix, precision: $0) }) }
    if sentences.contains(.vtg) { lines.append(Self.fitted { vtgBody(fix, precision: $0) }) }
    if sentences.contains(.gga) { lines.append(Self.fitted { ggaBody(fix, precision: $0) }) }
    if sentences.contains(.gsa) { lines += gsaBodies(fix).map(Self.frame) }
    if sentences.contains(.gsv) { lines += Self.gsvBodies(fix).map(Self.frame) }
    if sentences.contains(.zda), let body = zdaBody(fix) { lines.append(Self.frame(body)) }
    return lines
  }

  /// Encodes one epoch and appends its bytes (all sentences, CRLF-terminated) to `buffer`.
  public func encode(_ fix: Fix, into buffer: inout [UInt8]) {
    for line in encode(fix) { buffer.append(contentsOf: line.utf8) }
  }

  // MARK: Framing

  /// The NMEA 0183 checksum: XOR of every byte of `body` (the text between `$` and `*`).
  public static func checksum(_ body: some Sequence<UInt8>) -> UInt8 {
    body.reduce(0, ^)
  }

  /// NMEA 0183's limit on a sentence: 82 characters from the `$` to the CR LF, both included.
  public static let maximumSentenceLength = 82

  /// How many decimals the variable-width fields of RMC, VTG, GGA and GNS get. ``full`` keeps a
  /// position within 2e-8 degrees; the others are what receivers write when a sentence would
  /// pass 82 characters (a DGPS fix at altitude with millisecond times, say).
  public struct Precision: Sendable, Hashable {
    /// Decimals of the minutes of latitude and longitude (6: 1.9 mm, 5: 1.9 cm, 4: 19 cm).
    public var minuteDecimals: Int
    /// Decimals of altitude, geoid separation and DGPS age.
    public var heightPlaces: Int
    /// Decimals of HDOP.
    public var hdopPlaces: Int
    /// Decimals of speed over ground in knots and km/h.
    public var speedPlaces: Int

    /// Six decimals of minutes, two of heights and HDOP, three of speeds.
    public static let full = Precision(minuteDecimals: 6, heightPlaces: 2, hdopPlaces: 2, speedPlaces: 3)
    /// The steps tried in turn until a sentence fits in ``NMEAEncoder/maximumSentenceLength``.
    public static let steps: [Precision] = [
      full,
      Precision(minuteDecimals: 5, heightPlaces: 1, hdopPlaces: 1, speedPlaces: 2),
      Precision(minuteDecimals: 4, heightPlaces: 1, hdopPlaces: 1, speedPlaces: 1),
      Precision(minuteDecimals: 4, heightPlaces: 0, hdopPlaces: 1, speedPlaces: 1),
      Precision(minuteDecimals: 4, heightPlaces: 0, hdopPlaces: 0, speedPlaces: 0),
    ]
    /// GNS's steps: the minutes of position first, then the heights and HDOP. GNS comes before
    /// GGA, whose position wins, while gpsd computes `altHAE` from GNS's own altitude and
    /// separation (`processGNS`), which therefore keep GGA's decimals as long as they can.
    public static let gnsSteps: [Precision] = [
      full,
      Precision(minuteDecimals: 5, heightPlaces: 2, hdopPlaces: 2, speedPlaces: 3),
      Precision(minuteDecimals: 4, heightPlaces: 2, hdopPlaces: 2, speedPlaces: 3),
      Precision(minuteDecimals: 4, heightPlaces: 1, hdopPlaces: 1, speedPlaces: 3),
      Precision(minuteDecimals: 4, heightPlaces: 0, hdopPlaces: 1, speedPlaces: 3),
      Precision(minuteDecimals: 4, heightPlaces: 0, hdopPlaces: 0, speedPlaces: 3),
    ]
  }

  /// The framed sentence `body` makes at the first of `steps` (by default ``Precision/steps``)
  /// whose sentence fits in ``maximumSentenceLength``; at the last step when none does (fields the
  /// fix cannot shorten).
  public static func fitted(steps: [Precision] = Precision.steps, _ body: (Precision) -> String) -> String {
    var framed = ""
    for precision in steps {
      framed = frame(body(precision))
      if framed.utf8.count <= maximumSentenceLength { return framed }
    }
    return framed
  }

  /// Frames a sentence body (e.g. `GPGGA,...`, without `$`) as `$body*HH\r\n`, `HH` upper-case hex.
  public static func frame(_ body: String) -> String {
    let sum = checksum(body.utf8)
    let digits: [Character] = Array("0123456789ABCDEF")
    return "$" + body + "*" + String(digits[Int(sum >> 4)]) + String(digits[Int(sum & 0x0F)])
      + "\r\n"
  }

  // MARK: Sentences

  /// The RMC body: `xxRMC,time,status,lat,N/S,lon,E/W,knots,course,ddmmyy,magvar,E/W,mode[,navstatus]`.
  public func rmcBody(_ fix: Fix, precision: Precision = .full) -> String {
    let position = fix.mode.hasPosition ? fix.coordinate : nil
    var fields = [talker.letters + "RMC", Self.timeField(fix)]
    fields.append(position == nil ? "V" : "A")
    fields += Self.positionFields(position, minuteDecimals: precision.minuteDecimals)
    fields.append(fix.speedOverGround.map { Self.decimal($0 * 3600 / 1852, places: precision.speedPlaces) } ?? "")
    fields.append(fix.courseOverGround.map { Self.decimal(CompassAngle.rounded($0, places: 2), places: 2) } ?? "")
    fields.append(Self.dateField(fix))
    if let variation = fix.magneticVariation {
      fields.append(Self.decimal(abs(variation), places: 1))
      fields.append(variation < 0 ? "W" : "E")
    } else {
      fields += ["", ""]
    }
    fields.append(Self.modeIndicator(fix))
    if let status = fix.navigationalStatus { fields.append(status) }
    return fields.joined(separator: ",")
  }

  /// The VTG body: `xxVTG,course,T,,M,knots,N,km/h,K,mode` (magnetic course left empty).
  public func vtgBody(_ fix: Fix, precision: Precision = .full) -> String {
    let course = fix.courseOverGround.map { Self.decimal(CompassAngle.rounded($0, places: 2), places: 2) } ?? ""
    let knots = fix.speedOverGround.map { Self.decimal($0 * 3600 / 1852, places: precision.speedPlaces) } ?? ""
    let kmh = fix.speedOverGround.map { Self.decimal($0 * 3.6, places: precision.speedPlaces) } ?? ""
    return [
      talker.letters + "VTG", course, "T", "", "M", knots, "N", kmh, "K", Self.modeIndicator(fix),
    ]
    .joined(separator: ",")
  }

  /// The GGA body: `xxGGA,time,lat,N/S,lon,E/W,quality,used,hdop,alt,M,sep,M,age,station`.
  ///
  /// Altitude is written only for a 3D fix (a 2D fix leaves it empty, as receivers do); quality
  /// is the ``Fix/quality`` or, when unknown, 1 with a position and 0 without.
  public func ggaBody(_ fix: Fix, precision: Precision = .full) -> String {
    let position = fix.mode.hasPosition ? fix.coordinate : nil
    var fields = [talker.letters + "GGA", Self.timeField(fix)]
    fields += Self.positionFields(position, minuteDecimals: precision.minuteDecimals)
    let quality = fix.quality?.rawValue ?? (position == nil ? 0 : 1)
    fields.append(String(quality))
    fields.append(fix.satellitesUsed.map { Self.padded($0, width: 2) } ?? "")
    fields.append(fix.hdop.map { Self.decimal($0, places: precision.hdopPlaces) } ?? "")
    let altitude = fix.mode == .fix3D ? fix.altitudeMSL : nil
    fields.append(altitude.map { Self.decimal($0, places: precision.heightPlaces) } ?? "")
    fields.append(altitude == nil ? "" : "M")
    fields.append(fix.geoidSeparation.map { Self.decimal($0, places: precision.heightPlaces) } ?? "")
    fields.append(fix.geoidSeparation == nil ? "" : "M")
    fields.append(fix.dgpsAge.map { Self.decimal($0, places: min(1, precision.heightPlaces)) } ?? "")
    fields.append(fix.dgpsStation.map { Self.padded($0, width: 4) } ?? "")
    return fields.joined(separator: ",")
  }

  /// The GSA bodies: `xxGSA,A,mode,prn×12,pdop,hdop,vdop[,systemID]`.
  ///
  /// One sentence for a GPS-only epoch with talker `GP`; otherwise one `GNGSA` per system used
  /// (GPS and SBAS share system 1), carrying the NMEA 4.10 system ID (1 GPS, 2 GLONASS,
  /// 3 Galileo, 4 BeiDou, 5 QZSS, 6 NavIC). More than 12 satellites of a system take several
  /// sentences.
  public func gsaBodies(_ fix: Fix) -> [String] {
    let mode: Int
    switch fix.mode {
    case .fix3D: mode = 3
    case .fix2D: mode = 2
    case .unknown, .noFix: mode = 1
    }
    let dops = [fix.pdop, fix.hdop, fix.vdop].map { $0.map { Self.decimal($0, places: 2) } ?? "" }
    var bySystem: [(system: Int, prns: [Int])] = []
    for satellite in fix.satellites where satellite.used {
      guard let system = Self.systemID(satellite.constellation) else { continue }
      if let index = bySystem.firstIndex(where: { $0.system == system }) {
        bySystem[index].prns.append(satellite.prn)
      } else {
        bySystem.append((system, [satellite.prn]))
      }
    }
    let multiSystem = talker == .multiGNSS || bySystem.contains { $0.system != 1 }
    if bySystem.isEmpty { bySystem = [(1, [])] }
    var bodies: [String] = []
    for (system, prns) in bySystem {
      var chunks = stride(from: 0, to: prns.count, by: 12).map {
        Array(prns[$0..<min($0 + 12, prns.count)])
      }
      if chunks.isEmpty { chunks = [[]] }
      for chunk in chunks {
        var fields = [(multiSystem ? "GN" : talker.letters) + "GSA", "A", String(mode)]
        for slot in 0..<12 {
          fields.append(slot < chunk.count ? Self.padded(chunk[slot], width: 2) : "")
        }
        fields += dops
        if multiSystem { fields.append(String(system, radix: 16, uppercase: true)) }
        bodies.append(fields.joined(separator: ","))
      }
    }
    return bodies
  }

  /// The GSV bodies: `ttGSV,total,number,inView,(prn,elev,az,snr)×≤4[,signalID]` per constellation.
  ///
  /// Each constellation uses its own talker (GP for GPS and SBAS, GL, GA, GB, GQ, GI); `total` is
  /// the number of GSV sentences of that constellation, `number` is 1-based, `inView` counts the
  /// constellation's satellites. An epoch without satellites gives `GPGSV,1,1,00`.
  public static func gsvBodies(_ fix: Fix) -> [String] {
    var groups: [(talker: String, satellites: [Satellite])] = []
    for satellite in fix.satellites {
      guard let talker = TalkerID(constellation: satellite.constellation)?.letters else { continue }
      if let index = groups.firstIndex(where: { $0.talker == talker }) {
        groups[index].satellites.append(satellite)
      } else {
        groups.append((talker, [satellite]))
      }
    }
    if groups.isEmpty { return ["GPGSV,1,1,00"] }
    var bodies: [String] = []
    for (talker, satellites) in groups {
      let total = (satellites.count + 3) / 4
      let signalID = satellites.first?.signalID
      for number in 1...total {
        var fields = [
          talker + "GSV", String(total), String(number), padded(satellites.count, width: 2),
        ]
        for satellite in satellites[((number - 1) * 4)..<min(number * 4, satellites.count)] {
          fields.append(padded(satellite.prn, width: 2))
          fields.append(integerField(satellite.elevation, width: 2))
          fields.append(integerField(satellite.azimuth.map { CompassAngle.rounded($0, places: 0) }, width: 3))
          fields.append(integerField(satellite.snr, width: 2))
        }
        if let signalID { fields.append(String(signalID, radix: 16, uppercase: true)) }
        bodies.append(fields.joined(separator: ","))
      }
    }
    return bodies
  }

  /// The ZDA body: `xxZDA,hhmmss.ss,dd,mm,yyyy,00,00`; `nil` when the fix has no date.
  public func zdaBody(_ fix: Fix) -> String? {
    guard let time = fix.time else { return nil }
    let (year, month, day) = CivilDate.civil(milliseconds: time)
    return [
      talker.letters + "ZDA", Self.timeField(fix), padded2(day), padded2(month),
      Self.padded(year, width: 4), "00", "00",
    ].joined(separator: ",")
  }

  // MARK: Fields

  /// `ddmm.mmmmmm,N,dddmm.mmmmmm,E` (`minuteDecimals` decimals of minutes, 1...6), or four empty
  /// fields for `nil` or an invalid coordinate.
  public static func positionFields(_ coordinate: Coordinate?, minuteDecimals: Int = 6) -> [String] {
    guard let coordinate, coordinate.isValid else { return ["", "", "", ""] }
    return [
      angle(abs(coordinate.latitude), degreeDigits: 2, minuteDecimals: minuteDecimals),
      coordinate.latitude < 0 ? "S" : "N",
      angle(abs(coordinate.longitude), degreeDigits: 3, minuteDecimals: minuteDecimals),
      coordinate.longitude < 0 ? "W" : "E",
    ]
  }

  /// Degrees as `d…dmm.mmmmmm` with `degreeDigits` zero-padded degree digits (2 for latitude,
  /// 3 for longitude) and `minuteDecimals` decimals of minutes (1...6, six by default); `value`
  /// must be non-negative and finite.
  public static func angle(_ value: Double, degreeDigits: Int, minuteDecimals: Int = 6) -> String {
    let places = min(max(minuteDecimals, 1), 6)
    var unit: Int64 = 1
    for _ in 0..<places { unit *= 10 }
    // Work in units of the last decimal of a minute so rounding never produces "60.000000".
    let scaled = Self.roundedInteger(value * 60 * Double(unit)) ?? 0
    let degrees = scaled / (60 * unit)
    let minutes = scaled % (60 * unit)
    let whole = minutes / unit
    let fraction = minutes % unit
    return padded(Int(degrees), width: degreeDigits) + padded(Int(whole), width: 2) + "."
      + padded(Int(fraction), width: places)
  }

  /// UTC time of day as `hhmmss.ss` (`hhmmss.sss` when the milliseconds are not a multiple of
  /// ten), from ``Fix/time`` or ``Fix/timeOfDay``; empty when both are `nil`.
  public static func timeField(_ fix: Fix) -> String {
    let milliseconds: Int64
    if let time = fix.time {
      milliseconds = ((time % 86_400_000) + 86_400_000) % 86_400_000
    } else if let timeOfDay = fix.timeOfDay {
      milliseconds = Int64(timeOfDay)
    } else {
      return ""
    }
    let seconds = Int(milliseconds / 1000)
    let millis = Int(milliseconds % 1000)
    // A leap second (time of day 86_400_000...86_400_999) is written as 23:59:60.
    let clock =
      seconds >= 86_400
      ? "235960" : padded2(seconds / 3600) + padded2(seconds / 60 % 60) + padded2(seconds % 60)
    if millis % 10 == 0 { return clock + "." + padded2(millis / 10) }
    return clock + "." + padded(millis, width: 3)
  }

  /// UTC date as `ddmmyy` from ``Fix/time``; empty when `nil`.
  public static func dateField(_ fix: Fix) -> String {
    guard let time = fix.time else { return "" }
    let (year, month, day) = CivilDate.civil(milliseconds: time)
    return padded2(day) + padded2(month) + padded2(((year % 100) + 100) % 100)
  }

  /// A non-negative or negative number with exactly `places` (0...9) decimals, rounded half away
  /// from zero by adding 0.5 (``DecimalText/Rounding/addHalf``); empty (an empty NMEA field) when
  /// the value is not finite or its scaled magnitude reaches 10^15.
  public static func decimal(_ value: Double, places: Int) -> String {
    DecimalText.fixed(value, places: places, rounding: .addHalf, limit: 1e15) ?? ""
  }

  /// `value` in decimal, left-padded with zeros to `width` digits (negative values keep their sign).
  public static func padded(_ value: Int, width: Int) -> String {
    let digits = String(abs(value))
    let padding = String(repeating: "0", count: max(0, width - digits.count))
    return (value < 0 ? "-" : "") + padding + digits
  }

  /// `value` rounded half away from zero, or `nil` when it is not finite or beyond ±1e15.
  /// (Written without libm so the module needs no math library.)
  static func roundedInteger(_ value: Double) -> Int64? {
    guard value.isFinite, abs(value) < 1e15 else { return nil }
    return value >= 0 ? Int64(value + 0.5) : -Int64(-value + 0.5)
  }

  /// An optional value as a rounded, zero-padded integer field; empty when unknown.
  static func integerField(_ value: Double?, width: Int) -> String {
    guard let value, let integer = roundedInteger(value) else { return "" }
    return padded(Int(integer), width: width)
  }

  private static func padded2(_ value: Int) -> String { padded(value, width: 2) }
  private func padded2(_ value: Int) -> String { Self.padded(value, width: 2) }

  /// RMC/VTG mode indicator (NMEA 2.3+): `N` no fix, `A` autonomous, `D` differential,
  /// `E` dead reckoning, `M` manual, `S` simulator.
  static func modeIndicator(_ fix: Fix) -> String {
    guard fix.mode.hasPosition, fix.coordinate != nil else { return "N" }
    switch fix.quality {
    case .dgps?, .rtkFixed?, .rtkFloat?: return "D"
    case .deadReckoning?: return "E"
    case .manual?: return "M"
    case .simulator?: return "S"
    default: return "A"
    }
  }

  /// NMEA 4.10 GSA/GSV system ID of a constellation; `nil` for IMES, which NMEA does not cover.
  static func systemID(_ constellation: Constellation) -> Int? {
    switch constellation {
    case .gps, .sbas: return 1
    case .glonass: return 2
    case .galileo: return 3
    case .beidou: return 4
    case .qzss: return 5
    case .navic: return 6
    case .imes: return nil
    }
  }

}
