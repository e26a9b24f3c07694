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
    return UTCTime(iso8601: text, syntax: .rfc3339)?.milliseconds
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
}

extension TrackTime {
  /// `milliseconds` since the Unix epoch as ISO 8601 UTC (`2019-05-01T12:00:00Z`, with `.sss`
  /// when the milliseconds are not zero), as the exports write it.
  public static func iso8601(_ milliseconds: Int64) -> String {
    UTCTime(milliseconds: milliseconds).iso8601(fraction: .millisecondsUnlessZero)
  }
}
