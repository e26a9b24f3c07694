/// A UTC time: milliseconds since 1970-01-01T00:00:00Z (the Unix epoch; leap seconds are not
/// counted, as in POSIX time), on the proleptic Gregorian calendar, with its ISO 8601 text
/// (ISO 8601-1:2019 extended format; RFC 3339 is the profile written) read and written in one
/// place: gpsd's TPV and SKY `time`, NMEA dates, GPX and GeoJSON exports, OwnTracks, the track
/// store and the CLI all go through it.
///
/// Range: any `Int64` of milliseconds can be held and written; text is read for the years
/// 0000-9999 only (four digits, ISO 8601's basic range), so a read time lies between
/// 0000-01-01T00:00:00Z minus a zone offset and 9999-12-31T23:59:60.999Z plus one.
public struct UTCTime: Sendable, Hashable, Comparable {
  /// Milliseconds since 1970-01-01T00:00:00Z; negative before 1970.
  public var milliseconds: Int64

  /// The time `milliseconds` after 1970-01-01T00:00:00Z.
  @inlinable public init(milliseconds: Int64) { self.milliseconds = milliseconds }

  /// The time `seconds` after 1970-01-01T00:00:00Z (a Unix time, such as OwnTracks' `tst`);
  /// clamped to the range of ``milliseconds`` (about ±292 million years).
  @inlinable public init(seconds: Int64) {
    let (value, overflow) = seconds.multipliedReportingOverflow(by: 1000)
    milliseconds = overflow ? (seconds < 0 ? .min : .max) : value
  }

  @inlinable public static func < (lhs: UTCTime, rhs: UTCTime) -> Bool {
    lhs.milliseconds < rhs.milliseconds
  }

  /// Whole seconds since 1970-01-01T00:00:00Z, rounded toward the past (so a time before 1970
  /// with a fraction falls in the second it is in).
  @inlinable public var seconds: Int64 {
    let (quotient, remainder) = milliseconds.quotientAndRemainder(dividingBy: 1000)
    return remainder < 0 ? quotient - 1 : quotient
  }

  /// Days since 1970-01-01 of the UTC day this time is in (negative before 1970).
  @inlinable public var day: Int64 {
    let (quotient, remainder) = milliseconds.quotientAndRemainder(dividingBy: 86_400_000)
    return remainder < 0 ? quotient - 1 : quotient
  }

  /// Milliseconds since the start of the UTC day, 0..<86,400,000.
  @inlinable public var millisecondOfDay: Int {
    let remainder = Int(milliseconds % 86_400_000)
    return remainder < 0 ? remainder + 86_400_000 : remainder
  }

  /// The Gregorian year, month (1-12) and day (1-31) of the UTC day this time is in.
  @inlinable public var date: (year: Int, month: Int, day: Int) { CivilDate.civil(days: Int(day)) }
}

// MARK: - Writing

extension UTCTime {
  /// How many digits of a second's fraction ISO 8601 text gets.
  public enum Fraction: Sendable, Hashable {
    /// None (`2019-05-01T12:00:00Z`); the milliseconds are dropped (rounded toward the past).
    case none
    /// Always three (`2015-04-13T20:26:40.000Z`), as gpsd writes TPV and SKY times.
    case milliseconds
    /// Three when the milliseconds are not zero, none otherwise (`2019-05-01T12:00:00Z`,
    /// `2019-05-01T12:00:00.250Z`), as the track exports write.
    case millisecondsUnlessZero
  }

  /// Hands `emit` the ASCII bytes of the ISO 8601 text: ``writeDate(_:)`` then
  /// ``writeClock(fraction:_:)``. At most 32 bytes; allocates nothing (the fast path of gpsd's
  /// TPV writer).
  @inlinable public func write(fraction: Fraction, _ emit: (UInt8) -> Void) {
    writeDate(emit)
    writeClock(fraction: fraction, emit)
  }

