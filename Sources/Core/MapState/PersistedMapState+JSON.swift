import JSON
import LocationModel

/// Why a saved map state could not be read although it is JSON: a member is missing or of the
/// wrong type.
public struct MapStateDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
  /// Where the problem is, as dotted member names and array indices (`viewport.center.latitude`,
  /// `annotations.3.id`); empty for the top level.
  public var path: String
  /// What was expected there.
  public var reason: String

  /// Creates an error at `path`.
  public init(path: String, reason: String) {
    self.path = path
    self.reason = reason
  }

  /// `path: reason`, or the reason alone at the top level.
  public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }
}

extension PersistedMapState {
  /// The state as JSON, keys sorted: `{"annotations":[Annotation],"mode":String,"version":1,
  /// "viewport":{"center":{"latitude","longitude"},"rotation","size":{"height","width"},"zoom"}}`
  /// (degrees, points; annotations as ``Annotation/json``).
  public var json: JSONValue {
    let viewportJSON: JSONValue = .object([
      JSONMember(
        "center",
        .object([
          JSONMember("latitude", .number(viewport.center.latitude)),
          JSONMember("longitude", .number(viewport.center.longitude)),
        ])),
      JSONMember("zoom", .number(viewport.zoom)),
      JSONMember(
        "size",
        .object([JSONMember("width", .number(viewport.size.width)), JSONMember("height", .number(viewport.size.height))])),
      JSONMember("rotation", .number(viewport.rotation)),
    ])
    return JSONValue.object([
      JSONMember("version", .int(Int64(version))), JSONMember("viewport", viewportJSON),
      JSONMember("mode", .string(mode.rawValue)), JSONMember("annotations", .array(annotations.map(\.json))),
    ]).sortingKeys()
  }

  /// The contents of `mapstate.json`: ``json`` indented by two spaces per level, one member per
  /// line, then a newline.
  public var fileContents: [UInt8] {
    var bytes = json.indentedEncoded
    bytes.append(UInt8(ascii: "\n"))
    return bytes
  }

  /// Reads a state from the contents of `mapstate.json` (any JSON whitespace; unknown members
  /// are ignored; a member name given twice in one object is refused). Values are not checked here: the store validates them.
  ///
  /// - Throws: ``MapStateDecodingError``, also for text that is not JSON (path empty, the
  ///   reason giving the byte offset).
  public init(fileContents bytes: [UInt8]) throws(MapStateDecodingError) {
    let value: JSONValue
    do {
      value = try JSONValue.parse(bytes)
    } catch {
      throw MapStateDecodingError(path: "", reason: error.description)
    }
    // A name given twice is read differently by different parsers: the file is ambiguous.
    if let path = value.firstDuplicateMemberPath {
      throw MapStateDecodingError(path: String(path.prefix(200)), reason: "duplicate member: give each member once")
    }
    try self.init(json: value)
  }

  /// Reads a state from its ``json`` shape.
  ///
  /// - Throws: ``MapStateDecodingError`` naming the first missing or mistyped member.
  public init(json: JSONValue) throws(MapStateDecodingError) {
    let root = Members(json, path: "")
    let version = try root.int("version")
    let view = try root.object("viewport")
    let center = try view.object("center")
    let size = try view.object("size")
    let viewport = Viewport(
      center: Coordinate(latitude: try center.double("latitude"), longitude: try center.double("longitude")),
      zoom: try view.double("zoom"), size: ViewportSize(width: try size.double("width"), height: try size.double("height")),
      rotation: try view.double("rotation"))
    let modeName = try root.string("mode")
    guard let mode = UserTrackingMode(rawValue: modeName) else {
      throw MapStateDecodingError(path: "mode", reason: "must be one of none, follow, followWithHeading")
    }
    var annotations: [Annotation] = []
    for (index, element) in try root.array("annotations").enumerated() {
      let item = Members(element, path: "annotations.\(index)")
      annotations.append(
        Annotation(
          id: try item.string("id"),
          coordinate: Coordinate(latitude: try item.double("lat"), longitude: try item.double("lon")),
          title: try item.string("title"), subtitle: try item.optionalString("subtitle"),
          kind: try item.optionalString("kind")))
    }
    self.init(viewport: viewport, mode: mode, annotations: annotations)
    self.version = version
  }
}

/// Typed access to an object's members, with the member path in every error.
private struct Members {
  let value: JSONValue
  let path: String

  init(_ value: JSONValue, path: String) {
    self.value = value
    self.path = path
  }

  func at(_ key: String) -> String { path.isEmpty ? key : path + "." + key }

  func member(_ key: String, _ expected: String) throws(MapStateDecodingError) -> JSONValue {
    guard case .object = value else { throw MapStateDecodingError(path: path, reason: "expected an object") }
    guard let member = value[key], member != .null else {
      throw MapStateDecodingError(path: at(key), reason: "missing (\(expected))")
    }
    return member
  }

  func double(_ key: String) throws(MapStateDecodingError) -> Double {
    guard let number = try member(key, "a number").doubleValue else {
      throw MapStateDecodingError(path: at(key), reason: "expected a number")
    }
    return number
  }

  func int(_ key: String) throws(MapStateDecodingError) -> Int {
    guard let number = try member(key, "an integer").intValue else {
      throw MapStateDecodingError(path: at(key), reason: "expected an integer")
    }
    return number
  }

  func string(_ key: String) throws(MapStateDecodingError) -> String {
    guard let text = try member(key, "a string").stringValue else {
      throw MapStateDecodingError(path: at(key), reason: "expected a string")
    }
    return text
  }

  func optionalString(_ key: String) throws(MapStateDecodingError) -> String? {
    guard case .object = value else { throw MapStateDecodingError(path: path, reason: "expected an object") }
    guard let member = value[key], member != .null else { return nil }
    guard let text = member.stringValue else {
      throw MapStateDecodingError(path: at(key), reason: "expected a string")
    }
    return text
  }

  func object(_ key: String) throws(MapStateDecodingError) -> Members {
    let member = try member(key, "an object")
    guard case .object = member else { throw MapStateDecodingError(path: at(key), reason: "expected an object") }
    return Members(member, path: at(key))
  }

  func array(_ key: String) throws(MapStateDecodingError) -> [JSONValue] {
    guard let elements = try member(key, "an array").arrayValue else {
      throw MapStateDecodingError(path: at(key), reason: "expected an array")
    }
    return elements
  }
}
