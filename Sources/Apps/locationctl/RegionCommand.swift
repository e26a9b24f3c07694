import Glibc
import LocationModel
import LocationClient
import LocationProtocol
import Regions
import SystemIO

/// `region add ID circle LAT LON RADIUS | region add ID polygon FILE|- [--dwell S] [--title T]
/// [--no-entry] [--no-exit]`, `region remove ID`, `region list [--after ID] [--limit N]`,
/// `region state ID`.
///
/// A polygon file (RFC 7946 GeoJSON: a Polygon geometry, or a Feature or FeatureCollection with
/// exactly one Polygon; at most ``RegionGeoJSON/maxBytes``) is read and checked here with the
/// daemon's own rules, then sent as a compact Polygon geometry; a polygon whose request would
/// exceed the socket's line limit (``Request/maximumLineLength``) is refused here with the limit,
/// so nothing is sent that the daemon would cut off. Any refusal changes nothing.
func runRegion(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  let list = try ArgumentList(
    arguments, valued: ["--dwell", "--title", "--after", "--limit"], flags: ["--no-entry", "--no-exit"])
  let positional = list.positional
  guard let action = positional.first else { throw UsageError(regionUsage) }
  func noOptions() throws {
    guard list.values.isEmpty, list.flags.isEmpty else {
      throw UsageError(
        "region \(action) takes no options (--dwell, --title, --no-entry, --no-exit are for add)")
    }
  }
  switch (action, positional.count) {
  case ("list", 1):
    guard list.flags.isEmpty, Set(list.values.keys).isSubset(of: ["--after", "--limit"]) else {
      throw UsageError("region list takes only --after ID and --limit N")
    }
    var members = [JSONMember("action", "list")]
    if let after = list.values["--after"] { members.append(JSONMember("after", .string(after))) }
    if let text = list.values["--limit"] {
      // As the protocol spells it: digits only, 1...100000 (a sign, a fraction or an exponent is
      // refused here rather than rounded or passed on).
      guard let limit = DecimalText.wholeNumber(text, as: Int.self), (1...100_000).contains(limit) else {
        throw UsageError("--limit needs a whole number of regions from 1 to 100000, got \(text)")
      }
      members.append(JSONMember("limit", .number(Double(limit))))
    }
    guard members.count > 1 else { return try listAllRegions(options) }
    return try regionCall(options, members, text: Format.regions)
  case ("state", 2), ("remove", 2):
    try noOptions()
    guard list.values["--after"] == nil, list.values["--limit"] == nil else {
      throw UsageError("region \(action) takes no options (--after and --limit are for list)")
    }
    return try regionCall(
      options,
      [JSONMember("action", .string(action)), JSONMember("region", .string(positional[1]))],
      text: Format.region)
  case ("add", _):
    guard positional.count >= 3 else { throw UsageError(regionUsage) }
    var region: [JSONMember] = [JSONMember("id", .string(positional[1]))]
    if let title = list.values["--title"] { region.append(JSONMember("title", .string(title))) }
    switch (positional[2], positional.count) {
    case ("circle", 6):
      let latitude = try parseNumber(positional[3], "LAT")
      let longitude = try parseNumber(positional[4], "LON")
      let radius = try parseNumber(positional[5], "RADIUS")
      region.append(
        JSONMember(
          "circle",
          .object([
            JSONMember("lat", .number(latitude)), JSONMember("lon", .number(longitude)),
            JSONMember("radius", .number(radius)),
          ])))
    case ("polygon", 4):
      region.append(JSONMember("polygon", try polygonGeometry(file: positional[3])))
    default:
      throw UsageError(regionUsage)
    }
    if let dwell = try list.number("--dwell") { region.append(JSONMember("dwell", .number(dwell))) }
    if list.flags.contains("--no-entry") { region.append(JSONMember("notifyOnEntry", false)) }
    if list.flags.contains("--no-exit") { region.append(JSONMember("notifyOnExit", false)) }
    let members = [JSONMember("action", "add"), JSONMember("region", .object(region))]
    // The line the daemon reads: {"cmd":"region","id":N, ...members}; its id is a few bytes.
    let size = JSONValue.object(
      [JSONMember("cmd", "region"), JSONMember("id", 1_000_000)] + members
    ).encoded.count
    guard size <= Request.maximumLineLength else {
      throw ClientError(
        "the region is \(size) bytes as a request, and locationd reads request lines of at most "
          + "\(Request.maximumLineLength) bytes (about 1,500 polygon vertices at full precision): simplify the polygon "
          + "or split it into several regions; nothing was added")
    }
    return try regionCall(options, members, text: Format.region)
  default:
    throw UsageError(regionUsage)
  }
}