  /// Hands `emit` the date and the separator, `YYYY-MM-DDT`: four digits for the years
  /// 0000-9999; other years (before year 0 or after 9999) as a plain decimal integer, sign
  /// included, so that no time is written wrong.
  @inlinable public func writeDate(_ emit: (UInt8) -> Void) {
    let (year, month, day) = date
    Self.writeYear(year, emit)
    emit(0x2D)
    Self.writeDigits(month, width: 2, emit)
    emit(0x2D)
    Self.writeDigits(day, width: 2, emit)
    emit(0x54)
  }

  /// `year` as four digits for 0000-9999, otherwise as a plain decimal integer, sign included.
  @inlinable static func writeYear(_ year: Int, _ emit: (UInt8) -> Void) {
    guard !(0...9999).contains(year) else {
      writeDigits(year, width: 4, emit)
      return
    }
    if year < 0 { emit(0x2D) }
    var digits = 1
    var probe = year.magnitude
    while probe >= 10 {
      probe /= 10
      digits += 1
    }
    var divisor: UInt = 1
    for _ in 1..<digits { divisor *= 10 }
    var rest = year.magnitude
    while divisor > 0 {
      emit(0x30 + UInt8(rest / divisor))
      rest %= divisor
      divisor /= 10
    }
  }

  /// Hands `emit` the time of day and the zone, `hh:mm:ss[.sss]Z`, with the fraction as asked.
  @inlinable public func writeClock(fraction: Fraction, _ emit: (UInt8) -> Void) {
    let total = millisecondOfDay
    Self.writeDigits(total / 3_600_000, width: 2, emit)
    emit(0x3A)
    Self.writeDigits(total / 60_000 % 60, width: 2, emit)
    emit(0x3A)
    Self.writeDigits(total / 1000 % 60, width: 2, emit)
    let millisecond = total % 1000
    switch fraction {
    case .none: break
    case .milliseconds:
      emit(0x2E)
      Self.writeDigits(millisecond, width: 3, emit)
    case .millisecondsUnlessZero:
      if millisecond != 0 {
        emit(0x2E)
        Self.writeDigits(millisecond, width: 3, emit)
      }
    }
    emit(0x5A)
  }

  /// Appends the ISO 8601 text to `buffer` (see ``write(fraction:_:)``).
  @inlinable public func append(to buffer: inout [UInt8], fraction: Fraction) {
    write(fraction: fraction) { buffer.append($0) }
  }

  /// The ISO 8601 text, such as `2015-04-13T20:26:40.000Z` (see ``write(fraction:_:)``).
  public func iso8601(fraction: Fraction) -> String {
    var buffer: [UInt8] = []
    buffer.reserveCapacity(32)
    append(to: &buffer, fraction: fraction)
    return String(decoding: buffer, as: UTF8.self)
  }

  /// The ISO 8601 basic format to the second, `YYYYMMDDThhmmssZ` (`20190501T120000Z`: no
  /// separators, so that it can stand in a file name); the milliseconds are dropped (rounded
  /// toward the past). Years outside 0000-9999 as in ``writeDate(_:)``.
  public func iso8601Basic() -> String {
    var buffer: [UInt8] = []
    buffer.reserveCapacity(24)
    let (year, month, day) = date
    let total = millisecondOfDay
    Self.writeYear(year, { buffer.append($0) })
    for (value, width) in [(month, 2), (day, 2)] { Self.writeDigits(value, width: width) { buffer.append($0) } }
    buffer.append(0x54)
    for value in [total / 3_600_000, total / 60_000 % 60, total / 1000 % 60] {
      Self.writeDigits(value, width: 2) { buffer.append($0) }
    }
    buffer.append(0x5A)
    return String(decoding: buffer, as: UTF8.self)
  }

  /// `value` (0 or more, below 10^width) as exactly `width` (1-4) decimal digits.
  @usableFromInline @inline(__always)
  static func writeDigits(_ value: Int, width: Int, _ emit: (UInt8) -> Void) {
    if width >= 4 { emit(0x30 + UInt8(truncatingIfNeeded: value / 1000 % 10)) }
    if width >= 3 { emit(0x30 + UInt8(truncatingIfNeeded: value / 100 % 10)) }
    if width >= 2 { emit(0x30 + UInt8(truncatingIfNeeded: value / 10 % 10)) }
    emit(0x30 + UInt8(truncatingIfNeeded: value % 10))
  }
}

