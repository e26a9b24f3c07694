/// Writes fixes as gpsd JSON protocol objects (TPV, SKY), one object per call, no newline.
///
/// Field names and meanings follow gpsd's JSON protocol (gpsd 3.22): `mode` 0-3, `time`
/// ISO 8601 UTC with milliseconds, `lat`/`lon` degrees, `altHAE`/`altMSL` metres, `speed` m/s,
/// `track` degrees true, `climb` m/s, `eph`/`epv` metres at 95%. Unknown fields are left out,
/// never written as 0. Output is built byte by byte for speed (no JSONEncoder on the hot path).
public enum GPSDJSON {
  /// Appends `fix` as a gpsd TPV object to `buffer` (UTF-8 JSON, no trailing newline).
  public static func appendTPV(_ fix: Fix, to buffer: inout [UInt8]) {
    append("{\"class\":\"TPV\",\"mode\":", to: &buffer)
    appendInteger(fix.mode.rawValue, to: &buffer)
    if let quality = fix.quality, fix.mode.hasPosition {
      append(",\"status\":", to: &buffer)
      appendInteger(quality.gpsdStatus, to: &buffer)
    }
    if let time = fix.time {
      append(",\"time\":\"", to: &buffer)
      appendISO8601(milliseconds: time, to: &buffer)
      buffer.append(0x22)
    }
    if let c = fix.coordinate {
      field("lat", c.latitude, 9, &buffer)
      field("lon", c.longitude, 9, &buffer)
    }
    if let v = fix.altitudeHAE { field("altHAE", v, 3, &buffer) }
    if let v = fix.altitudeMSL { field("altMSL", v, 3, &buffer) }
    if let v = fix.courseOverGround { field("track", v, 4, &buffer) }
    if let v = fix.magneticVariation { field("magvar", v, 1, &buffer) }
    if let v = fix.speedOverGround { field("speed", v, 3, &buffer) }
    if let v = fix.climb { field("climb", v, 3, &buffer) }
    if let v = fix.geoidSeparation, fix.mode.hasPosition { field("geoidSep", v, 3, &buffer) }
    if let v = fix.eph { field("eph", v, 3, &buffer) }
    if let v = fix.epv { field("epv", v, 3, &buffer) }
    if let e = fix.errorEstimates, fix.mode.hasPosition {
      if let v = e.longitude { field("epx", v, 3, &buffer) }
      if let v = e.latitude { field("epy", v, 3, &buffer) }
    }
    buffer.append(0x7D)
  }

  /// Appends `fix`'s sky view as a gpsd SKY object to `buffer` (UTF-8 JSON, no trailing newline):
  /// `time`, `hdop`/`vdop`/`pdop`, `nSat`, `uSat` and `satellites` with `PRN`, `gnssid`, `el`,
  /// `az`, `ss` (dB-Hz) and `used`.
  public static func appendSKY(_ fix: Fix, to buffer: inout [UInt8]) {
    append("{\"class\":\"SKY\"", to: &buffer)
    if let time = fix.time {
      append(",\"time\":\"", to: &buffer)
      appendISO8601(milliseconds: time, to: &buffer)
      buffer.append(0x22)
    }
    if let v = fix.hdop { field("hdop", v, 2, &buffer) }
    if let v = fix.vdop { field("vdop", v, 2, &buffer) }
    if let v = fix.pdop { field("pdop", v, 2, &buffer) }
    append(",\"nSat\":", to: &buffer)
    appendInteger(fix.satellites.count, to: &buffer)
    if let used = fix.satellitesUsed {
      append(",\"uSat\":", to: &buffer)
      appendInteger(used, to: &buffer)
    }
    append(",\"satellites\":[", to: &buffer)
    for (i, s) in fix.satellites.enumerated() {
      if i > 0 { buffer.append(0x2C) }
      append("{\"PRN\":", to: &buffer)
      appendInteger(s.prn, to: &buffer)
      append(",\"gnssid\":", to: &buffer)
      appendInteger(s.constellation.rawValue, to: &buffer)
      if let v = s.elevation { field("el", v, 1, &buffer) }
      if let v = s.azimuth { field("az", v, 1, &buffer) }
      if let v = s.snr { field("ss", v, 1, &buffer) }
      append(s.used ? ",\"used\":true}" : ",\"used\":false}", to: &buffer)
    }
    append("]}", to: &buffer)
  }

