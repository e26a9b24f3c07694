import GNSSSky
import CLibXML2
import SystemIO
import Glibc
import NMEA
import LocationModel

/// Why a GPX file could not become a route.
public enum GPXError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The file could not be read.
  case unreadable(path: String, message: String)
  /// The XML is not well formed; line and parser message.
  case malformed(line: Int, message: String)
  /// A point's `lat`/`lon` attribute is missing or out of range.
  case invalidCoordinate(line: Int, latitude: String?, longitude: String?)
  /// A point's `<ele>` is not a decimal number of metres within
  /// ``GPXReader/elevationRange`` (the range the `simulate` URI's `altitude` accepts); line of the
  /// `<ele>` element and its text.
  case invalidElevation(line: Int, value: String)
  /// Two consecutive points of the route (the closing leg from the last point back to the first
  /// included) are antipodal, or within a few millimetres of it: every great circle joins them,
  /// so the direction of travel on that leg is undefined. Lines of the two points.
  case antipodalLeg(fromLine: Int, toLine: Int)
  /// The file has no `rtept`, `trkpt` or `wpt` elements.
  case noPoints
  /// The file has more than `limit` points (``GPXReader/maximumPoints``).
  case tooManyPoints(limit: Int)
  /// libxml2 could not be loaded (it is loaded for the first GPX file); the text says what to
  /// install.
  case parserUnavailable(String)
  /// The `simulate` URI's almanac file could not be read or parsed (its own text, which names
  /// the almanac and the line).
  case almanac(AlmanacError)
  /// An `obstruction` setting names leg `leg` but the route has only `legs` legs (`0..<legs`,
  /// the closing leg from the last point back to the first included).
  case obstructionBeyondRoute(leg: Int, legs: Int)

  /// A one-line message for logs and error replies.
  public var description: String {
    switch self {
    case .unreadable(let path, let message): return "cannot read GPX file \(path): \(message)"
    case .malformed(let line, let message):
      return "GPX is not well-formed XML (line \(line)): \(message)"
    case .invalidCoordinate(let line, let lat, let lon):
      return
        "GPX point on line \(line) has an invalid coordinate (lat=\(lat ?? "missing"), lon=\(lon ?? "missing"))"
    case .invalidElevation(let line, let value):
      return
        "GPX <ele> on line \(line) is not an elevation (\"\(value)\"): expected a decimal number of metres within -1000...100000"
    case .antipodalLeg(let from, let to):
      return
        "GPX points on lines \(from) and \(to) are antipodal: the direction of the leg between them is undefined (add a point between them)"
    case .noPoints: return "GPX file has no rtept, trkpt or wpt points"
    case .tooManyPoints(let limit): return "GPX file has more than \(limit) points"
    case .parserUnavailable(let reason): return reason
    case .almanac(let error): return error.description
    case .obstructionBeyondRoute(let leg, let legs):
      return "obstruction names leg \(leg) but the route has \(legs) legs (0...\(legs - 1))"
    }
  }
}

/// One point of a GPX file (GPX 1.1 `wptType`): WGS84 degrees and optional elevation in metres.
public struct GPXPoint: Sendable, Hashable {
  /// Position, WGS84 degrees.
  public var coordinate: Coordinate
  /// `<ele>`: elevation in metres, when given. GPX 1.1 names no datum; locationd takes it as
  /// height above mean sea level (`altMSL`), as receivers write it.
  public var elevation: Double?
  /// What hides the sky on the leg that starts at this point, from an `obstruction` element
  /// (any namespace) in the point's `<extensions>`: `open`, `tunnel`, `canyon` or `canyon:DEG`
  /// (see docs/simulator.md); `nil` when not given. A canyon's street azimuth is filled in from the
  /// route (0 here).
  public var obstruction: Obstruction?

  /// Creates a point.
  public init(coordinate: Coordinate, elevation: Double? = nil, obstruction: Obstruction? = nil) {
    self.coordinate = coordinate
    self.elevation = elevation
    self.obstruction = obstruction
  }
}

/// Reads the points of a GPX 1.0/1.1 file (Topografix GPX schema): the first route's `rtept`s if
/// there is a route, else all `trkpt`s of the tracks in order, else the `wpt`s.
///
/// XML is parsed by libxml2 (no network access, no entity expansion beyond the document).
public enum GPXReader {
  /// Elevations accepted in `<ele>`, metres: the range of the `simulate` URI's `altitude`.
  public static let elevationRange = -1000.0...100_000.0

