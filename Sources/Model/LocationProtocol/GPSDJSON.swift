import LocationModel

/// Writes fixes as gpsd JSON protocol objects (TPV, SKY), one object per call, no newline.
///
/// Field names and meanings follow gpsd's JSON protocol (gpsd 3.22): `mode` 0-3, `time`
/// ISO 8601 UTC with milliseconds, `lat`/`lon` degrees, `altHAE`/`altMSL` metres, `speed` m/s,
/// `track` degrees true, `climb` m/s, `eph`/`epv` metres at 95%. Unknown fields are left out,
/// never written as 0. Output is built byte by byte for speed: this is the measured fast path
/// beside `JSONValue`, which writes everything else. It writes no strings of its own (only
/// numbers and the time); the provenance strings `EventEncoding.tpv` adds go through
/// `JSONValue.writeString`, the one string escaper.
public enum GPSDJSON {
  /// Appends `fix` as a gpsd TPV object to `buffer` (UTF-8 JSON, no trailing newline).
  public static func appendTPV(_ fix: Fix, to buffer: inout [UInt8]) {
    // Written through a pointer into a stack buffer, then appended once: far cheaper than
    // appending to the array byte by byte. 17 fields of at most 60 bytes fit in 1 KiB.
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1536) { storage in
      guard let base = storage.baseAddress else { return }
      var w = ByteWriter(base: base, capacity: storage.count)
      w.write("{\"class\":\"TPV\",\"mode\":")
      w.integer(fix.mode.rawValue)
      if let quality = fix.quality, fix.mode.hasPosition {
        w.write(",\"status\":")
        w.integer(quality.gpsdStatus)
      }
      if let time = fix.time {
        w.write(",\"time\":\"")
        w.iso8601(milliseconds: time)
        w.byte(0x22)
      }
      if let c = fix.coordinate {
        w.field(",\"lat\":", c.latitude, 9)
        w.field(",\"lon\":", c.longitude, 9)
      }
      if let v = fix.altitudeHAE { w.field(",\"altHAE\":", v, 3) }
      if let v = fix.altitudeMSL { w.field(",\"altMSL\":", v, 3) }
      if let v = fix.courseOverGround { w.field(",\"track\":", CompassAngle.rounded(v, places: 4), 4) }
      if let v = fix.magneticVariation { w.field(",\"magvar\":", v, 1) }
      if let v = fix.speedOverGround { w.field(",\"speed\":", v, 3) }
      if let v = fix.climb { w.field(",\"climb\":", v, 3) }
      // gpsd json_tpv_dump prints geoidSep with the 3D-only fields.
      if let v = fix.geoidSeparation, fix.mode == .fix3D { w.field(",\"geoidSep\":", v, 3) }
      if let v = fix.eph { w.field(",\"eph\":", v, 3) }
      if let v = fix.epv { w.field(",\"epv\":", v, 3) }
      if let e = fix.errorEstimates, fix.mode.hasPosition {
        if let v = e.longitude { w.field(",\"epx\":", v, 3) }
        if let v = e.latitude { w.field(",\"epy\":", v, 3) }
      }
      w.byte(0x7D)
      buffer.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
    }
  }

  /// Appends `fix`'s sky view as a gpsd SKY object to `buffer` (UTF-8 JSON, no trailing newline):
  /// `time`, `hdop`/`vdop`/`pdop`, `nSat`, `uSat` and `satellites` with `PRN` (gpsd's numbering,
  /// unique across constellations: ``Satellite/gpsdPRN``), `gnssid`, `svid`, `el`, `az`, `ss`
  /// (dB-Hz) and `used`.
  public static func appendSKY(_ fix: Fix, to buffer: inout [UInt8]) {
    // A satellite entry is at most about 130 bytes; the header at most about 200.
    let capacity = 256 + 160 * fix.satellites.count
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { storage in
      guard let base = storage.baseAddress else { return }
      var w = ByteWriter(base: base, capacity: storage.count)
      w.write("{\"class\":\"SKY\"")
      if let time = fix.time {
        w.write(",\"time\":\"")
        w.iso8601(milliseconds: time)
        w.byte(0x22)
      }
      if let v = fix.hdop { w.field(",\"hdop\":", v, 2) }
      if let v = fix.vdop { w.field(",\"vdop\":", v, 2) }
      if let v = fix.pdop { w.field(",\"pdop\":", v, 2) }
      w.write(",\"nSat\":")
      w.integer(fix.satellites.count)
      if let used = fix.satellitesUsed {
        w.write(",\"uSat\":")
        w.integer(used)
      }
      w.write(",\"satellites\":[")
      for (i, s) in fix.satellites.enumerated() {
        if i > 0 { w.byte(0x2C) }
        w.write("{\"PRN\":")
        w.integer(s.gpsdPRN)
        w.write(",\"gnssid\":")
        w.integer(s.constellation.rawValue)
        w.write(",\"svid\":")
        w.integer(s.svid)
        if let v = s.elevation { w.field(",\"el\":", v, 1) }
        if let v = s.azimuth { w.field(",\"az\":", CompassAngle.rounded(v, places: 1), 1) }
        if let v = s.snr { w.field(",\"ss\":", v, 1) }
        w.write(s.used ? ",\"used\":true}" : ",\"used\":false}")
      }
      w.write("]}")
      buffer.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
    }
  }

  /// Appends the ISO 8601 UTC text `YYYY-MM-DDThh:mm:ss.sssZ` of milliseconds since 1970.
  public static func appendISO8601(milliseconds: Int64, to buffer: inout [UInt8]) {
    withWriter(into: &buffer) { $0.iso8601(milliseconds: milliseconds) }
  }

  /// The ISO 8601 UTC text (`2015-04-13T20:26:40.000Z`) of milliseconds since 1970.
  public static func iso8601(milliseconds: Int64) -> String {
    UTCTime(milliseconds: milliseconds).iso8601(fraction: .milliseconds)
  }

  /// Appends `value` with exactly `decimals` (0-9) digits after the point, rounded half away from
  /// zero; `null` for a non-finite value.
  public static func appendFixed(_ value: Double, decimals: Int, to buffer: inout [UInt8]) {
    withWriter(into: &buffer) { $0.fixed(value, decimals) }
  }

  /// Appends a decimal integer.
  public static func appendInteger(_ value: Int, to buffer: inout [UInt8]) {
    withWriter(into: &buffer) { $0.integer(value) }
  }

  private static func withWriter(into buffer: inout [UInt8], _ body: (inout ByteWriter) -> Void) {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { storage in
      guard let base = storage.baseAddress else { return }
      var w = ByteWriter(base: base, capacity: storage.count)
      body(&w)
      buffer.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
    }
  }
}

