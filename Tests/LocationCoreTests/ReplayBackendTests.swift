import Foundation
import LocationCore
import Synchronization
import LocationTestKit
import NMEA
import Testing
import LocationModel

/// Reads events until the next location, skipping status changes; `nil` when the stream ends.
func nextLocation(_ iterator: inout BackendEvents.AsyncIterator) async -> Location? {
  while let event = await iterator.next() {
    if case .location(let location) = event { return location }
  }
  return nil
}

/// Reads events until a status equal to `status`; returns its detail, `nil` if the stream ends.
func nextStatus(_ status: BackendStatus, _ iterator: inout BackendEvents.AsyncIterator) async
  -> String??
{
  while let event = await iterator.next() {
    if case .status(let got, let detail) = event, got == status { return .some(detail) }
  }
  return nil
}

/// Epochs at these log times (ms after 2023-11-14T22:13:20Z), one per second with gaps.
func epochs(atOffsets offsets: [Int64]) -> [DecodedFix] {
  let start: Int64 = 1_700_000_000_000
  return offsets.enumerated().map { index, offset in
    DecodedFix(
      fix: TestFixes.fix(
        latitude: 3.1386 + Double(index) * 1e-4, longitude: 101.6044, time: start + offset),
      line: 1 + index * 8)
  }
}

func makeReplay(
  _ fixes: [DecodedFix], clock: VirtualClock, speed: Double = 1, loop: Bool = false,
  timestamps: ReplayTimestamps = .original, paused: Bool = false
) -> ReplayBackend {
  ReplayBackend(
    source: DecodedFixesSource(name: "test.nmea", fixes: fixes),
    options: .init(
      path: "test.nmea", speed: speed, loop: loop, timestamps: timestamps, startPaused: paused),
    clock: clock, uri: "replay:test.nmea")
}

@Suite(.timeLimit(.minutes(3)))
struct ReplayBackendTests {
  static let offsets: [Int64] = [0, 1000, 2000, 5000, 5200, 8000, 9000]

