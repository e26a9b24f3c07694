import Foundation
import Glibc
import LocationClient
import LocationTestKit
import Testing

extension EndToEnd.LocationClientEndToEndTests {
  /// Waits until the user's connections watch `count` times (status' `userTracking.watches`),
  /// asking through `client`; false after 30 s.
  static func waitForWatches(_ count: Int, asking client: LocationClient) async throws -> Bool {
    try await waitUntil(timeout: 30) {
      try await client.status().json["userTracking"]?["watches"]?.intValue == count
    }
  }

  /// Polls `body` on the main actor every 10 ms until it holds (true) or `seconds` pass (false).
  @MainActor
  static func waitOnMain(seconds: Double = 30, _ body: @MainActor () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
      if body() { return true }
      try? await Task.sleep(for: .milliseconds(10))
    }
    return body()
  }

  @Test(
    "two users' tracking is counted apart: the backend runs while root's client or uid 65534's locationctl tracks"
  )
  func startStopCountedAcrossUsers() async throws {
    try requireNobodyClient(python: false)
    let scratch = try Scratch(mode: 0o755)
    defer { scratch.remove() }
    let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10", group: "nogroup")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    chmod(daemon.socketPath, 0o666)
    let socket = daemon.socketPath
    let ctl = try Products.path("locationctl")
    func nobody(_ command: String) async throws {
      let run = try await runAsNobody([ctl, "--socket", socket, command])
      #expect(run.status == 0, "locationctl \(command) as uid 65534: \(run)")
    }
    let root = LocationClient(socketPath: socket, timeout: .seconds(20))
    #expect(try await root.requestAuthorization() == .authorized)
    #expect(try await Self.backendActive(socket) == false)

    try await nobody("start")
    #expect(try await Self.backendActive(socket), "uid 65534's start did not start the backend")
    try await root.startTracking()
    // uid 65534 stops its own tracking only: root's goes on.
    try await nobody("stop")
    #expect(try await Self.backendActive(socket), "uid 65534's stop ended root's tracking")
    try await nobody("start")
    try await root.stopTracking()
    #expect(try await Self.backendActive(socket), "root's stop ended uid 65534's tracking")
    #expect(
      try await waitUntil(timeout: 30) { try await root.currentLocation != nil },
      "no fix while uid 65534 tracks")
    try await nobody("stop")
    #expect(
      try await waitUntil(timeout: 30) { try await !Self.backendActive(socket) },
      "the backend ran on after both users stopped")
    #expect(daemon.log.contains("uid=65534"), "\(daemon.log)")
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }

  @MainActor
  @Test(
    "a MapViewModel follows another client's annotations (added, replaced, removed) and its centre stays"
  )
  func mapViewModelFollowsAnotherClientsAnnotations() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    let renderer = RecordingMapRenderer()
    let model = MapViewModel(
      client: LocationClient(socketPath: daemon.socketPath, timeout: .seconds(20)),
      renderer: renderer)
    #expect(await model.requestAuthorization() == .authorized)
    await model.startTracking()
    #expect(await Self.waitOnMain { model.currentCoordinate != nil }, "no fix")
    let centre = try #require(model.mapCenter)
    #expect(model.initialCoordinate == centre)

    let other = LocationClient(socketPath: daemon.socketPath, timeout: .seconds(20))
    #expect(try await other.requestAuthorization() == .authorized)
    // The model's two watching connections (locations, map changes) are in place.
    #expect(
      try await Self.waitForWatches(2, asking: other), "the model does not watch the map")
    let cafe = Coordinate(latitude: 52.52, longitude: 13.405)
    let moved = Coordinate(latitude: 52.53, longitude: 13.41)
    try await other.addAnnotation(identifier: "cafe", coordinate: cafe, title: "Cafe")
    #expect(
      await Self.waitOnMain { model.annotations.map(\.id) == ["cafe"] },
      "the other client's annotation did not arrive: \(model.annotations)")
    try await other.addAnnotation(identifier: "cafe", coordinate: moved, title: "Café")
    #expect(
      await Self.waitOnMain { model.annotations.first?.coordinate == moved },
      "the replacement did not arrive: \(model.annotations)")
    #expect(model.annotations.count == 1 && model.annotations.first?.title == "Café")
    // The other client moves the shared map's centre: this view's camera stays.
    try await other.center(on: cafe)
    try await other.removeAnnotation(identifier: "cafe")
    #expect(
      await Self.waitOnMain { model.annotations.isEmpty },
      "the removal did not arrive: \(model.annotations)")
    let annotationCalls = renderer.calls.filter {
      if case .setCenter = $0 { return false }
      return true
    }
    #expect(
      annotationCalls == [
        .addOrReplaceAnnotation(Annotation(id: "cafe", coordinate: cafe, title: "Cafe")),
        .addOrReplaceAnnotation(Annotation(id: "cafe", coordinate: moved, title: "Café")),
        .removeAnnotation(identifier: "cafe"),
      ])
    #expect(model.mapCenter == centre)
    #expect(renderer.centers == [centre], "the centre moved: \(renderer.centers)")
    model.stopTracking()
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }

  @Test(
    "200 concurrent requestLocation calls on a daemon of 64 clients all get a fix, over one connection"
  )
  func manyConcurrentRequestLocations() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    let client = LocationClient(socketPath: daemon.socketPath, timeout: .seconds(20))
    #expect(try await client.requestAuthorization() == .authorized)
    let outcomes = await withTaskGroup(of: String.self) { group in
      for _ in 0..<200 {
        group.addTask {
          do {
            let location = try await client.requestLocation(timeout: .seconds(60))
            return location.fix.coordinate == nil ? "no coordinate" : "fix"
          } catch {
            return "\(error)"
          }
        }
      }
      var counts: [String: Int] = [:]
      for await outcome in group { counts[outcome, default: 0] += 1 }
      return counts
    }
    #expect(outcomes == ["fix": 200], "\(outcomes)")
    #expect(!daemon.log.contains("tooManyClients"), "\(daemon.log)")
    // The command connection and the shared one-shot connection (and a few more if some calls
    // came after the first fix): far fewer than one per call.
    let connections = daemon.log.components(separatedBy: "clientConnected").count - 1
    #expect((2...20).contains(connections), "\(connections) connections: \(daemon.log)")
    #expect(
      try await waitUntil(timeout: 30) { try await !Self.backendActive(daemon.socketPath) },
      "the one-shot requests left the backend running")
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }

  @Test(
    "a daemon at --max-clients: locationctl and LocationClient say tooManyClients, not a broken pipe or a bare close"
  )
  func fullDaemonSaysTooManyClients() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let daemon = try DaemonProcess(
      scratch: scratch, backend: "simulate?rate=10", extra: ["--max-clients", "1"])
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    let holder = LocationClient(socketPath: daemon.socketPath, timeout: .seconds(20))
    #expect(try await holder.requestAuthorization() == .authorized)
    let ctl = try Products.path("locationctl")
    for _ in 0..<5 {
      let run = try await runTool(ctl, ["--socket", daemon.socketPath, "status"], timeout: 60)
      #expect(run.status != 0, "\(run)")
      #expect(run.stderr.contains("already serves 1 clients"), "\(run)\n\(daemon.log)")
      #expect(!run.stderr.contains("Broken pipe"), "\(run)")
    }
    for _ in 0..<5 {
      let other = LocationClient(socketPath: daemon.socketPath, timeout: .seconds(20))
      do {
        _ = try await other.status()
        Issue.record("a second client was served by a daemon of one")
      } catch let error as LocationClientError {
        #expect(error.code == .tooManyClients, "\(error)")
      }
    }
    withExtendedLifetime(holder) {}
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }
}