private let regionUsage =
  "region takes add ID circle LAT LON RADIUS, add ID polygon FILE.geojson|-, remove ID, list [--after ID] [--limit N] or state ID"

/// Connects, asks for authorization and sends one `region` request; prints the reply (exit 0),
/// or the error (exit 1).
private func regionCall(
  _ options: ClientOptions, _ members: [JSONMember], text: (JSONValue) -> String
) throws
  -> Int32
{
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  if let refused = try reportError(connection.call("request"), options) { return refused }
  let reply = try connection.call("region", members)
  if let refused = reportError(reply, options) { return refused }
  if options.json { printJSON(reply) } else { print(text(reply.value)) }
  return ExitCode.success.rawValue
}

/// For an `ERROR` reply: prints it (`--json`) and its code and message on standard error, and
/// returns exit status 1; `nil` for any other reply.
private func reportError(_ reply: Message, _ options: ClientOptions) -> Int32? {
  guard reply["class"] == "ERROR" else { return nil }
  if options.json { printJSON(reply) }
  writeError("locationctl: \(reply["code"]?.stringValue ?? "error"): \(reply["message"]?.stringValue ?? "")")
  return ExitCode.failure.rawValue
}

/// `region list` without `--after` or `--limit`: every region, however many, fetched in pages
/// of ``regionPage`` (one reply has a size limit) and printed as one list (`--json`: one
/// `REGIONS` object with all of them and `"more":false`).
private func listAllRegions(_ options: ClientOptions) throws -> Int32 {
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  if let refused = try reportError(connection.call("request"), options) { return refused }
  var all: [JSONValue] = []
  var after: String?
  var page = regionPage
  while true {
    var members = [JSONMember("action", "list"), JSONMember("limit", .int(Int64(page)))]
    if let after { members.append(JSONMember("after", .string(after))) }
    let reply = try connection.call("region", members)
    if reply["class"] == "ERROR", reply["code"] == "limitExceeded", page > 1 {
      // Large polygons: a page that does not fit one reply is asked for again in halves.
      page /= 2
      continue
    }
    if let refused = reportError(reply, options) { return refused }
    let regions = reply["regions"]?.arrayValue ?? []
    all += regions
    guard reply["more"] == true, let last = regions.last?["id"]?.stringValue else { break }
    after = last
  }
  let combined = JSONValue.object([
    JSONMember("class", "REGIONS"), JSONMember("regions", .array(all)), JSONMember("more", false),
  ])
  if options.json { print(String(decoding: combined.encoded, as: UTF8.self)) } else { print(Format.regions(combined)) }
  return ExitCode.success.rawValue
}

/// Regions asked for per page by ``listAllRegions(_:)`` (halved while a page of large polygons
/// does not fit one reply).
let regionPage = 200

/// The polygon of a GeoJSON file (`-`: standard input) as a compact Polygon geometry, checked
/// with the daemon's rules.
///
/// - Throws: ``ClientError`` naming the file: unreadable, not a regular file, larger than
///   ``RegionGeoJSON/maxBytes``, or not an acceptable polygon (the engine's message).
private func polygonGeometry(file: String) throws -> JSONValue {
  let name = file == "-" ? "standard input" : file
  let limit = RegionGeoJSON.maxBytes
  let bytes: [UInt8]
  do {
    if file == "-" {
      bytes = try SystemIO.readToEnd(0, limit: limit)
    } else {
      let fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
      guard fd >= 0 else {
        throw ClientError(
          "cannot read \(name): \(String(cString: strerror(errno))); nothing was added", exitCode: .noInput)
      }
      defer { close(fd) }
      var info = stat()
      guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
        throw ClientError("cannot read \(name): not a regular file; nothing was added", exitCode: .noInput)
      }
      guard Int(info.st_size) <= limit else {
        throw ClientError(
          "\(name) is \(info.st_size) bytes: a polygon file may have at most \(limit) bytes; nothing was added"
        )
      }
      bytes = try SystemIO.readToEnd(fd, limit: limit)
    }
  } catch let error as ClientError {
    throw error
  } catch let error as SystemIO.ReadToEndError {
    switch error {
    case .tooLarge:
      throw ClientError(
        "\(name) has more than \(limit) bytes: a polygon file may have at most \(limit) bytes; nothing was added"
      )
    case .system(let error):
      throw ClientError("cannot read \(name): \(error); nothing was added", exitCode: .noInput)
    }
  }
  let shape: RegionShape
  do {
    shape = try RegionGeoJSON.shape(from: bytes)
  } catch {
    throw ClientError("\(name): \(error); nothing was added")
  }
  guard case .polygon(let exterior, let holes) = shape else {
    throw ClientError("\(name): not a polygon; nothing was added")
  }
  return RegionWire.polygonGeometry(exterior: exterior, holes: holes)
}