  /// Largest GPX file accepted, bytes: 16 MiB, some 200,000 points. libxml2 builds the whole
  /// document in memory, about 30 times the file's size, so this bounds the start-up's peak.
  public static let maximumFileSize = 16 * 1024 * 1024
  /// Most points accepted in one file (route points, track points and waypoints together).
  public static let maximumPoints = 100_000

  /// Reads and parses the GPX file at `path`. The file is opened with `O_NONBLOCK` and read only
  /// when it is a regular file, so a FIFO or device at the path cannot hang the backend.
  ///
  /// - Throws: ``GPXError`` (``GPXError/unreadable(path:message:)`` also for "not a regular file").
  public static func points(contentsOf path: String) throws(GPXError) -> [GPXPoint] {
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { throw .unreadable(path: path, message: String(cString: strerror(errno))) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      throw .unreadable(path: path, message: String(cString: strerror(errno)))
    }
    guard info.st_mode & S_IFMT == S_IFREG else {
      throw .unreadable(path: path, message: "not a regular file")
    }
    let bytes: [UInt8]
    do {
      bytes = try SystemIO.readToEnd(fd, limit: maximumFileSize)
    } catch {
      switch error {
      case .system(let error):
        throw .unreadable(path: path, message: error.description)
      case .tooLarge:
        throw .unreadable(path: path, message: "larger than \(maximumFileSize) bytes")
      }
    }
    return try points(from: bytes)
  }

  /// Parses GPX XML held in `bytes` (UTF-8 or as the XML declaration says). `lat`, `lon` and
  /// `<ele>` must be decimal numbers (`xsd:decimal`, as the GPX 1.1 schema types them); a route
  /// with antipodal consecutive points is refused.
  ///
  /// - Throws: ``GPXError``.
  public static func points(from bytes: [UInt8]) throws(GPXError) -> [GPXPoint] {
    if let reason = locationd_xml_load() { throw .parserUnavailable(String(cString: reason)) }
    let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)
    let document: xmlDocPtr? = bytes.withUnsafeBufferPointer { buffer in
      buffer.baseAddress.flatMap { base in
        base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
          locationd_xml_read_memory($0, Int32(clamping: buffer.count), "route.gpx", options)
        }
      }
    }
    guard let document else {
      if let error = locationd_xml_last_error() {
        let message = error.pointee.message.map { String(cString: $0) } ?? "parse failed"
        throw .malformed(line: Int(error.pointee.line), message: message.trimmingTrailingNewlines)
      }
      throw .malformed(line: 0, message: bytes.isEmpty ? "the document is empty" : "parse failed")
    }
    defer { locationd_xml_free_doc(document) }
    var collector = GPXCollector()
    if let root = locationd_xml_root(document) { try collector.visit(root) }
    for list in [collector.route, collector.track, collector.waypoints] where !list.isEmpty {
      try checkLegs(list)
      return list.map(\.point)
    }
    throw .noPoints
  }

  /// Refuses a closed route with a leg whose great circle is undefined (antipodal ends).
  private static func checkLegs(_ points: [GPXCollector.Entry]) throws(GPXError) {
    guard points.count > 1 else { return }
    for index in points.indices {
      let next = (index + 1) % points.count
      if SimulatedRoute.isAntipodal(points[index].point.coordinate, points[next].point.coordinate) {
        throw .antipodalLeg(fromLine: points[index].line, toLine: points[next].line)
      }
    }
  }
}

private struct GPXCollector {
  /// A point and the line of its element.
  struct Entry {
    var point: GPXPoint
    var line: Int
  }

  var route: [Entry] = []
  var track: [Entry] = []
  var waypoints: [Entry] = []
  private var routeCount = 0
  private var pointCount = 0

  /// Visits the sibling list starting at `first` and every descendant, in document order
  /// (libxml2 limits nesting to 256 levels, so the recursion is bounded).
  mutating func visit(_ first: xmlNodePtr?) throws(GPXError) {
    var child = first
    while let current = child {
      if current.pointee.type == XML_ELEMENT_NODE {
        let name = current.pointee.name.map { String(cString: $0) } ?? ""
        switch name {
        case "rtept", "trkpt", "wpt":
          pointCount += 1
          guard pointCount <= GPXReader.maximumPoints else { throw .tooManyPoints(limit: GPXReader.maximumPoints) }
          let point = try Self.point(current)
          switch name {
          case "rtept": if routeCount == 1 { route.append(point) }
          case "trkpt": track.append(point)
          default: waypoints.append(point)
          }
        default:
          if name == "rte" { routeCount += 1 }
          try visit(current.pointee.children)
        }
      }
      child = current.pointee.next
    }
  }