  @Test(arguments: [1.0, 10.0, 2.5])
  func pacingFollowsTheLogTimesDividedBySpeed(speed: Double) async throws {
    let fixes = epochs(atOffsets: Self.offsets)
    let clock = VirtualClock(wallOrigin: 1_800_000_000_000)
    let replay = makeReplay(fixes, clock: clock, speed: speed, timestamps: .shifted)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var instants: [Duration] = []
    var received: [Location] = []
    for index in fixes.indices {
      if index > 0 { await clock.advanceToNextDeadline() }
      let location = try #require(await nextLocation(&events))
      instants.append(clock.now)
      received.append(location)
    }
    let expected = Self.offsets.map { Duration.milliseconds(Double($0) / speed) }
    #expect(instants == expected)
    // Shifted timestamps: the first fix is "now", the rest keep the log's spacing.
    #expect(received.map { $0.fix.time } == Self.offsets.map { 1_800_000_000_000 + $0 })
    #expect(received.map { $0.provenance.line } == fixes.map(\.line))
    #expect(
      received.allSatisfy { $0.provenance.isSimulated && $0.provenance.source == "test.nmea" })
    #expect(await nextStatus(.endOfData, &events) != nil)
    await replay.stop()
  }

  @Test func atSpeedOneFixTimestampsAdvanceExactlyWithTheVirtualClock() async throws {
    let fixes = epochs(atOffsets: Self.offsets)
    let clock = VirtualClock(wallOrigin: 1_800_000_000_000)
    let replay = makeReplay(fixes, clock: clock, speed: 1, timestamps: .original)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var first: (Int64, Duration)?
    for index in fixes.indices {
      if index > 0 { await clock.advanceToNextDeadline() }
      let location = try #require(await nextLocation(&events))
      let time = try #require(location.fix.time)
      #expect(location.fix == fixes[index].fix)
      if let (firstTime, firstInstant) = first {
        #expect(Duration.milliseconds(time - firstTime) == clock.now - firstInstant)
      } else {
        first = (time, clock.now)
      }
    }
    await replay.stop()
  }

  /// A speed factor as small as the protocol allows (any positive number) puts the next epoch
  /// further away than a Duration or a nanosecond count can hold; the replay must wait (for
  /// practical purposes forever), not trap. Both timestamp modes compute the due time.
  @Test(arguments: [ReplayTimestamps.original, .shifted])
  func aTinySpeedWaitsInsteadOfOverflowing(_ timestamps: ReplayTimestamps) async throws {
    let clock = VirtualClock()
    let replay = makeReplay(epochs(atOffsets: [0, 1000, 2000]), clock: clock, speed: 1e-300, timestamps: timestamps)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await nextLocation(&events) != nil)
    let deadline = await clock.nextDeadline()
    #expect(deadline > .seconds(1_000_000))
    try replay.setSpeed(1e-300)
    #expect(replay.progress.fixesEmitted == 1)
    await replay.stop()
  }

  /// The same through the URI (`speed=1e-21` at the first start) and through the control while
  /// a replay at speed 1 waits for its next epoch (`replay speed 1e-300`).
  @Test func aTinySpeedFromTheURIOrTheControlWaitsInsteadOfOverflowing() async throws {
    let clock = VirtualClock()
    let fixes = epochs(atOffsets: [0, 1000, 2000])
    let options = try ReplayBackend.Options.parse("replay:test.nmea?speed=1e-21")
    let fromURI = ReplayBackend(
      source: DecodedFixesSource(name: "test.nmea", fixes: fixes), options: options, clock: clock,
      uri: "replay:test.nmea?speed=1e-21")
    var uriEvents = fromURI.events.makeAsyncIterator()
    try await fromURI.start()
    #expect(await nextLocation(&uriEvents) != nil)
    #expect(await clock.nextDeadline() > .seconds(1_000_000))
    await fromURI.stop()

    let replay = makeReplay(fixes, clock: clock, speed: 1)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await nextLocation(&events) != nil)
    let progress = try await replay.perform(.speed(1e-300))
    #expect(progress.speed == 1e-300 && progress.fixesEmitted == 1)
    #expect(await clock.nextDeadline() > clock.now + .seconds(1_000_000))
    await replay.stop()
  }

  @Test func anHourOfLogRunsAtOnceOnAnAutomaticClock() async throws {
    let offsets = (0..<3600).map { Int64($0) * 1000 }
    let clock = VirtualClock(autoAdvance: true)
    let replay = makeReplay(epochs(atOffsets: offsets), clock: clock, speed: 1)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var count = 0
    while await nextLocation(&events) != nil {
      count += 1
      if count == offsets.count { break }
    }
    #expect(count == 3600)
    #expect(clock.now == .seconds(3599))
    await replay.stop()
  }

  @Test func pauseFreezesTheLogClockAndResumeContinuesFromIt() async throws {
    let fixes = epochs(atOffsets: [0, 1000, 2000])
    let clock = VirtualClock()
    let replay = makeReplay(fixes, clock: clock)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await nextLocation(&events)?.provenance.line == 1)
    #expect(await clock.nextDeadline() == .seconds(1))
    clock.advance(to: .milliseconds(400))
    replay.pause()
    #expect(replay.progress.isPaused)
    clock.advance(by: .seconds(10))
    #expect(await eventually { clock.sleeperCount == 0 })
    #expect(replay.progress.fixesEmitted == 1)
    replay.resume()
    // 600 ms of the first interval were left when paused at 0.4 s.
    #expect(await clock.nextDeadline() == .milliseconds(11_000))
    await clock.advanceToNextDeadline()
    #expect(await nextLocation(&events)?.provenance.line == 9)
    #expect(await clock.nextDeadline() == .milliseconds(12_000))
    await replay.stop()
  }

  @Test func stepEmitsExactlyOneEpochAndStaysPaused() async throws {
    let fixes = epochs(atOffsets: [0, 1000, 2000, 3000])
    let clock = VirtualClock()
    let replay = makeReplay(fixes, clock: clock, paused: true)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await eventually { replay.progress.isPaused })
    #expect(replay.progress.fixesEmitted == 0)
    // Had the paused replay emitted anything, the first step would not bring the first epoch,
    // and a step that emitted more than one would move the counter past 2 and the next deadline
    // (below) past the second epoch.
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == 1)
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == 9)
    #expect(replay.progress.fixesEmitted == 2)
    #expect(clock.now == .zero)
    #expect(clock.sleeperCount == 0)
    // Stepping a running replay pauses it.
    replay.resume()
    #expect(await clock.nextDeadline() == .seconds(1))
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == 17)
    #expect(replay.progress.isPaused)
    await replay.stop()
  }

  @Test func seekFindsTheEpochByTimeFractionAndOffset() async throws {
    let offsets = (0..<10).map { Int64($0) * 1000 }
    let fixes = epochs(atOffsets: offsets)
    let clock = VirtualClock()
    let replay = makeReplay(fixes, clock: clock, speed: 0, paused: true)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()

    try replay.seek(toTime: 1_700_000_000_000 + 3000)
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == fixes[3].line)

    try replay.seek(toFraction: 0.5)  // span 9 s: the first epoch at or after 4.5 s
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == fixes[5].line)

    try replay.seek(to: .offset(.seconds(2)))  // backwards
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == fixes[2].line)
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == fixes[3].line)

    try replay.seek(toTime: 1_700_000_000_000 + 8500)
    replay.step()
    #expect(await nextLocation(&events)?.provenance.line == fixes[9].line)

    #expect(throws: ReplayError.self) { try replay.seek(toFraction: 1.5) }
    #expect(throws: ReplayError.self) { try replay.setSpeed(-1) }
    await replay.stop()
  }

  @Test func seekWhileRunningEmitsTheTargetAtOnceAndPacesFromIt() async throws {
    let fixes = epochs(atOffsets: (0..<10).map { Int64($0) * 1000 })
    let clock = VirtualClock()
    let replay = makeReplay(fixes, clock: clock, speed: 1)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await nextLocation(&events)?.provenance.line == fixes[0].line)
    #expect(await clock.nextDeadline() == .seconds(1))
    try replay.seek(toFraction: 2.0 / 3.0)  // 6 s
    #expect(await nextLocation(&events)?.provenance.line == fixes[6].line)
    #expect(clock.now == .zero)
    #expect(await clock.nextDeadline() == .seconds(1))
    await clock.advanceToNextDeadline()
    #expect(await nextLocation(&events)?.provenance.line == fixes[7].line)
    await replay.stop()
  }

  @Test func speedChangeTakesEffectFromTheCurrentLogTime() async throws {
    let fixes = epochs(atOffsets: [0, 1000, 2000, 3000])
    let clock = VirtualClock()
    let replay = makeReplay(fixes, clock: clock, speed: 1)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    _ = await nextLocation(&events)
    #expect(await clock.nextDeadline() == .seconds(1))
    clock.advance(to: .milliseconds(500))
    try replay.setSpeed(10)
    // 500 ms of log time remain; at 10x they take 50 ms. The replay's task re-sleeps after the
    // change on its own schedule: until it has, the next deadline may still be the old one.
    #expect(await settledDeadline(clock, expecting: .milliseconds(550)) == .milliseconds(550))
    await clock.advanceToNextDeadline()
    #expect(await nextLocation(&events)?.provenance.line == fixes[1].line)
    #expect(await settledDeadline(clock, expecting: .milliseconds(650)) == .milliseconds(650))
    await replay.stop()
  }

  @Test func loopRestartsCleanlyWithTheSameFixes() async throws {
    let fixes = epochs(atOffsets: [0, 1000, 2000])
    let clock = VirtualClock()
    let replay = makeReplay(fixes, clock: clock, speed: 1, loop: true)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var received: [Location] = []
    var instants: [Duration] = []
    for index in 0..<7 {
      if index > 0 { await clock.advanceToNextDeadline() }
      received.append(try #require(await nextLocation(&events)))
      instants.append(clock.now)
    }
    #expect(received.map(\.fix) == (fixes + fixes + fixes.prefix(1)).map(\.fix))
    #expect(received.map(\.provenance.line) == [1, 9, 17, 1, 9, 17, 1])
    // The new pass follows one usual interval (1 s) after the last epoch.
    #expect(instants == (0..<7).map { Duration.seconds($0) })
    #expect(replay.progress.pass == 3)
    await replay.stop()
  }

  @Test func shiftedTimestampsRestartAtNowOnEachPass() async throws {
    let fixes = epochs(atOffsets: [0, 1000])
    let clock = VirtualClock(wallOrigin: 1_900_000_000_000)
    let replay = makeReplay(fixes, clock: clock, speed: 1, loop: true, timestamps: .shifted)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var times: [Int64?] = []
    for index in 0..<4 {
      if index > 0 { await clock.advanceToNextDeadline() }
      times.append(try #require(await nextLocation(&events)).fix.time)
    }
    #expect(times == [0, 1000, 2000, 3000].map { 1_900_000_000_000 + $0 })
    await replay.stop()
  }

  @Test func shiftedTimestampsAreTheExactTimeTheEpochIsDue() async throws {
    // Started 0.4 ms into a wall millisecond: the first epoch waits for the next whole
    // millisecond, so that its millisecond timestamp is when it was due, not 0.4 ms before.
    let fixes = epochs(atOffsets: [0, 1000, 1500])
    let clock = VirtualClock(wallOrigin: 1_900_000_000_000)
    clock.advance(to: .microseconds(400))
    let replay = makeReplay(fixes, clock: clock, speed: 1, timestamps: .shifted)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var instants: [Duration] = []
    var times: [Int64?] = []
    for _ in fixes.indices {
      await clock.advanceToNextDeadline()
      times.append(try #require(await nextLocation(&events)).fix.time)
      instants.append(clock.now)
    }
    #expect(instants == [1, 1001, 1501].map { Duration.milliseconds($0) })
    #expect(times == [1, 1001, 1501].map { 1_900_000_000_000 + $0 })
    await replay.stop()
  }

  @Test func speedZeroEmitsEverythingThenEndOfData() async throws {
    let fixes = epochs(atOffsets: (0..<500).map { Int64($0) * 1000 })
    let replay = makeReplay(fixes, clock: VirtualClock(), speed: 0)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var lines: [Int] = []
    loop: while let event = await events.next() {
      switch event {
      case .location(let location): lines.append(location.provenance.line ?? -1)
      case .status(.endOfData, _): break loop
      default: continue
      }
    }
    #expect(lines == fixes.map(\.line))
    #expect(replay.progress.isAtEnd)
    await replay.stop()
    #expect(await nextStatus(.stopped, &events) != nil)
  }

  @Test func startingTwiceAfterStopReplaysFromTheBeginning() async throws {
    let fixes = epochs(atOffsets: [0, 1000])
    let replay = makeReplay(fixes, clock: VirtualClock(), speed: 0)
    var events = replay.events.makeAsyncIterator()
    for _ in 0..<2 {
      try await replay.start()
      #expect(await nextLocation(&events)?.provenance.line == 1)
      #expect(await nextLocation(&events)?.provenance.line == 9)
      await replay.stop()
      #expect(await nextStatus(.stopped, &events) != nil)
    }
  }

  @Test func missingFileFailsToStartWithTheErrno() async {
    let replay = ReplayBackend(
      options: .init(path: "/nonexistent/drive.nmea"), clock: VirtualClock())
    await #expect(
      throws: ReplayError.cannotOpen(
        path: "/nonexistent/drive.nmea", errno: 2, message: "No such file or directory")
    ) {
      try await replay.start()
    }
  }

  @Test func parsesReplayURIs() throws {
    let options = try ReplayBackend.Options.parse(
      "replay:/var/log/drive.nmea?speed=10&loop=true&timestamps=shifted")
    #expect(
      options == .init(path: "/var/log/drive.nmea", speed: 10, loop: true, timestamps: .shifted))
    #expect(try ReplayBackend.Options.parse("replay:-") == .init(path: "-"))
    #expect(try ReplayBackend.Options.parse("replay:log.nmea?speed=0&paused=yes").startPaused)
    #expect(try ReplayBackend.Options.parse("replay:-").rolloverFloor == nil)
    #expect(
      try ReplayBackend.Options.parse("replay:log.nmea?rollover-floor=2019-04-07").rolloverFloor
        == CivilDate.days(year: 2019, month: 4, day: 7))
    #expect(throws: BackendURIError.self) {
      try ReplayBackend.Options.parse("replay:log.nmea?rollover-floor=2019-13-01")
    }
    // "none" (the replay default, and gpsd://'s other value) and the upper bound.
    #expect(try ReplayBackend.Options.parse("replay:log.nmea?rollover-floor=none").rolloverFloor == nil)
    #expect(throws: BackendURIError.self) {
      try ReplayBackend.Options.parse("replay:log.nmea?rollover-floor=9999-12-31")
    }
    #expect(
      throws: BackendURIError.invalidValue(
        key: "speed", value: "-1", expected: "a number within 0...1000000 (0 = as fast as possible)")
    ) {
      try ReplayBackend.Options.parse("replay:log.nmea?speed=-1")
    }
    #expect(throws: BackendURIError.self) {
      try ReplayBackend.Options.parse("replay:log.nmea?speed=fast")
    }
    #expect(throws: BackendURIError.self) {
      try ReplayBackend.Options.parse("replay:log.nmea?sped=1")
    }
    #expect(throws: BackendURIError.self) {
      try ReplayBackend.Options.parse("replay:log.nmea?loop=maybe")
    }
    #expect(throws: BackendURIError.missingPath(uri: "replay:")) {
      try ReplayBackend.Options.parse("replay:")
    }
    #expect(throws: BackendURIError.self) { try ReplayBackend.Options.parse("simulate") }
  }
}

