import LocationModel
import Regions

/// The answer to one request: a JSON object with a `"class"`, or an error.
///
/// The server adds the request's `"id"` (when it had one) after `"class"` and writes the reply
/// as one line. Replies are never dropped, however slow the client.
public enum Reply: Sendable, Hashable {
  /// The longest reply line a client may be sent, bytes without the newline: 1 MiB (1,048,576),
  /// the socket server's backlog bound for one client. The service refuses a request whose
  /// reply would be longer with `limitExceeded` before building it.
  public static let maximumBytes = 1 << 20

  /// A success reply: `{"class":CLASS,"id":..,MEMBERS...}`.
  case object(class: String, members: [JSONMember])
  /// An error reply: `{"class":"ERROR","id":..,"code":CODE,"message":MESSAGE}`.
  case error(ErrorCode, message: String)

  /// The reply as one JSON object (without newline), with `id` inserted after `"class"`.
  public func json(id: RequestID?) -> JSONValue {
    var members: [JSONMember]
    switch self {
    case .object(let className, let body):
      members = [JSONMember("class", .string(className))]
      if let id { members.append(JSONMember("id", id.json)) }
      members.append(contentsOf: body.filter { $0.key != "class" && $0.key != "id" })
    case .error(let code, let message):
      members = [JSONMember("class", "ERROR")]
      if let id { members.append(JSONMember("id", id.json)) }
      members.append(JSONMember("code", .string(code.rawValue)))
      members.append(JSONMember("message", .string(message)))
    }
    return .object(members)
  }

  /// `{"class":"OK","cmd":NAME}`: a command that has nothing else to say succeeded.
  public static func ok(_ command: Command) -> Reply {
    .object(class: "OK", members: [JSONMember("cmd", .string(command.name))])
  }

  /// `{"class":"AUTHORIZATION","authorization":STATUS}`: the answer to `request`.
  public static func authorization(_ status: AuthorizationStatus) -> Reply {
    .object(
      class: "AUTHORIZATION", members: [JSONMember("authorization", .string(status.rawValue))])
  }

  /// `{"class":"TRACKING","tracking":BOOL,"distanceFilter":..,"minInterval":..,"desiredAccuracy":..}`:
  /// the answer to `start` and `stop`; filters in metres and seconds, `null` when not set.
  ///
  /// `tracking` is the caller's own tracking; `backendActive`, when given, whether the daemon's
  /// backend runs (for this or any other client) after the command.
  public static func tracking(
    _ tracking: Bool, options: LocationFilter = LocationFilter(), backendActive: Bool? = nil
  )
    -> Reply
  {
    var members = [
      JSONMember("tracking", .bool(tracking)),
      JSONMember("distanceFilter", .number(options.distanceFilter)),
      JSONMember("minInterval", .number(options.minimumInterval)),
      JSONMember("desiredAccuracy", .number(options.desiredAccuracy)),
    ]
    if let backendActive { members.append(JSONMember("backendActive", .bool(backendActive))) }
    return .object(class: "TRACKING", members: members)
  }

  /// `{"class":"STATUS","authorization":..,"tracking":..,"userTracking":..,"backendActive":..,
  /// "backend":{"uri":..,"state":..,"detail":..},"initial":TPV|null,"current":TPV|null,
  /// "age":S|null,"stale":BOOL,"clients":N,"http":{..}?,"storage":{..}?}`: the answer to `status`.
  ///
  /// - Parameters:
  ///   - authorization: the asking client's authorization status.
  ///   - tracking: whether the asking client tracks: its user ran `start` (until `stop`) or its
  ///     connection watches.
  ///   - userTracking: what tracks for the caller's user, `{"uid":U,"start":BOOL,"watches":N,
  ///     "thisConnection":BOOL}` (its `start` in force, how many of its connections watch, this
  ///     one included, and whether this one does); `nil` (left out) when not authorized.
  ///   - backendActive: whether the daemon's backend runs, for this or any other client.
  ///   - backendURI: e.g. `gpsd://localhost:2947`.
  ///   - backendState: the backend's last ``BackendStatus``.
  ///   - detail: the backend's last human-readable detail, if any.
  ///   - initial: the first location with a position since tracking started, as a TPV object
  ///     (see ``EventEncoding/tpv(_:)``), or `nil`.
  ///   - current: the newest location with a position, as a TPV object, or `nil`.
  ///   - clients: the number of connected clients.
  ///   - http: `{"url":..,"tokenFile":..}` when the HTTP front-end runs (`--http`); left out otherwise.
  ///   - storage: what the daemon's disk state is, `{"track":{..},"queue":{..}}` (docs/PROTOCOL.md:
  ///     whether the track store records, why not, and whether the MQTT queue is on disk or in
  ///     memory); left out when not authorized or when the daemon keeps nothing on disk.
  ///   - age: seconds since the current location arrived, on the daemon's monotonic clock (not
  ///     the fix's own time, which is on its source's timeline); `null` without one.
  ///   - stale: whether the current location is stale: the source's newest location had no
  ///     position, or `age` exceeds ``StaleLimit/seconds``; `nil` = the age rule alone.
  public static func status(
    authorization: AuthorizationStatus, tracking: Bool, userTracking: JSONValue? = nil, backendActive: Bool,
    backendURI: String,
    backendState: BackendStatus,
    detail: String? = nil, initial: JSONValue?, current: JSONValue?, clients: Int, http: JSONValue? = nil,
    storage: JSONValue? = nil, age: Double? = nil, stale: Bool? = nil
  ) -> Reply {
    .object(
      class: "STATUS",
      members: [
        JSONMember("authorization", .string(authorization.rawValue)),
        JSONMember("tracking", .bool(tracking)),
      ] + (userTracking.map { [JSONMember("userTracking", $0)] } ?? []) + [
        JSONMember("backendActive", .bool(backendActive)),
        JSONMember(
          "backend",
          [
            "uri": .string(backendURI), "state": .string(backendState.rawValue),
            "detail": .string(detail),
          ]),
        JSONMember("initial", initial ?? .null),
        JSONMember("current", current ?? .null),
      ] + StaleLimit.members(age: age, stale: stale) + [
        JSONMember("clients", .int(Int64(clients))),
      ] + (http.map { [JSONMember("http", $0)] } ?? [])
        + (storage.map { [JSONMember("storage", $0)] } ?? []))
  }

