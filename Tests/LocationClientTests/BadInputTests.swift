import Foundation
import Glibc
import Testing

@testable import LocationClient

/// What an application can get wrong: numbers JSON cannot carry, timeouts of zero or less, a
/// command before authorization, a socket path that is not a socket. Each gets a clear
/// `LocationClientError` and nothing is sent.
@Suite struct BadInputTests {
  let daemon = FakeDaemon()
  let clock = VirtualClock()

  /// Runs `body` and returns the LocationClientError it threw (a recorded issue when none).
  func failure(
    _ label: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
  ) async -> LocationClientError? {
    do {
      try await body()
      Issue.record("\(label) succeeded", sourceLocation: sourceLocation)
    } catch let error as LocationClientError {
      return error
    } catch {
      Issue.record("\(label) threw \(error)", sourceLocation: sourceLocation)
    }
    return nil
  }

  @Test func nonFiniteNumbersAreRefusedBeforeSending() async throws {
    let client = daemon.client(clock: clock)
    _ = try await client.requestAuthorization()
    let cases: [(String, String, () async throws -> Void)] = [
      (
        "annotate", "annotation.lat",
        {
          try await client.addAnnotation(
            identifier: "x", coordinate: Coordinate(latitude: .nan, longitude: 0))
        }
      ),
      (
        "annotate", "annotation.lon",
        {
          try await client.addAnnotation(
            identifier: "x", coordinate: Coordinate(latitude: 0, longitude: -.infinity))
        }
      ),
      (
        "setCenter", "lat",
        { try await client.center(on: Coordinate(latitude: .infinity, longitude: 0)) }
      ),
      ("zoom", "zoom", { try await client.setZoom(.nan) }),
      (
        "start", "distanceFilter",
        { try await client.startTracking(filter: LocationFilter(distanceFilter: .nan)) }
      ),
      ("replay", "value", { try await client.seekReplay(to: .nan) }),
      ("replay", "value", { try await client.setReplaySpeed(.infinity) }),
    ]
    for (command, member, body) in cases {
      let error = await failure("\(command) with \(member) not finite", body)
      #expect(error?.code == .invalidArgument)
      #expect(
        error?.message.contains("\"\(member)\" must be a finite number") == true, "\(error as Any)")
      #expect(error?.reply == nil)
    }
    // Only the authorization request reached the daemon.
    #expect(daemon.commands == ["request"])
  }

  @Test func timeoutsOfZeroOrLessAreRefusedBeforeConnecting() async throws {
    let client = daemon.client(clock: clock)
    for timeout: Duration in [.zero, .seconds(-1)] {
      let error = await failure("requestLocation(timeout: \(timeout))") {
        _ = try await client.requestLocation(timeout: timeout)
      }
      #expect(error?.code == .invalidArgument)
      #expect(error?.message.contains("more than zero") == true)
    }
    for timeout: Duration in [.zero, .milliseconds(-5)] {
      let broken = LocationClient(timeout: timeout, clock: clock) { FakeTransport(daemon: daemon) }
      let error = await failure("status with a client timeout of \(timeout)") {
        _ = try await broken.status()
      }
      #expect(error?.code == .invalidArgument)
      #expect(error?.message.contains("timeout must be more than zero") == true)
      let stream = await failure("locationUpdates with a client timeout of \(timeout)") {
        for try await _ in broken.locationUpdates {}
      }
      #expect(stream?.code == .invalidArgument)
    }
    #expect(daemon.state.withLock { $0.opened } == 0)
  }

  @Test func aCommandBeforeAuthorizationSaysToRequestIt() async throws {
    daemon.state.withLock { $0.requiresRequest = true }
    let client = daemon.client(clock: clock)
    let error = await failure("map before requestAuthorization") { _ = try await client.mapState }
    #expect(error?.code == .notAuthorized)
    #expect(error?.message.contains("call requestAuthorization() first") == true, "\(error as Any)")
    #expect(error?.reply?["code"] == "notAuthorized")
    #expect(try await client.requestAuthorization() == .authorized)
    #expect(try await client.mapState.zoom == 15)
  }

  @Test func aSocketPathThatIsNotASocketSaysWhatItIs() async throws {
    let directory =
      FileManager.default.temporaryDirectory.path
      + "/locationclient-paths-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try FileManager.default.createDirectory(
      atPath: directory + "/dir", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try #require(FileManager.default.createFile(atPath: directory + "/file", contents: Data()))
    for (path, expected) in [
      (directory + "/file", "is a regular file, not a socket"),
      (directory + "/dir", "is a directory, not a socket"),
      (directory + "/file/locationd.sock", "is not a directory"),
      (directory + "/missing.sock", "does not exist"),
    ] {
      let client = LocationClient(socketPath: path, timeout: .seconds(60))
      let error = await failure("connecting to \(path)") { _ = try await client.status() }
      #expect(error?.code == .noDaemon, "\(path)")
      #expect(error?.message.contains(expected) == true, "\(error as Any)")
      let stream = await failure("iterating on \(path)") {
        for try await _ in client.locationUpdates {}
      }
      #expect(stream?.code == .noDaemon, "\(path)")
    }
  }

  @Test(arguments: [FakeDaemon.State.Fullness.atOpen, .atSend])
  func aFullDaemonSaysTooManyClientsNotConnectionClosed(
    _ fullness: FakeDaemon.State.Fullness
  ) async throws {
    daemon.state.withLock { $0.full = fullness }
    let client = daemon.client(clock: clock)
    let command = await failure("status on a full daemon") { _ = try await client.status() }
    #expect(command?.code == .tooManyClients, "\(command as Any)")
    #expect(command?.message.contains("--max-clients") == true)
    let stream = await failure("locationUpdates on a full daemon") {
      for try await _ in client.locationUpdates {}
    }
    #expect(stream?.code == .tooManyClients, "\(stream as Any)")
    let oneShot = await failure("requestLocation on a full daemon") {
      _ = try await client.requestLocation(timeout: .seconds(5))
    }
    #expect(oneShot?.code == .tooManyClients, "\(oneShot as Any)")
  }

  @Test func aRequestOverTheProtocolsLineLengthIsRefusedAloneBeforeSending() async throws {
    let client = daemon.client(clock: clock)
    _ = try await client.requestAuthorization()
    let huge = String(repeating: "a", count: Request.maximumLineLength)
    let error = await failure("an annotation with a 64 KiB identifier") {
      try await client.addAnnotation(
        identifier: huge, coordinate: Coordinate(latitude: 1, longitude: 2))
    }
    #expect(error?.code == .lineTooLong)
    #expect(error?.message.contains("nothing was sent") == true, "\(error as Any)")
    let title = await failure("an annotation with a 64 KiB title") {
      try await client.addAnnotation(
        identifier: "t", coordinate: Coordinate(latitude: 1, longitude: 2), title: huge)
    }
    #expect(title?.code == .lineTooLong)
    // Just under the limit goes out (the daemon then judges it).
    let fitting = String(repeating: "b", count: 1000)
    try await client.addAnnotation(
      identifier: fitting, coordinate: Coordinate(latitude: 1, longitude: 2))
    #expect(daemon.commands == ["request", "annotate"])
  }
}
