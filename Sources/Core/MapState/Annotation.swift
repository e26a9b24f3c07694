import JSON
import LocationModel

extension Annotation {
  /// The annotation as JSON: `{"id","lat","lon","title"}`, then `"subtitle"` and `"kind"` when
  /// set, in this order.
  public var json: JSONValue {
    var members = [
      JSONMember("id", .string(id)), JSONMember("lat", .number(coordinate.latitude)),
      JSONMember("lon", .number(coordinate.longitude)), JSONMember("title", .string(title)),
    ]
    if let subtitle { members.append(JSONMember("subtitle", .string(subtitle))) }
    if let kind { members.append(JSONMember("kind", .string(kind))) }
    return .object(members)
  }

  /// Checks identifier, coordinate and text lengths (``TextRules``: bytes of UTF-8 and
  /// combining marks per character).
  ///
  /// - Throws: ``MapStateError/invalidIdentifier(_:reason:)``,
  ///   ``MapStateError/invalidCoordinate(latitude:longitude:)``,
  ///   ``MapStateError/textTooLong(field:bytes:limit:)`` or
  ///   ``MapStateError/tooManyCombiningMarks(field:count:limit:)``.
  ///   Does not check the reserved ``locationID``: the service does.
  public func validate() throws(MapStateError) {
    try Self.validateIdentifier(id)
    guard coordinate.isValid else {
      throw .invalidCoordinate(latitude: coordinate.latitude, longitude: coordinate.longitude)
    }
    for (field, text, limit) in [
      ("title", title, Self.maxTextBytes), ("subtitle", subtitle ?? "", Self.maxTextBytes),
      ("kind", kind ?? "", Self.maxKindBytes),
    ] {
      if text.utf8.count > limit {
        throw .textTooLong(field: field, bytes: text.utf8.count, limit: limit)
      }
      let marks = TextRules.mostCombiningMarks(in: text)
      if marks > TextRules.maxCombiningMarks {
        throw .tooManyCombiningMarks(field: field, count: marks, limit: TextRules.maxCombiningMarks)
      }
      let longest = TextRules.longestCharacter(in: text)
      if longest > TextRules.maxScalarsPerCharacter {
        throw .characterTooLong(field: field, count: longest, limit: TextRules.maxScalarsPerCharacter)
      }
    }
    // Control characters would reach other users' terminals (escape sequences) and break the
    // one-line text output; format characters (Unicode category Cf: bidirectional overrides such
    // as U+202E, zero-width characters) make text display as something it is not. Both are
    // refused, as in identifiers.
    for (field, text) in [("title", title), ("subtitle", subtitle ?? ""), ("kind", kind ?? "")]
    where Self.containsControlOrFormat(text) {
      throw .controlCharacters(field: field)
    }
  }

  /// Whether `text` has a scalar of Unicode general category Cc (control), Cf (format), Zl (line
  /// separator, U+2028) or Zp (paragraph separator, U+2029): the last two break a line in
  /// JavaScript, JSON viewers and terminals as a newline does.
  static func containsControlOrFormat(_ text: String) -> Bool {
    text.unicodeScalars.contains(where: isRefused)
  }

  /// Whether `scalar` is of a category refused in annotation text (see ``containsControlOrFormat(_:)``).
  static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.properties.generalCategory {
    case .format: return !TextRules.isAllowedJoiner(scalar)
    case .control, .lineSeparator, .paragraphSeparator: return true
    default: return false
    }
  }

  /// Checks that an identifier is 1...256 bytes of UTF-8 with at most
  /// ``TextRules/maxCombiningMarks`` combining marks on a character and without control (Cc) or
  /// format (Cf) characters (``TextRules``, the same rule as region ids).
  ///
  /// - Throws: ``MapStateError/invalidIdentifier(_:reason:)``.
  public static func validateIdentifier(_ id: String) throws(MapStateError) {
    if id.isEmpty { throw .invalidIdentifier(id, reason: "empty") }
    if id.unicodeScalars.allSatisfy({ $0.properties.isWhitespace }) {
      throw .invalidIdentifier(id, reason: "blank (only white space)")
    }
    if let reason = TextRules.problem(id, maxBytes: maxIdentifierBytes) {
      throw .invalidIdentifier(String(id.unicodeScalars.prefix(32).map(Character.init)) + "...", reason: reason)
    }
    if containsControlOrFormat(id) {
      // The message shows such characters as \u{...} so that it cannot reorder or hide text.
      let visible = id.unicodeScalars.map { scalar in
        isRefused(scalar) ? "\\u{" + String(scalar.value, radix: 16) + "}" : String(scalar)
      }
      throw .invalidIdentifier(
        visible.joined(), reason: "contains control, format or line-separator characters (Unicode Cc, Cf, Zl, Zp)")
    }
  }
}

/// How many annotations the map holds at most, and how much text.
///
/// Every `MAP` reply and event carries all annotations, so without a bound one client could make
/// the map too large for any client to receive. The limits keep the largest reply (JSON, GeoJSON
/// or SVG) well below a client's backlog bound in the server (1 MiB).
public enum AnnotationLimits {
  /// Most annotations on the map (not counting the mirrored current location).
  public static let maxCount = 1000
  /// Most bytes of annotation text on the map: the UTF-8 of every annotation's id, title,
  /// subtitle and kind together (``Annotation/textByteCount``), 64 KiB. With the worst text
  /// (every character escaped as `&quot;` in SVG) the largest reply stays below 1 MiB.
  public static let maxTotalBytes = 64 * 1024
}

