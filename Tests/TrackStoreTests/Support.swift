import Foundation
import LocationModel
import TrackStore

/// A fresh directory under /tmp for one test.
func temporaryDirectory() throws -> String {
  var template = Array("/tmp/track-store-XXXXXX".utf8CString)
  guard let result = mkdtemp(&template) else { throw TestFailure("mkdtemp failed") }
  return String(cString: result)
}

struct TestFailure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

/// The package root (tests run with it as the working directory, but do not rely on it).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
  .deletingLastPathComponent().path

/// Runs `arguments` and returns its exit status, standard output and standard error (through
/// files, so a large output never blocks the child).
func run(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
  let directory = try temporaryDirectory()
  guard FileManager.default.createFile(atPath: directory + "/out", contents: nil),
    FileManager.default.createFile(atPath: directory + "/err", contents: nil)
  else { throw TestFailure("cannot create output files in \(directory)") }
  let output = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/out"))
  let error = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/err"))
  let process = Process()
  process.executableURL = URL(fileURLWithPath: arguments[0])
  process.arguments = Array(arguments.dropFirst())
  process.standardOutput = output
  process.standardError = error
  process.standardInput = FileHandle.nullDevice
  try process.run()
  process.waitUntilExit()
  try output.close()
  try error.close()
  let out = try String(contentsOfFile: directory + "/out", encoding: .utf8)
  let err = try String(contentsOfFile: directory + "/err", encoding: .utf8)
  try? FileManager.default.removeItem(atPath: directory)
  return (process.terminationStatus, out, err)
}

/// A walk of `count` points one `step` (ms) apart, heading north-east from Vancouver, with every
/// field set; seeded so every run stores the same track.
func syntheticTrack(count: Int, start: Int64 = 1_556_712_000_000, step: Int64 = 1000, backend: String = "replay:/log.nmea")
  -> [TrackPoint]
{
  var generator = SplitMix(seed: 42)
  var points: [TrackPoint] = []
  points.reserveCapacity(count)
  var latitude = 49.2741667
  var longitude = -123.1853333
  for index in 0..<count {
    latitude += Double(generator.next() % 100) * 1e-7
    longitude += Double(generator.next() % 100) * 1e-7
    var point = TrackPoint(
      time: start + Int64(index) * step, coordinate: Coordinate(latitude: latitude, longitude: longitude),
      mode: index % 7 == 0 ? .fix2D : .fix3D, backend: backend, source: "/dev/ttyUSB0", isSimulated: index % 2 == 0)
    point.altitudeMSL = 12.5 + Double(index % 50)
    point.geoidSeparation = -16.7
    point.speed = Double(index % 30) / 3
    point.course = Double(index % 360)
    point.climb = 0.25
    point.eph = 4.75
    point.epv = 6.9
    point.hdop = 0.9 + Double(index % 5) / 10
    point.vdop = 1.2
    point.pdop = 1.5
    point.satellitesUsed = 4 + index % 9
    point.quality = .gps
    points.append(point)
  }
  return points
}

struct SplitMix {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// Every point of `store` in time order.
func allPoints(_ store: TrackStore, since: Int64? = nil, until: Int64? = nil) throws -> [TrackPoint] {
  var points: [TrackPoint] = []
  do {
    try store.forEachPoint(since: since, until: until) { (point: TrackPoint) throws(Never) in points.append(point) }
  } catch {
    switch error {
    case .store(let error): throw error
    case .body(let never): switch never {}
    }
  }
  return points
}

/// The export of `store` as text.
func exportText(_ store: TrackStore, _ options: TrackExportOptions) throws -> String {
  var bytes: [UInt8] = []
  try TrackExporter.export(from: store, options: options) { (chunk: [UInt8]) throws(TrackExportError) in
    bytes += chunk
  }
  return String(decoding: bytes, as: UTF8.self)
}