@Suite(.timeLimit(.minutes(3)))
struct ReplayRejectionTests {
  @Test func rejectedSentencesOfALogAreReportedAsOneWarningPerChunk() async throws {
    // Three epochs; the second RMC has a wrong checksum and a line of garbage follows it.
    let encoder = NMEAEncoder()
    var lines = (0..<3).flatMap { encoder.encode(TestRoute.fix($0 * 10)) }
    let rmc = try #require(lines.indices.filter { lines[$0].contains("RMC") }.dropFirst().first)
    var damaged = lines[rmc]
    let star = try #require(damaged.lastIndex(of: "*"))
    damaged.replaceSubrange(damaged.index(after: star)..., with: "00")
    lines[rmc] = damaged
    lines.insert("$GPGGA,this is not a sentence*7F", at: rmc + 1)
    let (latitudes, warnings) = try await replayToEnd(lines, name: "rejections")
    let fixes = latitudes.count
    #expect(fixes == 3)
    #expect(warnings.count == 1, "\(warnings)")
    let warning = try #require(warnings.first)
    #expect(warning.contains("2 sentences rejected and skipped"), "\(warning)")
    #expect(warning.contains("checksumMismatch=2"), "\(warning)")
    #expect(warning.hasPrefix("LOG lines 1-\(lines.count): "), "\(warning)")
  }