/// Why a map-state request was refused. Every case has a human-readable ``description``.
public enum MapStateError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A coordinate is not finite or outside latitude `-90...90` / longitude `-180...180` degrees.
  case invalidCoordinate(latitude: Double, longitude: Double)
  /// A zoom level is not finite or outside `0...22`.
  case invalidZoom(Double)
  /// A span in degrees is not finite or outside `(0, 180]` x `(0, 360]`.
  case invalidSpan(latitudeDelta: Double, longitudeDelta: Double)
  /// A span in metres is not finite and positive.
  case invalidMetricSpan(latitudinalMetres: Double, longitudinalMetres: Double)
  /// A viewport size is not finite or outside `1...16384` points.
  case invalidViewportSize(width: Double, height: Double)
  /// A rotation is not finite.
  case invalidRotation(Double)
  /// An annotation identifier is empty, too long or has control characters.
  case invalidIdentifier(String, reason: String)
  /// The identifier is reserved for the mirrored current location (``Annotation/locationID``).
  case reservedIdentifier(String)
  /// A title, subtitle or kind is longer than allowed, bytes of UTF-8.
  case textTooLong(field: String, bytes: Int, limit: Int)
  /// A title, subtitle or kind has more than ``TextRules/maxCombiningMarks`` combining marks
  /// on one character.
  case tooManyCombiningMarks(field: String, count: Int, limit: Int)
  /// A title, subtitle or kind has a character (extended grapheme cluster) of more than
  /// ``TextRules/maxScalarsPerCharacter`` code points.
  case characterTooLong(field: String, count: Int, limit: Int)
  /// The identifier starts with ``Annotation/fleetPrefix``, the MQTT fleet view's namespace.
  case fleetIdentifier(String)
  /// A title, subtitle or kind contains control characters (escape sequences, newlines) or
  /// format characters (Unicode Cf, e.g. U+202E right-to-left override).
  case controlCharacters(field: String)
  /// Adding the annotation would exceed ``AnnotationLimits``: the map would then hold `count`
  /// annotations with `bytes` bytes of text.
  case limitExceeded(count: Int, bytes: Int)
  /// No annotation has this identifier.
  case noSuchAnnotation(id: String)
  /// "Center on current location" was asked while there is no fix.
  case noCurrentLocation

  /// A one-line explanation for clients and logs.
  public var description: String {
    switch self {
    case .invalidCoordinate(let latitude, let longitude):
      return
        "invalid coordinate lat=\(latitude) lon=\(longitude): need finite latitude -90...90 and longitude -180...180 degrees"
    case .invalidZoom(let zoom):
      return "invalid zoom level \(zoom): need a finite value in 0...22"
    case .invalidSpan(let latitudeDelta, let longitudeDelta):
      return
        "invalid span latitudeDelta=\(latitudeDelta) longitudeDelta=\(longitudeDelta): need finite degrees in (0, 180] and (0, 360]"
    case .invalidMetricSpan(let latitudinal, let longitudinal):
      return
        "invalid span latitudinalMetres=\(latitudinal) longitudinalMetres=\(longitudinal): need finite positive metres"
    case .invalidViewportSize(let width, let height):
      return "invalid viewport size \(width)x\(height): need finite points in 1...16384"
    case .invalidRotation(let rotation):
      return "invalid rotation \(rotation): need finite degrees"
    case .invalidIdentifier(let id, let reason):
      return "invalid annotation id \"\(id)\": \(reason)"
    case .reservedIdentifier(let id):
      return "annotation id \"\(id)\" is reserved for the current location"
    case .textTooLong(let field, let bytes, let limit):
      return "annotation \(field) too long: \(bytes) bytes of UTF-8, limit \(limit)"
    case .characterTooLong(let field, let count, let limit):
      return "annotation \(field) has a character of \(count) code points, limit \(limit)"
    case .tooManyCombiningMarks(let field, let count, let limit):
      return
        "annotation \(field) has \(count) combining marks on one character, limit \(limit)"
    case .fleetIdentifier(let id):
      return
        "annotation id \"\(id.unicodeScalars.prefix(64).map(String.init).joined())\" starts with \"\(Annotation.fleetPrefix)\", the MQTT fleet view's namespace: choose another id"
    case .controlCharacters(let field):
      return
        "annotation \(field) contains control, format or line-separator characters (escape sequences, newlines, direction overrides; Unicode Cc, Cf, Zl, Zp): use plain text"
    case .limitExceeded(let count, let bytes):
      return
        "annotation limit exceeded: the map would hold \(count) annotations with \(bytes) bytes of text; the limits are \(AnnotationLimits.maxCount) annotations and \(AnnotationLimits.maxTotalBytes) bytes (UTF-8 of ids, titles, subtitles and kinds together): remove annotations first"
    case .noSuchAnnotation(let id):
      return "no annotation with id \"\(id)\""
    case .noCurrentLocation:
      return "no current location: there is no fix"
    }
  }
}
