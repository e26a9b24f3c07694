import Foundation
import Glibc
import LocationCore
import LocationModel
import LocationTestKit
import MapState
import Regions
import Synchronization
import SystemIO
import Testing

@testable import LocationProtocol
@testable import ServiceCore

private let root = PeerCredentials(pid: 1, uid: 0, gid: 0)
/// Paris, a circle of 200 m around it.
private let center = Coordinate(latitude: 48.8566, longitude: 2.3522)

/// The real service over a fake backend, its regions on a manual virtual clock and in a
/// temporary state directory.
private struct RegionHarness {
  let directory: TemporaryDirectory
  let backend = FakeBackend()
  let clock = VirtualClock(wallOrigin: 1_790_000_000_000)
  let service: LocationService
  let logged = Recorder<String>()

  init(directory: TemporaryDirectory? = nil) async throws {
    self.directory = try directory ?? TemporaryDirectory()
    let state = self.directory.path + "/state"
    mkdir(state, 0o700)
    let logged = logged
    let regions = RegionService(
      store: RegionStore(directory: state) { logged.append($0) }, clock: clock)
    service = LocationService(
      manager: LocationManager(backend: backend),
      map: MapStateService(store: MapStateStore(directory: state) { _ in }), backend: backend,
      authority: AuthorizationAuthority(Authorizer(groupName: nil)), regions: regions)
    await service.start()
  }

  var statePath: String { directory.path + "/state" }

  /// Authorizes `channel` (root) and answers `line` from it, as the socket front-end would: a
  /// line the protocol refuses is answered with its error.
  func ask(_ line: String, _ channel: EventChannel) async throws -> JSONValue {
    let context = ClientContext(connection: channel, peer: root)
    _ = await service.handle(Request(command: .requestAuthorization), from: context)
    let request: Request
    do {
      request = try Request.parse(Array(line.utf8))
    } catch {
      return Reply.error(error.code, message: error.message).json(id: nil)
    }
    // Encoded and read back, as a client reads it (a GeoJSON reply holds raw bytes).
    return try JSONValue.parse(await service.handle(request, from: context).json(id: nil).encoded)
  }

  /// Moves the clock on by one second and sends a fix taken now, `north` metres north of the
  /// center (HDOP 1: a 95% error radius of about 19 m).
  @discardableResult func fix(north: Double) -> Location {
    clock.advance(by: .seconds(1))
    let latitude = center.latitude + north / 111_195
    return backend.send(
      fix: TestFixes.fix(
        latitude: latitude, longitude: center.longitude, time: clock.wallTimeMilliseconds))
  }

  func stop(removing: Bool = true) async {
    await service.shutdown(reason: "test")
    if removing { directory.remove() }
  }
}

@Suite("Region monitoring in the service", .serialized)
struct RegionServiceTests {
  static let addHome =
    #"{"cmd":"region","action":"add","region":{"id":"home","title":"Home","circle":{"lat":48.8566,"lon":2.3522,"radius":200},"dwell":30}}"#

