import Foundation
import LocationTestKit
import NMEA
import Testing
import LocationModel
import LocationProtocol

/// Compares our decode of every corpus log with gpsd's own decode (`.chk`) of it.
///
/// gpsd's reference value for an epoch is the last TPV it reported for that time after an NMEA
/// sentence of that epoch (one that carries the epoch's time of day). TPVs that gpsd produced from
/// other input (the CASIC binary frames interleaved in quectel-l76k-dual.log, which the .chk does
/// not print) are counted separately and explained in docs/nmea-vs-gpsd.md.
struct CorpusAgreement {
  struct Row {
    var log: String
    var epochs = 0
    var matched = 0
    var mismatches: [String: Int] = [:]
    var nonNMEAReports = 0
    var examples: [String] = []
    /// Per TPV field: the epochs where gpsd reports the field, and those of them where ours agree.
    var fieldEpochs: [String: Int] = [:]
    var fieldAgreed: [String: Int] = [:]
    /// Per TPV field: the largest difference between gpsd's value and ours among agreeing epochs.
    var largestDifference: [String: Double] = [:]
  }

  /// The TPV fields compared, each with its tolerance: gpsd prints `lat`/`lon` with 9 decimals
  /// (1e-6 degrees is 0.1 m), `altMSL`/`altHAE` with 4 and `speed` with 3 (1 cm, 1 cm/s), `track`
  /// with 4 (0.01 degrees), `geoidSep` with 3 (2 mm: the last printed digit of two roundings of
  /// one model value), `magvar` with 1 (0.05 degrees: one printed value, and the binary noise of
  /// a value that ends in 5 at the second decimal). `mode` must be equal.
  static let fields: [(name: String, tolerance: Double)] = [
    ("lat", 1e-6), ("lon", 1e-6), ("altMSL", 0.01), ("speed", 0.01), ("track", 0.01), ("altHAE", 0.01),
    ("geoidSep", 0.002), ("magvar", 0.051),
  ]

  /// The field names of ``fields`` and `mode`, in table order.
  static var fieldNames: [String] { ["mode"] + fields.map(\.name) }

  /// The comparison key of an ISO 8601 time: the whole time, or only the time of day
  /// (`hh:mm:ss.sss`) for gpsd output whose dates gpsd moved by 1024 weeks.
  static func key(_ time: String, byTimeOfDay: Bool) -> String {
    guard byTimeOfDay, time.count >= 23 else { return time }
    let chars = Array(time)
    return String(chars[11..<23])
  }

  /// The `hhmmss` time of a GGA, RMC, GNS, ZDA or GLL line, `nil` for other lines.
  static func fixTime(_ line: String) -> String? {
    let fields = line.split(separator: ",", omittingEmptySubsequences: false)
    guard let address = fields.first, address.hasPrefix("$"), address.count == 6 else { return nil }
    let index: Int
    switch address.suffix(3) {
    case "GGA", "RMC", "GNS", "ZDA": index = 1
    case "GLL": index = 5
    default: return nil
    }
    guard fields.count > index, fields[index].count >= 6 else { return nil }
    return String(fields[index].prefix(6))
  }

  static func reference(chk: URL, byTimeOfDay: Bool = false) throws -> (settled: [String: [String: Any]], nonNMEA: Set<String>) {
    let data = try Data(contentsOf: chk)
    var trigger = ""
    var settled: [String: [String: Any]] = [:]
    var nonNMEA = Set<String>()
    var lastFixTime = ""
    // Split on bytes: "\r\n" is a single Character in Swift.
    for bytes in data.split(separator: 0x0A) {
      let line = String(decoding: bytes.filter { $0 != 0x0D }, as: UTF8.self)
      if line.isEmpty { continue }
      if line.hasPrefix("{") {
        guard line.hasPrefix("{\"class\":\"TPV\""),
          let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
          let time = object["time"] as? String, time.count >= 19
        else { continue }
        let chars = Array(time)
        let timeOfDay = String([chars[11], chars[12], chars[14], chars[15], chars[17], chars[18]])
        // gpsd may report the cycle again after a sentence without a time (GSA, or one it
        // ignores such as GLC), with what a GGA or GLL sent after the cycle's first report
        // changed: that TPV is a reference too while the last timed sentence had the epoch's
        // time (bundg_zeus_9.log sends RMC and ZDA before GGA and GLL). Not after GSV: GSV
        // changes no TPV field, so a TPV after it comes from input the .chk does not show
        // (the binary frames of quectel-l76k-dual.log). Not after a proprietary sentence either
        // ($PGRMZ altitude, $PASHR attitude): those are not NMEA 0183 and are not decoded here.
        let untimedNMEA =
          trigger.hasPrefix("$") && !trigger.hasPrefix("$P") && !trigger.dropFirst(3).hasPrefix("GSV,")
          && lastFixTime == timeOfDay
        if trigger.contains(timeOfDay) || untimedNMEA {
          settled[key(time, byTimeOfDay: byTimeOfDay)] = object
        } else {
          nonNMEA.insert(key(time, byTimeOfDay: byTimeOfDay))
        }
      } else if !line.hasPrefix("#") {
        trigger = line
        lastFixTime = Self.fixTime(line) ?? lastFixTime
      }
    }
    return (settled, nonNMEA)
  }

