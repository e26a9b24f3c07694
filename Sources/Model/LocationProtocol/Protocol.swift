import FoundationEssentials
import LocationModel

/// The identifier a client may put in a request as `"id"`; the reply echoes it unchanged.
///
/// A JSON string or number. An id read from a request line keeps the client's text
/// (``numberText(_:)``, ``stringText(_:)``), so it comes back byte for byte: a number beyond 2^53
/// or with an exponent, a string with the escapes the client chose (`"a\/b"`, `"\u0041"`).
public enum RequestID: Sendable, Hashable {
  /// A string id, e.g. `"a7"`.
  case string(String)
  /// A numeric id, e.g. `1` (integral numbers are written without a fraction).
  case number(Double)
  /// A numeric id exactly as the request wrote it (valid JSON number text, e.g.
  /// `9007199254740993` or `1.50e3`), echoed unchanged.
  case numberText(String)
  /// A string id exactly as the request wrote it: the JSON string literal with its quotes and
  /// escapes (valid JSON, e.g. `"a\/b"`), echoed unchanged.
  case stringText(String)

  /// The id as a JSON value.
  public var json: JSONValue {
    switch self {
    case .string(let value): return .string(value)
    case .number(let value): return .number(value)
    case .numberText(let text), .stringText(let text): return .raw(Array(text.utf8))
    }
  }

  /// The id a reply's `"id"` member holds (inverse of ``json``); `nil` for other values.
  package init?(json: JSONValue) {
    switch json {
    case .string(let value): self = .string(value)
    case .int(let value): self = .number(Double(value))
    case .double(let value): self = .number(value)
    case .raw(let bytes):
      let text = String(decoding: bytes, as: UTF8.self)
      self = bytes.first == UInt8(ascii: "\"") ? .stringText(text) : .numberText(text)
    default: return nil
    }
  }
}

/// The format of a `map` reply.
public enum MapFormat: String, Sendable, Hashable, Codable, CaseIterable {
  /// The map state as a `MAP` object (center, zoom, mode, annotations).
  case json
  /// The map state as an RFC 7946 GeoJSON FeatureCollection in the member `geojson`.
  case geojson
  /// The map rendered as an SVG document (a string) in the member `svg`.
  case svg
}

/// A replay control action (`replay` request); the backend must be a `replay:` backend.
public enum ReplayAction: Sendable, Hashable {
  /// Pauses the replay.
  case pause
  /// Resumes a paused replay.
  case resume
  /// Moves to `seconds` after the first epoch of the log (`>= 0`).
  case seek(seconds: Double)
  /// Sets the playback speed factor (`>= 0`; 1 = real time, 0 = as fast as possible).
  case speed(Double)
  /// Emits the next `epochs` epochs (`1...10_000`) and stays paused.
  case step(epochs: Int)
}

/// What a client asks for. See docs/PROTOCOL.md for the wire form of each case.
public enum Command: Sendable, Hashable {
  /// `{"cmd":"request"}`: asks for authorization; the service decides it from the peer's credentials.
  case requestAuthorization
  /// `{"cmd":"start"}`: starts location updates with the given filters.
  case start(LocationFilter)
  /// `{"cmd":"stop"}`: stops location updates.
  case stop
  /// `{"cmd":"status"}`: authorization, tracking, backend, initial and current location.
  case status
  /// `{"cmd":"location"}`: the initial and current location.
  case location
  /// `{"cmd":"watch","enable":true,"coalesce":true,...filters}`: streams events (locations,
  /// backend status, map changes) to this client and tracks for this connection, with the
  /// filters of `start`. `coalesce: false` delivers every location (for recording): a client that
  /// cannot keep up is then disconnected instead of skipping fixes.
  case watch(enable: Bool, coalesce: Bool = true, options: LocationFilter = LocationFilter())
  /// `{"cmd":"center"}`: centers the map on the current location.
  case centerOnLocation
  /// `{"cmd":"setCenter","lat":..,"lon":..}`: centers the map on a coordinate.
  case setCenter(Coordinate)
  /// `{"cmd":"zoom","zoom":..}`: sets the zoom level (Web Mercator, `0...22`).
  case zoom(Double)
  /// `{"cmd":"mode","mode":..}`: sets the user-tracking mode.
  case mode(UserTrackingMode)
  /// `{"cmd":"annotate","annotation":{"id":..,"lat":..,"lon":..,"title":..}}`: adds or replaces an annotation.
  case annotate(Annotation)
  /// `{"cmd":"remove","annotation":ID}`: removes the annotation with this id.
  case removeAnnotation(id: String)
  /// `{"cmd":"map","format":..}`: the map state in a format.
  case map(MapFormat)
  /// `{"cmd":"replay","action":..,"value":..}`: controls a replay backend.
  case replay(ReplayAction)
  /// `{"cmd":"region","action":"add"|"remove"|"list"|"state",...}`: region monitoring (see
  /// ``RegionAction`` and docs/regions.md).
  case region(RegionAction)

