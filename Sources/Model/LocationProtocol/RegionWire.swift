import LocationModel
import Regions

/// What a `region` request asks for (`"action"`).
public enum RegionAction: Sendable, Hashable {
  /// `{"cmd":"region","action":"add","region":{REGION}}`: adds the region, or replaces the one
  /// with the same id (its state starts again at `unknown`).
  case add(Region)
  /// `{"cmd":"region","action":"remove","region":ID}`: removes the region with this id.
  case remove(id: String)
  /// `{"cmd":"region","action":"list"}`: every region with its state, sorted by id. With
  /// `"after":ID` only the regions whose id sorts after ID (bytes of UTF-8), and with
  /// `"limit":N` (1...100,000) at most N of them; the reply then says `"more":true|false`.
  case list(after: String? = nil, limit: Int? = nil)
  /// `{"cmd":"region","action":"state","region":ID}`: one region with its state.
  case state(id: String)
}

/// The wire form of regions: the region object of requests and replies, the status object
/// (region plus state), and the `REGION` event. See docs/PROTOCOL.md and docs/regions.md.
///
/// Region object: `{"id":ID,"title":TEXT|null,"circle":{"lat":DEG,"lon":DEG,"radius":M}` or
/// `"polygon":GEOJSON,"dwell":S|null,"notifyOnEntry":BOOL,"notifyOnExit":BOOL}`. In a request the
/// polygon is an RFC 7946 Polygon geometry (positions `[lon, lat]`), or a Feature or
/// FeatureCollection holding exactly one Polygon, parsed by ``RegionGeoJSON/shape(from:)``; in a
/// reply it is always a Polygon geometry with closed rings.
public enum RegionWire {
  /// Longest region id, bytes of UTF-8 (the engine's rule: 1...256 bytes).
  public static let maximumIDBytes = 256
  /// Longest title, bytes of UTF-8.
  public static let maximumTitleBytes = 1024
  /// Largest `"limit"` of a `region` `list` page: 100,000 regions.
  public static let maximumListLimit = 100_000

  /// Parses the members of a `region` request after `cmd`.
  ///
  /// - Throws: ``ProtocolError`` `invalidArgument`: a missing or unknown action or member, or a
  ///   region the engine refuses (its message, e.g. a radius of 0 or a self-intersecting ring).
  static func action(_ reader: inout ArgumentReader, id: RequestID?) throws(ProtocolError)
    -> RegionAction
  {
    let action = try reader.string("action", maxBytes: 16)
    switch action {
    case "add":
      guard let object = reader.take("region"), let members = object.objectMembers else {
        throw reader.error(
          "missing \"region\": an object {\"id\":..,\"circle\":{\"lat\":..,\"lon\":..,\"radius\":..}} "
            + "or {\"id\":..,\"polygon\":{GeoJSON Polygon}}")
      }
      var inner = ArgumentReader(members: members, id: id, context: "region.")
      let region = try parseRegion(&inner)
      try inner.rejectLeftovers(command: "region")
      return .add(region)
    case "remove":
      return .remove(id: try reader.string("region", maxBytes: maximumIDBytes, key: "region id"))
    case "state":
      return .state(id: try reader.string("region", maxBytes: maximumIDBytes, key: "region id"))
    case "list":
      let after = try reader.optionalString("after", maxBytes: maximumIDBytes)
      let limit = try reader.optionalNumber("limit", in: 1...Double(maximumListLimit), unit: "regions")
      if let limit, limit != limit.rounded() {
        throw reader.error("\"limit\" must be a whole number of regions (got \(limit))")
      }
      return .list(after: after, limit: limit.map { Int($0) })
    default:
      throw reader.error("\"action\" must be one of add, remove, list, state (got \"\(action)\")")
    }
  }