  static func ours(log: URL, byTimeOfDay: Bool = false) throws -> [String: [String: Any]] {
    let (fixes, _) = decode(Array(try Data(contentsOf: log)))
    var result: [String: [String: Any]] = [:]
    for fix in fixes {
      var json: [UInt8] = []
      GPSDJSON.appendTPV(fix, to: &json)
      guard let object = try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
        let time = object["time"] as? String
      else { continue }
      result[key(time, byTimeOfDay: byTimeOfDay)] = object
    }
    return result
  }

  /// The per-log Markdown table printed by the agreement tests, with a total row.
  static func table(_ rows: [Row]) -> String {
    var table = "\n| log | gpsd epochs (mode 2/3) | matched | mismatches by field | later non-NMEA TPVs |\n|---|---:|---:|---|---:|\n"
    for row in rows {
      let mismatches = row.mismatches.isEmpty ? "-" : row.mismatches.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
      table += "| \(row.log) | \(row.epochs) | \(row.matched) | \(mismatches) | \(row.nonNMEAReports) |\n"
    }
    let epochs = rows.reduce(0) { $0 + $1.epochs }
    let matched = rows.reduce(0) { $0 + $1.matched }
    let ratio = epochs == 0 ? 0 : Double(matched) / Double(epochs)
    table += "| **total** | \(epochs) | \(matched) | \(String(format: "%.2f%%", ratio * 100)) | |\n"
    table += "\n| field | gpsd epochs with it | agreed | share | largest difference agreed |\n"
    table += "|---|---:|---:|---:|---:|\n"
    for field in fieldNames {
      let (compared, agreed) = fieldAgreement(rows, field)
      let share = compared == 0 ? 100 : 100 * Double(agreed) / Double(compared)
      let largest = rows.compactMap { $0.largestDifference[field] }.max().map { String(format: "%.6g", $0) } ?? "-"
      table += "| \(field) | \(compared) | \(agreed) | \(String(format: "%.2f%%", share)) | \(largest) |\n"
    }
    return table
  }

  /// The epochs where gpsd reports `field`, and those where ours agree, over all rows.
  static func fieldAgreement(_ rows: [Row], _ field: String) -> (compared: Int, agreed: Int) {
    let compared = rows.reduce(0) { $0 + $1.fieldEpochs[field, default: 0] }
    return (compared, rows.reduce(0) { $0 + $1.fieldAgreed[field, default: 0] })
  }