  /// A log cut off in the middle of its last sentence: the warning names that line, which has
  /// no line end, once (it used to say "lines 49-48").
  @Test func aSentenceCutOffAtTheEndOfTheLogIsReportedOnItsLine() async throws {
    let encoder = NMEAEncoder()
    let lines = (0..<3).flatMap { encoder.encode(TestRoute.fix($0 * 10)) }
    let (latitudes, warnings) = try await replayToEnd(lines, name: "cut", unterminated: "$GPGGA,1200")
    #expect(latitudes.count == 3)
    #expect(
      warnings == ["LOG line \(lines.count + 1): 1 sentence rejected and skipped (truncated=1)"],
      "\(warnings)")
  }
}

@Suite(.timeLimit(.minutes(3)))
struct ReplayFlowTests {
  /// A looping replay at speed 0 never ends; an observer that keeps every event and reads slowly
  /// must hold it back instead of queueing without bound.
  @Test func aSlowLosslessObserverHoldsBackAnEndlessReplay() async throws {
    let replay = ReplayBackend(
      source: DecodedFixesSource(name: "loop", fixes: TestFixes.track(count: 100)),
      options: .init(path: "loop", speed: 0, loop: true), clock: VirtualClock(), uri: "replay:loop")
    let manager = LocationManager(backend: replay)
    let client = ClientID(1)
    await manager.setAuthorization(.authorized, for: client)
    let observer = await manager.observe(coalescing: false)
    try await manager.startUpdating(client: client)
    // Not reading: the replay must stop at the bounded queues (observer backlog, the manager's
    // batch and the backend's queue), not run on. Wait until it has stopped (the count stays the
    // same while the replay task is waiting for room); a replay that ran on would pass any bound
    // and never stop.
    var emittedWhileStalled = -1
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
      let before = replay.progress.fixesEmitted
      for _ in 0..<20 { await Task.yield() }
      try await Task.sleep(for: .milliseconds(50))
      let after = replay.progress.fixesEmitted
      if after > 0 && after == before {
        emittedWhileStalled = after
        break
      }
      if after >= 5_000 { break }
    }
    #expect(
      (1..<5_000).contains(emittedWhileStalled),
      "the replay kept running for a stalled reader: \(replay.progress.fixesEmitted) fixes")
    try #require(emittedWhileStalled > 0)
    #expect(replay.progress.fixesEmitted < 5_000, "the replay kept running")
    // Reading again lets it go on, in order.
    var lines: [Int] = []
    for await event in observer {
      if case .location(let location, let missed) = event {
        #expect(missed == 0)
        lines.append(location.provenance.line ?? -1)
        if lines.count == 3 * emittedWhileStalled { break }
      }
    }
    #expect(replay.progress.fixesEmitted > emittedWhileStalled)
    #expect(lines.count == 3 * emittedWhileStalled)
    await manager.stopUpdating(client: client)
    await manager.shutdown()
  }

  /// A huge input without a single epoch keeps the replay reading; stop() must still end it.
  /// (A sparse file of 1 TiB of zeros: devices such as /dev/zero are refused as logs.)
  @Test func stopEndsAReplayOfAnEndlessInputWithoutEpochs() async throws {
    let path = "/tmp/locationd-sparse-\(getpid()).nmea"
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    #expect(fd >= 0 && ftruncate(fd, 1 << 40) == 0)
    close(fd)
    defer { unlink(path) }
    let replay = ReplayBackend(
      source: NMEAFileSource(path: path), options: .init(path: path, speed: 0),
      clock: VirtualClock(), uri: "replay:\(path)")
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await nextStatus(.connected, &events) != nil, "connected is said before reading")
    try await Task.sleep(for: .milliseconds(200))
    await replay.stop()  // returned: the read loop saw the cancellation
    #expect(await nextStatus(.stopped, &events) != nil)
    #expect(replay.progress.fixesEmitted == 0)
  }
}