  /// The wire name of the command (`"cmd"` value).
  public var name: String {
    switch self {
    case .requestAuthorization: return "request"
    case .start: return "start"
    case .stop: return "stop"
    case .status: return "status"
    case .location: return "location"
    case .watch: return "watch"
    case .centerOnLocation: return "center"
    case .setCenter: return "setCenter"
    case .zoom: return "zoom"
    case .mode: return "mode"
    case .annotate: return "annotate"
    case .removeAnnotation: return "remove"
    case .map: return "map"
    case .replay: return "replay"
    case .region: return "region"
    }
  }

  /// Whether the command may be used before the client is authorized (`request`, `status`).
  public var isAllowedUnauthorized: Bool {
    switch self {
    case .requestAuthorization, .status: return true
    default: return false
    }
  }
}

/// One parsed and validated request line.
public struct Request: Sendable, Hashable {
  /// The client's `"id"`, echoed in the reply; `nil` when absent.
  public var id: RequestID?
  /// What the client asks for.
  public var command: Command

  /// Creates a request.
  public init(id: RequestID? = nil, command: Command) {
    self.id = id
    self.command = command
  }
}

/// Stable error codes of `ERROR` replies (the `"code"` member).
public enum ErrorCode: String, Sendable, Hashable, Codable, CaseIterable {
  /// The line is not a JSON object.
  case malformedJSON
  /// `"cmd"` is missing or names no known command.
  case unknownCommand
  /// A member is missing, of the wrong type, out of range, or unknown.
  case invalidArgument
  /// The client is not authorized for this command (send `request` first; root or the group only).
  case notAuthorized
  /// The line exceeded the maximum request length (64 KiB); it was discarded.
  case lineTooLong
  /// The server already serves the maximum number of clients; the connection is closed.
  case tooManyClients
  /// No fix yet, so there is no current location (e.g. for `center`).
  case noFix
  /// The command needs a replay backend and the daemon runs another one.
  case notReplay
  /// No annotation with this id.
  case notFound
  /// The map would exceed its annotation limits (count or bytes of text; the message gives
  /// both limits), or a reply would be too large for a client to receive.
  case limitExceeded
  /// The change was made and is in effect, but saving the map state failed (disk full, I/O
  /// error, no file descriptors): it would be lost at a restart unless a later save succeeds.
  /// Every later change retries the save, and so does shutdown.
  case notSaved
  /// The backend or service cannot do this now (e.g. gpsd unreachable).
  case unavailable
  /// A bug or unexpected failure in the daemon.
  case `internal`
}

/// Why a request line was rejected before reaching a handler.
public struct ProtocolError: Error, Sendable, Hashable {
  /// The stable error code.
  public var code: ErrorCode
  /// What went wrong and what to do, for people.
  public var message: String
  /// The request id, when the line was an object with a usable `"id"`.
  public var id: RequestID?

  /// Creates a protocol error.
  public init(_ code: ErrorCode, _ message: String, id: RequestID? = nil) {
    self.code = code
    self.message = message
    self.id = id
  }
}

extension Request {
  /// The maximum length of a request line, bytes, without the newline (64 KiB).
  public static let maximumLineLength = 64 * 1024