  /// The region described by the members of a region object (see the type's discussion).
  static func parseRegion(_ reader: inout ArgumentReader) throws(ProtocolError) -> Region {
    let regionID = try reader.string("id", maxBytes: maximumIDBytes, key: "region id")
    let title = try reader.optionalString("title", maxBytes: maximumTitleBytes)
    // Ranges are the engine's to check, so that its one message says what is allowed; a value
    // that is no finite number is refused here in the same words.
    let dwell = try reader.optionalNumber(
      "dwell", unit: "seconds", rule: "a finite time in (0, \(ArgumentReader.text(Region.maxDwell))] seconds")
    let notifyOnEntry = try reader.optionalBool("notifyOnEntry") ?? true
    let notifyOnExit = try reader.optionalBool("notifyOnExit") ?? true
    let circle = reader.take("circle")
    let polygon = reader.take("polygon")
    let shape: RegionShape
    switch (circle, polygon) {
    case (let circle?, nil):
      guard let members = circle.objectMembers else {
        throw reader.error(
          "\"region.circle\" must be an object {\"lat\":..,\"lon\":..,\"radius\":..}")
      }
      var inner = ArgumentReader(members: members, id: reader.id, context: "region.circle.")
      let center = try inner.coordinate()
      let radius = try inner.number(
        "radius", unit: "metres", rule: "a finite radius in (0, \(ArgumentReader.text(RegionShape.maxRadius))] metres")
      try inner.rejectLeftovers(command: "region")
      shape = .circle(center: center, radius: radius)
    case (nil, let polygon?):
      guard polygon.objectMembers != nil else {
        throw reader.error(
          "\"region.polygon\" must be a GeoJSON object such as {\"type\":\"Polygon\",\"coordinates\":[..]}"
        )
      }
      do {
        shape = try RegionGeoJSON.shape(from: polygon.encoded)
      } catch {
        throw reader.error("\"region.polygon\": \(error)")
      }
    case (.some, .some):
      throw reader.error("give one of \"region.circle\" and \"region.polygon\", not both")
    case (nil, nil):
      throw reader.error(
        "missing \"region.circle\" ({\"lat\":..,\"lon\":..,\"radius\":..}) or \"region.polygon\" (a GeoJSON Polygon)"
      )
    }
    do {
      return try Region(
        id: regionID, title: title, shape: shape, notifyOnEntry: notifyOnEntry,
        notifyOnExit: notifyOnExit,
        dwell: dwell)
    } catch {
      throw reader.error("invalid region \"\(regionID)\": \(error)")
    }
  }

  /// The region object (see the type's discussion): members `id`, `title`, `circle` or
  /// `polygon`, `dwell`, `notifyOnEntry`, `notifyOnExit`, in this order.
  public static func json(_ region: Region) -> JSONValue {
    .object(members(region))
  }

  static func members(_ region: Region) -> [JSONMember] {
    var members = [
      JSONMember("id", .string(region.id)), JSONMember("title", .string(region.title)),
    ]
    switch region.shape {
    case .circle(let center, let radius):
      members.append(
        JSONMember(
          "circle",
          .object([
            JSONMember("lat", .number(center.latitude)),
            JSONMember("lon", .number(center.longitude)),
            JSONMember("radius", .number(radius)),
          ])))
    case .polygon(let exterior, let holes):
      members.append(JSONMember("polygon", polygonGeometry(exterior: exterior, holes: holes)))
    }
    members.append(JSONMember("dwell", .number(region.dwell)))
    members.append(JSONMember("notifyOnEntry", .bool(region.notifyOnEntry)))
    members.append(JSONMember("notifyOnExit", .bool(region.notifyOnExit)))
    return members
  }

  /// An RFC 7946 Polygon geometry: each ring closed (its first position repeated at the end),
  /// positions `[lon, lat]`.
  public static func polygonGeometry(exterior: [Coordinate], holes: [[Coordinate]]) -> JSONValue {
    func ring(_ vertices: [Coordinate]) -> JSONValue {
      var positions = vertices.map {
        JSONValue.array([.number($0.longitude), .number($0.latitude)])
      }
      if let first = positions.first { positions.append(first) }
      return .array(positions)
    }
    return .object([
      JSONMember("type", "Polygon"),
      JSONMember("coordinates", .array([ring(exterior)] + holes.map(ring))),
    ])
  }

