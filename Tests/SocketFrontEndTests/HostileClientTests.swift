import Foundation
import Glibc
import LocationCore
import LocationTestKit
import MapState
import NMEA
import Synchronization
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel

@Suite("Hostile clients", .serialized, .timeLimit(.minutes(3)))
struct HostileClientTests {
  @Test(
    "numeric ids come back byte for byte",
    arguments: [
      "9007199254740993", "18446744073709551617", "-9007199254740993", "1.50e3", "0.1000000000000000055511151231257827",
      "-0", "12",
    ])
  func numericIDsComeBackUnchanged(_ id: String) async throws {
    let request = try Request.parse(Array(#"{"cmd":"stop","id":\#(id)}"#.utf8))
    #expect(request.id == .numberText(id))
    #expect(Reply.ok(.stop).json(id: request.id).jsonString == #"{"class":"OK","id":\#(id),"cmd":"stop"}"#)
    // Errors found while reading the request carry it unchanged too.
    do {
      _ = try Request.parse(Array(#"{"id":\#(id),"cmd":"zoom","zoom":99}"#.utf8))
      Issue.record("zoom 99 accepted")
    } catch {
      #expect(Reply.error(error.code, message: "").json(id: error.id).jsonString.contains(#""id":\#(id),"#))
    }
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    try await client.request(#"{"cmd":"status","id":\#(id)}"#)
    let line = try #require(await client.readLine())
    #expect(line.hasPrefix(#"{"class":"STATUS","id":\#(id),"#), "\(line)")
    await fixture.stop()
  }

  @Test("an id that is a number of more than 256 bytes is refused")
  func longNumericID() throws {
    let digits = String(repeating: "9", count: 300)
    #expect(throws: ProtocolError.self) { try Request.parse(Array(#"{"cmd":"stop","id":\#(digits)}"#.utf8)) }
  }

  /// 5,000 requests written at once, read 4 KiB at a time: every reply must arrive, in order,
  /// however small the client's backlog bound.
  @Test("a client that pipelines requests and reads slowly gets every reply")
  func pipelinedSlowReader() async throws {
    var options = ServerOptions()
    options.maxBacklogBytes = 16 * 1024
    let fixture = try ServerFixture(options: options)
    let client = try fixture.connect()
    let count = 5000
    var pending = Array((1...count).map { #"{"cmd":"status","id":\#($0)}"# + "\n" }.joined().utf8)
    var received: [UInt8] = []
    var replies = 0
    var ids: [Int] = []
    var closed = false
    var rounds = 0
    while replies < count && !closed && rounds < 200_000 {
      rounds += 1
      if !pending.isEmpty {
        let written = pending.withUnsafeBytes {
          Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        if written > 0 { pending.removeFirst(written) }
      }
      var chunk = [UInt8](repeating: 0, count: 4096)
      let read = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
      if read == 0 { closed = true }
      if read > 0 {
        received.append(contentsOf: chunk[0..<read])
        while let newline = received.firstIndex(of: UInt8(ascii: "\n")) {
          let line = Array(received[..<newline])
          received.removeSubrange(...newline)
          replies += 1
          if let value = try? JSONValue.parse(line), value["class"] == "STATUS",
            let id = value["id"]?.doubleValue
          {
            ids.append(Int(id))
          }
        }
      }
      try await Task.sleep(for: .milliseconds(1))
    }
    #expect(!closed)
    #expect(replies == count)
    #expect(ids == Array(1...count))
    await fixture.stop()
  }

  @Test("a reply larger than a client's backlog bound becomes limitExceeded, the client stays")
  func replyTooLarge() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let socket = try ListeningSocket.create(path: directory.path + "/s.sock", group: nil)
    let server = SocketServer(socket: socket, handler: HugeReplyHandler())
    try server.start()
    let client = try TestClient(path: directory.path + "/s.sock")
    _ = try await client.roundTrip(#"{"cmd":"request"}"#)
    let reply = try await client.roundTrip(#"{"cmd":"map","format":"svg","id":"big"}"#)
    #expect(reply?["code"] == "limitExceeded")
    #expect(reply?["id"] == "big")
    #expect(reply?["message"]?.stringValue?.contains("1048576 bytes") == true)
    let status = try await client.roundTrip(#"{"cmd":"status","id":2}"#)
    #expect(status?["class"] == "STATUS")
    server.stop()
    await server.waitUntilStopped()
  }

  /// Every reply a full map can produce fits a client's backlog bound, whatever the text.
  @Test(
    "the largest map replies fit a client's backlog",
    arguments: ["\"", "<", "&", "\\", "\u{E9}", "\u{2122}", "\u{1F600}", "x"])
  func largestMapReplies(_ character: String) async throws {
    let map = MapStateService()
    var bytes = 0
    let perAnnotation = AnnotationLimits.maxTotalBytes / AnnotationLimits.maxCount
    for index in 0..<AnnotationLimits.maxCount {
      let id = "\(index)"
      let room = perAnnotation - id.utf8.count
      let title = String(repeating: character, count: max(0, room / 2 / character.utf8.count))
      let annotation = Annotation(
        id: id, coordinate: Coordinate(latitude: -85, longitude: -179.123456789), title: title,
        subtitle: title)
      bytes += annotation.textByteCount
      try await map.addAnnotation(annotation)
    }
    #expect(bytes > AnnotationLimits.maxTotalBytes * 8 / 10)
    await map.update(fix: {
      var fix = Fix(mode: .fix3D)
      fix.coordinate = Coordinate(latitude: 1.5, longitude: 2.5)
      return fix
    }())
    let limit = ServerOptions().maxBacklogBytes
    let json = LocationService.mapJSON(await map.snapshot, changes: [.annotationAdded(id: "0")])
    let sizes = [
      ("json", json.encoded.count),
      ("geojson", Reply.mapGeoJSON(Array(await map.geoJSON().utf8)).json(id: nil).encoded.count),
      ("svg", Reply.mapSVG(await map.svg()).json(id: nil).encoded.count),
    ]
    for (format, size) in sizes {
      #expect(size < limit * 9 / 10, "\(format) with \(character): \(size) bytes")
    }
  }

  @Test("a change that could not be saved is answered notSaved, and saved by the next change")
  func unsavedChangeIsReported() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let failing = Mutex<Int32?>(ENOSPC)
    let store = MapStateStore(
      directory: directory.path + "/state", log: { _ in },
      failureInjector: { step in step == "write" ? failing.withLock { $0 } : nil })
    let map = MapStateService(store: store)
    let backend = FakeBackend()
    let manager = LocationManager(backend: backend)
    let service = LocationService(
      manager: manager, map: map, backend: backend, authority: AuthorizationAuthority(Authorizer(groupName: nil)))
    let socket = try ListeningSocket.create(path: directory.path + "/s.sock", group: nil)
    let server = SocketServer(socket: socket, handler: service)
    await service.attach(server)
    await service.start()
    try server.start()
    let client = try TestClient(path: directory.path + "/s.sock")
    #expect(try await client.roundTrip(#"{"cmd":"request"}"#)?["class"] == "AUTHORIZATION")
    let annotate = try await client.roundTrip(
      #"{"cmd":"annotate","id":1,"annotation":{"id":"cafe","lat":1,"lon":2,"title":"Cafe"}}"#)
    #expect(annotate?["code"] == "notSaved", "\(String(describing: annotate))")
    #expect(annotate?["message"]?.stringValue?.contains("No space left on device") == true)
    // In effect all the same.
    let shown = try await client.roundTrip(#"{"cmd":"map"}"#)
    #expect(shown?["annotations"]?.arrayValue?.count == 1)
    failing.withLock { $0 = nil }
    let zoom = try await client.roundTrip(#"{"cmd":"zoom","zoom":5}"#)
    #expect(zoom?["class"] == "MAP")
    let saved = try #require(MapStateStore(directory: directory.path + "/state", log: { _ in }).load())
    #expect(saved.annotations.map(\.id) == ["cafe"])
    #expect(saved.viewport.zoom == 5)
    server.stop()
    await server.waitUntilStopped()
    await service.shutdown(reason: "test")
  }

  @Test("a denied client is told the configured group")
  func deniedHintNamesTheGroup() async throws {
    try #require(geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0)
    let fixture = try await ServiceFixture(group: "daemon")
    // The denial message for later commands names the group, as the request reply does.
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    let pipe = Pipe()
    process.standardOutput = pipe
    process.arguments = [
      "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
      """
      import socket,sys
      s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=s.makefile('rw')
      for line in ['{"cmd":"request"}','{"cmd":"zoom","zoom":3}']:
          f.write(line+'\\n'); f.flush(); print(f.readline().strip())
      """, fixture.path,
    ]
    try await runToExit(process)
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let lines = output.split(separator: "\n")
    #expect(lines.count == 2, "\(output)")
    #expect(lines.allSatisfy { $0.contains("member of group daemon") }, "\(output)")
    await fixture.stop()
  }
}

/// Answers every request with an SVG document of 2 MB (status with a status reply).
private struct HugeReplyHandler: RequestHandler {
  func handle(_ request: Request, from client: ClientContext) async -> Reply {
    if case .status = request.command {
      return .status(
        authorization: .notDetermined, tracking: false, backendActive: false, backendURI: "x", backendState: .stopped,
        initial: nil, current: nil, clients: 1)
    }
    return .mapSVG(String(repeating: "x", count: 2_000_000))
  }
}

@Suite("Files the daemon reads", .timeLimit(.minutes(3)))
struct DaemonFileTests {
  @Test("a FIFO in place of the config file fails the read instead of hanging a reload")
  func configFIFO() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.path + "/locationd.conf"
    #expect(mkfifo(path, 0o600) == 0)
    let outcome = await resultOnItsOwnThread { () -> String in
      do {
        _ = try Configuration.readTextFile(path)
        return "read"
      } catch {
        return "\(error)"
      }
    }
    #expect(outcome == "not a regular file")
    let parsed = await resultOnItsOwnThread { () -> Bool in
      (try? Configuration.parse(arguments: ["--config", path], readFile: Configuration.readTextFile))
        != nil
    }
    #expect(parsed == false)
  }
}

@Suite("Log lines")
struct LogQuoteTests {
  @Test("format and C1 control characters in values are shown escaped, not applied")
  func formatCharacters() {
    #expect(Log.quote("gpx\u{202E}txt") == #""gpx\u{202e}txt""#)
    #expect(Log.quote("a\u{9B}31m") == #""a\x9b31m""#)
    #expect(Log.quote("zero\u{200B}width") == #""zero\u{200b}width""#)
    #expect(Log.quote("plain") == "plain")
    #expect(Log.quote("caf\u{E9}") == "caf\u{E9}")
  }
}