  /// Parses one request line (without its `\n`; a trailing `\r` is ignored).
  ///
  /// - Throws: ``ProtocolError`` with `malformedJSON` (not a JSON object), `unknownCommand`
  ///   (missing or unknown `"cmd"`) or `invalidArgument` (missing, mistyped, out-of-range or unknown
  ///   member); the error carries the request's id when one could be read.
  public static func parse(_ line: [UInt8]) throws(ProtocolError) -> Request {
    var bytes = line
    if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
    let value: JSONValue
    let idText: [UInt8]?
    do {
      (value, idText) = try JSONValue.parse(bytes, textOfMember: "id")
    } catch {
      throw ProtocolError(
        .malformedJSON,
        "the line is not valid JSON (at byte \(error.offset): \(error.reason)): send one JSON object per line")
    }
    return try parse(value, idText: idText)
  }

  /// The filters of `start` and `watch`: `distanceFilter` (m), `minInterval` (s), `desiredAccuracy` (m).
  fileprivate static func filter(_ reader: inout ArgumentReader) throws(ProtocolError) -> LocationFilter {
    LocationFilter(
      distanceFilter: try reader.optionalNumber("distanceFilter", in: 0...1.0e7, unit: "metres"),
      minimumInterval: try reader.optionalNumber("minInterval", in: 0...86_400, unit: "seconds"),
      desiredAccuracy: try reader.optionalNumber("desiredAccuracy", in: 0.001...1.0e7, unit: "metres"))
  }

  /// Validates a decoded JSON value as a request. See ``parse(_:)-([UInt8])``.
  ///
  /// - Throws: ``ProtocolError`` as ``parse(_:)-([UInt8])`` does (except `malformedJSON` for bad syntax).
  public static func parse(_ value: JSONValue) throws(ProtocolError) -> Request {
    try parse(value, idText: nil)
  }

