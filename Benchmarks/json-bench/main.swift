// JSON encoding and decoding: JSONValue (the project's writer and strict parser) against
// Foundation's JSONEncoder/JSONDecoder (Codable) and JSONSerialization.
//
// Usage: json-bench [ITERATIONS]   (default 20,000; build with -c release)
// Prints, for each payload and each way, microseconds per operation: the median of 5 runs of
// ITERATIONS operations (ITERATIONS / 10 for the MAP payload), after one warm-up run. About two
// minutes with the default. Payloads, as the daemon sends and
// receives them:
//   request  {"cmd":"start","id":2,"distanceFilter":10,"minInterval":1,"desiredAccuracy":50}:
//            encode = what locationctl writes; decode = the line read into a typed request
//            (JSONValue: Request.parse, which also validates every member).
//   MAP      a map state with 100 annotations (about 9 KB): encode = the MAP reply;
//            decode = back into typed values (centre, zoom, mode, annotations...).
//   status   a STATUS reply with two TPVs: encode = the reply object; decode = typed values.
//   TPV      (after the table) one TPV written by the per-fix byte writer, GPSDJSON.appendTPV.
// Every way produces and reads the same JSON text; each decode checks a value it read.
import Foundation
import JSON
import LocationModel
import LocationProtocol
import MapState
import SystemIO

#if canImport(Glibc)
  import Glibc
#endif

// One optional operand, the iteration count; options are not taken.
let operands = (try? ArgumentScanner.parse(Array(CommandLine.arguments.dropFirst())).operands) ?? []
let iterations = max(10, operands.first.flatMap { Int($0) } ?? 20_000)
let mapIterations = iterations / 10
/// Median microseconds per operation of 5 timed runs (after one warm-up run).
func measure(times count: Int = iterations, _ body: () throws -> Int) rethrows -> Double {
  var runs: [Double] = []
  var sink = 0
  defer { if sink == 42 { print("") } }
  for run in 0..<6 {
    let clock = ContinuousClock()
    let start = clock.now
    for _ in 0..<count { sink &+= try body() }
    let elapsed = clock.now - start
    if run > 0 {
      let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
      runs.append(seconds * 1e6 / Double(count))
    }
  }
  return runs.sorted()[runs.count / 2]
}

struct BenchFailure: Error, CustomStringConvertible {
  var description: String
}

// MARK: Codable mirrors of the wire shapes (what a JSONEncoder design would declare)

struct StartRequest: Codable {
  var cmd: String
  var id: Int?
  var distanceFilter: Double?
  var minInterval: Double?
  var desiredAccuracy: Double?
}

struct WireLatLon: Codable {
  var lat: Double
  var lon: Double
}

struct WireSize: Codable {
  var width: Double
  var height: Double
}

struct WireAnnotation: Codable {
  var id: String
  var lat: Double
  var lon: Double
  var title: String
  var subtitle: String?
  var kind: String?
}

struct WireMap: Codable {
  var `class`: String
  var center: WireLatLon
  var zoom: Double
  var mode: UserTrackingMode
  var annotations: [WireAnnotation]
  var rotation: Double
  var size: WireSize
  var span: WireLatLon
  var tracking: Bool
}

struct WireTPV: Codable {
  var `class`: String
  var mode: Int
  var status: Int?
  var time: String?
  var lat: Double?
  var lon: Double?
  var altHAE: Double?
  var altMSL: Double?
  var track: Double?
  var speed: Double?
  var eph: Double?
  var backend: String
  var simulated: Bool
}

struct WireBackend: Codable {
  var uri: String
  var state: String
  var detail: String?
}

struct WireStatus: Codable {
  var `class`: String
  var authorization: String
  var tracking: Bool
  var backendActive: Bool
  var backend: WireBackend
  var initial: WireTPV?
  var current: WireTPV?
  var clients: Int
}

// MARK: Payloads