/// Client controls as the daemon applies them (``ReplayBackend/perform(_:)``): each control's
/// reply is the position after it, and controls combine in any order.
@Suite(.timeLimit(.minutes(3)))
struct ReplayControlTests {
  static let offsets = (0...20).map { Int64($0) * 1000 }

  /// A replay at speed 1 that emitted the epochs at 0...10 s and is paused at 10 s.
  func pausedAtTen(_ clock: VirtualClock) async throws -> (
    ReplayBackend, BackendEvents.AsyncIterator
  ) {
    let replay = makeReplay(epochs(atOffsets: Self.offsets), clock: clock, speed: 1)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    for index in 0...10 {
      if index > 0 { await clock.advanceToNextDeadline() }
      _ = try #require(await nextLocation(&events))
    }
    let progress = try await replay.perform(.pause)
    #expect(progress.logOffsetMilliseconds == 10_000)
    #expect(progress.isPaused)
    return (replay, events)
  }

  static let orders: [[ReplayControl]] = {
    let controls: [ReplayControl] = [.seek(.offset(.seconds(1))), .speed(2), .resume]
    return [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]].map {
      $0.map { controls[$0] }
    }
  }()

  @Test(arguments: orders)
  func seekSpeedAndResumeInAnyOrderPlayFromTheSeekPositionAtTheNewSpeed(
    _ order: [ReplayControl]
  ) async throws {
    let clock = VirtualClock()
    var (replay, events) = try await pausedAtTen(clock)
    clock.advance(by: .seconds(5))
    for control in order { _ = try await replay.perform(control) }
    let start = clock.now
    var received: [(Int?, Duration)] = []
    for index in 0..<4 {
      if index > 0 { await clock.advanceToNextDeadline() }
      let location = try #require(await nextLocation(&events))
      received.append((location.provenance.line, clock.now - start))
    }
    // From 1 s of log time at 2x: 1, 2, 3, 4 s of log at 0, 0.5, 1, 1.5 s.
    #expect(received.map(\.0) == [1, 2, 3, 4].map { 1 + $0 * 8 })
    #expect(received.map(\.1) == [0, 500, 1000, 1500].map { Duration.milliseconds($0) })
    await replay.stop()
  }

  @Test func theRawControlsInTheReportedOrderDoNotReplayABurst() async throws {
    // The same commands without waiting for each to be applied (as a script sends them).
    let clock = VirtualClock()
    var (replay, events) = try await pausedAtTen(clock)
    try replay.seek(to: .offset(.seconds(1)))
    _ = await replay.settled()
    try replay.setSpeed(2)
    replay.resume()
    #expect(await nextLocation(&events)?.provenance.line == 1 + 8)
    #expect(await clock.nextDeadline() == clock.now + .milliseconds(500))
    await replay.stop()
  }

  @Test func repliesGiveThePositionAfterTheCommand() async throws {
    let clock = VirtualClock()
    var (replay, events) = try await pausedAtTen(clock)
    var progress = try await replay.perform(.seek(.offset(.seconds(3))))
    #expect(progress.logOffsetMilliseconds == 3000)
    progress = try await replay.perform(.pause)
    #expect(progress.logOffsetMilliseconds == 3000)
    progress = try await replay.perform(.step(epochs: 1))  // emits the 3 s epoch
    #expect(progress.logOffsetMilliseconds == 3000)
    #expect(await nextLocation(&events)?.provenance.line == 1 + 3 * 8)
    progress = try await replay.perform(.step(epochs: 1))
    #expect(progress.logOffsetMilliseconds == 4000)
    #expect(await nextLocation(&events)?.provenance.line == 1 + 4 * 8)
    progress = try await replay.perform(.step(epochs: 3))
    #expect(progress.logOffsetMilliseconds == 7000)
    #expect(progress.fixesEmitted == 11 + 5)
    for offset in 5...7 {
      #expect(await nextLocation(&events)?.provenance.line == 1 + offset * 8)
    }
    // Stepping past the end leaves the position at the last epoch.
    progress = try await replay.perform(.step(epochs: 100))
    #expect(progress.logOffsetMilliseconds == 20_000)
    #expect(progress.isAtEnd)
    progress = try await replay.perform(.seek(.offset(.seconds(2))))
    #expect(progress.logOffsetMilliseconds == 2000)
    #expect(!progress.isAtEnd)
    await replay.stop()
  }

  @Test(arguments: [
    ReplayControl.pause, .resume, .step(epochs: 1), .speed(5), .seek(.offset(.seconds(2))),
  ])
  func everyControlIsRefusedWhileStopped(_ control: ReplayControl) async throws {
    let clock = VirtualClock()
    let replay = makeReplay(epochs(atOffsets: [0, 1000, 2000]), clock: clock, speed: 1)
    await #expect(throws: ReplayError.notRunning) { try await replay.perform(control) }
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    // Nothing was kept: the session plays from the start at the URI's speed.
    #expect(await nextLocation(&events)?.provenance.line == 1)
    #expect(await clock.nextDeadline() == .seconds(1))
    let progress = replay.progress
    #expect(progress.fixesEmitted == 1 && progress.logOffsetMilliseconds == 0)
    #expect(!progress.isPaused && progress.speed == 1)
    await replay.stop()
    await #expect(throws: ReplayError.notRunning) { try await replay.perform(control) }
  }

  @Test func controlsOfOneSessionDoNotCarryIntoTheNext() async throws {
    let clock = VirtualClock()
    let replay = makeReplay(epochs(atOffsets: [0, 1000, 2000]), clock: clock, speed: 2)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    _ = await nextLocation(&events)
    _ = try await replay.perform(.speed(5))
    _ = try await replay.perform(.pause)
    await replay.stop()
    try await replay.start()
    #expect(await nextLocation(&events)?.provenance.line == 1)
    #expect(replay.progress.speed == 2)
    #expect(!replay.progress.isPaused)
    #expect(await clock.nextDeadline() == clock.now + .milliseconds(500))
    await replay.stop()
  }

  @Test func pausedIsReportedAsTheBackendState() async throws {
    let clock = VirtualClock()
    let replay = makeReplay(epochs(atOffsets: [0, 1000, 2000]), clock: clock, speed: 1)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    _ = await nextLocation(&events)
    _ = try await replay.perform(.pause)
    #expect(await nextStatus(.paused, &events) == .some("paused at 0 s of test.nmea"))
    _ = try await replay.perform(.resume)
    #expect(await nextStatus(.connected, &events) == .some("replaying test.nmea"))
    await replay.stop()

    let startsPaused = makeReplay(
      epochs(atOffsets: [0, 1000]), clock: clock, speed: 1, paused: true)
    var pausedEvents = startsPaused.events.makeAsyncIterator()
    try await startsPaused.start()
    #expect(await nextStatus(.paused, &pausedEvents) != nil)
    await startsPaused.stop()
  }

  @Test func aGapInTheLogIsReportedWithTheWaitAtTheCurrentSpeed() async throws {
    // 1 Hz, then 630 s without an epoch, then 1 Hz again; at speed 10.
    let clock = VirtualClock()
    let (replay, start) = try await replayWaitingInAGap(clock: clock)
    var events = start
    #expect(await clock.nextDeadline() == .milliseconds(200 + 63_000))
    await clock.advanceToNextDeadline()
    #expect(await nextStatus(.connected, &events) == .some("replaying test.nmea"))
    #expect(await nextLocation(&events)?.provenance.line == 1 + 3 * 8)
    await replay.stop()
  }

  @Test func gapsSkipReplacesAGapByTheUsualIntervalAndKeepsLogPositions() async throws {
    let offsets: [Int64] = [0, 1000, 2000, 632_000, 633_000]
    let clock = VirtualClock()
    let replay = ReplayBackend(
      source: DecodedFixesSource(name: "test.nmea", fixes: epochs(atOffsets: offsets)),
      options: try .parse("replay:test.nmea?gaps=skip"), clock: clock, uri: "replay:test.nmea")
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    var instants: [Duration] = []
    for index in offsets.indices {
      if index > 0 { await clock.advanceToNextDeadline() }
      _ = await nextLocation(&events)
      instants.append(clock.now)
    }
    #expect(instants == [0, 1, 2, 3, 4].map { Duration.seconds($0) })
    #expect(replay.progress.logOffsetMilliseconds == 633_000)
    #expect(throws: BackendURIError.self) { try ReplayBackend.Options.parse("replay:x?gaps=no") }
    #expect(try ReplayBackend.Options.parse("replay:x").gaps == .keep)
    await replay.stop()
  }
}

