import Glibc
import Testing

@testable import LocationClient

/// The client on a scripted daemon: replies, errors, timeouts on the virtual clock, streams and
/// reconnection.
@Suite struct LocationClientTests {
  let daemon = FakeDaemon()
  let clock = VirtualClock()

  @Test func errorRepliesKeepTheDaemonsCode() async throws {
    let client = daemon.client(clock: clock)
    _ = try await client.requestAuthorization()
    do {
      try await client.removeAnnotation(identifier: "nothing")
      Issue.record("remove of an unknown id succeeded")
    } catch let error as LocationClientError {
      #expect(error.code == .notFound)
      #expect(error.daemonCode == .notFound)
      #expect(error.message == "no annotation")
    }
  }

  @Test func aReplyWithoutItsMembersIsABadReply() async throws {
    // The scripted daemon answers `status` with a bare OK: not a STATUS reply.
    let client = daemon.client(clock: clock)
    do {
      _ = try await client.status()
      Issue.record("a bare OK was taken for a status")
    } catch let error as LocationClientError {
      #expect(error.code == .badReply)
      #expect(error.message.contains("STATUS reply"))
    }
  }

  @Test func anErrorAboutTheConnectionAnswersTheWaitingRequest() async throws {
    daemon.state.withLock { $0.silent = true }
    let client = daemon.client(clock: clock)
    let call = Task { try await client.mapState }
    let daemon = daemon
    let clock = clock
    // The request waits (its timeout sleeps on the clock); then the daemon refuses the client.
    try await withHangGuard { await clock.waitForSleepers(1) }
    daemon.sendToAll(
      .object([
        JSONMember("class", "ERROR"), JSONMember("code", "tooManyClients"),
        JSONMember("message", "64 clients already"),
      ]))
    do {
      _ = try await call.value
      Issue.record("the map state came from a daemon that refused the client")
    } catch let error as LocationClientError {
      #expect(error.code == .tooManyClients)
      #expect(error.message == "64 clients already")
    }
  }

  @Test func replayControlsSendTheProtocolsMembers() async throws {
    let client = daemon.client(clock: clock)
    let status = try await client.seekReplay(to: 12.5)
    #expect(status == ReplayStatus(state: "paused", speed: 1, position: 12.5))
    _ = try await client.stepReplay(epochs: 3)
    let requests = daemon.state.withLock { $0.requests }
    #expect(requests.map { $0["action"]?.stringValue } == ["seek", "step"])
    #expect(requests.map { $0["value"]?.doubleValue } == [12.5, 3])
  }

  @Test func aDaemonThatNeverAnswersTimesOut() async throws {
    daemon.state.withLock { $0.silent = true }
    let client = daemon.client(clock: clock)
    let clock = clock
    let call = Task { try await client.status() }
    try await withHangGuard { await clock.waitForSleepers(1) }
    clock.advance(by: .seconds(29))
    clock.advance(by: .seconds(1))
    do {
      _ = try await call.value
      Issue.record("status answered by a silent daemon")
    } catch let error as LocationClientError {
      #expect(error.code == .timedOut)
      #expect(error.message.contains("did not answer status"))
    }
  }

  @Test func requestLocationTimesOutWithoutAFixAndClosesItsConnection() async throws {
    let client = daemon.client(clock: clock)
    let clock = clock
    let request = Task { try await client.requestLocation(timeout: .seconds(5)) }
    let daemon = daemon
    try await withHangGuard { await daemon.waitForWatchers(1) }
    try await withHangGuard { await clock.waitForSleepers(1) }
    clock.advance(by: .seconds(5))
    await #expect(throws: LocationClientError.self) { try await request.value }
    try await withHangGuard { await daemon.waitForClosed(1) }
    #expect(daemon.watcherCount == 0)
  }

  @Test func requestLocationReturnsTheFirstFix() async throws {
    let client = daemon.client(clock: clock)
    let request = Task { try await client.requestLocation(timeout: .seconds(5)) }
    let daemon = daemon
    try await withHangGuard { await daemon.waitForWatchers(1) }
    daemon.push(.object([JSONMember("class", "TPV"), JSONMember("mode", 1)]))
    daemon.push(FakeDaemon.tpv(49.27, -123.18, time: "2026-11-29T20:55:10.250Z"))
    let location = try await request.value
    #expect(location.fix.coordinate == Coordinate(latitude: 49.27, longitude: -123.18))
    #expect(location.fix.time == 1_795_985_710_250)
    #expect(location.fix.eph == 19)
    #expect(location.provenance.backend == "simulate")
    try await withHangGuard { await daemon.waitForClosed(1) }
  }

