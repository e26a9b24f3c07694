import JSON
import LocationModel

/// The saved form of a monitor's regions (``RegionMonitor/persisted()``), version 1:
///
/// ```json
/// {"version":1,"regions":[
///   {"id":"home","title":"Home","notifyOnEntry":true,"notifyOnExit":true,"dwell":300,
///    "shape":{"type":"circle","center":[13.405,52.52],"radius":150},
///    "state":"inside","since":1764500000000,"dwellFired":false},
///   {"id":"park","title":null,"notifyOnEntry":true,"notifyOnExit":false,"dwell":null,
///    "shape":{"type":"polygon","exterior":[[13.40,52.51],[13.41,52.51],[13.41,52.52]],"holes":[]},
///    "state":"unknown","since":null,"dwellFired":false}]}
/// ```
///
/// Positions are `[longitude, latitude]` in degrees, as in GeoJSON; rings are open (no repeated
/// closing position). Regions are sorted by id. Numbers are written in the shortest form that
/// reads back to the same `Double`, so a round trip is exact.
extension RegionMonitor {
  /// The document format version written by ``persisted()`` and read by
  /// ``init(restoring:configuration:)``.
  public static let documentVersion = 1

  /// The regions and their states as a versioned JSON document (see above): every region with
  /// its state, the time of the transition into it (`since`, ms since 1970 UTC, `null` when not
  /// known) and whether its dwell event has fired during the current stay.
  public func persisted() -> JSONValue {
    var regions: [JSONValue] = []
    let sorted = entries.compactMap { $0 }.sorted {
      $0.region.id.unicodeScalars.lexicographicallyPrecedes($1.region.id.unicodeScalars)
    }
    regions.reserveCapacity(sorted.count)
    for entry in sorted {
      let region = entry.region
      regions.append(
        .object([
          JSONMember("id", .string(region.id)), JSONMember("title", .string(region.title)),
          JSONMember("notifyOnEntry", .bool(region.notifyOnEntry)),
          JSONMember("notifyOnExit", .bool(region.notifyOnExit)), JSONMember("dwell", .number(region.dwell)),
          JSONMember("shape", Self.json(region.shape)), JSONMember("state", .string(entry.state.rawValue)),
          JSONMember("since", entry.since.map { .int($0) } ?? .null), JSONMember("dwellFired", .bool(entry.dwellFired)),
        ]))
    }
    return .object([JSONMember("version", .int(Int64(Self.documentVersion))), JSONMember("regions", .array(regions))])
  }

  static func json(_ coordinate: Coordinate) -> JSONValue {
    .array([.double(coordinate.longitude), .double(coordinate.latitude)])
  }

  static func json(_ shape: RegionShape) -> JSONValue {
    switch shape {
    case .circle(let center, let radius):
      return .object([
        JSONMember("type", "circle"), JSONMember("center", json(center)), JSONMember("radius", .double(radius)),
      ])
    case .polygon(let exterior, let holes):
      return .object([
        JSONMember("type", "polygon"), JSONMember("exterior", .array(exterior.map(json))),
        JSONMember("holes", .array(holes.map { .array($0.map(json)) })),
      ])
    }
  }

  /// Restores a monitor from a document written by ``persisted()``, with every region's saved
  /// state (see ``RegionMonitor`` for what a restored state means).
  ///
  /// Everything is checked: the version, every member's type, no unknown or missing member, no
  /// duplicate id, and every region with the same rules as ``Region/init(id:title:shape:notifyOnEntry:notifyOnExit:dwell:)``.
  /// Nothing is restored unless everything is valid.
  ///
  /// - Throws: ``RegionError/invalidDocument(reason:)`` naming the region (by position and id)
  ///   and what is wrong.
  public init(restoring document: JSONValue, configuration: RegionMonitorConfiguration = .default)
    throws(RegionError)
  {
    self.init(configuration: configuration)
    guard let members = document.objectMembers else { throw .invalidDocument(reason: "not a JSON object") }
    try Self.onlyKeys(["version", "regions"], in: members, at: "the document")
    guard let version = document["version"]?.intValue else {
      throw .invalidDocument(reason: "missing or non-integer \"version\"")
    }
    guard version == Self.documentVersion else {
      throw .invalidDocument(reason: "version \(version) is not supported (this build reads version \(Self.documentVersion))")
    }
    guard let list = document["regions"]?.arrayValue else {
      throw .invalidDocument(reason: "missing \"regions\" array")
    }
    var restored: [Entry] = []
    var seen: Set<String> = []
    for (position, item) in list.enumerated() {
      let entry: Entry
      do {
        entry = try Self.entry(from: item)
      } catch {
        let id = item["id"]?.stringValue.map { " (id \"\($0.prefix(64))\")" } ?? ""
        let reason: String
        if case .invalidDocument(let inner) = error { reason = inner } else { reason = error.description }
        throw .invalidDocument(reason: "region \(position)\(id): \(reason)")
      }
      guard seen.insert(entry.region.id).inserted else {
        throw .invalidDocument(reason: "region \(position): duplicate id \"\(entry.region.id.prefix(64))\"")
      }
      restored.append(entry)
    }
    for entry in restored { insert(entry) }
  }