/// Writes ASCII into a fixed buffer through a pointer; writes past the capacity are dropped.
struct ByteWriter {
  let base: UnsafeMutablePointer<UInt8>
  let capacity: Int
  private(set) var count = 0

  init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
    self.base = base
    self.capacity = capacity
  }

  @inline(__always) mutating func byte(_ b: UInt8) {
    guard count < capacity else { return }
    base[count] = b
    count += 1
  }

  @inline(__always) mutating func write(_ text: StaticString) {
    text.withUTF8Buffer { bytes in
      guard count + bytes.count <= capacity, let source = bytes.baseAddress else { return }
      (base + count).update(from: source, count: bytes.count)
      count += bytes.count
    }
  }

  mutating func integer(_ value: Int) {
    if value < 0 { byte(0x2D) }
    var n = value.magnitude
    var digits = 1
    var probe = n
    while probe >= 10 {
      probe /= 10
      digits += 1
    }
    guard count + digits <= capacity else { return }
    var i = count + digits - 1
    repeat {
      base[i] = 0x30 + UInt8(n % 10)
      n /= 10
      i -= 1
    } while n > 0
    count += digits
  }

  /// `value` with exactly `decimals` (0-9) digits after the point (``DecimalText``, rounded as
  /// gpsd's `printf("%.Nf")`: ``DecimalText/Rounding/nearestEven``); `null` for a non-finite
  /// value, Swift's shortest form for a magnitude of 9 × 10^18 or more once scaled.
  mutating func fixed(_ value: Double, _ decimals: Int) {
    guard value.isFinite else {
      write("null")
      return
    }
    guard let digits = DecimalText.digits(value, places: decimals, rounding: .nearestEven) else {
      for b in value.description.utf8 { byte(b) }
      return
    }
    digits.write { byte($0) }
  }

  @inline(__always) mutating func field(_ name: StaticString, _ value: Double, _ decimals: Int) {
    write(name)
    fixed(value, decimals)
  }

  /// The TPV/SKY `time`: ISO 8601 UTC with milliseconds (``UTCTime/Fraction/milliseconds``).
  @inline(__always) mutating func iso8601(milliseconds: Int64) {
    UTCTime(milliseconds: milliseconds).write(fraction: .milliseconds) { byte($0) }
  }
}
