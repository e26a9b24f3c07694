import Foundation
import MapState
import SystemIO
import Testing
import LocationModel

/// A fresh empty directory under the system temporary directory.
func temporaryDirectory() throws -> String {
  let path = NSTemporaryDirectory() + "mapstate-tests-" + UUID().uuidString
  try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  return path
}

@Suite("Persistence")
struct PersistenceTests {
  /// The state file as JSONEncoder wrote it (sorted keys, pretty-printed) is the file written
  /// now, and reads back to the same state.
  @Test func stateFileFormatIsKept() throws {
    let file = """
      {
        "annotations" : [
          {
            "id" : "a",
            "kind" : "poi",
            "lat" : 3,
            "lon" : 4.25,
            "title" : "Ay \\"1\\""
          }
        ],
        "mode" : "follow",
        "version" : 1,
        "viewport" : {
          "center" : {
            "latitude" : 1.5,
            "longitude" : -2.5
          },
          "rotation" : 90,
          "size" : {
            "height" : 600,
            "width" : 800
          },
          "zoom" : 9
        }
      }

      """
    let state = PersistedMapState(
      viewport: Viewport(
        center: Coordinate(latitude: 1.5, longitude: -2.5), zoom: 9, size: ViewportSize(width: 800, height: 600),
        rotation: 90),
      mode: .follow,
      annotations: [Annotation(id: "a", coordinate: Coordinate(latitude: 3, longitude: 4.25), title: "Ay \"1\"", kind: "poi")])
    #expect(String(decoding: state.fileContents, as: UTF8.self) == file)
    #expect(try PersistedMapState(fileContents: Array(file.utf8)) == state)
    // Compact text, members in any order, unknown members: read all the same.
    let compact = #"{"viewport":{"zoom":9,"rotation":90,"size":{"width":800,"height":600},"center":{"longitude":-2.5,"latitude":1.5}},"mode":"follow","version":1,"extra":[],"annotations":[{"title":"Ay \"1\"","lon":4.25,"lat":3,"id":"a","kind":"poi"}]}"#
    #expect(try PersistedMapState(fileContents: Array(compact.utf8)) == state)
  }

  @Test(arguments: [
    (#"{"version":1,"mode":"none","annotations":[],"viewport":{"center":{"latitude":"0","longitude":0},"zoom":1,"size":{"width":1,"height":1},"rotation":0}}"#, "viewport.center.latitude: expected a number"),
    (#"{"version":1,"mode":"none","annotations":[{"id":"a","lat":1,"lon":2}],"viewport":{"center":{"latitude":0,"longitude":0},"zoom":1,"size":{"width":1,"height":1},"rotation":0}}"#, "annotations.0.title: missing (a string)"),
    (#"{"version":1.5}"#, "version: expected an integer"),
    (#"{"version":1,"mode":"sideways","annotations":[],"viewport":{"center":{"latitude":0,"longitude":0},"zoom":1,"size":{"width":1,"height":1},"rotation":0}}"#, "mode: must be one of none, follow, followWithHeading"),
    ("[1,2,3]", "expected an object"),
    (#"{"version":1,"#, "invalid JSON at byte 13: "),
  ])
  func stateFileErrorsNameTheMember(_ file: String, _ message: String) {
    #expect {
      try PersistedMapState(fileContents: Array(file.utf8))
    } throws: { error in
      String(describing: error).hasPrefix(message)
    }
  }

  @Test func stateSurvivesARestart() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let log = LogCollector()
    let first = MapStateService(store: MapStateStore(directory: directory, log: log.sink))
    #expect(
      log.all.count == 1
        && log.all[0].hasPrefix("map state file missing, starting with an empty map"))
    try await first.setViewportSize(ViewportSize(width: 640, height: 480))
    try await first.setCenter(Coordinate(latitude: 47.376_9, longitude: 8.541_7))
    try await first.setZoom(13.25)
    try await first.addAnnotation(
      Annotation(
        id: "b", coordinate: Coordinate(latitude: 1, longitude: 2), title: "Bee", subtitle: "s"))
    try await first.addAnnotation(
      Annotation(id: "a", coordinate: Coordinate(latitude: 3, longitude: 4), title: "Ay", kind: "k")
    )
    await first.setMode(.followWithHeading)
    await first.update(fix: fix(47.4, 8.5, course: 33))
    let before = await first.snapshot
    // Saves run on the saver's thread: what a restart reads is what was saved once they settle.
    #expect(await first.savesSettled())

    let secondLog = LogCollector()
    let second = MapStateService(store: MapStateStore(directory: directory, log: secondLog.sink))
    #expect(secondLog.all == [])
    let after = await second.snapshot
    #expect(after.center == before.center)
    #expect(after.zoom == before.zoom)
    #expect(after.mode == .followWithHeading)
    #expect(after.rotation == 33)
    #expect(after.size == ViewportSize(width: 640, height: 480))
    // The current location is not persisted: it comes from fixes.
    #expect(before.annotations.map(\.id) == ["location", "b", "a"])
    #expect(after.annotations == Array(before.annotations.dropFirst()))
    // Only the state file is left: the temporary file was renamed.
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: directory) == [MapStateStore.fileName])
  }

