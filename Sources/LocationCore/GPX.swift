import CLibXML2
import SystemIO
import Glibc
import NMEA

/// Why a GPX file could not become a route.
public enum GPXError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The file could not be read.
  case unreadable(path: String, message: String)
  /// The XML is not well formed; line and parser message.
  case malformed(line: Int, message: String)
  /// A point's `lat`/`lon` attribute is missing or out of range.
  case invalidCoordinate(line: Int, latitude: String?, longitude: String?)
  /// The file has no `rtept`, `trkpt` or `wpt` elements.
  case noPoints
  /// libxml2 could not be loaded (it is loaded for the first GPX file); the text says what to
  /// install.
  case parserUnavailable(String)

  /// A one-line message for logs and error replies.
  public var description: String {
    switch self {
    case .unreadable(let path, let message): return "cannot read GPX file \(path): \(message)"
    case .malformed(let line, let message):
      return "GPX is not well-formed XML (line \(line)): \(message)"
    case .invalidCoordinate(let line, let lat, let lon):
      return
        "GPX point on line \(line) has an invalid coordinate (lat=\(lat ?? "missing"), lon=\(lon ?? "missing"))"
    case .noPoints: return "GPX file has no rtept, trkpt or wpt points"
    case .parserUnavailable(let reason): return reason
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

  /// Creates a point.
  public init(coordinate: Coordinate, elevation: Double? = nil) {
    self.coordinate = coordinate
    self.elevation = elevation
  }
}

/// Reads the points of a GPX 1.0/1.1 file (Topografix GPX schema): the first route's `rtept`s if
/// there is a route, else all `trkpt`s of the tracks in order, else the `wpt`s.
///
/// XML is parsed by libxml2 (no network access, no entity expansion beyond the document).
public enum GPXReader {
  /// Largest GPX file accepted, bytes.
  public static let maximumFileSize = 64 * 1024 * 1024

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

  /// Parses GPX XML held in `bytes` (UTF-8 or as the XML declaration says).
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
    if !collector.route.isEmpty { return collector.route }
    if !collector.track.isEmpty { return collector.track }
    if !collector.waypoints.isEmpty { return collector.waypoints }
    throw .noPoints
  }
}

private struct GPXCollector {
  var route: [GPXPoint] = []
  var track: [GPXPoint] = []
  var waypoints: [GPXPoint] = []
  private var routeCount = 0

  /// Visits the sibling list starting at `first` and every descendant, in document order
  /// (libxml2 limits nesting to 256 levels, so the recursion is bounded).
  mutating func visit(_ first: xmlNodePtr?) throws(GPXError) {
    var child = first
    while let current = child {
      if current.pointee.type == XML_ELEMENT_NODE {
        let name = current.pointee.name.map { String(cString: $0) } ?? ""
        switch name {
        case "rtept", "trkpt", "wpt":
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

  static func point(_ node: xmlNodePtr) throws(GPXError) -> GPXPoint {
    let line = Int(locationd_xml_line(node))
    let lat = attribute(node, "lat")
    let lon = attribute(node, "lon")
    guard let latText = lat, let lonText = lon,
      let latitude = Double(latText.trimmingWhitespace), let longitude = Double(lonText.trimmingWhitespace),
      Coordinate(latitude: latitude, longitude: longitude).isValid
    else {
      throw .invalidCoordinate(line: line, latitude: lat, longitude: lon)
    }
    var point = GPXPoint(coordinate: Coordinate(latitude: latitude, longitude: longitude))
    var child = node.pointee.children
    while let current = child {
      if current.pointee.type == XML_ELEMENT_NODE, current.pointee.name.map({ String(cString: $0) }) == "ele",
        let text = content(current), let value = Double(text.trimmingWhitespace), value.isFinite
      {
        point.elevation = value
      }
      child = current.pointee.next
    }
    return point
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