  /// The status object: the region object's members followed by `state` (`unknown`, `inside`,
  /// `outside`), `since` (ISO 8601 UTC time of the transition into the state, or `null`),
  /// `distance` (metres from the boundary of the last deciding fix that measured it, negative
  /// inside, or `null`) and `measured` (ISO 8601 UTC time of that fix, on its source's timeline,
  /// or `null` when there is no distance or it was restored from a file): a distance is as old
  /// as `measured`, not the current one.
  public static func json(_ status: RegionStatus) -> JSONValue {
    var members = members(status.region)
    members.append(JSONMember("state", .string(status.state.rawValue)))
    members.append(
      JSONMember("since", status.since.map { .string(GPSDJSON.iso8601(milliseconds: $0)) } ?? .null)
    )
    members.append(JSONMember("distance", .number(status.distanceToBoundary)))
    members.append(
      JSONMember("measured", status.distanceTime.map { .string(GPSDJSON.iso8601(milliseconds: $0)) } ?? .null))
    return .object(members)
  }
}

extension Reply {
  /// `{"class":"REGION","region":STATUS}` (plus `"replaced":BOOL` after `add`, `"removed":true`
  /// after `remove`): the answer to `region` `add`, `remove` and `state`; STATUS is
  /// ``RegionWire/json(_:)-(RegionStatus)``.
  public static func region(_ status: RegionStatus, replaced: Bool? = nil, removed: Bool = false)
    -> Reply
  {
    var members = [JSONMember("region", RegionWire.json(status))]
    if let replaced { members.append(JSONMember("replaced", .bool(replaced))) }
    if removed { members.append(JSONMember("removed", true)) }
    return .object(class: "REGION", members: members)
  }

  /// `{"class":"REGIONS","regions":[STATUS...]}`: the answer to `region` `list`, sorted by id;
  /// a page (`after` or `limit` asked) adds `"more":BOOL`, whether regions follow it.
  public static func regions(_ statuses: [RegionStatus], more: Bool? = nil) -> Reply {
    var members = [JSONMember("regions", .array(statuses.map(RegionWire.json)))]
    if let more { members.append(JSONMember("more", .bool(more))) }
    return .object(class: "REGIONS", members: members)
  }

  /// Least bytes of a region's status object (``RegionWire/json(_:)-(RegionStatus)``) from its
  /// counts alone: the fixed members (over 120 bytes), id, title, and for a polygon at least 6
  /// bytes a position (`[1,2],`). For refusing a list before encoding it.
  public static func estimatedBytes(_ status: RegionStatus) -> Int {
    let region = status.region
    var bytes = 126 + region.id.utf8.count + (region.title?.utf8.count ?? 0)
    if case .polygon(let exterior, let holes) = region.shape {
      bytes += 40 + 6 * holes.reduce(exterior.count + 1) { $0 + $1.count + 1 }
    }
    return bytes
  }
}

extension Event {
  /// `{"class":"REGION","region":ID,"event":"enter"|"exit"|"dwell","time":ISO8601,"fix":TPV}`: a
  /// region transition; never coalesced or dropped for a slow client. `time` is the deciding
  /// fix's time (for `dwell`, when the dwell time was reached), written as TPV times are; `fix`
  /// is the deciding fix (for `dwell`, the last fix) as a TPV object (``EventEncoding/tpv(_:)``).
  public static func region(_ transition: RegionTransition) -> Event {
    Event(
      body: .object([
        JSONMember("class", "REGION"), JSONMember("region", .string(transition.id)),
        JSONMember("event", .string(transition.event.rawValue)),
        JSONMember("time", .string(GPSDJSON.iso8601(milliseconds: transition.time))),
        JSONMember("fix", EventEncoding.tpv(transition.location)),
      ]),
      transition: transition)
  }
}