@Suite(.timeLimit(.minutes(3)))
struct ReplayNonNMEATests {
  @Test func aLogWithoutNMEASentencesSaysSoAtItsEnd() async throws {
    let path = "/tmp/locationd-not-nmea-\(getpid()).gpx"
    #expect(
      FileManager.default.createFile(
        atPath: path, contents: Data(#"<gpx version="1.1"><wpt lat="1" lon="2"/></gpx>"#.utf8)))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let replay = ReplayBackend(
      source: NMEAFileSource(path: path), options: .init(path: path, speed: 0),
      clock: VirtualClock(), uri: "replay:\(path)")
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(
      await nextStatus(.endOfData, &events)
        == .some("end of \(path): no NMEA sentences found in \(path)"))
    await replay.stop()
  }
}

@Suite(.timeLimit(.minutes(3)))
struct ReplayRolloverFloorTests {
  @Test func replayedFixesSayTheirDateWasMoved() async throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("rollover-\(UUID().uuidString).nmea").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    try "$GPRMC,120000,A,4808.9993,N,01135.0798,E,0.0,0.0,251099,,*16\r\n".write(
      toFile: path, atomically: true, encoding: .utf8)
    let options = try ReplayBackend.Options.parse("replay:\(path)?speed=0&rollover-floor=2019-04-07")
    let replay = ReplayBackend(options: options, clock: VirtualClock(autoAdvance: true))
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    let location = try #require(await nextLocation(&events))
    #expect(location.fix.time == Int64(CivilDate.days(year: 2019, month: 6, day: 10)) * 86_400_000 + 43_200_000)
    #expect(location.provenance.rolloverWeeks == 1024)
    await replay.stop()
    // Without the option the date stays as recorded.
    let plain = try #require(try NMEAFileSource(path: path).open().next())
    #expect(plain.fix.time == Int64(CivilDate.days(year: 1999, month: 10, day: 25)) * 86_400_000 + 43_200_000)
    #expect(plain.rolloverWeeks == 0)
  }
}