  static func compare(log: URL, byTimeOfDay: Bool = false) throws -> Row {
    let (settled, nonNMEA) = try reference(chk: URL(fileURLWithPath: log.path + ".chk"), byTimeOfDay: byTimeOfDay)
    let ours = try ours(log: log, byTimeOfDay: byTimeOfDay)
    var row = Row(log: log.lastPathComponent)
    row.nonNMEAReports = nonNMEA.count
    for (time, gpsd) in settled.sorted(by: { $0.key < $1.key }) {
      guard let mode = gpsd["mode"] as? Int, mode >= 2 else { continue }
      row.epochs += 1
      var bad: [String] = []
      let mine = ours[time]
      if mine == nil { bad.append("missing") }
      row.fieldEpochs["mode", default: 0] += 1
      if let mine, mine["mode"] as? Int == mode {
        row.fieldAgreed["mode", default: 0] += 1
      } else if mine != nil {
        bad.append("mode")
      }
      for (key, tolerance) in fields {
        guard let expected = gpsd[key] as? Double else { continue }
        row.fieldEpochs[key, default: 0] += 1
        guard let mine else { continue }
        if let actual = mine[key] as? Double, abs(actual - expected) <= tolerance {
          row.fieldAgreed[key, default: 0] += 1
          row.largestDifference[key] = max(row.largestDifference[key] ?? 0, abs(actual - expected))
        } else {
          bad.append(key)
        }
      }
      if bad.isEmpty {
        row.matched += 1
      } else {
        for field in bad { row.mismatches[field, default: 0] += 1 }
        if row.examples.count < 3 { row.examples.append("\(time): \(bad.joined(separator: ","))") }
      }
    }
    return row
  }
}

@Suite("NMEA corpus vs gpsd")
struct CorpusAgreementTests {
  @Test("the corpus is present (required when CI=true)")
  func corpusPresent() {
    if !NMEACorpus.isAvailable {
      if NMEACorpus.isRequired {
        Issue.record("CI=true but \(NMEACorpus.directory.path) is missing")
      } else {
        print(NMEACorpus.missingMessage)
      }
      return
    }
    #expect(NMEACorpus.logsWithGPSDOutput().count >= 10)
  }

  @Test("every log with gpsd output agrees with gpsd", .enabled(if: NMEACorpus.isAvailable, "NMEA corpus missing"))
  func agreementTable() throws {
    var rows: [CorpusAgreement.Row] = []
    for log in NMEACorpus.logsWithGPSDOutput() {
      rows.append(try CorpusAgreement.compare(log: log))
    }
    print(CorpusAgreement.table(rows))
    for row in rows where !row.examples.isEmpty { print("\(row.log): \(row.examples.joined(separator: "; "))") }
    let epochs = rows.reduce(0) { $0 + $1.epochs }
    let matched = rows.reduce(0) { $0 + $1.matched }
    let ratio = epochs == 0 ? 0 : Double(matched) / Double(epochs)
    #expect(epochs > 500, "the corpus should give hundreds of comparable epochs")
    #expect(ratio >= 0.99, "agreement with gpsd below 99%")
    for field in CorpusAgreement.fieldNames {
      let (compared, agreed) = CorpusAgreement.fieldAgreement(rows, field)
      #expect(compared > 0 && Double(agreed) >= 0.995 * Double(compared), "\(field): \(agreed) of \(compared)")
    }
  }

  @Test(
    "logs without gpsd output decode without a crash and with plausible counts",
    .enabled(if: NMEACorpus.isAvailable, "NMEA corpus missing"))
  func logsWithoutReference() throws {
    // Expected epochs and fix counts measured from the logs' own sentences (see SOURCES.md):
    // each line is (file, RMC count, valid RMC count).
    let expected: [String: (rmc: Int, valid: Int)] = [
      "aerorust-nmea1.log": (1307, 993),
      "hazer-neof10t.txt": (46, 46),
      "nmeaparser-NmeaSampleData-trimmed.txt": (2692, 2692),
      "nmeaparser-TrimbleR2SampleData.txt": (34, 34),
    ]
    let logs = NMEACorpus.logsWithoutGPSDOutput()
    #expect(logs.count == expected.count)
    for log in logs {
      let (fixes, stats) = decode(Array(try Data(contentsOf: log)))
      guard let counts = expected[log.lastPathComponent] else {
        Issue.record("unexpected log \(log.lastPathComponent)")
        continue
      }
      let positioned = fixes.filter { $0.mode.hasPosition }
      #expect(stats.rejectedTotal == 0, "\(log.lastPathComponent): \(stats.summary)")
      #expect(fixes.count == counts.rmc, "\(log.lastPathComponent): one fix per RMC epoch")
      #expect(positioned.count == counts.valid, "\(log.lastPathComponent): fixes with a position")
      for fix in positioned {
        guard let c = fix.coordinate else { continue }
        #expect(c.isValid)
      }
    }
  }
}