  /// As ``parse(_:)-(JSONValue)``; `idText` is the text of the `"id"` as the line wrote it,
  /// which then becomes the id (``RequestID/numberText(_:)``, ``RequestID/stringText(_:)``).
  static func parse(_ value: JSONValue, idText: [UInt8]?) throws(ProtocolError) -> Request {
    guard let members = value.objectMembers else {
      throw ProtocolError(
        .malformedJSON, "a request must be a JSON object such as {\"cmd\":\"status\"}")
    }
    var reader = ArgumentReader(members: members)
    var id = try reader.readID()
    if let idText, let given = id {
      // The limit is on the text as written (a string's without its quotes): that is what comes
      // back in the reply.
      let isString: Bool
      if case .string = given { isString = true } else { isString = false }
      guard idText.count - (isString ? 2 : 0) <= 256 else {
        throw ProtocolError(.invalidArgument, "\"id\" must be a string or a number, at most 256 bytes as written")
      }
      let text = String(decoding: idText, as: UTF8.self)
      id = isString ? .stringText(text) : .numberText(text)
      reader.id = id
    }
    if case .number(let number) = id, !number.isFinite {
      throw ProtocolError(.invalidArgument, "\"id\" must be a number within Double's range, or a string")
    }
    guard let cmdValue = reader.take("cmd") else {
      throw ProtocolError(
        .unknownCommand, "the request has no \"cmd\" member: add e.g. \"cmd\":\"status\"", id: id)
    }
    guard let cmd = cmdValue.stringValue else {
      throw ProtocolError(.unknownCommand, "\"cmd\" must be a string such as \"status\"", id: id)
    }
    let command: Command
    switch cmd {
    case "request": command = .requestAuthorization
    case "start":
      command = .start(try Self.filter(&reader))
    case "stop": command = .stop
    case "status": command = .status
    case "location": command = .location
    case "watch":
      command = .watch(
        enable: try reader.optionalBool("enable") ?? true, coalesce: try reader.optionalBool("coalesce") ?? true,
        options: try Self.filter(&reader))
    case "center": command = .centerOnLocation
    case "setCenter": command = .setCenter(try reader.coordinate())
    case "zoom": command = .zoom(try reader.number("zoom", in: 0...22, unit: "zoom level"))
    case "mode":
      let name = try reader.string("mode", maxBytes: 64)
      guard let mode = UserTrackingMode(rawValue: name) else {
        throw reader.error(
          "\"mode\" must be one of none, follow, followWithHeading (got \"\(name)\")")
      }
      command = .mode(mode)
    case "annotate":
      guard let object = reader.take("annotation"), let members = object.objectMembers else {
        throw reader.error(
          "missing \"annotation\": an object {\"id\":..,\"lat\":..,\"lon\":..,\"title\":..}")
      }
      var inner = ArgumentReader(members: members, id: id, context: "annotation.")
      let annotationID = try inner.string("id", maxBytes: 256, key: "annotation id")
      let coordinate = try inner.coordinate()
      let title = try inner.optionalString("title", maxBytes: 1024) ?? ""
      let subtitle = try inner.optionalString("subtitle", maxBytes: 1024)
      let kind = try inner.optionalString("kind", maxBytes: 64)
      try inner.rejectLeftovers(command: cmd)
      command = .annotate(
        Annotation(
          id: annotationID, coordinate: coordinate, title: title, subtitle: subtitle, kind: kind))
    case "remove":
      command = .removeAnnotation(
        id: try reader.string("annotation", maxBytes: 256, key: "annotation id"))
    case "map":
      let name = try reader.optionalString("format", maxBytes: 16) ?? "json"
      guard let format = MapFormat(rawValue: name) else {
        throw reader.error("\"format\" must be one of json, geojson, svg (got \"\(name)\")")
      }
      command = .map(format)
    case "replay":
      let action = try reader.string("action", maxBytes: 16)
      switch action {
      case "pause": command = .replay(.pause)
      case "resume": command = .replay(.resume)
      case "seek":
        command = .replay(
          .seek(seconds: try reader.number("value", in: 0...1.0e9, unit: "seconds")))
      case "speed":
        command = .replay(
          .speed(try reader.number("value", in: 0...1.0e6, unit: "times real time")))
      case "step":
        let epochs = try reader.optionalNumber("value", in: 1...10_000, unit: "epochs") ?? 1
        guard epochs.rounded() == epochs, let count = Int(exactly: epochs) else {
          throw reader.error("\"value\" of step must be a whole number of epochs")
        }
        command = .replay(.step(epochs: count))
      default:
        throw reader.error(
          "\"action\" must be one of pause, resume, seek, speed, step (got \"\(action)\")")
      }
    case "region":
      command = .region(try RegionWire.action(&reader, id: id))
    default:
      throw ProtocolError(
        .unknownCommand,
        "unknown command \"\(cmd)\": use one of request, start, stop, status, location, watch, center, "
          + "setCenter, zoom, mode, annotate, remove, map, replay, region", id: id)
    }
    try reader.rejectLeftovers(command: cmd)
    return Request(id: id, command: command)
  }
}

/// Reads the members of a request object, each at most once, and remembers which are left.
struct ArgumentReader {
  var members: [JSONMember]
  var id: RequestID?
  /// Prefix of member names in messages (`annotation.` inside the annotation object).
  var context = ""

  /// Names of the members taken so far: one left over with such a name is a duplicate.
  var taken: Set<String> = []

  mutating func take(_ key: String) -> JSONValue? {
    guard let index = members.firstIndex(where: { $0.key == key }) else { return nil }
    taken.insert(key)
    return members.remove(at: index).value
  }

  func error(_ message: String) -> ProtocolError {
    ProtocolError(.invalidArgument, message, id: id)
  }

  mutating func readID() throws(ProtocolError) -> RequestID? {
    guard let value = take("id") else { return nil }
    switch value {
    case .null: return nil
    case .string(let string) where string.utf8.count <= 256: id = .string(string)
    case .int(let number): id = .number(Double(number))
    // Not finite only beyond Double's range (1e999): such an id is answered from its text.
    case .double(let number): id = .number(number)
    default: throw error("\"id\" must be a string or a number, at most 256 bytes")
    }
    return id
  }