/// Every status the replay gives says where it stands now, after any control.
@Suite(.timeLimit(.minutes(3)))
struct ReplayStatusDetailTests {
  /// A seek after the end of the log plays again: the backend says it is connected again.
  @Test func aSeekAfterTheEndSaysConnectedAgain() async throws {
    let clock = VirtualClock()
    let replay = makeReplay(epochs(atOffsets: [0, 1000, 2000, 3000]), clock: clock, speed: 0)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await nextStatus(.endOfData, &events) == .some("end of test.nmea"))
    _ = try await replay.perform(.speed(1))
    let progress = try await replay.perform(.seek(.offset(.seconds(1))))
    #expect(!progress.isAtEnd)
    #expect(await nextStatus(.connected, &events) == .some("replaying test.nmea"))
    #expect(await nextLocation(&events)?.provenance.line == 1 + 8)
    await replay.stop()
  }

  /// While paused, a step or seek that moves the replay says the new position; a seek past the
  /// end stands at the log's last epoch.
  @Test func thePausedDetailFollowsStepsAndSeeks() async throws {
    let clock = VirtualClock()
    let replay = makeReplay(
      epochs(atOffsets: (0...29).map { Int64($0) * 1000 }), clock: clock, speed: 1, paused: true)
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    #expect(await nextStatus(.paused, &events) == .some("paused at 0 s of test.nmea"))
    var progress = try await replay.perform(.step(epochs: 3))
    #expect(progress.logOffsetMilliseconds == 2000)
    #expect(await nextStatus(.paused, &events) == .some("paused at 2 s of test.nmea"))
    progress = try await replay.perform(.seek(.offset(.seconds(20))))
    #expect(progress.logOffsetMilliseconds == 20_000)
    #expect(await nextStatus(.paused, &events) == .some("paused at 20 s of test.nmea"))
    progress = try await replay.perform(.step(epochs: 2))
    #expect(progress.logOffsetMilliseconds == 21_000)
    #expect(await nextStatus(.paused, &events) == .some("paused at 21 s of test.nmea"))
    progress = try await replay.perform(.seek(.offset(.seconds(1_000_000_000))))
    #expect(progress.isAtEnd)
    #expect(progress.logOffsetMilliseconds == 29_000)
    await replay.stop()
  }

  /// A speed change, pause and resume, or seek during a gap makes the gap notice stale: it is said
  /// again with the wait that remains, or replaced.
  @Test func theGapNoticeIsSaidAgainAfterControlsDuringTheGap() async throws {
    let clock = VirtualClock()
    let (replay, start) = try await replayWaitingInAGap(clock: clock)
    var events = start
    // 2 s later at speed 10 the log clock is at 22 s: 610 s of log remain.
    clock.advance(by: .seconds(2))
    _ = try await replay.perform(.speed(1))
    #expect(
      await nextStatus(.connected, &events) == .some("gap of 630 s in the log, next fix in 610 s"))
    _ = try await replay.perform(.pause)
    #expect(await nextStatus(.paused, &events) != nil)
    clock.advance(by: .seconds(100))
    _ = try await replay.perform(.resume)
    #expect(
      await nextStatus(.connected, &events) == .some("gap of 630 s in the log, next fix in 610 s"))
    #expect(await clock.nextDeadline() == clock.now + .seconds(610))
    clock.advance(by: .seconds(10))
    _ = try await replay.perform(.speed(2))
    #expect(
      await nextStatus(.connected, &events)
        == .some("gap of 630 s in the log, next fix in 300 s at speed 2"))
    // A seek leaves the gap: the notice is replaced at once.
    _ = try await replay.perform(.seek(.offset(.zero)))
    #expect(await nextStatus(.connected, &events) == .some("replaying test.nmea"))
    #expect(await nextLocation(&events)?.provenance.line == 1)
    await replay.stop()
  }
}