  static func onlyKeys(_ allowed: Set<String>, in members: [JSONMember], at place: String) throws(RegionError) {
    var seen: Set<String> = []
    for member in members {
      guard allowed.contains(member.key) else {
        throw .invalidDocument(reason: "unknown member \"\(member.key.prefix(64))\" in \(place)")
      }
      guard seen.insert(member.key).inserted else {
        throw .invalidDocument(reason: "duplicate member \"\(member.key.prefix(64))\" in \(place)")
      }
    }
  }

  static func entry(from item: JSONValue) throws(RegionError) -> Entry {
    guard let members = item.objectMembers else { throw .invalidDocument(reason: "not an object") }
    try onlyKeys(
      ["id", "title", "notifyOnEntry", "notifyOnExit", "dwell", "shape", "state", "since", "dwellFired"],
      in: members, at: "the region")
    guard let id = item["id"]?.stringValue else { throw .invalidDocument(reason: "missing string \"id\"") }
    let title: String?
    switch item["title"] {
    case nil, .null?: title = nil
    case .string(let value)?: title = value
    default: throw .invalidDocument(reason: "\"title\" is not a string or null")
    }
    func flag(_ key: String) throws(RegionError) -> Bool {
      guard let value = item[key]?.boolValue else { throw .invalidDocument(reason: "missing Boolean \"\(key)\"") }
      return value
    }
    let notifyOnEntry = try flag("notifyOnEntry")
    let notifyOnExit = try flag("notifyOnExit")
    let dwell: Double?
    switch item["dwell"] {
    case nil, .null?: dwell = nil
    case let value?:
      guard let seconds = value.doubleValue else { throw .invalidDocument(reason: "\"dwell\" is not a number or null") }
      dwell = seconds
    }
    guard let shapeValue = item["shape"] else { throw .invalidDocument(reason: "missing \"shape\"") }
    let shape = try Self.shape(from: shapeValue)
    let region = try Region(
      id: id, title: title, shape: shape, notifyOnEntry: notifyOnEntry, notifyOnExit: notifyOnExit, dwell: dwell)
    guard let stateName = item["state"]?.stringValue, let state = RegionState(rawValue: stateName) else {
      throw .invalidDocument(reason: "\"state\" is not one of \"unknown\", \"inside\", \"outside\"")
    }
    let since: Int64?
    switch item["since"] {
    case nil, .null?: since = nil
    case .int(let value)?: since = value
    default: throw .invalidDocument(reason: "\"since\" is not an integer (ms since 1970) or null")
    }
    let dwellFired: Bool
    switch item["dwellFired"] {
    case nil: dwellFired = false
    case .bool(let value)?: dwellFired = value
    default: throw .invalidDocument(reason: "\"dwellFired\" is not a Boolean")
    }
    var entry = Entry(region: region)
    entry.state = state
    entry.since = state == .unknown ? nil : since
    entry.dwellFired = state == .inside && dwellFired
    return entry
  }

  static func coordinate(from value: JSONValue, _ place: String) throws(RegionError) -> Coordinate {
    guard let pair = value.arrayValue, pair.count == 2, let longitude = pair[0].doubleValue,
      let latitude = pair[1].doubleValue
    else {
      throw .invalidDocument(reason: "\(place) is not a [longitude, latitude] pair of numbers")
    }
    return Coordinate(latitude: latitude, longitude: longitude)
  }

  static func shape(from value: JSONValue) throws(RegionError) -> RegionShape {
    guard let members = value.objectMembers else { throw .invalidDocument(reason: "\"shape\" is not an object") }
    switch value["type"]?.stringValue {
    case "circle":
      try onlyKeys(["type", "center", "radius"], in: members, at: "the circle")
      guard let centerValue = value["center"] else { throw .invalidDocument(reason: "circle without \"center\"") }
      let center = try coordinate(from: centerValue, "the circle's \"center\"")
      guard let radius = value["radius"]?.doubleValue else {
        throw .invalidDocument(reason: "circle without a numeric \"radius\"")
      }
      return .circle(center: center, radius: radius)
    case "polygon":
      try onlyKeys(["type", "exterior", "holes"], in: members, at: "the polygon")
      func ring(_ value: JSONValue?, _ name: String) throws(RegionError) -> [Coordinate] {
        guard let positions = value?.arrayValue else { throw .invalidDocument(reason: "\(name) is not an array") }
        var ring: [Coordinate] = []
        ring.reserveCapacity(positions.count)
        for (index, position) in positions.enumerated() {
          ring.append(try coordinate(from: position, "\(name) position \(index)"))
        }
        return ring
      }
      let exterior = try ring(value["exterior"], "the exterior ring")
      guard let holeValues = value["holes"]?.arrayValue else {
        throw .invalidDocument(reason: "polygon without a \"holes\" array")
      }
      var holes: [[Coordinate]] = []
      for (index, hole) in holeValues.enumerated() { holes.append(try ring(hole, "hole \(index + 1)")) }
      return .polygon(exterior: exterior, holes: holes)
    default:
      throw .invalidDocument(reason: "\"shape\" has no \"type\" of \"circle\" or \"polygon\"")
    }
  }
}