  static func point(_ node: xmlNodePtr) throws(GPXError) -> Entry {
    let line = Int(locationd_xml_line(node))
    let lat = attribute(node, "lat")
    let lon = attribute(node, "lon")
    guard let latText = lat, let lonText = lon,
      let latitude = decimal(latText), let longitude = decimal(lonText),
      Coordinate(latitude: latitude, longitude: longitude).isValid
    else {
      throw .invalidCoordinate(line: line, latitude: lat, longitude: lon)
    }
    var point = GPXPoint(coordinate: Coordinate(latitude: latitude, longitude: longitude))
    var child = node.pointee.children
    while let current = child {
      if current.pointee.type == XML_ELEMENT_NODE, current.pointee.name.map({ String(cString: $0) }) == "ele" {
        let text = content(current) ?? ""
        guard let value = decimal(text), GPXReader.elevationRange.contains(value) else {
          throw .invalidElevation(line: Int(locationd_xml_line(current)), value: text)
        }
        point.elevation = value
      }
      if current.pointee.type == XML_ELEMENT_NODE, current.pointee.name.map({ String(cString: $0) }) == "extensions" {
        var item = current.pointee.children
        while let element = item {
          if element.pointee.type == XML_ELEMENT_NODE,
            element.pointee.name.map({ String(cString: $0) }) == "obstruction"
          {
            let text = (content(element) ?? "").trimmingWhitespace
            guard let obstruction = Self.obstruction(text) else {
              throw .malformed(
                line: Int(locationd_xml_line(element)),
                message: "obstruction '\(text)' is not open, tunnel, canyon or canyon:DEG (DEG within 0...89)")
            }
            point.obstruction = obstruction
          }
          item = element.pointee.next
        }
      }
      child = current.pointee.next
    }
    return Entry(point: point, line: line)
  }

  /// `open`, `tunnel`, `canyon` (walls of 30°) or `canyon:DEG` (`0...89`); `nil` otherwise.
  static func obstruction(_ text: String) -> Obstruction? {
    switch text.lowercased() {
    case "open": return .openSky
    case "tunnel": return .tunnel
    case "canyon": return .urbanCanyon(streetAzimuth: 0, wallElevation: 30)
    default:
      guard text.lowercased().hasPrefix("canyon:"), let degrees = decimal(String(text.dropFirst(7))),
        (0...89).contains(degrees)
      else { return nil }
      return .urbanCanyon(streetAzimuth: 0, wallElevation: degrees)
    }
  }

  /// An `xsd:decimal` (optional sign, digits with at most one decimal point, surrounding
  /// whitespace allowed): no exponent, hexadecimal, `inf` or `nan`, which `Double(_:)` would take.
  static func decimal(_ text: String) -> Double? {
    let trimmed = text.trimmingWhitespace
    var digits = 0
    var points = 0
    for (offset, byte) in trimmed.utf8.enumerated() {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digits += 1
      case UInt8(ascii: "."): points += 1
      case UInt8(ascii: "+"), UInt8(ascii: "-"): if offset != 0 { return nil }
      default: return nil
      }
    }
    guard digits > 0, points <= 1, let value = Double(trimmed), value.isFinite else { return nil }
    return value
  }

  static func attribute(_ node: xmlNodePtr, _ name: String) -> String? {
    guard let value = locationd_xml_attribute(node, name) else { return nil }
    defer { locationd_xml_free(value) }
    return String(cString: value)
  }

  static func content(_ node: xmlNodePtr) -> String? {
    guard let value = locationd_xml_content(node) else { return nil }
    defer { locationd_xml_free(value) }
    return String(cString: value)
  }
}

extension String {
  fileprivate var trimmingWhitespace: String {
    var scalars = Substring(self)
    while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
    while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
    return String(scalars)
  }

  fileprivate var trimmingTrailingNewlines: String {
    var text = Substring(self)
    while let last = text.last, last.isNewline { text.removeLast() }
    return String(text)
  }
}