/// A replay at speed 10 of a 1 Hz log with 630 s without an epoch after its third fix, started on
/// `clock` and read up to the announcement of the gap (checked here): the replay now waits out
/// the gap's 63 s.
func replayWaitingInAGap(clock: VirtualClock) async throws -> (ReplayBackend, BackendEvents.AsyncIterator) {
  let offsets: [Int64] = [0, 1000, 2000, 632_000, 633_000]
  let replay = makeReplay(epochs(atOffsets: offsets), clock: clock, speed: 10)
  var events = replay.events.makeAsyncIterator()
  try await replay.start()
  for index in 0..<3 {
    if index > 0 { await clock.advanceToNextDeadline() }
    _ = await nextLocation(&events)
  }
  #expect(
    await nextStatus(.connected, &events)
      == .some("gap of 630 s in the log, next fix in 63 s at speed 10"))
  return (replay, events)
}

/// A rewindable source whose content can change between passes (a log emptied or rotated while
/// it is replayed).
final class ChangingSource: ReplaySource, @unchecked Sendable {
  let name = "changing.nmea"
  var isRewindable: Bool { true }
  private let content: Mutex<[DecodedFix]>
  private let opens = Mutex(0)

  init(_ fixes: [DecodedFix]) { content = Mutex(fixes) }

  func set(_ fixes: [DecodedFix]) { content.withLock { $0 = fixes } }
  var openCount: Int { opens.withLock { $0 } }

  func open() throws(ReplayError) -> any ReplayCursor {
    opens.withLock { $0 += 1 }
    return try DecodedFixesSource(name: name, fixes: content.withLock { $0 }).open()
  }
}

@Suite(.timeLimit(.minutes(3)))
struct ReplayEmptyPassTests {
  @Test("a looping replay of a log without any epoch ends as without loop: no pass after pass")
  func emptyLogIsNotLooped() async throws {
    let source = ChangingSource([])
    let replay = ReplayBackend(
      source: source, options: .init(path: "changing.nmea", speed: 0, loop: true), clock: VirtualClock(),
      uri: "replay:changing.nmea")
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    let detail = try #require(await nextStatus(.endOfData, &events))
    #expect(detail?.contains("no NMEA sentences found") == true, "\(String(describing: detail))")
    // Still ended a while later: it did not open the log pass after pass.
    for _ in 0..<200 { await Task.yield() }
    #expect(source.openCount == 1)
    #expect(replay.progress.pass == 1)
    await replay.stop()
  }

  @Test("a log emptied during a looping replay is read again every second, with one warning, until it holds epochs")
  func emptiedLogIsRetriedOnTheClock() async throws {
    let fixes = epochs(atOffsets: [0, 1000])
    let source = ChangingSource(fixes)
    let clock = VirtualClock()
    let replay = ReplayBackend(
      source: source, options: .init(path: "changing.nmea", speed: 1, loop: true), clock: clock,
      uri: "replay:changing.nmea")
    var events = replay.events.makeAsyncIterator()
    try await replay.start()
    // Pass 1 has its cursor; the log is emptied before pass 2 opens it.
    source.set([])
    _ = try #require(await nextLocation(&events))
    await clock.advanceToNextDeadline()
    _ = try #require(await nextLocation(&events))
    // Pass 2 finds nothing: one warning, then a read each second of the clock.
    var warnings: [String] = []
    while warnings.isEmpty, let event = await events.next() {
      if case .error(let message) = event { warnings.append(message) }
    }
    #expect(warnings.first?.contains("pass 2 found no fixes") == true, "\(warnings)")
    let opened = source.openCount
    for _ in 0..<5 { await clock.advanceToNextDeadline() }
    // One read per second of the clock (the read after the last advance may not have run yet).
    #expect((opened + 4...opened + 5).contains(source.openCount), "\(source.openCount) reads after \(opened)")
    #expect(replay.progress.pass == 2, "an empty read is not a pass")
    // The log holds epochs again: the replay goes on with them.
    source.set(fixes)
    let advancing = Task {
      for _ in 0..<20 where !Task.isCancelled { await clock.advanceToNextDeadline() }
    }
    let again = try #require(await nextLocation(&events))
    advancing.cancel()
    #expect(again.fix == fixes[0].fix)
    await replay.stop()
  }
}

/// The clock's next deadline once it is `expected`, or the one it still has after many turns of
/// the scheduler (no wall-clock wait): a deadline that never becomes `expected` is returned and
/// fails the test.
private func settledDeadline(_ clock: VirtualClock, expecting expected: Duration) async -> Duration {
  var deadline = await clock.nextDeadline()
  var turns = 0
  while deadline != expected && turns < 10_000 {
    await Task.yield()
    deadline = await clock.nextDeadline()
    turns += 1
  }
  return deadline
}