let requestLine = Array(
  #"{"cmd":"start","id":2,"distanceFilter":10,"minInterval":1,"desiredAccuracy":50}"#.utf8)

func makeSnapshot() -> MapSnapshot {
  var annotations: [Annotation] = []
  for index in 0..<100 {
    let step = Double(index)
    let coordinate = Coordinate(latitude: 52.5 + step * 0.001, longitude: 13.4 - step * 0.0007)
    let subtitle: String? = index % 3 == 0 ? "Berlin \"Mitte\"" : nil
    let kind: String? = index % 2 == 0 ? "poi" : nil
    annotations.append(
      Annotation(
        id: "poi-\(index)", coordinate: coordinate, title: "Point of interest \(index)", subtitle: subtitle,
        kind: kind))
  }
  let viewport = Viewport(
    center: Coordinate(latitude: 52.5199, longitude: 13.4026), zoom: 14,
    size: ViewportSize(width: 800, height: 600))
  return MapSnapshot(viewport: viewport, mode: .follow, annotations: annotations, tracking: true)
}

let snapshot = makeSnapshot()

func makeLocation(_ seconds: Int64) -> Location {
  var fix = Fix(mode: .fix3D)
  fix.quality = .gps
  fix.time = 1_700_000_000_000 + seconds * 1000
  fix.coordinate = Coordinate(latitude: 52.520008, longitude: 13.404954)
  fix.altitudeMSL = 34.5
  fix.geoidSeparation = 39.1
  fix.speedOverGround = 1.234
  fix.courseOverGround = 54.7
  fix.hdop = 0.9
  return Location(fix: fix, provenance: Provenance(backend: "simulate", isSimulated: true))
}

let initial = makeLocation(0)
let current = makeLocation(60)

// MARK: JSONValue

func valueRequestEncode() -> Int {
  JSONValue.object([
    JSONMember("cmd", "start"), JSONMember("id", 2), JSONMember("distanceFilter", .number(10.0)),
    JSONMember("minInterval", .number(1.0)), JSONMember("desiredAccuracy", .number(50.0)),
  ]).encoded.count
}

func valueRequestDecode() throws -> Int {
  guard case .start(let filter) = try Request.parse(requestLine).command else {
    throw BenchFailure(description: "not start")
  }
  return Int(filter.distanceFilter ?? 0)
}

func valueMapEncode() -> [UInt8] {
  var members = [JSONMember("class", "MAP")]
  members.append(contentsOf: snapshot.json.objectMembers ?? [])
  return JSONValue.object(members).encoded
}

func valueMapDecode(_ bytes: [UInt8]) throws -> Int {
  let value = try JSONValue.parse(bytes)
  guard let center = value["center"], let lat = center["lat"]?.doubleValue, lat.isFinite,
    value["zoom"]?.doubleValue != nil, let mode = value["mode"]?.stringValue.flatMap(UserTrackingMode.init),
    let list = value["annotations"]?.arrayValue
  else { throw BenchFailure(description: "bad MAP") }
  var annotations: [Annotation] = []
  annotations.reserveCapacity(list.count)
  for item in list {
    guard let id = item["id"]?.stringValue, let lat = item["lat"]?.doubleValue, let lon = item["lon"]?.doubleValue,
      let title = item["title"]?.stringValue
    else { throw BenchFailure(description: "bad annotation") }
    annotations.append(
      Annotation(
        id: id, coordinate: Coordinate(latitude: lat, longitude: lon), title: title,
        subtitle: item["subtitle"]?.stringValue, kind: item["kind"]?.stringValue))
  }
  return annotations.count + (mode == .follow ? 1 : 0)
}

func valueStatusEncode() -> [UInt8] {
  Reply.status(
    authorization: .authorized, tracking: true, backendActive: true, backendURI: "simulate",
    backendState: .connected, detail: nil, initial: EventEncoding.tpv(initial),
    current: EventEncoding.tpv(current), clients: 3
  ).json(id: .number(7)).encoded
}

func valueStatusDecode(_ bytes: [UInt8]) throws -> Int {
  let value = try JSONValue.parse(bytes)
  guard value["authorization"]?.stringValue == "authorized", let tpv = value["current"],
    let mode = tpv["mode"]?.intValue, let lat = tpv["lat"]?.doubleValue, lat.isFinite,
    let clients = value["clients"]?.intValue
  else { throw BenchFailure(description: "bad STATUS") }
  return mode + clients
}

// MARK: JSONEncoder / JSONDecoder

func wireMap() -> WireMap {
  WireMap(
    class: "MAP", center: WireLatLon(lat: snapshot.center.latitude, lon: snapshot.center.longitude),
    zoom: snapshot.zoom, mode: snapshot.mode,
    annotations: snapshot.annotations.map {
      WireAnnotation(
        id: $0.id, lat: $0.coordinate.latitude, lon: $0.coordinate.longitude, title: $0.title,
        subtitle: $0.subtitle, kind: $0.kind)
    },
    rotation: snapshot.rotation, size: WireSize(width: snapshot.size.width, height: snapshot.size.height),
    span: WireLatLon(lat: snapshot.span.latitudeDelta, lon: snapshot.span.longitudeDelta), tracking: snapshot.tracking)
}

func wireTPV(_ location: Location) -> WireTPV {
  let fix = location.fix
  return WireTPV(
    class: "TPV", mode: fix.mode.rawValue, status: fix.quality?.gpsdStatus,
    time: fix.time.map { GPSDJSON.iso8601(milliseconds: $0) }, lat: fix.coordinate?.latitude,
    lon: fix.coordinate?.longitude, altHAE: fix.altitudeHAE, altMSL: fix.altitudeMSL, track: fix.courseOverGround,
    speed: fix.speedOverGround, eph: fix.eph, backend: location.provenance.backend,
    simulated: location.provenance.isSimulated)
}

func codableRequestEncode() throws -> Int {
  try JSONEncoder().encode(
    StartRequest(cmd: "start", id: 2, distanceFilter: 10, minInterval: 1, desiredAccuracy: 50)
  ).count
}

func codableRequestDecode() throws -> Int {
  let request = try JSONDecoder().decode(StartRequest.self, from: Data(requestLine))
  return Int(request.distanceFilter ?? 0)
}

func codableMapEncode() throws -> Data { try JSONEncoder().encode(wireMap()) }

func codableMapDecode(_ data: Data) throws -> Int {
  let map = try JSONDecoder().decode(WireMap.self, from: data)
  return map.annotations.count + (map.mode == .follow ? 1 : 0)
}

func codableStatusEncode() throws -> Data {
  try JSONEncoder().encode(
    WireStatus(
      class: "STATUS", authorization: "authorized", tracking: true, backendActive: true,
      backend: WireBackend(uri: "simulate", state: "connected", detail: nil), initial: wireTPV(initial),
      current: wireTPV(current), clients: 3))
}

func codableStatusDecode(_ data: Data) throws -> Int {
  let status = try JSONDecoder().decode(WireStatus.self, from: data)
  return (status.current?.mode ?? 0) + status.clients
}

// MARK: JSONSerialization

func serializationRequestEncode() throws -> Int {
  let object: [String: Any] = [
    "cmd": "start", "id": 2, "distanceFilter": 10, "minInterval": 1, "desiredAccuracy": 50,
  ]
  return try JSONSerialization.data(withJSONObject: object).count
}

func serializationRequestDecode() throws -> Int {
  guard let object = try JSONSerialization.jsonObject(with: Data(requestLine)) as? [String: Any],
    object["cmd"] as? String == "start", let distance = object["distanceFilter"] as? Double
  else { throw BenchFailure(description: "bad request") }
  return Int(distance)
}

func serializationMapEncode() throws -> Data {
  let annotations: [[String: Any]] = snapshot.annotations.map { annotation in
    var object: [String: Any] = [
      "id": annotation.id, "lat": annotation.coordinate.latitude, "lon": annotation.coordinate.longitude,
      "title": annotation.title,
    ]
    if let subtitle = annotation.subtitle { object["subtitle"] = subtitle }
    if let kind = annotation.kind { object["kind"] = kind }
    return object
  }
  let object: [String: Any] = [
    "class": "MAP", "center": ["lat": snapshot.center.latitude, "lon": snapshot.center.longitude],
    "zoom": snapshot.zoom, "mode": snapshot.mode.rawValue, "annotations": annotations,
    "rotation": snapshot.rotation, "size": ["width": snapshot.size.width, "height": snapshot.size.height],
    "span": ["lat": snapshot.span.latitudeDelta, "lon": snapshot.span.longitudeDelta],
    "tracking": snapshot.tracking,
  ]
  return try JSONSerialization.data(withJSONObject: object)
}

func serializationMapDecode(_ data: Data) throws -> Int {
  guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
    let list = object["annotations"] as? [[String: Any]], let mode = object["mode"] as? String
  else { throw BenchFailure(description: "bad MAP") }
  var annotations: [Annotation] = []
  for item in list {
    guard let id = item["id"] as? String, let lat = item["lat"] as? Double, let lon = item["lon"] as? Double,
      let title = item["title"] as? String
    else { throw BenchFailure(description: "bad annotation") }
    annotations.append(
      Annotation(
        id: id, coordinate: Coordinate(latitude: lat, longitude: lon), title: title,
        subtitle: item["subtitle"] as? String, kind: item["kind"] as? String))
  }
  return annotations.count + (mode == "follow" ? 1 : 0)
}

func serializationTPV(_ location: Location) -> [String: Any] {
  let tpv = wireTPV(location)
  var object: [String: Any] = ["class": "TPV", "mode": tpv.mode, "backend": tpv.backend, "simulated": tpv.simulated]
  if let v = tpv.status { object["status"] = v }
  if let v = tpv.time { object["time"] = v }
  if let v = tpv.lat { object["lat"] = v }
  if let v = tpv.lon { object["lon"] = v }
  if let v = tpv.altHAE { object["altHAE"] = v }
  if let v = tpv.altMSL { object["altMSL"] = v }
  if let v = tpv.track { object["track"] = v }
  if let v = tpv.speed { object["speed"] = v }
  if let v = tpv.eph { object["eph"] = v }
  return object
}

func serializationStatusEncode() throws -> Data {
  let object: [String: Any] = [
    "class": "STATUS", "authorization": "authorized", "tracking": true, "backendActive": true,
    "backend": ["uri": "simulate", "state": "connected", "detail": NSNull()] as [String: Any],
    "initial": serializationTPV(initial), "current": serializationTPV(current), "clients": 3,
  ]
  return try JSONSerialization.data(withJSONObject: object)
}

func serializationStatusDecode(_ data: Data) throws -> Int {
  guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
    let tpv = object["current"] as? [String: Any], let mode = tpv["mode"] as? Int,
    let clients = object["clients"] as? Int
  else { throw BenchFailure(description: "bad STATUS") }
  return mode + clients
}

// MARK: Run

do {
  let mapBytes = valueMapEncode()
  let statusBytes = valueStatusEncode()
  let mapData = try codableMapEncode()
  let statusData = try codableStatusEncode()
  let mapSerialized = try serializationMapEncode()
  let statusSerialized = try serializationStatusEncode()
  // Each decoder reads every encoder's text, so all three agree on the payloads.
  for data in [Data(mapBytes), mapData, mapSerialized] {
    guard try valueMapDecode(Array(data)) == 101, try codableMapDecode(data) == 101,
      try serializationMapDecode(data) == 101
    else { throw BenchFailure(description: "MAP payloads disagree") }
  }
  for data in [Data(statusBytes), statusData, statusSerialized] {
    guard try valueStatusDecode(Array(data)) == 6, try codableStatusDecode(data) == 6,
      try serializationStatusDecode(data) == 6
    else { throw BenchFailure(description: "STATUS payloads disagree") }
  }

  let rows: [(String, Double, Double, Double)] = [
    ("request encode", measure(valueRequestEncode), try measure(codableRequestEncode), try measure(serializationRequestEncode)),
    ("request decode", try measure(valueRequestDecode), try measure(codableRequestDecode), try measure(serializationRequestDecode)),
    (
      "MAP (100 annotations) encode", measure(times: mapIterations) { valueMapEncode().count },
      try measure(times: mapIterations) { try codableMapEncode().count },
      try measure(times: mapIterations) { try serializationMapEncode().count }
    ),
    (
      "MAP (100 annotations) decode", try measure(times: mapIterations) { try valueMapDecode(mapBytes) },
      try measure(times: mapIterations) { try codableMapDecode(mapData) },
      try measure(times: mapIterations) { try serializationMapDecode(mapSerialized) }
    ),
    (
      "status reply encode", measure { valueStatusEncode().count }, try measure { try codableStatusEncode().count },
      try measure { try serializationStatusEncode().count }
    ),
    (
      "status reply decode", try measure { try valueStatusDecode(statusBytes) },
      try measure { try codableStatusDecode(statusData) }, try measure { try serializationStatusDecode(statusSerialized) }
    ),
  ]
  func cell(_ value: Double) -> String {
    let text = value < 10 ? String(format: "%.2f", value) : String(format: "%.1f", value)
    return String(repeating: " ", count: max(0, 9 - text.count)) + text
  }
  print(
    "json-bench: \(iterations) operations per run (MAP \(mapIterations)), median of 5 runs, microseconds per operation")
  print("bytes: request \(requestLine.count), MAP \(mapBytes.count), status \(statusBytes.count)")
  print("| operation                    | JSONValue | JSONEncoder/Decoder | JSONSerialization |")
  print("|------------------------------|-----------|---------------------|-------------------|")
  for (name, value, codable, serialization) in rows {
    let padded = name + String(repeating: " ", count: max(0, 28 - name.count))
    print("| \(padded) | \(cell(value)) | \(cell(codable))           | \(cell(serialization))         |")
  }
  // The per-fix fast path: gpsd's TPV object written straight into bytes (its numbers through
  // DecimalText's digits), the one writer that bypasses JSONValue.
  var tpv: [UInt8] = []
  tpv.reserveCapacity(512)
  let tpvMicroseconds = measure(times: iterations * 10) {
    tpv.removeAll(keepingCapacity: true)
    GPSDJSON.appendTPV(current.fix, to: &tpv)
    return tpv.count
  }
  print("TPV fast path (GPSDJSON.appendTPV, \(tpv.count) bytes): \(cell(tpvMicroseconds)) microseconds per TPV")
} catch {
  FileHandle.standardError.write(Data("json-bench: \(error)\n".utf8))
  exit(1)
}
