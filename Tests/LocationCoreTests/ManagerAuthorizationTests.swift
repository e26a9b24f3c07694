import LocationCore
import LocationModel
import LocationTestKit
import Testing

private func fix(_ latitude: Double) -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.coordinate = Coordinate(latitude: latitude, longitude: 2.5)
  return fix
}

/// The manager decides nothing: its owner sets each client's authorization.
@Suite(.timeLimit(.minutes(1)))
struct ManagerAuthorizationTests {
  @Test("a client is notDetermined until its owner sets a status")
  func ownerDecides() async throws {
    let manager = LocationManager(backend: FakeBackend())
    #expect(await manager.authorizationStatus(for: alice) == .notDetermined)
    await #expect(throws: LocationManagerError.notAuthorized(alice, .notDetermined)) {
      try await manager.startUpdating(client: alice)
    }
    await manager.setAuthorization(.authorized, for: alice)
    #expect(await manager.authorizationStatus(for: alice) == .authorized)
    try await manager.startUpdating(client: alice)
    #expect(await manager.isTracking(client: alice))
  }

  @Test("setting a tracking client to denied stops its tracking, the backend with it, and its deliveries")
  func revokingStopsTracking() async throws {
    let backend = FakeBackend()
    let manager = LocationManager(backend: backend)
    await manager.setAuthorization(.authorized, for: alice)
    await manager.setAuthorization(.authorized, for: bob)
    let stream = await manager.subscribe(client: alice, coalescing: false)
    try await manager.startUpdating(client: alice)
    try await manager.startUpdating(client: bob)
    backend.send(fix: fix(1))
    #expect(await eventually { await manager.currentLocation != nil })

    await manager.setAuthorization(.denied, for: alice)
    #expect(await !manager.isTracking(client: alice))
    #expect(await manager.isTracking(client: bob))
    #expect(backend.isRunning, "bob still tracks")
    backend.send(fix: fix(2))
    #expect(await eventually { await manager.currentLocation?.fix.coordinate?.latitude == 2 })
    await #expect(throws: LocationManagerError.notAuthorized(alice, .denied)) {
      try await manager.startUpdating(client: alice)
    }
    let delivered = locations(await drain(stream)).compactMap(\.fix.coordinate?.latitude)
    #expect(delivered == [1], "nothing after the revocation")

    await manager.setAuthorization(.denied, for: bob)
    #expect(!backend.isRunning, "the last tracking client was revoked")
    #expect(await manager.trackingClientCount == 0)
  }
}