  @Test("enter, dwell and exit reach a watcher as REGION events after the deciding fix's TPV")
  func enterDwellExit() async throws {
    let harness = try await RegionHarness()
    let watcher = EventChannel()
    let added = try await harness.ask(Self.addHome, watcher)
    #expect(added["class"] == "REGION")
    #expect(added["replaced"] == false)
    #expect(added["region"]?["state"] == "unknown")
    #expect(added["region"]?["circle"]?["radius"]?.doubleValue == 200)
    #expect(try await harness.ask(#"{"cmd":"watch"}"#, watcher)["class"] == "WATCH")
    #expect(await eventually { harness.backend.isRunning })

    // Two fixes 1 km north: outside is decided (no event: nothing was entered or left).
    harness.fix(north: 1000)
    harness.fix(north: 1000)
    // Two fixes at the center: the second confirms the entry.
    harness.fix(north: 0)
    let entering = harness.fix(north: 0)
    #expect(await eventually { watcher.regionEvents.count == 1 })
    let enter = try #require(watcher.regionEvents.first)
    #expect(enter["region"] == "home")
    #expect(enter["event"] == "enter")
    #expect(
      enter["time"]?.stringValue == GPSDJSON.iso8601(milliseconds: try #require(entering.fix.time)))
    #expect(enter["fix"]?["class"] == "TPV")
    #expect(enter["fix"]?["lat"]?.doubleValue == entering.fix.coordinate?.latitude)
    #expect(enter.objectMembers?.map(\.key) == ["class", "region", "event", "time", "fix"])
    // The deciding fix's TPV came first.
    let classes = watcher.classes
    let enterIndex = try #require(classes.firstIndex(of: "REGION"))
    #expect(classes[..<enterIndex].filter { $0 == "TPV" }.count == 4)
    let state = try await harness.ask(
      #"{"cmd":"region","action":"state","region":"home"}"#, watcher)
    #expect(state["region"]?["state"] == "inside")
    #expect(state["region"]?["since"]?.stringValue == enter["time"]?.stringValue)
    #expect((state["region"]?["distance"]?.doubleValue ?? 0) < -150)

    // 30 s of dwell on the clock, no fix needed: the clock task fires it.
    harness.clock.advance(by: .seconds(31))
    #expect(await eventually { watcher.regionEvents.count == 2 })
    #expect(watcher.regionEvents.last?["event"] == "dwell")

    harness.fix(north: 1000)
    let leaving = harness.fix(north: 1000)
    #expect(await eventually { watcher.regionEvents.count == 3 })
    let exit = try #require(watcher.regionEvents.last)
    #expect(exit["event"] == "exit")
    #expect(
      exit["time"]?.stringValue == GPSDJSON.iso8601(milliseconds: try #require(leaving.fix.time)))
    await harness.stop()
  }

  @Test("add replaces by id, list is sorted, remove and state of an unknown id are notFound")
  func addListRemove() async throws {
    let harness = try await RegionHarness()
    let client = EventChannel()
    #expect(try await harness.ask(Self.addHome, client)["replaced"] == false)
    let replaced = try await harness.ask(
      #"{"cmd":"region","action":"add","region":{"id":"home","circle":{"lat":48.8566,"lon":2.3522,"radius":50}}}"#,
      client)
    #expect(replaced["replaced"] == true)
    #expect(replaced["region"]?["title"] == .null)
    _ = try await harness.ask(
      #"{"cmd":"region","action":"add","region":{"id":"a-office","circle":{"lat":48.86,"lon":2.35,"radius":80}}}"#,
      client)
    let list = try await harness.ask(#"{"cmd":"region","action":"list"}"#, client)
    #expect(list["class"] == "REGIONS")
    #expect(
      list["regions"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["a-office", "home"])
    #expect(list["regions"]?.arrayValue?.last?["circle"]?["radius"]?.doubleValue == 50)
    let removed = try await harness.ask(
      #"{"cmd":"region","action":"remove","region":"home"}"#, client)
    #expect(removed["removed"] == true)
    #expect(removed["region"]?["id"] == "home")
    #expect(
      try await harness.ask(#"{"cmd":"region","action":"remove","region":"home"}"#, client)["code"]
        == "notFound")
    #expect(
      try await harness.ask(#"{"cmd":"region","action":"state","region":"home"}"#, client)["code"]
        == "notFound")
    // A refused region changes nothing.
    let refused = try await harness.ask(
      #"{"cmd":"region","action":"add","region":{"id":"a-office","circle":{"lat":48.86,"lon":2.35,"radius":0}}}"#,
      client)
    #expect(refused["code"] == "invalidArgument")
    #expect(refused["message"]?.stringValue?.contains("radius") == true)
    let after = try await harness.ask(#"{"cmd":"region","action":"list"}"#, client)
    #expect(after["regions"]?.arrayValue?.first?["circle"]?["radius"]?.doubleValue == 80)
    await harness.stop()
  }

  @Test("ids are compared by code points: a canonically equivalent spelling neither replaces nor finds a region")
  func idsAreLiteral() async throws {
    let harness = try await RegionHarness()
    let client = EventChannel()
    func addRegion(_ id: String) async throws -> JSONValue {
      try await harness.ask(
        #"{"cmd":"region","action":"add","region":{"id":""# + id + #"","circle":{"lat":1,"lon":1,"radius":100}}}"#,
        client)
    }
    #expect(try await addRegion(#"caf\u00e9"#)["replaced"] == false)
    let other = try await addRegion(#"cafe\u0301"#)
    #expect(other["code"] == "invalidArgument", "\(other)")
    #expect(other["message"]?.stringValue?.contains("canonically equivalent") == true)
    #expect(try await addRegion(#"\u212b"#)["replaced"] == false)
    #expect(try await addRegion(#"\u00c5"#)["code"] == "invalidArgument")
    let list = try await harness.ask(#"{"cmd":"region","action":"list"}"#, client)
    #expect(list["regions"]?.arrayValue?.count == 2)
    #expect(
      try await harness.ask(#"{"cmd":"region","action":"state","region":"cafe\u0301"}"#, client)["code"]
        == "notFound")
    #expect(
      try await harness.ask(#"{"cmd":"region","action":"remove","region":"cafe\u0301"}"#, client)["code"]
        == "notFound")
    #expect(
      try await harness.ask(#"{"cmd":"region","action":"remove","region":"caf\u00e9"}"#, client)["removed"]
        == true)
    // With the first spelling gone, the other may be added.
    #expect(try await addRegion(#"cafe\u0301"#)["replaced"] == false)
    await harness.stop()
  }

  @Test("region commands need authorization, like map")
  func needsAuthorization() async throws {
    let harness = try await RegionHarness()
    let stranger = EventChannel()
    let request = try Request.parse(Array(#"{"cmd":"region","action":"list"}"#.utf8))
    let reply = await harness.service.handle(
      request,
      from: ClientContext(
        connection: stranger, peer: PeerCredentials(pid: 9, uid: 65534, gid: 65534)))
    #expect(reply.json(id: nil)["code"] == "notAuthorized")
    await harness.stop()
  }

  @Test("regions and their states survive a restart of the service; enter is not fired again")
  func persistence() async throws {
    let first = try await RegionHarness()
    let watcher = EventChannel()
    _ = try await first.ask(Self.addHome, watcher)
    _ = try await first.ask(#"{"cmd":"watch"}"#, watcher)
    #expect(await eventually { first.backend.isRunning })
    first.fix(north: 0)
    first.fix(north: 0)
    #expect(await eventually { watcher.regionEvents.count == 1 })
    let saved = try String(contentsOfFile: first.statePath + "/regions.json", encoding: .utf8)
    #expect(saved.contains("\"home\"") && saved.contains("\"unknown\""), "saved at add: \(saved)")
    // The state change is saved with the next second of the clock.
    first.clock.advance(by: .seconds(1))
    #expect(
      await eventually {
        ((try? String(contentsOfFile: first.statePath + "/regions.json", encoding: .utf8)) ?? "")
          .contains("\"inside\"")
      })
    var info = stat()
    #expect(stat(first.statePath + "/regions.json", &info) == 0 && info.st_mode & 0o777 == 0o600)
    await first.stop(removing: false)

    let second = try await RegionHarness(directory: first.directory)
    let client = EventChannel()
    let state = try await second.ask(#"{"cmd":"region","action":"state","region":"home"}"#, client)
    #expect(state["region"]?["state"] == "inside")
    #expect(state["region"]?["title"] == "Home")
    _ = try await second.ask(#"{"cmd":"watch"}"#, client)
    #expect(await eventually { second.backend.isRunning })
    second.clock.advance(by: .seconds(3))
    for _ in 0..<4 { second.fix(north: 0) }
    #expect(await eventually { client.classes.filter { $0 == "TPV" }.count == 4 })
    #expect(client.regionEvents.filter { $0["event"] == "enter" }.isEmpty, "\(client.regionEvents)")
    #expect(second.logged.values.isEmpty, "\(second.logged.values)")
    await second.stop()
  }

  @Test("a failed save answers notSaved, keeps the change in effect, and is retried on the clock")
  func failedSave() async throws {
    let directory = try TemporaryDirectory()
    let state = directory.path + "/state"
    mkdir(state, 0o700)
    let failing = Mutex(true)
    let clock = VirtualClock(wallOrigin: 1_790_000_000_000)
    let regions = RegionService(
      store: RegionStore(
        directory: state, log: { _ in },
        failureInjector: { step in
          step == "rename" && failing.withLock { $0 } ? ENOSPC : nil
        }), clock: clock)
    let backend = FakeBackend()
    let service = LocationService(
      manager: LocationManager(backend: backend), map: MapStateService(), backend: backend,
      authority: AuthorizationAuthority(Authorizer(groupName: nil)), regions: regions)
    await service.start()
    let client = EventChannel()
    let context = ClientContext(connection: client, peer: root)
    _ = await service.handle(Request(command: .requestAuthorization), from: context)
    let reply = await service.handle(try Request.parse(Array(Self.addHome.utf8)), from: context)
      .json(id: nil)
    #expect(reply["code"] == "notSaved")
    #expect(reply["message"]?.stringValue?.contains("No space left on device") == true, "\(reply)")
    #expect(await regions.count == 1, "the change is in effect")
    #expect(access(state + "/regions.json", F_OK) != 0)
    failing.withLock { $0 = false }
    clock.advance(by: .seconds(1))
    #expect(await eventually { access(state + "/regions.json", F_OK) == 0 })
    #expect(await eventually { await regions.unsavedChanges == nil })
    await service.shutdown(reason: "test")
    directory.remove()
  }

  @Test("a corrupt regions file gives one log line, no regions, and is kept aside")
  func corruptFile() async throws {
    let directory = try TemporaryDirectory()
    let state = directory.path + "/state"
    mkdir(state, 0o700)
    let fd = try #require(openFile(state + "/regions.json"))
    try SystemIO.writeAll(fd, "{\"version\":1,\"regions\":[{")
    close(fd)
    let logged = Recorder<String>()
    let regions = RegionService(store: RegionStore(directory: state) { logged.append($0) })
    #expect(await regions.count == 0)
    #expect(logged.values.count == 1)
    #expect(
      logged.values.first?.hasPrefix(
        "regions file corrupt, starting with no regions path=\(state)/regions.json") == true)
    #expect(logged.values.first?.contains("keptAs=regions.json.rejected") == true)
    #expect(access(state + "/regions.json.rejected", F_OK) == 0)
    #expect(access(state + "/regions.json", F_OK) != 0)
    directory.remove()
  }

  @Test("a second bad start keeps the first rejected file: each gets its own name, at most 10")
  func rejectedFilesAreKept() async throws {
    let directory = try TemporaryDirectory()
    let state = directory.path + "/state"
    mkdir(state, 0o700)
    var names: [String] = []
    for start in 0..<12 {
      let fd = try #require(openFile(state + "/regions.json"))
      try SystemIO.writeAll(fd, "bad \(start)")
      // Distinct modification times, in order of the starts (the oldest is replaced).
      var times = [
        timespec(tv_sec: 1_000_000 + start, tv_nsec: 0), timespec(tv_sec: 1_000_000 + start, tv_nsec: 0),
      ]
      #expect(futimens(fd, &times) == 0)
      close(fd)
      let logged = Recorder<String>()
      _ = RegionService(store: RegionStore(directory: state) { logged.append($0) })
      let line = logged.values.first ?? ""
      let kept = line.components(separatedBy: "keptAs=").last ?? ""
      names.append(kept)
    }
    let expected = ["regions.json.rejected"] + (1...9).map { "regions.json.rejected.\($0)" }
    #expect(Array(names.prefix(10)) == expected)
    // The eleventh and twelfth replace the oldest two.
    #expect(Array(names.suffix(2)) == ["regions.json.rejected", "regions.json.rejected.1"])
    func contents(_ name: String) -> String {
      (try? String(contentsOfFile: state + "/" + name, encoding: .utf8)) ?? ""
    }
    #expect(contents("regions.json.rejected") == "bad 10")
    #expect(contents("regions.json.rejected.2") == "bad 2")
    #expect(contents("regions.json.rejected.9") == "bad 9")
    directory.remove()
  }

  @Test("a regions file with a member given twice is refused as corrupt, not read one way")
  func duplicateMemberFile() async throws {
    let directory = try TemporaryDirectory()
    let state = directory.path + "/state"
    mkdir(state, 0o700)
    let fd = try #require(openFile(state + "/regions.json"))
    try SystemIO.writeAll(fd, #"{"version":1,"regions":[],"regions":[]}"#)
    close(fd)
    let logged = Recorder<String>()
    let regions = RegionService(store: RegionStore(directory: state) { logged.append($0) })
    #expect(await regions.count == 0)
    #expect(logged.values.first?.contains(#"error=duplicate member "regions""#) == true, "\(logged.values)")
    #expect(access(state + "/regions.json.rejected", F_OK) == 0)
    directory.remove()
  }

  @Test("a planted symbolic link is not followed: no regions, one line")
  func plantedLink() async throws {
    let directory = try TemporaryDirectory()
    let state = directory.path + "/state"
    mkdir(state, 0o700)
    symlink("/etc/passwd", state + "/regions.json")
    let logged = Recorder<String>()
    let regions = RegionService(store: RegionStore(directory: state) { logged.append($0) })
    #expect(await regions.count == 0)
    #expect(logged.values.count == 1)
    #expect(logged.values.first?.contains("a symbolic link") == true)
    #expect(logged.values.first?.contains("keptAs=regions.json.rejected") == true)
    directory.remove()
  }

  @Test("the map's GeoJSON and SVG show the regions with their states")
  func renderers() async throws {
    let harness = try await RegionHarness()
    let client = EventChannel()
    _ = try await harness.ask(Self.addHome, client)
    let geojson = try await harness.ask(#"{"cmd":"map","format":"geojson"}"#, client)
    let features = geojson["geojson"]?["features"]?.arrayValue ?? []
    let region = try #require(features.first { $0["properties"]?["kind"] == "region" })
    #expect(region["id"] == "home")
    #expect(region["properties"]?["state"] == "unknown")
    #expect(region["properties"]?["title"] == "Home")
    let svg = try await harness.ask(#"{"cmd":"map","format":"svg"}"#, client)
    #expect(
      svg["svg"]?.stringValue?.contains(#"<g class="region" data-id="home" data-state="unknown">"#)
        == true)
    _ = try await harness.ask(#"{"cmd":"region","action":"remove","region":"home"}"#, client)
    let after = try await harness.ask(#"{"cmd":"map","format":"geojson"}"#, client)
    #expect(
      after["geojson"]?["features"]?.arrayValue?.contains { $0["properties"]?["kind"] == "region" }
        == false)
    await harness.stop()
  }
}

/// Creates `path` for writing (mode 0600), failing if it exists.
private func openFile(_ path: String) -> Int32? {
  let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
  return fd >= 0 ? fd : nil
}