// MARK: - Reading

extension UTCTime {
  /// Which ISO 8601 forms ``init(iso8601:syntax:)`` takes, beyond what every form shares: a
  /// four-digit year (0000-9999), two-digit month, day, hour, minute and second, only ASCII
  /// digits, a real calendar date (no 2026-02-30), hour 00-23, minute 00-59, second 00-59 (or 60,
  /// a leap second, where the syntax takes it: it counts as the first second of the next minute,
  /// as POSIX time does), and nothing after the zone. A fraction needs at least one digit; digits after the third are
  /// dropped (rounded toward the past).
  public struct Syntax: Sendable, Hashable {
    /// Whether the time of day may, must or must not follow the date.
    public enum TimeOfDay: Sendable, Hashable {
      /// `YYYY-MM-DDThh:mm...` only.
      case required
      /// The date alone (`2019-05-01`: midnight UTC) or with a time.
      case optional
      /// The date alone: `YYYY-MM-DD`.
      case forbidden
    }

    /// Whether a time of day follows the date.
    public var timeOfDay: TimeOfDay
    /// Most digits after the decimal sign, 0...64 (0: no fraction is taken).
    public var maximumFractionDigits: Int
    /// `,` as the decimal sign beside `.` (ISO 8601 allows both).
    public var acceptsComma: Bool
    /// Lowercase `t` and `z` (RFC 3339 allows them).
    public var acceptsLowercase: Bool
    /// A space instead of the `T` (RFC 3339 allows it).
    public var acceptsSpace: Bool
    /// `hh:mm` without seconds.
    public var acceptsOmittedSeconds: Bool
    /// A zone offset `+hh:mm`, `-hhmm` (hours 00-23, minutes 00-59) beside `Z`.
    public var acceptsOffset: Bool
    /// Second 60 (a leap second); when false, seconds are 00-59.
    public var acceptsLeapSecond: Bool

    /// Creates a syntax; every option not given is off, but for leap seconds, which are taken.
    public init(
      timeOfDay: TimeOfDay = .required, maximumFractionDigits: Int = 0, acceptsComma: Bool = false,
      acceptsLowercase: Bool = false, acceptsSpace: Bool = false,
      acceptsOmittedSeconds: Bool = false,
      acceptsOffset: Bool = false, acceptsLeapSecond: Bool = true
    ) {
      self.timeOfDay = timeOfDay
      self.maximumFractionDigits = min(max(maximumFractionDigits, 0), 64)
      self.acceptsComma = acceptsComma
      self.acceptsLowercase = acceptsLowercase
      self.acceptsSpace = acceptsSpace
      self.acceptsOmittedSeconds = acceptsOmittedSeconds
      self.acceptsOffset = acceptsOffset
      self.acceptsLeapSecond = acceptsLeapSecond
    }

    /// A TPV `time` as gpsd and this daemon write it: `YYYY-MM-DDThh:mm:ss[.f]Z`, 1-9 fraction
    /// digits, uppercase `T` and `Z`, no offset.
    public static let tpv = Syntax(maximumFractionDigits: 9)

    /// As ``tpv`` with up to 19 fraction digits (a text of at most 40 bytes): times carried in
    /// OwnTracks region events and TPVs handed to the MQTT front-end.
    public static let tpvLongFraction = Syntax(maximumFractionDigits: 19)

    /// RFC 3339 and the ISO 8601 forms people type: `2019-05-01T12:00:00Z`,
    /// `2019-05-01T12:00:00.250+02:00`, `2019-05-01 12:00z`, `2019-05-01T07:30:00,5-0430`, or a
    /// date alone (midnight UTC). A time needs a zone.
    public static let rfc3339 = Syntax(
      timeOfDay: .optional, maximumFractionDigits: 64, acceptsComma: true, acceptsLowercase: true,
      acceptsSpace: true,
      acceptsOmittedSeconds: true, acceptsOffset: true)

