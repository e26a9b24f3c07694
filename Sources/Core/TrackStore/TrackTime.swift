import LocationModel

/// The TIME arguments of `locationctl track export --since/--until`.
public enum TrackTime {
  /// Milliseconds since the Unix epoch for `text`, or `nil` when it is neither form:
  /// - Unix seconds, optionally with a fraction: `1556712000`, `1556712000.5`;
  /// - ISO 8601 / RFC 3339 in UTC or with an offset: `2019-05-01T12:00:00Z`,
  ///   `2019-05-01T12:00:00.250+02:00`, `2019-05-01T12:00Z`; a date alone (`2019-05-01`) is
  ///   midnight UTC. A space may stand for the `T`.
  public static func parse(_ text: String) -> Int64? {
    let bytes = Array(text.utf8)
    guard !bytes.isEmpty, bytes.count <= 64 else { return nil }
    if let seconds = unixSeconds(bytes) { return seconds }
    return iso8601(bytes)
  }

  private static func digit(_ byte: UInt8) -> Int? {
    byte >= 48 && byte <= 57 ? Int(byte - 48) : nil
  }

  private static func unixSeconds(_ bytes: [UInt8]) -> Int64? {
    var index = 0
    var negative = false
    if bytes[0] == UInt8(ascii: "-") {
      negative = true
      index = 1
    }
    var whole: Int64 = 0
    var digits = 0
    while index < bytes.count, let d = digit(bytes[index]) {
      guard digits < 12 else { return nil }
      whole = whole * 10 + Int64(d)
      digits += 1
      index += 1
    }
    guard digits > 0 else { return nil }
    var fraction: Int64 = 0
    if index < bytes.count {
      guard bytes[index] == UInt8(ascii: ".") else { return nil }
      index += 1
      var scale: Int64 = 100
      var fractionDigits = 0
      while index < bytes.count, let d = digit(bytes[index]) {
        fraction += Int64(d) * scale
        scale /= 10
        fractionDigits += 1
        index += 1
      }
      guard fractionDigits > 0, index == bytes.count else { return nil }
    }
    let value = whole * 1000 + fraction
    return negative ? -value : value
  }

  private static func iso8601(_ bytes: [UInt8]) -> Int64? {
    var index = 0
    func number(_ width: Int) -> Int? {
      guard index + width <= bytes.count else { return nil }
      var value = 0
      for k in index..<(index + width) {
        guard let d = digit(bytes[k]) else { return nil }
        value = value * 10 + d
      }
      index += width
      return value
    }
    func expect(_ character: Character) -> Bool {
      guard index < bytes.count, let ascii = character.asciiValue, bytes[index] == ascii else { return false }
      index += 1
      return true
    }
    guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
      (1...12).contains(month), (1...CivilDate.daysIn(month: month, year: year)).contains(day)
    else { return nil }
    var milliseconds = Int64(CivilDate.days(year: year, month: month, day: day)) * 86_400_000
    if index == bytes.count { return milliseconds }
    guard expect("T") || expect("t") || expect(" ") else { return nil }
    guard let hour = number(2), hour < 24, expect(":"), let minute = number(2), minute < 60 else { return nil }
    var second = 0
    var fraction: Int64 = 0
    if expect(":") {
      guard let s = number(2), s <= 60 else { return nil }
      second = s
      if expect(".") || expect(",") {
        var scale: Int64 = 100
        var count = 0
        while index < bytes.count, let d = digit(bytes[index]) {
          fraction += Int64(d) * scale
          scale /= 10
          count += 1
          index += 1
        }
        guard count > 0 else { return nil }
      }
    }
    milliseconds += Int64(hour * 3600 + minute * 60 + second) * 1000 + fraction
    guard index < bytes.count else { return nil }  // a time needs its zone: Z or an offset
    if expect("Z") || expect("z") {
      return index == bytes.count ? milliseconds : nil
    }
    let sign: Int64
    if expect("+") {
      sign = 1
    } else if expect("-") {
      sign = -1
    } else {
      return nil
    }
    guard let offsetHours = number(2), offsetHours < 24 else { return nil }
    _ = expect(":")
    guard let offsetMinutes = number(2), offsetMinutes < 60, index == bytes.count else { return nil }
    return milliseconds - sign * Int64(offsetHours * 3600 + offsetMinutes * 60) * 1000
  }
}

extension TrackTime {
  /// `milliseconds` since the Unix epoch as ISO 8601 UTC (`2019-05-01T12:00:00Z`, with `.sss`
  /// when the milliseconds are not zero), as the exports write it.
  public static func iso8601(_ milliseconds: Int64) -> String {
    var out = ByteOutput { (_: [UInt8]) throws(TrackExportError) in }
    out.time(milliseconds)
    return String(decoding: out.bytes, as: UTF8.self)
  }
}