  mutating func optionalNumber(_ key: String, in range: ClosedRange<Double>, unit: String)
    throws(ProtocolError)
    -> Double?
  {
    guard let value = take(key), value != .null else { return nil }
    guard let number = value.doubleValue else {
      throw error("\"\(context)\(key)\" must be a number (\(unit))")
    }
    // A magnitude beyond a Double's range (1e400) reads as infinity: out of range, not "not a
    // number".
    guard number.isFinite, range.contains(number) else {
      throw error(
        "\"\(context)\(key)\" must be within \(Self.text(range.lowerBound))...\(Self.text(range.upperBound)) \(unit) (got \(Self.text(number)))"
      )
    }
    return number
  }

  /// A number as a person writes it in a message: `-5`, `1000000000`, `0.5`, `1e+300`.
  static func text(_ number: Double) -> String {
    number.isFinite && number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : "\(number)"
  }

  /// A number whose range another part checks (the region engine), read as any finite value:
  /// a missing or non-finite one is refused with `rule`, what that part allows ("a finite radius
  /// in (0, 1000000] metres"), not with the whole range of a Double.
  mutating func optionalNumber(_ key: String, unit: String, rule: String) throws(ProtocolError)
    -> Double?
  {
    guard let value = take(key), value != .null else { return nil }
    guard let number = value.doubleValue else {
      throw error("\"\(context)\(key)\" must be a number (\(unit))")
    }
    guard number.isFinite else {
      throw error("\"\(context)\(key)\" must be \(rule) (got \(Self.text(number)))")
    }
    return number
  }

  /// ``optionalNumber(_:unit:rule:)`` for a member that must be there.
  mutating func number(_ key: String, unit: String, rule: String) throws(ProtocolError) -> Double {
    guard let number = try optionalNumber(key, unit: unit, rule: rule) else {
      throw error("missing \"\(context)\(key)\": \(rule)")
    }
    return number
  }

  mutating func number(_ key: String, in range: ClosedRange<Double>, unit: String)
    throws(ProtocolError) -> Double
  {
    guard let number = try optionalNumber(key, in: range, unit: unit) else {
      throw error(
        "missing \"\(context)\(key)\": a number (\(unit)) within \(Self.text(range.lowerBound))...\(Self.text(range.upperBound))"
      )
    }
    return number
  }

  mutating func optionalBool(_ key: String) throws(ProtocolError) -> Bool? {
    guard let value = take(key), value != .null else { return nil }
    guard let bool = value.boolValue else {
      throw error("\"\(context)\(key)\" must be true or false")
    }
    return bool
  }

  mutating func optionalString(_ key: String, maxBytes: Int, key name: String? = nil)
    throws(ProtocolError)
    -> String?
  {
    guard let value = take(key), value != .null else { return nil }
    guard let string = value.stringValue else {
      throw error("\"\(context)\(key)\" must be a string")
    }
    guard string.utf8.count <= maxBytes else {
      throw error("\"\(context)\(key)\" is longer than \(maxBytes) bytes")
    }
    return string
  }

  mutating func string(_ key: String, maxBytes: Int, key name: String? = nil) throws(ProtocolError)
    -> String
  {
    let detail = name.map { " (\($0))" } ?? ""
    guard let string = try optionalString(key, maxBytes: maxBytes) else {
      throw error("missing \"\(context)\(key)\": a non-empty string\(detail)")
    }
    guard !string.isEmpty else { throw error("\"\(context)\(key)\" is empty: give a non-empty string\(detail)") }
    return string
  }

  mutating func coordinate() throws(ProtocolError) -> Coordinate {
    let latitude = try number("lat", in: -90...90, unit: "degrees WGS84")
    let longitude = try number("lon", in: -180...180, unit: "degrees WGS84")
    return Coordinate(latitude: latitude, longitude: longitude)
  }

  func rejectLeftovers(command: String) throws(ProtocolError) {
    guard let extra = members.first else { return }
    if taken.contains(extra.key) {
      // RFC 8259 section 4 leaves duplicate names undefined; a request may not rely on which wins.
      throw error("duplicate member \"\(context)\(extra.key)\": give each member once")
    }
    throw error(
      "unknown member \"\(context)\(extra.key)\" for command \"\(command)\": see docs/PROTOCOL.md")
  }
}
