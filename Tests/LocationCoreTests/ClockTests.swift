import LocationCore
import LocationTestKit
import Testing
import LocationModel

@Suite(.timeLimit(.minutes(3)))
struct VirtualClockTests {
  @Test func manualClockWakesSleepersInDeadlineOrderOnlyWhenAdvanced() async throws {
    let clock = VirtualClock(wallOrigin: 1_000_000)
    let woken = Recorder<Int>()
    let late = Task {
      try await clock.sleep(until: .seconds(3))
      woken.append(3)
    }
    let early = Task {
      try await clock.sleep(until: .seconds(1))
      woken.append(1)
    }
    #expect(await eventually { clock.sleeperCount == 2 })
    #expect(await clock.nextDeadline() == .seconds(1))
    clock.advance(to: .milliseconds(500))
    // advance(to:) takes every due sleeper off the list before it returns: both still sleep.
    #expect(clock.sleeperCount == 2)
    #expect(woken.values.isEmpty)
    clock.advance(to: .seconds(1))
    try await early.value
    #expect(woken.values == [1])
    #expect(clock.sleeperCount == 1)
    clock.advance(by: .seconds(5))
    try await late.value
    #expect(woken.values == [1, 3])
    #expect(clock.now == .seconds(6))
    #expect(clock.wallTimeMilliseconds == 1_006_000)
  }

  @Test func cancellingASleeperRemovesItAndThrows() async {
    let clock = VirtualClock()
    let sleeper = Task { try await clock.sleep(until: .seconds(10)) }
    #expect(await eventually { clock.sleeperCount == 1 })
    sleeper.cancel()
    let result = await sleeper.result
    #expect(throws: CancellationError.self) { try result.get() }
    #expect(clock.sleeperCount == 0)
  }

  @Test func automaticClockJumpsToEachDeadline() async throws {
    let clock = VirtualClock(wallOrigin: 0, autoAdvance: true)
    try await clock.sleep(until: .seconds(3600))
    #expect(clock.now == .seconds(3600))
    try await clock.sleep(until: .seconds(10))
    #expect(clock.now == .seconds(3600))
    #expect(clock.wallTimeMilliseconds == 3_600_000)
  }

  @Test func systemClockIsMonotonicAndWallTimeIsPlausible() async throws {
    let clock = SystemClock()
    let before = clock.now
    try await clock.sleep(until: before + .milliseconds(5))
    #expect(clock.now >= before + .milliseconds(5))
    // 2020-01-01 .. 2100-01-01: a sanity check of units (milliseconds), not of the date.
    #expect((1_577_836_800_000...4_102_444_800_000).contains(clock.wallTimeMilliseconds))
  }
}
