import LocationCore
import LocationModel
import LocationTestKit
import MapState
import Regions
import Testing

@testable import LocationProtocol
@testable import ServiceCore

/// When the current location is stale, and that `status`, `location`, the map and `center` give
/// one answer to "is there a fix now".
@Suite("The current location turns stale")
struct StalenessTests {
  /// A service over a fake backend on a manual virtual clock, with one authorized client that
  /// tracks and watches.
  struct Rig {
    let backend = FakeBackend()
    let map = MapStateService()
    let clock = VirtualClock(wallOrigin: 1_790_000_000_000)
    let manager: LocationManager
    let service: LocationService
    let channel = EventChannel()
    let context: ClientContext

    init() async {
      manager = LocationManager(backend: backend)
      service = LocationService(
        manager: manager, map: map, backend: backend,
        authority: AuthorizationAuthority(Authorizer(groupName: nil)),
        regions: RegionService(clock: clock))
      context = ClientContext(connection: channel, peer: PeerCredentials(pid: 1, uid: 0, gid: 0))
      await service.start()
      _ = await service.handle(Request(command: .requestAuthorization), from: context)
      _ = await service.handle(Request(command: .watch(enable: true)), from: context)
    }

    func ask(_ command: Command) async -> JSONValue {
      // Through the wire's bytes: the TPV objects are inserted as encoded text.
      let reply = await service.handle(Request(command: command), from: context).json(id: nil)
      return (try? JSONValue.parse(reply.encoded)) ?? .null
    }

    /// Sends `fix` and waits until the service has dispatched it (a hang guard, not a timing
    /// assertion). It counts locations, not events: the backend's `connected` status, posted
    /// when tracking began, may still be on its way, and counting it as this fix let the test
    /// move the clock before the fix arrived.
    func send(_ fix: Fix) async throws {
      let before = await service.dispatchedLocations
      _ = backend.send(fix: fix)
      var waited = 0
      while await service.dispatchedLocations <= before, waited < 10_000 {
        try await Task.sleep(for: .milliseconds(1))
        waited += 1
      }
      #expect(await service.dispatchedLocations > before, "the fix was not dispatched")
    }

    /// Waits until the watcher has `count` events of class `name` (hang guard as above).
    func waitFor(_ name: String, count: Int) async throws {
      var waited = 0
      while channel.events(name).count < count, waited < 10_000 {
        try await Task.sleep(for: .milliseconds(1))
        waited += 1
      }
    }
  }

  static let time: Int64 = 1_790_000_000_000

  @Test("an epoch without a position makes the current location stale at once: status, location, the map and center agree")
  func noFixEpochIsStale() async throws {
    let rig = await Rig()
    try await rig.send(TestFixes.fix(latitude: 48.8566, longitude: 2.3522, time: Self.time))
    var status = await rig.ask(.status)
    #expect(status["current"]?["lat"]?.doubleValue == 48.8566)
    #expect(status["stale"] == false)
    #expect(await rig.ask(.location)["stale"] == false)
    #expect(await rig.map.currentLocation != nil)

    // The receiver reports an epoch without a position.
    try await rig.send(TestFixes.fix(latitude: 0, longitude: 0, time: Self.time + 1000, mode: .noFix))
    status = await rig.ask(.status)
    // The last position is still given (never a made-up one), marked stale; the map has no
    // location and center has nothing to center on.
    #expect(status["current"]?["lat"]?.doubleValue == 48.8566)
    #expect(status["stale"] == true)
    let location = await rig.ask(.location)
    #expect(location["current"]?["lat"]?.doubleValue == 48.8566)
    #expect(location["stale"] == true)
    #expect(location["age"]?.doubleValue == 0)
    #expect(await rig.map.currentLocation == nil)
    #expect(await rig.ask(.centerOnLocation)["code"] == "noFix")
    try await rig.waitFor("STALE", count: 1)
    #expect(rig.channel.events("STALE").map { $0["stale"] } == [true])
    // The TPV without a position comes before the STALE event it causes.
    let classes = rig.channel.classes.filter { $0 == "TPV" || $0 == "STALE" }
    #expect(classes.suffix(2) == ["TPV", "STALE"])

    // A second epoch without a position says nothing more.
    try await rig.send(TestFixes.fix(latitude: 0, longitude: 0, time: Self.time + 2000, mode: .noFix))
    #expect(rig.channel.events("STALE").count == 1)

    // The next fix with a position ends it everywhere.
    try await rig.send(TestFixes.fix(latitude: 48.8570, longitude: 2.3530, time: Self.time + 3000))
    status = await rig.ask(.status)
    #expect(status["current"]?["lat"]?.doubleValue == 48.857)
    #expect(status["stale"] == false)
    #expect(await rig.ask(.location)["stale"] == false)
    #expect(await rig.map.currentLocation?.latitude == 48.857)
    try await rig.waitFor("STALE", count: 2)
    #expect(rig.channel.events("STALE").map { $0["stale"] } == [true, false])
    await rig.service.shutdown(reason: "test")
  }

  @Test("without any epoch for more than 5 s of the clock, the current location turns stale once, and the next fix ends it")
  func silentSourceTurnsStaleByAge() async throws {
    let rig = await Rig()
    try await rig.send(TestFixes.fix(latitude: 48.8566, longitude: 2.3522, time: Self.time))
    rig.clock.advance(by: .seconds(4))
    #expect(await rig.ask(.status)["stale"] == false)
    #expect(await rig.ask(.status)["age"]?.doubleValue == 4)
    rig.clock.advance(by: .seconds(2))
    try await rig.waitFor("STALE", count: 1)
    let stale = rig.channel.events("STALE")
    #expect(stale.map { $0["stale"] } == [true])
    #expect((stale.first?["age"]?.doubleValue ?? 0) > 5)
    #expect(await rig.ask(.status)["stale"] == true)
    #expect(await rig.ask(.location)["stale"] == true)
    // By age alone the map keeps the last fix: the source has not said it has none.
    #expect(await rig.map.currentLocation != nil)
    rig.clock.advance(by: .seconds(3))
    try await Task.sleep(for: .milliseconds(50))
    #expect(rig.channel.events("STALE").count == 1, "a stale location is reported once")
    try await rig.send(TestFixes.fix(latitude: 48.8570, longitude: 2.3530, time: Self.time + 9000))
    try await rig.waitFor("STALE", count: 2)
    #expect(rig.channel.events("STALE").map { $0["stale"] } == [true, false])
    #expect(await rig.ask(.status)["stale"] == false)
    await rig.service.shutdown(reason: "test")
  }

  @Test("before the first fix, epochs without a position make nothing stale: there is no current location")
  func noFixBeforeAnyFix() async throws {
    let rig = await Rig()
    try await rig.send(TestFixes.fix(latitude: 0, longitude: 0, time: Self.time, mode: .noFix))
    let status = await rig.ask(.status)
    #expect(status["current"] == .null)
    #expect(status["age"] == .null)
    #expect(status["stale"] == false)
    #expect(rig.channel.events("STALE").isEmpty)
    await rig.service.shutdown(reason: "test")
  }
}
