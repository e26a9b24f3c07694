import NMEA

#if canImport(FoundationXML)
  import Foundation
  import FoundationXML
#else
  import Foundation
#endif

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
    }
  }
}

/// One point of a GPX file (GPX 1.1 `wptType`): WGS84 degrees and optional elevation in metres.
public struct GPXPoint: Sendable, Hashable {
  /// Position, WGS84 degrees.
  public var coordinate: Coordinate
  /// `<ele>`: elevation in metres (GPX 1.1 says above mean sea level), when given.
  public var elevation: Double?

  /// Creates a point.
  public init(coordinate: Coordinate, elevation: Double? = nil) {
    self.coordinate = coordinate
    self.elevation = elevation
  }
}

/// Reads the points of a GPX 1.0/1.1 file (Topografix GPX schema): the first route's `rtept`s if
/// there is a route, else all `trkpt`s of the tracks in order, else the `wpt`s.
public enum GPXReader {
  /// Reads and parses the GPX file at `path`.
  ///
  /// - Throws: ``GPXError``.
  public static func points(contentsOf path: String) throws(GPXError) -> [GPXPoint] {
    let data: Data
    do {
      data = try Data(contentsOf: URL(fileURLWithPath: path))
    } catch {
      throw .unreadable(path: path, message: "\(error.localizedDescription)")
    }
    return try points(from: data)
  }

  /// Parses GPX XML from `data`.
  ///
  /// - Throws: ``GPXError``.
  public static func points(from data: Data) throws(GPXError) -> [GPXPoint] {
    let parser = XMLParser(data: data)
    let collector = GPXCollector()
    parser.delegate = collector
    let ok = parser.parse()
    if let error = collector.error { throw error }
    guard ok else {
      throw .malformed(
        line: parser.lineNumber, message: parser.parserError.map { "\($0)" } ?? "parse failed")
    }
    if !collector.route.isEmpty { return collector.route }
    if !collector.track.isEmpty { return collector.track }
    if !collector.waypoints.isEmpty { return collector.waypoints }
    throw .noPoints
  }
}

private final class GPXCollector: NSObject, XMLParserDelegate {
  var route: [GPXPoint] = []
  var track: [GPXPoint] = []
  var waypoints: [GPXPoint] = []
  var error: GPXError?
  private var routeCount = 0
  private var current: (kind: String, point: GPXPoint)?
  private var inElevation = false
  private var elevationText = ""
  private var depth = 0

  func parser(
    _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
    qualifiedName qName: String?,
    attributes attributeDict: [String: String] = [:]
  ) {
    depth += 1
    let name = localName(elementName)
    switch name {
    case "rte":
      routeCount += 1
    case "rtept", "trkpt", "wpt":
      let lat = attributeDict["lat"]
      let lon = attributeDict["lon"]
      guard let latText = lat, let lonText = lon,
        let latitude = Double(latText.trimmingCharacters(in: .whitespaces)),
        let longitude = Double(lonText.trimmingCharacters(in: .whitespaces)),
        Coordinate(latitude: latitude, longitude: longitude).isValid
      else {
        if error == nil {
          error = .invalidCoordinate(line: parser.lineNumber, latitude: lat, longitude: lon)
        }
        parser.abortParsing()
        return
      }
      current = (name, GPXPoint(coordinate: Coordinate(latitude: latitude, longitude: longitude)))
    case "ele":
      if current != nil {
        inElevation = true
        elevationText = ""
      }
    default:
      break
    }
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) {
    if inElevation { elevationText += string }
  }

  func parser(
    _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
    qualifiedName qName: String?
  ) {
    depth -= 1
    let name = localName(elementName)
    switch name {
    case "ele":
      if inElevation,
        let value = Double(elevationText.trimmingCharacters(in: .whitespacesAndNewlines)),
        value.isFinite
      {
        current?.point.elevation = value
      }
      inElevation = false
    case "rtept", "trkpt", "wpt":
      guard let (kind, point) = current else { return }
      switch kind {
      case "rtept": if routeCount == 1 { route.append(point) }
      case "trkpt": track.append(point)
      default: waypoints.append(point)
      }
      current = nil
    default:
      break
    }
  }

  func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
    if error == nil { error = .malformed(line: parser.lineNumber, message: "\(parseError)") }
  }

  func parserDidEndDocument(_ parser: XMLParser) {
    if depth != 0, error == nil {
      error = .malformed(line: parser.lineNumber, message: "document ends inside an element")
    }
  }

  private func localName(_ name: String) -> String {
    if let colon = name.lastIndex(of: ":") { return String(name[name.index(after: colon)...]) }
    return name
  }
}
