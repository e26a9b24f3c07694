/// One GPS satellite's almanac record (IS-GPS-200 §20.3.3.5.1.2, subframes 4 and 5 page
/// contents) as the YUMA format gives it: angles in radians, rates in radians per second.
public struct AlmanacRecord: Sendable, Hashable {
  /// PRN, `1...32`.
  public var prn: Int
  /// Health word; `0` means usable. The simulator leaves out any satellite whose health is not 0.
  public var health: Int
  /// Eccentricity `e`, `0..<1` (GPS orbits are below 0.03).
  public var eccentricity: Double
  /// Time of applicability `t_oa`, seconds into the almanac week, `0...604_800`.
  public var timeOfApplicability: Double
  /// Inclination `i` (the full angle, not the almanac's `δi` offset from 0.3 semicircles), radians.
  public var inclination: Double
  /// Rate of right ascension `Ω̇`, radians per second.
  public var rateOfRightAscension: Double
  /// Square root of the semi-major axis, `√A`, metres^½ (about 5153.6 for GPS).
  public var sqrtSemiMajorAxis: Double
  /// Longitude of the ascending node at the start of the almanac week, `Ω₀`, radians.
  public var rightAscensionAtWeek: Double
  /// Argument of perigee `ω`, radians.
  public var argumentOfPerigee: Double
  /// Mean anomaly at `t_oa`, `M₀`, radians.
  public var meanAnomaly: Double
  /// Clock bias `a_f0`, seconds.
  public var clockBias: Double
  /// Clock drift `a_f1`, seconds per second.
  public var clockDrift: Double
  /// The almanac week as the file gives it: modulo 1024 in NAVCEN files, or a full week number.
  public var week: Int

  /// Creates a record; units as the properties state.
  public init(
    prn: Int, health: Int, eccentricity: Double, timeOfApplicability: Double, inclination: Double,
    rateOfRightAscension: Double, sqrtSemiMajorAxis: Double, rightAscensionAtWeek: Double,
    argumentOfPerigee: Double, meanAnomaly: Double, clockBias: Double = 0, clockDrift: Double = 0,
    week: Int
  ) {
    self.prn = prn
    self.health = health
    self.eccentricity = eccentricity
    self.timeOfApplicability = timeOfApplicability
    self.inclination = inclination
    self.rateOfRightAscension = rateOfRightAscension
    self.sqrtSemiMajorAxis = sqrtSemiMajorAxis
    self.rightAscensionAtWeek = rightAscensionAtWeek
    self.argumentOfPerigee = argumentOfPerigee
    self.meanAnomaly = meanAnomaly
    self.clockBias = clockBias
    self.clockDrift = clockDrift
    self.week = week
  }
}

/// Why a YUMA almanac was refused; `line` is 1-based.
public enum AlmanacError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The file could not be read (`errno` text).
  case unreadable(path: String, message: String)
  /// A line where a record header (`******** Week N almanac for PRN-XX ********`) was expected.
  case expectedHeader(line: Int, text: String)
  /// A record line whose label is not the one YUMA puts at that place.
  case unexpectedLabel(line: Int, expected: String, found: String)
  /// A value that is not a number, or out of its range; `expected` says what is accepted.
  case invalidValue(line: Int, label: String, value: String, expected: String)
  /// The file ended inside a record.
  case truncatedRecord(line: Int, prn: Int?)
  /// Two records for one PRN.
  case duplicatePRN(line: Int, prn: Int)
  /// The records disagree on the week or the time of applicability.
  case inconsistentEpoch(line: Int, detail: String)
  /// No record at all.
  case empty

  /// A one-line message naming the line.
  public var description: String {
    switch self {
    case .unreadable(let path, let message): return "cannot read almanac \(path): \(message)"
    case .expectedHeader(let line, let text):
      return "almanac line \(line): expected '******** Week N almanac for PRN-XX ********', found '\(text)'"
    case .unexpectedLabel(let line, let expected, let found):
      return "almanac line \(line): expected label '\(expected)', found '\(found)'"
    case .invalidValue(let line, let label, let value, let expected):
      return "almanac line \(line): '\(label)' value '\(value)' is not \(expected)"
    case .truncatedRecord(let line, let prn):
      return "almanac line \(line): the file ends inside the record" + (prn.map { " of PRN \($0)" } ?? "")
    case .duplicatePRN(let line, let prn): return "almanac line \(line): PRN \(prn) appears twice"
    case .inconsistentEpoch(let line, let detail): return "almanac line \(line): \(detail)"
    case .empty: return "almanac has no record"
    }
  }
}

/// A GPS almanac: its records, keyed by PRN, all for one week and time of applicability.
public struct GPSAlmanac: Sendable, Hashable {
  /// The records, in PRN order.
  public var records: [AlmanacRecord]

  /// Creates an almanac from records (no checks: use ``parseYUMA(_:)`` for text).
  public init(records: [AlmanacRecord]) { self.records = records.sorted { $0.prn < $1.prn } }

  /// The almanac shipped with the project (``BundledAlmanac``).
  public static let bundled: GPSAlmanac = {
    // The bundled text is checked by the test suite; an empty almanac here would only mean no
    // GPS satellites, never a crash.
    (try? parseYUMA(BundledAlmanac.yuma)) ?? GPSAlmanac(records: [])
  }()