  @Test func overlappingRequestLocationCallsShareOneConnection() async throws {
    let client = daemon.client(clock: clock)
    let requests = (0..<200).map { _ in
      Task { try await client.requestLocation(timeout: .seconds(5)) }
    }
    let daemon = daemon
    try await withHangGuard {
      await daemon.waitForWatchers(1)
      while client.oneShotWaiterCount < 200 { await Task.yield() }
    }
    daemon.push(FakeDaemon.tpv(3.1386, 101.6044))
    for request in requests {
      #expect(
        try await request.value.fix.coordinate == Coordinate(latitude: 3.1386, longitude: 101.6044))
    }
    try await withHangGuard { await daemon.waitForClosed(1) }
    #expect(daemon.state.withLock { $0.opened } == 1)
    #expect(daemon.watcherCount == 0)
    #expect(client.oneShotWaiterCount == 0)
  }

  @Test func aCancelledRequestLocationLeavesTheOthersAndTheLastOneClosesTheConnection()
    async throws
  {
    let client = daemon.client(clock: clock)
    let daemon = daemon
    let first = Task { try await client.requestLocation(timeout: .seconds(5)) }
    let second = Task { try await client.requestLocation(timeout: .seconds(5)) }
    try await withHangGuard {
      await daemon.waitForWatchers(1)
      while client.oneShotWaiterCount < 2 { await Task.yield() }
    }
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(daemon.watcherCount == 1)
    daemon.push(FakeDaemon.tpv(10, 20))
    #expect(try await second.value.fix.coordinate == Coordinate(latitude: 10, longitude: 20))
    try await withHangGuard { await daemon.waitForClosed(1) }
    // Alone and cancelled: its connection closes, so its tracking ends.
    let third = Task { try await client.requestLocation(timeout: .seconds(5)) }
    try await withHangGuard {
      await daemon.waitForWatchers(1)
      while client.oneShotWaiterCount < 1 { await Task.yield() }
    }
    third.cancel()
    await #expect(throws: CancellationError.self) { try await third.value }
    try await withHangGuard { await daemon.waitForClosed(2) }
    #expect(daemon.watcherCount == 0)
    #expect(client.oneShotWaiterCount == 0)
  }

  @Test func breakingTheLoopClosesTheWatchingConnection() async throws {
    let client = daemon.client(clock: clock)
    let daemon = daemon
    let consumer = Task {
      var seen: [Coordinate] = []
      for try await location in client.locationUpdates(everyFix: true) {
        if let coordinate = location.fix.coordinate { seen.append(coordinate) }
        if seen.count == 2 { break }
      }
      return seen
    }
    try await withHangGuard { await daemon.waitForWatchers(1) }
    daemon.push(FakeDaemon.tpv(1, 1))
    daemon.push(FakeDaemon.tpv(2, 2))
    #expect(
      try await consumer.value == [
        Coordinate(latitude: 1, longitude: 1), Coordinate(latitude: 2, longitude: 2),
      ])
    try await withHangGuard { await daemon.waitForClosed(1) }
    #expect(daemon.watcherCount == 0)
    #expect(daemon.commands == ["request", "watch"])
  }

  @Test func updatesResumeAfterARestartAndCommandsReconnect() async throws {
    let client = daemon.client(clock: clock)
    let clock = clock
    let daemon = daemon
    #expect(try await client.requestAuthorization() == .authorized)
    let consumer = Task {
      var seen: [Coordinate] = []
      for try await location in client.locationUpdates(everyFix: true) {
        if let coordinate = location.fix.coordinate { seen.append(coordinate) }
        if seen.count == 2 { break }
      }
      return seen
    }
    try await withHangGuard { await daemon.waitForWatchers(1) }
    daemon.push(FakeDaemon.tpv(1, 1))
    #expect(
      try await client.initialLocation?.fix.coordinate == Coordinate(latitude: 1, longitude: 1))
    daemon.goDown()
    // One failed attempt while down, then the pause on the virtual clock, then back.
    try await withHangGuard { await clock.waitForSleepers(1) }
    daemon.comeBack()
    clock.advance(by: .milliseconds(500))
    try await withHangGuard { await daemon.waitForWatchers(1) }
    daemon.push(FakeDaemon.tpv(2, 2))
    #expect(
      try await consumer.value == [
        Coordinate(latitude: 1, longitude: 1), Coordinate(latitude: 2, longitude: 2),
      ])
    // The command connection ended with the restart: the next command opens a new one and asks
    // for authorization again before it.
    #expect(
      try await client.initialLocation?.fix.coordinate == Coordinate(latitude: 2, longitude: 2))
    let commands = daemon.commands
    #expect(commands.suffix(2) == ["request", "location"])
  }

  @Test func refusedUpdatesThrowNotAuthorized() async throws {
    daemon.state.withLock { $0.authorizes = false }
    let client = daemon.client(clock: clock)
    do {
      for try await _ in client.locationUpdates {}
      Issue.record("updates ended without an error")
    } catch let error as LocationClientError {
      #expect(error.code == .notAuthorized)
    }
  }

  @Test func noDaemonIsAnErrorWithAdvice() async throws {
    let client = LocationClient(
      socketPath: "/tmp/no-such-dir-\(getpid())/l.sock", timeout: .seconds(5))
    do {
      _ = try await client.status()
      Issue.record("status without a daemon succeeded")
    } catch let error as LocationClientError {
      #expect(error.code == .noDaemon)
      #expect(error.message.contains("is locationd running?"))
    }
  }

  @Test(arguments: [
    ("2026-11-29T20:55:10.000Z", Int64(1_795_985_710_000)),
    ("2026-11-29T20:55:10Z", Int64(1_795_985_710_000)),
    ("1970-01-01T00:00:00.5Z", Int64(500)),
    ("2024-02-29T23:59:59.999999Z", Int64(1_709_251_199_999)),
  ])
  func readsTPVTimes(_ text: String, _ milliseconds: Int64) {
    #expect(Wire.milliseconds(iso8601: text) == milliseconds)
  }

  @Test(arguments: [
    "2026-02-30T00:00:00Z", "2026-11-29 20:55:10Z", "2026-11-29T25:00:00Z", "2026-11-29T20:55:10.Z",
    "",
  ])
  func refusesBadTimes(_ text: String) {
    #expect(Wire.milliseconds(iso8601: text) == nil)
  }
}
