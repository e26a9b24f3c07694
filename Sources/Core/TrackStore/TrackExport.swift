import LocationModel
import SystemIO

/// Formats of `locationctl track export`.
public enum TrackFormat: String, Sendable, Hashable, CaseIterable {
  /// GPX 1.1 (topografix.com/GPX/1/1): one `trk`, a `trkseg` per gap-separated run of fixes.
  case gpx
  /// GeoJSON (RFC 7946): one Feature, a LineString, or a MultiLineString when there are gaps.
  case geojson
  /// CSV (RFC 4180) with a header line, one fix per line.
  case csv
}

/// What to export and how.
public struct TrackExportOptions: Sendable, Hashable {
  /// First fix time included, milliseconds since the Unix epoch; `nil` for the oldest.
  public var since: Int64?
  /// Fix times before this are included, milliseconds since the Unix epoch; `nil` for the newest.
  public var until: Int64?
  /// The output format.
  public var format: TrackFormat
  /// A new segment (GPX `trkseg`, GeoJSON line) starts after a gap between consecutive fixes
  /// longer than this, milliseconds; must be positive. Default 300,000 (5 minutes): longer than a
  /// receiver's usual outage in a tunnel, shorter than a stop between trips.
  public var gap: Int64
  /// Which fixes are exported, by their source (default all).
  public var sources: TrackSourceFilter = .all

  /// The default gap between segments, milliseconds.
  public static let defaultGap: Int64 = 300_000

  /// Creates options; see each property.
  public init(since: Int64? = nil, until: Int64? = nil, format: TrackFormat = .gpx, gap: Int64 = defaultGap) {
    self.since = since
    self.until = until
    self.format = format
    self.gap = gap
  }
}

/// Why an export stopped.
public enum TrackExportError: Error, Hashable, Sendable, CustomStringConvertible {
  /// Reading the store failed.
  case store(TrackStoreError)
  /// Writing the output failed (errno), e.g. a closed pipe or a full disk.
  case output(SystemError)
  /// An option is out of range.
  case invalidOption(String)

  /// One line for locationctl.
  public var description: String {
    switch self {
    case .store(let error): return error.description
    case .output(let error): return "cannot write the export: \(error.description)"
    case .invalidOption(let reason): return reason
    }
  }
}

/// Streams stored fixes out as GPX, GeoJSON or CSV through a cursor: memory stays flat (one
/// 64 KiB output buffer) whatever the number of fixes.
///
/// Altitudes: GPX `ele` is the altitude above mean sea level (the geoid), as Garmin devices
/// write it; `geoidheight` carries the geoid separation, so `ele + geoidheight` is the height
/// above the WGS84 ellipsoid. GeoJSON's third coordinate is that ellipsoidal height (RFC 7946
/// section 4 defines altitude as height above the WGS84 ellipsoid), omitted for a fix without
/// both MSL altitude and geoid separation. CSV has both columns.
public enum TrackExporter {
  /// Output buffered before each write, bytes.
  public static let bufferSize = 64 * 1024

  /// Exports to a file descriptor (a file, a pipe, standard output).
  ///
  /// - Returns: the number of fixes written.
  /// - Throws: ``TrackExportError``.
  @discardableResult
  public static func export(from store: TrackStore, options: TrackExportOptions, to fd: Int32) throws(TrackExportError)
    -> Int
  {
    try export(from: store, options: options) { (bytes: [UInt8]) throws(TrackExportError) in
      do throws(SystemError) { try SystemIO.writeAll(fd, bytes) } catch { throw .output(error) }
    }
  }