  /// Appends `"YYYY-MM-DDThh:mm:ss.sssZ"`'s inner text for milliseconds since 1970 (UTC).
  public static func appendISO8601(milliseconds: Int64, to buffer: inout [UInt8]) {
    var days = milliseconds / 86_400_000
    var ms = milliseconds % 86_400_000
    if ms < 0 {
      ms += 86_400_000
      days -= 1
    }
    let (year, month, day) = CivilDate.civil(days: Int(days))
    appendPadded(year, 4, &buffer)
    buffer.append(0x2D)
    appendPadded(month, 2, &buffer)
    buffer.append(0x2D)
    appendPadded(day, 2, &buffer)
    buffer.append(0x54)
    let total = Int(ms)
    appendPadded(total / 3_600_000, 2, &buffer)
    buffer.append(0x3A)
    appendPadded(total / 60_000 % 60, 2, &buffer)
    buffer.append(0x3A)
    appendPadded(total / 1000 % 60, 2, &buffer)
    buffer.append(0x2E)
    appendPadded(total % 1000, 3, &buffer)
    buffer.append(0x5A)
  }

  /// The ISO 8601 UTC text (`2015-04-13T20:26:40.000Z`) of milliseconds since 1970.
  public static func iso8601(milliseconds: Int64) -> String {
    var buffer: [UInt8] = []
    appendISO8601(milliseconds: milliseconds, to: &buffer)
    return String(decoding: buffer, as: UTF8.self)
  }

  /// Appends `value` with exactly `decimals` digits after the point (rounded half away from
  /// zero); `null` for a non-finite value.
  public static func appendFixed(_ value: Double, decimals: Int, to buffer: inout [UInt8]) {
    guard value.isFinite else {
      append("null", to: &buffer)
      return
    }
    let scale = powers[min(max(decimals, 0), 9)]
    let scaled = (abs(value) * scale).rounded()
    guard scaled < 9.0e18 else {
      append(value.description, to: &buffer)
      return
    }
    var n = UInt64(scaled)
    if value < 0 && n != 0 { buffer.append(0x2D) }
    let divisor = UInt64(scale)
    appendInteger(Int(n / divisor), to: &buffer)
    if decimals > 0 {
      buffer.append(0x2E)
      n %= divisor
      let start = buffer.count
      buffer.append(contentsOf: repeatElement(0x30, count: decimals))
      var i = buffer.count - 1
      while i >= start {
        buffer[i] = 0x30 + UInt8(n % 10)
        n /= 10
        i -= 1
      }
    }
  }

  private static let powers: [Double] = [1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]

  @inline(__always)
  private static func field(_ name: StaticString, _ value: Double, _ decimals: Int, _ buffer: inout [UInt8]) {
    buffer.append(0x2C)
    buffer.append(0x22)
    name.withUTF8Buffer { buffer.append(contentsOf: $0) }
    buffer.append(0x22)
    buffer.append(0x3A)
    appendFixed(value, decimals: decimals, to: &buffer)
  }

  @inline(__always)
  private static func append(_ text: StaticString, to buffer: inout [UInt8]) {
    text.withUTF8Buffer { buffer.append(contentsOf: $0) }
  }

  private static func append(_ text: String, to buffer: inout [UInt8]) {
    buffer.append(contentsOf: text.utf8)
  }

  /// Appends a decimal integer.
  public static func appendInteger(_ value: Int, to buffer: inout [UInt8]) {
    if value < 0 { buffer.append(0x2D) }
    var n = value.magnitude
    if n < 10 {
      buffer.append(0x30 + UInt8(n))
      return
    }
    var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                 UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
      (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var count = 0
    withUnsafeMutableBytes(of: &digits) { raw in
      while n > 0 {
        raw[count] = 0x30 + UInt8(n % 10)
        n /= 10
        count += 1
      }
      for i in stride(from: count - 1, through: 0, by: -1) { buffer.append(raw[i]) }
    }
  }

  private static func appendPadded(_ value: Int, _ width: Int, _ buffer: inout [UInt8]) {
    var divisor = 1
    for _ in 1..<width { divisor *= 10 }
    var v = max(0, value)
    if v >= divisor * 10 {
      appendInteger(v, to: &buffer)
      return
    }
    while divisor > 0 {
      buffer.append(0x30 + UInt8(v / divisor))
      v %= divisor
      divisor /= 10
    }
  }
}