extension Format {
  /// One line for a region status object:
  /// `ID  STATE [since TIME]  SHAPE  [dwell S s]  [D m inside|outside at TIME]  [TITLE]`.
  static func regionLine(_ status: JSONValue) -> String {
    var parts = [status["id"]?.stringValue ?? "?"]
    var state = status["state"]?.stringValue ?? "?"
    if let since = status["since"]?.stringValue { state += " since " + since }
    parts.append(state)
    if let circle = status["circle"] {
      let latitude = circle["lat"]?.doubleValue ?? 0
      let longitude = circle["lon"]?.doubleValue ?? 0
      parts.append(
        "circle \(latitude), \(longitude) radius \(circle["radius"]?.doubleValue.map { "\($0)" } ?? "?") m"
      )
    } else if let polygon = status["polygon"]?["coordinates"]?.arrayValue {
      let vertices = polygon.reduce(0) { $0 + max(0, ($1.arrayValue?.count ?? 1) - 1) }
      parts.append(
        "polygon of \(vertices) vertices"
          + (polygon.count == 2 ? ", 1 hole" : polygon.count > 2 ? ", \(polygon.count - 1) holes" : ""))
    }
    if let dwell = status["dwell"]?.doubleValue { parts.append("dwell \(dwell) s") }
    if let distance = status["distance"]?.doubleValue {
      parts.append(
        (distance < 0 ? "\(-distance.rounded()) m inside" : "\(distance.rounded()) m outside")
          + (status["measured"]?.stringValue.map { " at " + $0 } ?? ""))
    }
    if let title = status["title"]?.stringValue { parts.append(title) }
    return parts.joined(separator: "  ")
  }

  /// The reply to `region add`, `remove` or `state`.
  static func region(_ reply: JSONValue) -> String {
    let status = reply["region"] ?? .null
    let id = status["id"]?.stringValue ?? "?"
    if reply["removed"] == true { return "removed region \(id)" }
    let line = regionLine(status)
    if let replaced = reply["replaced"]?.boolValue {
      return (replaced ? "replaced: " : "added: ") + line
    }
    return line
  }

  /// The reply to `region list`: one line per region, or `no regions`; a page with regions
  /// after it ends with `more: region list --after LAST_ID`.
  static func regions(_ reply: JSONValue) -> String {
    let regions = reply["regions"]?.arrayValue ?? []
    var text = regions.isEmpty ? "no regions" : regions.map(regionLine).joined(separator: "\n")
    if reply["more"] == true, let last = regions.last?["id"]?.stringValue {
      text += "\nmore: region list --after " + shellQuoted(last)
    }
    return text
  }

  /// `text` as one shell word: as is when it has only safe characters, else in single quotes.
  static func shellQuoted(_ text: String) -> String {
    let safe = text.unicodeScalars.allSatisfy {
      ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || "-_.:/@+".unicodeScalars.contains($0)
    }
    if safe && !text.isEmpty { return text }
    return "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
  }

  /// A `REGION` event: `region ID: enter at TIME  FIX`.
  static func regionEvent(_ event: JSONValue) -> String {
    "region " + (event["region"]?.stringValue ?? "?") + ": " + (event["event"]?.stringValue ?? "?")
      + " at "
      + (event["time"]?.stringValue ?? "?") + "  " + fix(event["fix"])
  }
}