  /// `{"class":"LOCATION","initial":TPV|null,"current":TPV|null,"age":S|null,"stale":BOOL}`: the
  /// answer to `location`; `age` and `stale` as in ``status(authorization:tracking:userTracking:backendActive:backendURI:backendState:detail:initial:current:clients:http:storage:age:stale:)``.
  public static func location(initial: JSONValue?, current: JSONValue?, age: Double? = nil, stale: Bool? = nil) -> Reply {
    .object(
      class: "LOCATION",
      members: [
        JSONMember("initial", initial ?? .null), JSONMember("current", current ?? .null),
      ] + StaleLimit.members(age: age, stale: stale))
  }

  /// `{"class":"WATCH","enable":BOOL}`: the answer to `watch`.
  public static func watch(enabled: Bool) -> Reply {
    .object(class: "WATCH", members: [JSONMember("enable", .bool(enabled))])
  }

  /// `{"class":"MAP","format":"geojson","geojson":{..}}`: the answer to `map` with format geojson;
  /// `geojson` is an encoded RFC 7946 FeatureCollection, inserted verbatim.
  public static func mapGeoJSON(_ featureCollection: [UInt8]) -> Reply {
    .object(
      class: "MAP",
      members: [JSONMember("format", "geojson"), JSONMember("geojson", .raw(featureCollection))])
  }

  /// `{"class":"MAP","format":"svg","svg":"<svg ..."}`: the answer to `map` with format svg.
  public static func mapSVG(_ document: String) -> Reply {
    .object(
      class: "MAP", members: [JSONMember("format", "svg"), JSONMember("svg", .string(document))])
  }

  /// `{"class":"REPLAY","state":..,"speed":..,"position":..}`: the answer to `replay`.
  ///
  /// - Parameters:
  ///   - state: `playing`, `paused` or `endOfData`.
  ///   - speed: the speed factor (1 = real time).
  ///   - position: seconds since the first epoch of the log, or `nil` before the first epoch.
  public static func replay(state: String, speed: Double, position: Double?) -> Reply {
    .object(
      class: "REPLAY",
      members: [
        JSONMember("state", .string(state)), JSONMember("speed", .number(speed)),
        JSONMember("position", .number(position)),
      ])
  }
}

/// An unsolicited message pushed to a client that sent `watch` (a location, a backend status change).
///
/// A coalescible event (``coalescingKey`` not `nil`) waiting in a slow client's queue is replaced
/// by the next event with the same key; the delivered one then carries `"missed":N`, the number of
/// events of that key the client did not get. Other events are never dropped.
public struct Event: Sendable, Hashable {
  /// The event object (`{"class":...}`), usually encoded once and shared by all clients.
  public var body: JSONValue
  /// Events with the same key replace each other in a slow client's queue; `nil` = never replaced.
  public var coalescingKey: String?
  /// For a fix's TPV event from the hub, the fix it was encoded from, so that a front-end that
  /// writes fixes in another form (NMEA sentences, GeoClue Location objects, OwnTracks messages)
  /// takes the typed value and never parses `body`; `nil` for every other event.
  public var location: Location?
  /// For a `REGION` event, the transition it was encoded from (typed, as ``location`` for a
  /// fix); `nil` for every other event.
  public var transition: RegionTransition?

