import Foundation

/// The CPU time and memory of a running process, read from `/proc` as proc(5) describes it
/// (Linux only), for benchmarks that measure a daemon from outside.
public struct ProcessSample: Sendable, Equatable {
  /// utime + stime (fields 14 and 15 of `/proc/PID/stat`), seconds.
  public var cpuSeconds: Double
  /// `VmRSS` of `/proc/PID/status`, MiB (its kB / 1024).
  public var residentMegabytes: Double

  /// Creates a sample from its two figures.
  public init(cpuSeconds: Double, residentMegabytes: Double) {
    self.cpuSeconds = cpuSeconds
    self.residentMegabytes = residentMegabytes
  }

  /// Reads process `pid` now; `nil` when it is gone or its files cannot be parsed.
  public static func read(pid: Int32) -> ProcessSample? {
    guard let cpu = cpuSeconds(pid: pid),
      let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
      let rss = kilobytes(status: status, field: "VmRSS")
    else { return nil }
    return ProcessSample(cpuSeconds: cpu, residentMegabytes: Double(rss) / 1024)
  }

  /// utime + stime of process `pid` now, seconds (the ticks of ``cpuTicks(stat:)`` over
  /// `sysconf(_SC_CLK_TCK)`); `nil` when it is gone or `/proc/PID/stat` cannot be parsed.
  public static func cpuSeconds(pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let ticks = cpuTicks(stat: stat)
    else { return nil }
    return Double(ticks.user + ticks.system) / Double(sysconf(Int32(_SC_CLK_TCK)))
  }

  /// utime and stime, in clock ticks, from the text of `/proc/PID/stat`: fields 14 and 15,
  /// counted after the command name in parentheses (which may itself hold spaces and `)`, so
  /// the last `)` ends it). `nil` when the text has fewer fields or they are not counts.
  public static func cpuTicks(stat text: String) -> (user: Int, system: Int)? {
    guard let close = text.lastIndex(of: ")") else { return nil }
    // After ") ": field 3 (state) is index 0, so utime (14) is index 11 and stime (15) 12.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]),
      user >= 0, system >= 0
    else { return nil }
    return (user, system)
  }

  /// The value in kB of a `NAME:   VALUE kB` line of `/proc/PID/status` (`VmRSS`, `VmHWM`,
  /// `RssAnon`...); `nil` when the line is missing or not a count.
  public static func kilobytes(status text: String, field: String) -> Int? {
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
      let parts = line.split(separator: " ", omittingEmptySubsequences: true)
      guard parts.count >= 2, let value = Int(parts[1].trimmingCharacters(in: .whitespaces)),
        value >= 0
      else { return nil }
      return value
    }
    return nil
  }
}

/// Byte-level scanning of the JSON lines gpsd and locationd send (gpsd's TPV shape, see
/// gpsd_json(5)), fast enough for a benchmark's hot path: no JSONDecoder.
public enum TPVLine {
  private static let classPrefix = Array(#"{"class":"TPV""#.utf8)
  private static let timeKey = Array(#""time":""#.utf8)

  /// Whether `line` is a TPV report: it starts with `{"class":"TPV"`, as both gpsd and
  /// locationd write it.
  public static func isTPV(_ line: ArraySlice<UInt8>) -> Bool {
    line.count >= classPrefix.count && line.prefix(classPrefix.count).elementsEqual(classPrefix)
  }

  /// The `"time":"..."` member of a TPV line (ISO 8601 UTC, such as
  /// `2026-03-14T12:00:00.100Z`) as milliseconds since 1970; `nil` when the line has no time
  /// or it is not in that form.
  public static func time(_ line: ArraySlice<UInt8>) -> Int64? {
    let key = timeKey
    var index = line.startIndex
    while index + key.count <= line.endIndex {
      if line[index] == key[0], line[index..<(index + key.count)].elementsEqual(key) {
        let start = index + key.count
        guard let end = line[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return TestRoute.milliseconds(iso8601: String(decoding: line[start..<end], as: UTF8.self))
      }
      index += 1
    }
    return nil
  }
}

/// One entry of a benchmark's `--clients` list: a count, or `MAX`, the most clients gpsd
/// accepts (measured at run time).
public enum BenchmarkClientCount: Sendable, Equatable, CustomStringConvertible {
  /// That many clients, 1...4096.
  case count(Int)
  /// As many clients as gpsd accepts.
  case gpsdLimit

  /// Why a `--clients` list was refused.
  public struct ParseError: Error, Equatable, CustomStringConvertible {
    /// The entry that is neither a count within 1...4096 nor `MAX` ("" for an empty entry).
    public var entry: String
    /// A one-line explanation.
    public var description: String {
      entry.isEmpty
        ? "--clients needs a list of counts or MAX, such as 10,50,MAX"
        : "--clients: \"\(entry)\" is neither a count within 1...4096 nor MAX"
    }
  }

  /// Parses a comma-separated list such as `10,50,MAX` (`max` in any case); spaces around
  /// entries are allowed. Throws ``ParseError`` for an empty list or a bad entry.
  public static func parseList(_ text: String) throws(ParseError) -> [BenchmarkClientCount] {
    var list: [BenchmarkClientCount] = []
    for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
      let trimmed = entry.trimmingCharacters(in: .whitespaces)
      if trimmed.uppercased() == "MAX" {
        list.append(.gpsdLimit)
      } else if let count = Int(trimmed), (1...4096).contains(count) {
        list.append(.count(count))
      } else {
        throw ParseError(entry: trimmed)
      }
    }
    return list
  }

  /// The count itself, or `limit` for ``gpsdLimit``.
  public func resolved(gpsdLimit limit: Int) -> Int {
    switch self {
    case .count(let count): return count
    case .gpsdLimit: return limit
    }
  }

  /// `10` or `MAX`.
  public var description: String {
    switch self {
    case .count(let count): return String(count)
    case .gpsdLimit: return "MAX"
    }
  }
}