    /// A calendar date alone, `YYYY-MM-DD` (midnight UTC).
    public static let date = Syntax(timeOfDay: .forbidden)
  }

  /// Reads ISO 8601 text of the given syntax; `nil` for anything else (empty or truncated text,
  /// an impossible date or time, non-ASCII digits, trailing bytes, a year of more than four
  /// digits).
  public init?(iso8601 text: some StringProtocol, syntax: Syntax) {
    // The longest text of any syntax: date, T, time, fraction, offset.
    guard text.utf8.count <= 26 + syntax.maximumFractionDigits else { return nil }
    var reader = ISO8601Reader(bytes: Array(text.utf8))
    guard let milliseconds = reader.read(syntax) else { return nil }
    self.milliseconds = milliseconds
  }
}

/// The cursor of ``UTCTime/init(iso8601:syntax:)``.
private struct ISO8601Reader {
  let bytes: [UInt8]
  var index = 0

  init(bytes: [UInt8]) { self.bytes = bytes }

  var atEnd: Bool { index == bytes.count }

  mutating func number(_ width: Int) -> Int? {
    guard index + width <= bytes.count else { return nil }
    var value = 0
    for k in index..<(index + width) {
      let digit = bytes[k] &- 0x30
      guard digit <= 9 else { return nil }
      value = value * 10 + Int(digit)
    }
    index += width
    return value
  }

  mutating func take(_ byte: UInt8) -> Bool {
    guard index < bytes.count, bytes[index] == byte else { return false }
    index += 1
    return true
  }

  mutating func read(_ syntax: UTCTime.Syntax) -> Int64? {
    guard let year = number(4), take(0x2D), let month = number(2), take(0x2D), let day = number(2),
      (1...12).contains(month), (1...CivilDate.daysIn(month: month, year: year)).contains(day)
    else { return nil }
    let midnight = Int64(CivilDate.days(year: year, month: month, day: day)) * 86_400_000
    if atEnd { return syntax.timeOfDay == .required ? nil : midnight }
    guard syntax.timeOfDay != .forbidden,
      take(0x54) || (syntax.acceptsLowercase && take(0x74)) || (syntax.acceptsSpace && take(0x20)),
      let hour = number(2), hour < 24, take(0x3A), let minute = number(2), minute < 60
    else { return nil }
    var second = 0
    var fraction: Int64 = 0
    if take(0x3A) {
      guard let s = number(2), s < (syntax.acceptsLeapSecond ? 61 : 60) else { return nil }
      second = s
      if syntax.maximumFractionDigits > 0, take(0x2E) || (syntax.acceptsComma && take(0x2C)) {
        var scale: Int64 = 100
        var count = 0
        while index < bytes.count, case let digit = bytes[index] &- 0x30, digit <= 9 {
          guard count < syntax.maximumFractionDigits else { return nil }
          fraction += Int64(digit) * scale
          scale /= 10
          count += 1
          index += 1
        }
        guard count > 0 else { return nil }
      }
    } else if !syntax.acceptsOmittedSeconds {
      return nil
    }
    let time = midnight + Int64((hour * 60 + minute) * 60 + second) * 1000 + fraction
    if take(0x5A) || (syntax.acceptsLowercase && take(0x7A)) { return atEnd ? time : nil }
    guard syntax.acceptsOffset else { return nil }
    let sign: Int64
    if take(0x2B) {
      sign = 1
    } else if take(0x2D) {
      sign = -1
    } else {
      return nil
    }
    guard let offsetHours = number(2), offsetHours < 24 else { return nil }
    _ = take(0x3A)
    guard let offsetMinutes = number(2), offsetMinutes < 60, atEnd else { return nil }
    return time - sign * Int64(offsetHours * 60 + offsetMinutes) * 60_000
  }
}