  /// Creates an event.
  public init(
    body: JSONValue, coalescingKey: String? = nil, location: Location? = nil,
    transition: RegionTransition? = nil
  ) {
    self.body = body
    self.coalescingKey = coalescingKey
    self.location = location
    self.transition = transition
  }

  /// A location event: a gpsd TPV object (see ``EventEncoding/tpv(_:)``), coalesced under `"TPV"`.
  public static func location(_ tpv: JSONValue) -> Event {
    Event(body: tpv, coalescingKey: "TPV")
  }

  /// `{"class":"BACKEND","uri":..,"state":..,"detail":..}`: a backend status change; never coalesced.
  ///
  /// A replay without loop sends `state` `endOfData` once at the end of its log; `locationctl watch`
  /// exits 0 on it.
  public static func backend(uri: String, state: BackendStatus, detail: String?) -> Event {
    Event(
      body: [
        "class": "BACKEND", "uri": .string(uri), "state": .string(state.rawValue),
        "detail": .string(detail),
      ])
  }

  /// `{"class":"STALE","stale":BOOL,"age":SECONDS}`: the current fix became stale (`true`: no new
  /// fix with a position for more than the stale limit, ``StaleLimit/seconds``; `age` is the
  /// seconds since the current fix arrived, on the daemon's monotonic clock) or fresh again
  /// (`false`, sent with the first fix after a stale one; `age` 0). Never coalesced.
  public static func stale(_ stale: Bool, age: Double) -> Event {
    Event(body: ["class": "STALE", "stale": .bool(stale), "age": .number((age * 10).rounded() / 10)])
  }

  /// `{"class":"WARNING","message":..}`: a non-fatal backend error (a bad log line); never coalesced.
  public static func warning(_ message: String) -> Event {
    Event(body: ["class": "WARNING", "message": .string(message)])
  }
}

/// An ``Event`` encoded once, to be given to many clients: the JSON object, the same bytes with
/// the line's `\n`, and the coalescing key.
public struct EncodedEvent: Sendable {
  /// The event object as UTF-8 JSON, no newline.
  public let body: [UInt8]
  /// `body` followed by `\n`: what a line-oriented transport writes.
  public let line: [UInt8]
  /// ``Event/coalescingKey``.
  public let coalescingKey: String?
  /// ``Event/location``: the fix a TPV event was encoded from, `nil` for other events.
  public let location: Location?
  /// ``Event/transition``: the transition a `REGION` event was encoded from, `nil` for others.
  public let transition: RegionTransition?

  /// Encodes `event`.
  public init(_ event: Event) {
    body = event.body.encoded
    var line = body
    line.append(UInt8(ascii: "\n"))
    self.line = line
    coalescingKey = event.coalescingKey
    location = event.location
    transition = event.transition
  }
}

/// Encodes locations for replies and events.
public enum EventEncoding {
  /// A location as a gpsd TPV object (`GPSDJSON.appendTPV`) extended with its provenance:
  /// `"backend"` (URI), `"source"` (device or file, when known), `"line"` (replays: 1-based line
  /// of the epoch's first sentence), `"simulated"` (Bool) and, when a week-rollover floor moved
  /// the date, `"rolloverWeeks"` (the GPS weeks added, a multiple of 1024).
  public static func tpv(_ location: Location) -> JSONValue {
    var bytes: [UInt8] = []
    GPSDJSON.appendTPV(location.fix, to: &bytes)
    if bytes.isEmpty { bytes = Array(#"{"class":"TPV"}"#.utf8) }
    var extra = [JSONMember("backend", .string(location.provenance.backend))]
    if let source = location.provenance.source {
      extra.append(JSONMember("source", .string(source)))
    }
    if let line = location.provenance.line { extra.append(JSONMember("line", .int(Int64(line)))) }
    extra.append(JSONMember("simulated", .bool(location.provenance.isSimulated)))
    if let weeks = location.provenance.rolloverWeeks { extra.append(JSONMember("rolloverWeeks", .int(Int64(weeks)))) }
    return .raw(JSONValue.appending(extra, toEncodedObject: bytes))
  }
}

/// When a current fix counts as stale by age: no newer fix with a position arrived for this long
/// (it is stale at once when the source reports an epoch without a position).
public enum StaleLimit {
  /// Seconds, on the daemon's monotonic clock: 5 (five epochs of a 1 Hz receiver, as gpsd's
  /// own no-fix timer).
  public static let seconds: Double = 5

  /// `"age":S|null,"stale":BOOL` as `STATUS` and `LOCATION` give them: `age` in seconds to a
  /// tenth, `stale` as given or, when `nil`, by the age rule alone.
  static func members(age: Double?, stale: Bool?) -> [JSONMember] {
    [
      JSONMember("age", .number(age.map { ($0 * 10).rounded() / 10 })),
      JSONMember("stale", .bool(stale ?? age.map { $0 > seconds } ?? false)),
    ]
  }
}