  /// Exports to `sink`, called with consecutive chunks of at most about ``bufferSize`` bytes.
  ///
  /// - Returns: the number of fixes written.
  /// - Throws: ``TrackExportError``, or what `sink` throws.
  @discardableResult
  public static func export(
    from store: TrackStore, options: TrackExportOptions,
    sink: @escaping ([UInt8]) throws(TrackExportError) -> Void
  ) throws(TrackExportError) -> Int {
    guard options.gap > 0 else { throw .invalidOption("the gap between segments must be positive") }
    if let since = options.since, let until = options.until, until <= since {
      throw .invalidOption("--until must be later than --since")
    }
    var out = ByteOutput(sink: sink)
    var count = 0
    var previousTime: Int64?
    switch options.format {
    case .gpx:
      out.append(
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <gpx version="1.1" creator="locationd" xmlns="http://www.topografix.com/GPX/1/1" \
        xmlns:gpxtpx="http://www.garmin.com/xmlschemas/TrackPointExtension/v2" \
        xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" \
        xsi:schemaLocation="http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd \
        http://www.garmin.com/xmlschemas/TrackPointExtension/v2 https://www8.garmin.com/xmlschemas/TrackPointExtensionv2.xsd">
        <trk><name>locationd track</name>

        """)
      try walk(store, options, &out) { (point, out) in
        if let previous = previousTime {
          if TrackPoint.milliseconds(from: previous, to: point.time) > options.gap { out.append("</trkseg>\n<trkseg>\n") }
        } else {
          out.append("<trkseg>\n")
        }
        previousTime = point.time
        count += 1
        writeGPX(point, &out)
      }
      if previousTime != nil { out.append("</trkseg>\n") }
      out.append("</trk>\n</gpx>\n")
    case .geojson:
      let multi: Bool
      do {
        multi = try store.hasGap(
          since: options.since, until: options.until, sources: options.sources, longerThan: options.gap)
      } catch {
        throw .store(error)
      }
      out.append(#"{"type":"Feature","geometry":{"type":""#)
      out.append(multi ? #"MultiLineString","coordinates":["# : #"LineString","coordinates":["#)
      var first: Int64?
      try walk(store, options, &out) { (point, out) in
        if let previous = previousTime {
          if multi && TrackPoint.milliseconds(from: previous, to: point.time) > options.gap { out.append("],\n[") } else { out.append(",\n") }
        } else if multi {
          out.append("[")
        }
        if first == nil { first = point.time }
        previousTime = point.time
        count += 1
        out.append("[")
        out.fixed(longitude(point), 8)
        out.append(",")
        out.fixed(point.coordinate.latitude, 8)
        if let hae = point.altitudeHAE {
          out.append(",")
          out.fixed(hae, 3)
        }
        out.append("]")
      }
      if multi && previousTime != nil { out.append("]") }
      out.append(#"]},"properties":{"points":"#)
      out.integer(Int64(count))
      if let first, let last = previousTime {
        out.append(#","start":""#)
        out.time(first)
        out.append(#"","end":""#)
        out.time(last)
        out.append("\"")
      }
      out.append("}}\n")
    case .csv:
      out.append(Self.csvHeader)
      try walk(store, options, &out) { (point, out) in
        count += 1
        writeCSV(point, &out)
      }
    }
    try out.flush()
    return count
  }

  /// The CSV header line.
  static let csvHeader: StaticString = """
    time,latitude,longitude,altitude_msl,altitude_hae,geoid_separation,speed,course,climb,\
    eph,epv,hdop,vdop,pdop,satellites_used,mode,quality,backend,source,simulated

    """

  private static func walk(
    _ store: TrackStore, _ options: TrackExportOptions, _ out: inout ByteOutput,
    _ body: (TrackPoint, inout ByteOutput) -> Void
  ) throws(TrackExportError) {
    do {
      try store.forEachPoint(
        since: options.since, until: options.until, sources: options.sources, provenance: options.format == .csv
      ) {
        (point: TrackPoint) throws(TrackExportError) in
        body(point, &out)
        if out.count >= bufferSize { try out.flush() }
      }
    } catch {
      switch error {
      case .store(let error): throw .store(error)
      case .body(let error): throw error
      }
    }
  }

  /// The longitude in `-180..<180` as written with 8 decimals: GPX's longitudeType excludes
  /// 180 (the same meridian as -180), so a value that rounds to 180 is written as -180.
  static func longitude(_ point: TrackPoint) -> Double {
    let longitude = point.coordinate.longitude
    return (longitude * 1e8).rounded() >= 180e8 ? longitude - 360 : longitude
  }

  /// A course over ground for `gpxtpx:course` (DegreesTrue_t: 0 up to, not including, 360) and
  /// the CSV `course` column, as written with 2 decimals: a value that rounds to 360 is written
  /// as 0, as the TPV's `track` is; `nil` when not finite.
  static func gpxCourse(_ course: Double) -> Double? {
    guard course.isFinite else { return nil }
    var degrees = course.truncatingRemainder(dividingBy: 360)
    if degrees < 0 { degrees += 360 }
    return (degrees * 100).rounded(.toNearestOrEven) >= 36_000 ? 0 : degrees
  }

  static func writeGPX(_ point: TrackPoint, _ out: inout ByteOutput) {
    out.append("<trkpt lat=\"")
    out.fixed(point.coordinate.latitude, 8)
    out.append("\" lon=\"")
    out.fixed(longitude(point), 8)
    out.append("\">")
    if let msl = point.altitudeMSL {
      out.append("<ele>")
      out.fixed(msl, 3)
      out.append("</ele>")
    }
    out.append("<time>")
    out.time(point.time)
    out.append("</time>")
    if let separation = point.geoidSeparation {
      out.append("<geoidheight>")
      out.fixed(separation, 3)
      out.append("</geoidheight>")
    }
    switch point.mode {
    case .fix2D: out.append(point.quality == .dgps ? "<fix>dgps</fix>" : "<fix>2d</fix>")
    case .fix3D: out.append(point.quality == .dgps ? "<fix>dgps</fix>" : "<fix>3d</fix>")
    default: break
    }
    if let satellites = point.satellitesUsed, satellites >= 0 {
      out.append("<sat>")
      out.integer(Int64(satellites))
      out.append("</sat>")
    }
    if let hdop = point.hdop, hdop >= 0 {
      out.append("<hdop>")
      out.fixed(hdop, 2)
      out.append("</hdop>")
    }
    if let vdop = point.vdop, vdop >= 0 {
      out.append("<vdop>")
      out.fixed(vdop, 2)
      out.append("</vdop>")
    }
    if let pdop = point.pdop, pdop >= 0 {
      out.append("<pdop>")
      out.fixed(pdop, 2)
      out.append("</pdop>")
    }
    // GPX 1.1 has no element for speed or course: Garmin's TrackPointExtension v2 carries them
    // (speed in m/s, course in degrees true within 0..<360), read by gpsbabel and most tools.
    let speed = point.speed.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
    let course = point.course.flatMap(gpxCourse)
    if speed != nil || course != nil {
      out.append("<extensions><gpxtpx:TrackPointExtension>")
      if let speed {
        out.append("<gpxtpx:speed>")
        out.fixed(speed, 3)
        out.append("</gpxtpx:speed>")
      }
      if let course {
        out.append("<gpxtpx:course>")
        out.fixed(course, 2)
        out.append("</gpxtpx:course>")
      }
      out.append("</gpxtpx:TrackPointExtension></extensions>")
    }
    out.append("</trkpt>\n")
  }

  static func writeCSV(_ point: TrackPoint, _ out: inout ByteOutput) {
    out.time(point.time)
    out.append(",")
    out.fixed(point.coordinate.latitude, 8)
    out.append(",")
    out.fixed(longitude(point), 8)
    out.optional(point.altitudeMSL, 3)
    out.optional(point.altitudeHAE, 3)
    out.optional(point.geoidSeparation, 3)
    out.optional(point.speed, 3)
    out.optional(point.course.flatMap(gpxCourse), 2)
    out.optional(point.climb, 3)
    out.optional(point.eph, 2)
    out.optional(point.epv, 2)
    out.optional(point.hdop, 2)
    out.optional(point.vdop, 2)
    out.optional(point.pdop, 2)
    out.append(",")
    if let satellites = point.satellitesUsed { out.integer(Int64(satellites)) }
    out.append(point.mode == .fix3D ? ",3d," : ",2d,")
    if let quality = point.quality { out.integer(Int64(quality.rawValue)) }
    out.append(",")
    out.csvField(point.backend, column: 0)
    out.append(",")
    out.csvField(point.source ?? "", column: 1)
    out.append(point.isSimulated ? ",true\n" : ",false\n")
  }
}

/// The exporter's output buffer: bytes appended, handed to the sink in chunks.
struct ByteOutput {
  var bytes: [UInt8] = []
  /// The last field escaped in each CSV column that uses ``csvField(_:column:)``.
  private var lastFields: [(String, [UInt8])?] = [nil, nil]
  /// The day (since the Unix epoch) whose "YYYY-MM-DDT" is in ``cachedDate``.
  private var cachedDay = Int64.min
  private var cachedDate: [UInt8] = []
  let sink: ([UInt8]) throws(TrackExportError) -> Void

  init(sink: @escaping ([UInt8]) throws(TrackExportError) -> Void) {
    self.sink = sink
    bytes.reserveCapacity(TrackExporter.bufferSize + 4096)
  }

  var count: Int { bytes.count }

  mutating func flush() throws(TrackExportError) {
    guard !bytes.isEmpty else { return }
    try sink(bytes)
    bytes.removeAll(keepingCapacity: true)
  }

  /// Appends a literal (copied as one block: no per-character work).
  mutating func append(_ text: StaticString) {
    text.withUTF8Buffer { bytes.append(contentsOf: $0) }
  }

  mutating func integer(_ value: Int64) {
    if value < 0 {
      bytes.append(UInt8(ascii: "-"))
      unsigned(value.magnitude)
    } else {
      unsigned(UInt64(value))
    }
  }

  /// Decimal digits of `value`. One and two digits (most integer parts, the date's fields) are
  /// appended directly; longer numbers get their digit count first (comparisons, no division),
  /// then are filled from the right with divisions by the constant 10.
  private mutating func unsigned(_ value: UInt64) {
    if value < 10 {
      bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value))
      return
    }
    if value < 100 {
      bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value / 10))
      bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10))
      return
    }
    var digits = 3
    var power: UInt64 = 1000
    while digits < 20 && value >= power {
      digits += 1
      if digits == 20 { break }
      power &*= 10
    }
    let start = bytes.count
    bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
    var rest = value
    var index = start + digits - 1
    while rest >= 10 {
      bytes[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
      rest /= 10
      index -= 1
    }
    bytes[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
  }

  /// `value` in fixed notation with at most `digits` (0...9) decimals, trailing zeros trimmed
  /// (xsd:decimal and JSON number alike: never an exponent; ``DecimalText``, rounded as the TPV
  /// and gpsd's printf round, so a fix's export gives the digits its TPV gives, 20.5625 m as
  /// 20.562). Non-finite values and magnitudes of 1e9 or more write `0`: the store keeps only
  /// finite values, and no field reaches 1e9.
  @inline(__always)
  mutating func fixed(_ value: Double, _ digits: Int) {
    guard abs(value) < 1e9, let text = DecimalText.digits(value, places: digits, rounding: .nearestEven) else {
      bytes.append(UInt8(ascii: "0"))
      return
    }
    text.write(trimmingZeros: true) { bytes.append($0) }
  }

  /// A comma, then `value` when present (a CSV column).
  mutating func optional(_ value: Double?, _ digits: Int) {
    bytes.append(UInt8(ascii: ","))
    if let value { fixed(value, digits) }
  }

  /// ISO 8601 UTC (`2019-05-01T12:00:00Z`, with `.sss` when the milliseconds are not zero).
  mutating func time(_ milliseconds: Int64) {
    let time = UTCTime(milliseconds: milliseconds)
    // Consecutive fixes share their date: "YYYY-MM-DDT" is made once per day and copied.
    let day = time.day
    if day != cachedDay {
      cachedDate.removeAll(keepingCapacity: true)
      time.writeDate { cachedDate.append($0) }
      cachedDay = day
    }
    bytes.append(contentsOf: cachedDate)
    time.writeClock(fraction: .millisecondsUnlessZero) { bytes.append($0) }
  }

  /// A CSV field (RFC 4180): quoted, with inner quotes doubled, when it holds a comma, a quote or
  /// a line break.
  ///
  /// Consecutive fixes share their backend and source: each `column` (0 or 1) remembers its last
  /// text and escaping, so a repeated text is copied, not scanned again.
  mutating func csvField(_ text: String, column: Int) {
    let slot = column == 0 ? 0 : 1
    if let (last, escaped) = lastFields[slot], last == text {
      bytes.append(contentsOf: escaped)
      return
    }
    let start = bytes.count
    escapeCSV(text)
    lastFields[slot] = (text, Array(bytes[start...]))
  }

  private mutating func escapeCSV(_ text: String) {
    let utf8 = text.utf8
    guard utf8.contains(where: { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 10 || $0 == 13 }) else {
      bytes.append(contentsOf: utf8)
      return
    }
    bytes.append(UInt8(ascii: "\""))
    for byte in utf8 {
      if byte == UInt8(ascii: "\"") { bytes.append(byte) }
      bytes.append(byte)
    }
    bytes.append(UInt8(ascii: "\""))
  }
}
