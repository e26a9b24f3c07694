import LocationModel
/// Reads the comma-separated fields of one sentence body, as bytes, without allocating.
///
/// Field 0 is the address (`GPGGA`); data fields are numbered from 1, as NMEA 0183 does.
/// Every reader returns `nil` for an empty field (an absent value, never 0) and throws
/// ``NMEAError/invalidField(_:index:name:value:)`` for text that is not a valid value.
///
/// Bounds: every read goes through ``range(_:)``, which answers `nil` for an index outside
/// `0..<count` (negative ones included) and for offsets outside `0...bytes.count`; `count` is
/// clamped to the offset buffers' size at creation. No index computed by a sentence parser, however
/// wrong, reads outside `bytes`, `starts` or `ends`.
struct FieldReader {
  static let maximumFields = 48
  let bytes: UnsafeBufferPointer<UInt8>
  let starts: UnsafeMutableBufferPointer<Int32>
  let ends: UnsafeMutableBufferPointer<Int32>
  let count: Int
  let type: SentenceType

  /// A reader over `bytes` (the text between `$` and `*`, exclusive) whose `count` fields run
  /// from `starts[i]` to `ends[i]` (exclusive), as the parser found them.
  init(
    bytes: UnsafeBufferPointer<UInt8>, starts: UnsafeMutableBufferPointer<Int32>, ends: UnsafeMutableBufferPointer<Int32>,
    count: Int, type: SentenceType
  ) {
    self.bytes = bytes
    self.starts = starts
    self.ends = ends
    self.count = max(0, min(count, starts.count, ends.count))
    self.type = type
  }

  /// The byte offsets `(start, end)` of field `i` in `bytes`, end exclusive; `nil` when the field
  /// is empty or `i` is outside `0..<count`. Both offsets are checked against `bytes`.
  @inline(__always) func range(_ i: Int) -> (Int, Int)? {
    // One unsigned comparison rejects negative indices as well as those past the end.
    guard UInt(bitPattern: i) < UInt(bitPattern: count) else { return nil }
    let s = Int(starts[i])
    let e = Int(ends[i])
    guard s >= 0, s < e, e <= bytes.count else { return nil }
    return (s, e)
  }

  func isEmpty(_ i: Int) -> Bool { range(i) == nil }

  func text(_ i: Int) -> String {
    guard let (s, e) = range(i) else { return "" }
    return String(decoding: UnsafeBufferPointer(rebasing: bytes[s..<e]), as: UTF8.self)
  }

  func invalid(_ i: Int, _ name: String) -> NMEAError {
    .invalidField(type, index: i, name: name, value: text(i))
  }

  /// A single character field (status, hemisphere, mode indicator).
  func character(_ i: Int, _ name: String) throws(NMEAError) -> UInt8? {
    guard let (s, e) = range(i) else { return nil }
    guard e - s == 1 else { throw invalid(i, name) }
    return bytes[s]
  }

  /// A decimal number with optional sign and fraction.
  func double(_ i: Int, _ name: String) throws(NMEAError) -> Double? {
    guard let (s, e) = range(i) else { return nil }
    guard let value = Self.parseDecimal(bytes, s, e) else { throw invalid(i, name) }
    return value
  }

  /// A decimal number that must lie in `range` (NMEA 0183's range for the field: a course is
  /// 0-360 degrees, an elevation -90-90, a speed not negative); a value outside is an invalid
  /// field, as text that is not a number is.
  func double(_ i: Int, _ name: String, in range: ClosedRange<Double>) throws(NMEAError) -> Double? {
    guard let value = try double(i, name) else { return nil }
    guard range.contains(value) else { throw invalid(i, name) }
    return value
  }

  /// Courses and azimuths, degrees true (360 is north as 0 is).
  static let compass = 0.0...360.0
  /// A magnetic variation's magnitude, degrees (its direction, E or W, is a field of its own).
  static let variation = 0.0...180.0
  /// Speeds, which are never negative.
  static let nonNegative = 0.0...Double.greatestFiniteMagnitude

