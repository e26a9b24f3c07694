import LocationCore
import LocationModel
import LocationTestKit
import MapState
import Regions
import Testing

@testable import LocationProtocol
@testable import ServiceCore

/// A client's `stop` served while the fix before it is still on its way to the map.
@Suite("Tracking stops while a fix is dispatched")
struct StopRaceTests {
  @Test("after stop, the map has no location, as the manager has none: also when the fix was still on its way")
  func mapForgetsTheFixOfAStoppedSession() async throws {
    let backend = FakeBackend()
    let map = MapStateService()
    let manager = LocationManager(backend: backend)
    let service = LocationService(
      manager: manager, map: map, backend: backend,
      authority: AuthorizationAuthority(Authorizer(groupName: nil)),
      regions: RegionService(clock: VirtualClock(wallOrigin: 1_790_000_000_000)))
    await service.start()
    let context = ClientContext(connection: EventChannel(), peer: PeerCredentials(pid: 1, uid: 0, gid: 0))
    _ = await service.handle(Request(command: .requestAuthorization), from: context)
    // Each round: start (the backend reports connected), one fix, stop at once (the backend
    // reports stopped): three manager events, the fix dispatched before the stop's.
    for round in 0..<200 {
      let before = await service.dispatchedEvents
      _ = await service.handle(Request(command: .start(LocationFilter())), from: context)
      _ = backend.send(
        fix: TestFixes.fix(latitude: 48.8566, longitude: 2.3522, time: 1_790_000_000_000 + Int64(round) * 1000))
      _ = await service.handle(Request(command: .stop), from: context)
      // A hang guard, not a timing assertion: the events are dispatched without waiting.
      var waited = 0
      while await service.dispatchedEvents < before + 3, waited < 10_000 {
        try await Task.sleep(for: .milliseconds(1))
        waited += 1
      }
      #expect(await service.dispatchedEvents >= before + 3, "round \(round): events not dispatched")
      #expect(await manager.currentLocation == nil)
      #expect(await map.currentLocation == nil, "round \(round): the map kept the stopped session's fix")
      if await map.currentLocation != nil { break }
    }
    await service.shutdown(reason: "test")
  }
}