  /// Found by fuzzing the loader: a file with a bad viewport and an annotation that would be left
  /// out logged two lines (the annotations, then the viewport) for one unusable file.
  @Test func anUnusableFileWithRefusedAnnotationsLogsOneLine() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory, log: { _ in })
    let file = #"""
      {"version":1,"mode":"none","annotations":[{"id":"a","lat":1,"lon":2,"title":""},{"id":"a","lat":1,"lon":2,"title":""}],
       "viewport":{"center":{"latitude":0,"longitude":0},"zoom":18888,"size":{"width":800,"height":600},"rotation":0}}
      """#
    try Data(file.utf8).write(to: URL(fileURLWithPath: store.path))
    let log = LogCollector()
    #expect(MapStateStore(directory: directory, log: log.sink).load() == nil)
    #expect(log.all.count == 1, "\(log.all)")
    #expect(log.all.first?.hasPrefix("map state file holds invalid values, starting with an empty map") == true)
  }

  /// A file that exists but cannot be opened (here a Unix socket: ENXIO; in the field a mode or
  /// an I/O error) is set aside, so that the next save does not replace what it holds.
  @Test func aFileThatCannotBeOpenedIsSetAsideNotReplaced() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory, log: { _ in })
    let listener = try #require(bindUnixSocket(at: store.path))
    defer { close(listener) }
    let log = LogCollector()
    #expect(MapStateStore(directory: directory, log: log.sink).load() == nil)
    #expect(log.all.count == 1, "\(log.all)")
    #expect(log.all.first?.hasPrefix("map state file unreadable, starting with an empty map") == true, "\(log.all)")
    #expect(log.all.first?.hasSuffix("keptAs=\(MapStateStore.rejectedFileName)") == true, "\(log.all)")
    try store.save(PersistedMapState(viewport: .default, mode: .none, annotations: []))
    var info = stat()
    #expect(lstat(directory + "/" + MapStateStore.rejectedFileName, &info) == 0)
    #expect(info.st_mode & S_IFMT == S_IFSOCK)
  }

  /// The same for the state file every other store loads through (StateFile: the regions file).
  @Test func aStateFileThatCannotBeOpenedIsSetAsideNotReplaced() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let listener = try #require(bindUnixSocket(at: directory + "/regions.json"))
    defer { close(listener) }
    let log = LogCollector()
    let file = StateFile(
      directory: directory, fileName: "regions.json", subject: "regions", fallback: "starting with no regions",
      maxFileSize: 1 << 20, log: log.sink)
    #expect(file.load() == .unusable)
    #expect(log.all.count == 1, "\(log.all)")
    #expect(log.all.first?.hasPrefix("regions file unreadable, starting with no regions") == true, "\(log.all)")
    #expect(log.all.first?.hasSuffix("keptAs=regions.json.rejected") == true, "\(log.all)")
    try file.save(Array("{}".utf8))
    var info = stat()
    #expect(lstat(directory + "/regions.json.rejected", &info) == 0)
    #expect(info.st_mode & S_IFMT == S_IFSOCK)
  }

  /// Found by fuzzing the loader: the corrupt-file message quoted the file's bad value verbatim,
  /// so a newline in it split the message into two log lines (a forged second line).
  @Test func valuesFromACorruptFileStayOnOneLogLine() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory, log: { _ in })
    let viewport = #""viewport":{"center":{"latitude":0,"longitude":0},"zoom":1,"size":{"width":800,"height":600},"rotation":0}"#
    let files = [
      #"{"version":1,"mode":"none\nlocationd: forged","annotations":[],"# + viewport + "}",
      #"{"version":1,"mode":"none","annotations":[{"id":"a\r\u0085\u2028b\u0000","lat":1,"lon":2,"title":""},{"id":"a\r\u0085\u2028b\u0000","lat":1,"lon":2,"title":""}],"#
        + viewport + "}",
    ]
    for file in files {
      try Data(file.utf8).write(to: URL(fileURLWithPath: store.path))
      let log = LogCollector()
      let state = MapStateStore(directory: directory, log: log.sink).load()
      // The bad mode empties the map; the bad annotations are left out of a loaded map.
      #expect(state == nil || state?.annotations == [])
      #expect(log.all.count == 1, "\(log.all)")
      let line = log.all.first ?? ""
      #expect(!line.unicodeScalars.contains { $0.properties.generalCategory == .control || $0 == "\u{2028}" }, "\(line)")
      #expect(line.contains("path=\(store.path)"), "\(line)")
    }
  }

  @Test func truncatedAndCorruptFilesGiveAnEmptyState() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory, log: { _ in })
    let service = MapStateService(store: store)
    try await service.setZoom(9)
    try await service.addAnnotation(
      Annotation(id: "a", coordinate: Coordinate(latitude: 3, longitude: 4), title: "Ay"))
    // Settled before the file is damaged below: no save of this service may come after.
    #expect(await service.savesSettled())
    let saved = try Data(contentsOf: URL(fileURLWithPath: store.path))
    #expect(saved.count > 100)

    let invalidZoom = String(decoding: saved, as: UTF8.self).replacingOccurrences(
      of: "\"zoom\" : 9", with: "\"zoom\" : 99")
    let variants: [(String, Data, String)] = [
      ("truncated", saved.prefix(saved.count / 2), "map state file corrupt"),
      ("empty", Data(), "map state file corrupt"),
      ("garbage", Data([0xFF, 0x00, 0x7B, 0x22]), "map state file corrupt"),
      ("wrong type", Data("[1,2,3]".utf8), "map state file corrupt"),
      ("zoom 99", Data(invalidZoom.utf8), "map state file holds invalid values"),
      (
        "version 2", Data(#"{"version":2,"viewport":{},"mode":"none","annotations":[]}"#.utf8),
        "map state file corrupt"
      ),
    ]
    #expect(invalidZoom.contains("99"))
    for (name, bytes, message) in variants {
      try bytes.write(to: URL(fileURLWithPath: store.path))
      let log = LogCollector()
      let restored = MapStateService(store: MapStateStore(directory: directory, log: log.sink))
      let snapshot = await restored.snapshot
      #expect(snapshot.zoom == Viewport.default.zoom, "\(name)")
      #expect(snapshot.annotations.isEmpty, "\(name)")
      #expect(log.all.count == 1, "\(name): \(log.all)")
      #expect(
        log.all.first?.hasPrefix(message + ", starting with an empty map path=\(store.path)")
          == true, "\(name): \(log.all)")
    }
    let versionTwo = Data(
      String(decoding: saved, as: UTF8.self).replacingOccurrences(
        of: "\"version\" : 1", with: "\"version\" : 2"
      ).utf8)
    try versionTwo.write(to: URL(fileURLWithPath: store.path))
    let log = LogCollector()
    _ = MapStateService(store: MapStateStore(directory: directory, log: log.sink))
    #expect(log.all.first?.hasPrefix("map state file has unknown version") == true, "\(log.all)")
  }

  @Test func saveFailureIsLoggedAndStateKept() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // The state directory path is taken by a regular file.
    let blocked = directory + "/blocked"
    try Data("x".utf8).write(to: URL(fileURLWithPath: blocked))
    let store = MapStateStore(directory: blocked, log: { _ in })
    #expect(throws: MapStoreError.self) {
      try store.save(PersistedMapState(viewport: .default, mode: .none, annotations: []))
    }
    let log = LogCollector()
    let service = MapStateService(store: MapStateStore(directory: blocked, log: log.sink))
    try await service.setZoom(5)
    #expect(await service.snapshot.zoom == 5)
    #expect(await service.savesSettled())
    #expect(log.all.contains { $0.hasPrefix("map state not saved, keeping it in memory") })
  }

  @Test func saveCreatesTheDirectory() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory + "/nested/state", log: { _ in })
    let state = PersistedMapState(
      viewport: Viewport(center: Coordinate(latitude: 1, longitude: 2), zoom: 3),
      mode: .follow,
      annotations: [
        Annotation(id: "p", coordinate: Coordinate(latitude: 5, longitude: 6), title: "P")
      ])
    try store.save(state)
    #expect(store.load() == state)
  }

  @Test func restoredViewportIsClampedAndNormalised() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory, log: { _ in })
    let file = """
      {"version":1,"mode":"none","annotations":[],
       "viewport":{"center":{"latitude":89.5,"longitude":10},"zoom":4,"size":{"width":300,"height":200},"rotation":-30}}
      """
    try Data(file.utf8).write(to: URL(fileURLWithPath: store.path))
    let viewport = try #require(store.load()?.viewport)
    #expect(viewport.center == Coordinate(latitude: WebMercator.maxLatitude, longitude: 10))
    #expect(viewport.rotation == 330)
    #expect(viewport.size == ViewportSize(width: 300, height: 200))
  }
}

/// A Unix stream socket bound at `path` (its descriptor), or `nil`.
func bindUnixSocket(at path: String) -> Int32? {
  guard var address = UnixAddress(path: path) else { return nil }
  let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return nil }
  guard address.withSockaddr({ bind(fd, $0, $1) }) == 0 else {
    close(fd)
    return nil
  }
  return fd
}