  /// A non-negative integer.
  func int(_ i: Int, _ name: String) throws(NMEAError) -> Int? {
    guard let (s, e) = range(i) else { return nil }
    guard e - s <= 9 else { throw invalid(i, name) }
    var value = 0
    for k in s..<e {
      let d = bytes[k] &- 0x30
      guard d < 10 else { throw invalid(i, name) }
      value = value * 10 + Int(d)
    }
    return value
  }

  /// An integer written in hexadecimal (GSA/GSV system and signal IDs may use `A`-`F`).
  func hexInt(_ i: Int, _ name: String) throws(NMEAError) -> Int? {
    guard let (s, e) = range(i) else { return nil }
    guard e - s <= 4 else { throw invalid(i, name) }
    var value = 0
    for k in s..<e {
      guard let d = Self.hexDigit(bytes[k]) else { throw invalid(i, name) }
      value = value * 16 + Int(d)
    }
    return value
  }

  /// `hhmmss` or `hhmmss.s...` UTC time of day, in milliseconds since midnight (rounded).
  func timeOfDay(_ i: Int, _ name: String = "UTC time") throws(NMEAError) -> Int32? {
    guard let (s, e) = range(i) else { return nil }
    guard e - s >= 6 else { throw invalid(i, name) }
    var digits = 0
    for k in s..<(s + 6) {
      let d = bytes[k] &- 0x30
      guard d < 10 else { throw invalid(i, name) }
      digits = digits * 10 + Int(d)
    }
    let hh = digits / 10000
    let mm = digits / 100 % 100
    let ss = digits % 100
    guard hh < 24, mm < 60, ss <= 60 else { throw invalid(i, name) }
    var millis = 0
    if e > s + 6 {
      guard bytes[s + 6] == 0x2E, let fraction = Self.parseDecimal(bytes, s + 6, e) else { throw invalid(i, name) }
      millis = min(999, Int(fraction * 1000 + 0.5))
    }
    return Int32(((hh * 60 + mm) * 60 + ss) * 1000 + millis)
  }

  /// `ddmmyy` date as days since 1970-01-01. Two-digit years 80-99 are 1980-1999, 00-79 are 2000-2079
  /// (GPS began in 1980).
  func date(_ i: Int, _ name: String = "date") throws(NMEAError) -> Int? {
    guard let (s, e) = range(i) else { return nil }
    guard e - s == 6 else { throw invalid(i, name) }
    var digits = 0
    for k in s..<e {
      let d = bytes[k] &- 0x30
      guard d < 10 else { throw invalid(i, name) }
      digits = digits * 10 + Int(d)
    }
    let day = digits / 10000
    let month = digits / 100 % 100
    let yy = digits % 100
    let year = yy >= 80 ? 1900 + yy : 2000 + yy
    guard (1...12).contains(month), (1...CivilDate.daysIn(month: month, year: year)).contains(day) else {
      throw invalid(i, name)
    }
    return CivilDate.days(year: year, month: month, day: day)
  }

  /// `(d)ddmm.mmmm` angle plus a hemisphere letter, as signed decimal degrees.
  ///
  /// Both fields empty gives `nil`; one without the other, a letter other than the two allowed,
  /// minutes of 60 or more, or degrees beyond `limit` throw.
  func angle(
    _ i: Int, hemisphere h: Int, positive: UInt8, negative: UInt8, limit: Double, _ name: String, _ hemisphereName: String
  ) throws(NMEAError) -> Double? {
    let valueRange = range(i)
    let hemi = try character(h, hemisphereName)
    guard let (s, e) = valueRange else {
      if hemi == nil { return nil }
      throw invalid(i, name)
    }
    guard let hemi, hemi == positive || hemi == negative else { throw invalid(h, hemisphereName) }
    // Integer part (degrees * 100 + whole minutes) and fractional minutes, read separately.
    var whole = 0
    var k = s
    while k < e, bytes[k] != 0x2E {
      let d = bytes[k] &- 0x30
      guard d < 10, k - s < 6 else { throw invalid(i, name) }
      whole = whole * 10 + Int(d)
      k += 1
    }
    guard k - s >= 3 else { throw invalid(i, name) }
    var fraction = 0.0
    if k < e {
      guard let f = Self.parseDecimal(bytes, k, e) else { throw invalid(i, name) }
      fraction = f
    }
    let degrees = Double(whole / 100)
    let minutes = Double(whole % 100) + fraction
    guard minutes < 60 else { throw invalid(i, name) }
    let value = degrees + minutes / 60
    guard value <= limit else { throw invalid(i, name) }
    return hemi == negative ? -value : value
  }