  /// The labels of a YUMA record, in order, after the header line.
  static let labels = [
    "ID", "Health", "Eccentricity", "Time of Applicability(s)", "Orbital Inclination(rad)",
    "Rate of Right Ascen(r/s)", "SQRT(A)  (m 1/2)", "Right Ascen at Week(rad)",
    "Argument of Perigee(rad)", "Mean Anom(rad)", "Af0(s)", "Af1(s/s)", "week",
  ]

  /// Parses a YUMA almanac (the U.S. Coast Guard NAVCEN format): records of a header line
  /// `******** Week N almanac for PRN-XX ********` and 13 `Label: value` lines in the order of
  /// ``labels``, separated by blank lines; CRLF line ends are accepted. Strict: every label must be
  /// the expected one (whitespace inside labels is not significant), every value a finite number
  /// in range (PRN 1-32, health 0-255, eccentricity 0..<1, `t_oa` 0...604800, √A 1000...10000,
  /// week 0...9999), one record per PRN, one week and `t_oa` for all.
  /// - Throws: ``AlmanacError`` with the 1-based line number.
  public static func parseYUMA(_ text: String) throws(AlmanacError) -> GPSAlmanac {
    var lines: [Substring] = []
    // "\r\n" is one Character in Swift: split on it as well as on "\n".
    for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
      var line = raw
      if line.last == "\r" { line = line.dropLast() }
      lines.append(line)
    }
    var records: [AlmanacRecord] = []
    var index = 0
    func trimmed(_ s: Substring) -> Substring {
      var s = s
      while let first = s.first, first == " " || first == "\t" { s = s.dropFirst() }
      while let last = s.last, last == " " || last == "\t" { s = s.dropLast() }
      return s
    }
    func squeeze(_ s: Substring) -> String { s.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ") }
    while index < lines.count {
      let header = trimmed(lines[index])
      if header.isEmpty {
        index += 1
        continue
      }
      let headerLine = index + 1
      guard header.hasPrefix("*"), header.contains("almanac for PRN") else {
        throw .expectedHeader(line: headerLine, text: String(header.prefix(60)))
      }
      index += 1
      var values: [Double] = []
      var prn: Int?
      for label in labels {
        guard index < lines.count, !trimmed(lines[index]).isEmpty else {
          throw .truncatedRecord(line: min(index + 1, lines.count), prn: prn)
        }
        let line = lines[index]
        let lineNumber = index + 1
        index += 1
        guard let colon = line.firstIndex(of: ":") else {
          throw .unexpectedLabel(line: lineNumber, expected: label, found: String(trimmed(line).prefix(40)))
        }
        let found = squeeze(line[..<colon])
        guard found.lowercased() == squeeze(Substring(label)).lowercased() else {
          throw .unexpectedLabel(line: lineNumber, expected: label, found: found)
        }
        let text = String(trimmed(line[line.index(after: colon)...]))
        guard let value = Double(text), value.isFinite else {
          throw .invalidValue(line: lineNumber, label: label, value: text, expected: "a number")
        }
        func check(_ ok: Bool, _ expected: String) throws(AlmanacError) {
          if !ok { throw .invalidValue(line: lineNumber, label: label, value: text, expected: expected) }
        }
        switch label {
        case "ID":
          try check(value == value.rounded() && (1...32).contains(value), "a PRN within 1...32")
          prn = Int(value)
        case "Health": try check(value == value.rounded() && (0...255).contains(value), "an integer within 0...255")
        case "Eccentricity": try check(value >= 0 && value < 1, "within 0..<1")
        case "Time of Applicability(s)": try check(value >= 0 && value <= 604_800, "seconds within 0...604800")
        case "SQRT(A)  (m 1/2)": try check(value >= 1000 && value <= 10_000, "within 1000...10000 m^1/2")
        case "week": try check(value == value.rounded() && (0...9999).contains(value), "a week number within 0...9999")
        case "Orbital Inclination(rad)", "Right Ascen at Week(rad)", "Argument of Perigee(rad)", "Mean Anom(rad)":
          try check(abs(value) <= 7, "an angle in radians within -7...7")
        case "Rate of Right Ascen(r/s)": try check(abs(value) < 1e-5, "a rate in rad/s below 1e-5")
        default: try check(abs(value) < 1, "a clock term below 1 s (or s/s)")
        }
        values.append(value)
      }
      let record = AlmanacRecord(
        prn: Int(values[0]), health: Int(values[1]), eccentricity: values[2],
        timeOfApplicability: values[3], inclination: values[4], rateOfRightAscension: values[5],
        sqrtSemiMajorAxis: values[6], rightAscensionAtWeek: values[7], argumentOfPerigee: values[8],
        meanAnomaly: values[9], clockBias: values[10], clockDrift: values[11], week: Int(values[12]))
      if records.contains(where: { $0.prn == record.prn }) {
        throw .duplicatePRN(line: headerLine + 1, prn: record.prn)
      }
      if let first = records.first,
        first.week != record.week || first.timeOfApplicability != record.timeOfApplicability
      {
        throw .inconsistentEpoch(
          line: headerLine,
          detail:
            "PRN \(record.prn) is for week \(record.week) t_oa \(record.timeOfApplicability), PRN \(first.prn) for week \(first.week) t_oa \(first.timeOfApplicability)"
        )
      }
      records.append(record)
    }
    guard !records.isEmpty else { throw .empty }
    return GPSAlmanac(records: records)
  }
}