  func latitude(_ i: Int) throws(NMEAError) -> Double? {
    try angle(i, hemisphere: i + 1, positive: 0x4E, negative: 0x53, limit: 90, "latitude", "latitude hemisphere")
  }

  func longitude(_ i: Int) throws(NMEAError) -> Double? {
    try angle(i, hemisphere: i + 1, positive: 0x45, negative: 0x57, limit: 180, "longitude", "longitude hemisphere")
  }

  /// 10^p for p in 0...18, each exact in a Double.
  @inline(__always) static func powerOfTen(_ p: Int) -> Double {
    switch p {
    case 0: return 1
    case 1: return 1e1
    case 2: return 1e2
    case 3: return 1e3
    case 4: return 1e4
    case 5: return 1e5
    case 6: return 1e6
    case 7: return 1e7
    case 8: return 1e8
    case 9: return 1e9
    case 10: return 1e10
    case 11: return 1e11
    case 12: return 1e12
    case 13: return 1e13
    case 14: return 1e14
    case 15: return 1e15
    case 16: return 1e16
    case 17: return 1e17
    default: return 1e18
    }
  }

  /// Parses `[+-]digits[.digits]` exactly: the digits form an integer mantissa divided by a power
  /// of ten, which IEEE 754 rounds correctly (same result as `strtod`) for up to 15 significant digits.
  @inline(__always)
  static func parseDecimal(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Double? {
    var k = start
    var negative = false
    if k < end, bytes[k] == 0x2D || bytes[k] == 0x2B {
      negative = bytes[k] == 0x2D
      k += 1
    }
    var mantissa: UInt64 = 0
    var digits = 0
    var fractionDigits = 0
    var seenPoint = false
    while k < end {
      let c = bytes[k]
      if c == 0x2E {
        if seenPoint { return nil }
        seenPoint = true
      } else {
        let d = c &- 0x30
        guard d < 10 else { return nil }
        if digits < 18 {
          mantissa = mantissa * 10 + UInt64(d)
          digits += 1
          if seenPoint { fractionDigits += 1 }
        } else if !seenPoint {
          return nil  // more than 18 integer digits: not a receiver value
        }
      }
      k += 1
    }
    guard digits > 0 else { return nil }
    let value = fractionDigits == 0 ? Double(mantissa) : Double(mantissa) / powerOfTen(fractionDigits)
    return negative ? -value : value
  }

  @inline(__always) static func hexDigit(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: return c - 0x30
    case 0x41...0x46: return c - 0x41 + 10
    case 0x61...0x66: return c - 0x61 + 10
    default: return nil
    }
  }
}

extension FieldReader {
  /// Latitude at `lat`/`lat+1` and longitude at `lon`/`lon+1`; `nil` when all four are empty.
  func coordinate(latitude lat: Int, longitude lon: Int) throws(NMEAError) -> Coordinate? {
    let latitude = try self.latitude(lat)
    let longitude = try self.longitude(lon)
    switch (latitude, longitude) {
    case let (la?, lo?): return Coordinate(latitude: la, longitude: lo)
    case (nil, nil): return nil
    case (nil, _): throw invalid(lat, "latitude")
    case (_, nil): throw invalid(lon, "longitude")
    }
  }
}
