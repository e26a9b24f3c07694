import Synchronization
import LocationModel
import SystemIO

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The time source a backend paces itself on: a monotonic timeline for sleeping and a UTC wall
/// clock for timestamps.
///
/// The daemon uses ``SystemClock``; tests use ``VirtualClock`` so that an hour of log or route runs
/// in milliseconds with the same output every time.
public protocol LocationClock: Sendable {
  /// Monotonic time elapsed since the clock's origin (never goes backwards).
  var now: Duration { get }
  /// UTC wall time in milliseconds since 1970-01-01T00:00:00Z.
  var wallTimeMilliseconds: Int64 { get }
  /// UTC wall time in nanoseconds since 1970-01-01T00:00:00Z, for scheduling on whole wall
  /// milliseconds. The default is ``wallTimeMilliseconds`` times 10^6.
  var wallTimeNanoseconds: Int64 { get }
  /// Suspends until ``now`` reaches `deadline`; returns at once when it already has.
  ///
  /// - Throws: `CancellationError` when the calling task is cancelled while sleeping.
  func sleep(until deadline: Duration) async throws
}

extension LocationClock {
  /// ``wallTimeMilliseconds`` in nanoseconds (a clock with a finer wall time overrides it).
  public var wallTimeNanoseconds: Int64 { wallTimeMilliseconds * 1_000_000 }
}

/// The real clock: `ContinuousClock` for sleeping, `CLOCK_REALTIME` for timestamps.
public struct SystemClock: LocationClock {
  private let origin: ContinuousClock.Instant

  /// Creates a clock whose ``now`` is zero at the moment of creation.
  public init() {
    origin = ContinuousClock.now
  }

  /// Monotonic time since this clock was created.
  public var now: Duration { ContinuousClock.now - origin }

  /// UTC wall time from `clock_gettime(CLOCK_REALTIME)`, milliseconds since 1970.
  public var wallTimeMilliseconds: Int64 { WallClock.milliseconds() }

  /// UTC wall time from `clock_gettime(CLOCK_REALTIME)`, nanoseconds since 1970.
  public var wallTimeNanoseconds: Int64 { WallClock.nanoseconds() }

  /// Sleeps on `ContinuousClock` until `deadline` (relative to this clock's origin).
  public func sleep(until deadline: Duration) async throws {
    try await ContinuousClock().sleep(until: origin + deadline, tolerance: nil)
  }
}

/// A clock that only moves when told to, for deterministic tests and fast simulation.
///
/// Two ways to drive it:
/// - **automatic** (`autoAdvance: true`): a `sleep(until:)` moves ``now`` straight to its deadline
///   and returns, so a paced backend runs as fast as the CPU allows, with exactly the instants it
///   would have seen in real time. Meant for one sleeping task at a time.
/// - **manual** (default): sleepers wait until ``advance(to:)`` or ``advance(by:)`` moves time past
///   their deadline; ``nextDeadline()`` waits for the next sleeper so a test can step exactly from
///   one paced event to the next.
///
/// The wall clock is `wallOrigin` (milliseconds since 1970) plus ``now``.
public final class VirtualClock: LocationClock {
  private struct Sleeper {
    var id: UInt64
    var deadline: Duration
    var continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var now: Duration = .zero
    var nextID: UInt64 = 0
    var sleepers: [Sleeper] = []
    var deadlineWaiters: [CheckedContinuation<Duration, Never>] = []
  }

  private let state = Mutex(State())
  private let autoAdvance: Bool
  private let wallOrigin: Int64

  /// Creates a virtual clock at ``now`` zero.
  ///
  /// - Parameters:
  ///   - wallOrigin: UTC wall time at ``now`` zero, milliseconds since 1970
  ///     (default 2024-01-01T00:00:00Z).
  ///   - autoAdvance: whether sleeping moves time forward by itself (see the type's discussion).
  public init(wallOrigin: Int64 = 1_704_067_200_000, autoAdvance: Bool = false) {
    self.wallOrigin = wallOrigin
    self.autoAdvance = autoAdvance
  }

  /// Virtual time since the origin.
  public var now: Duration { state.withLock { $0.now } }

  /// `wallOrigin` plus ``now``, in milliseconds since 1970.
  public var wallTimeMilliseconds: Int64 {
    wallOrigin + Self.milliseconds(now)
  }

  /// `wallOrigin` plus ``now``, in nanoseconds since 1970.
  public var wallTimeNanoseconds: Int64 {
    let (seconds, attoseconds) = now.components
    return wallOrigin * 1_000_000 + seconds * 1_000_000_000 + attoseconds / 1_000_000_000
  }

  /// Number of tasks currently sleeping on this clock.
  public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

  /// Sleeps until virtual time reaches `deadline` (at once in automatic mode).
  ///
  /// - Throws: `CancellationError` when the task is cancelled before the deadline.
  public func sleep(until deadline: Duration) async throws {
    try Task.checkCancellation()
    if autoAdvance {
      state.withLock { if $0.now < deadline { $0.now = deadline } }
      await Task.yield()
      try Task.checkCancellation()
      return
    }
    let id: UInt64? = state.withLock { state in
      if deadline <= state.now { return nil }
      state.nextID += 1
      return state.nextID
    }
    guard let id else { return }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        let (resumeNow, waiters): (Bool, [CheckedContinuation<Duration, Never>]) = state.withLock {
          state in
          if deadline <= state.now || Task.isCancelled { return (true, []) }
          state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
          let waiters = state.deadlineWaiters
          state.deadlineWaiters = []
          return (false, waiters)
        }
        if resumeNow {
          if Task.isCancelled {
            continuation.resume(throwing: CancellationError())
          } else {
            continuation.resume()
          }
        }
        for waiter in waiters { waiter.resume(returning: deadline) }
      }
    } onCancel: {
      let sleeper: Sleeper? = state.withLock { state in
        guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
        return state.sleepers.remove(at: index)
      }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves time forward to `instant` (never backwards) and wakes, in deadline order, every sleeper
  /// whose deadline has been reached.
  public func advance(to instant: Duration) {
    let due: [Sleeper] = state.withLock { state in
      if instant > state.now { state.now = instant }
      let now = state.now
      let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
      state.sleepers.removeAll { $0.deadline <= now }
      return due
    }
    for sleeper in due { sleeper.continuation.resume() }
  }

  /// Moves time forward by `duration`; see ``advance(to:)``.
  public func advance(by duration: Duration) {
    advance(to: now + duration)
  }

  /// Waits until at least one task sleeps on this clock, and returns the earliest deadline.
  public func nextDeadline() async -> Duration {
    if let earliest = state.withLock({ $0.sleepers.map(\.deadline).min() }) { return earliest }
    let deadline = await withCheckedContinuation {
      (continuation: CheckedContinuation<Duration, Never>) in
      let earliest: Duration? = state.withLock { state in
        if let earliest = state.sleepers.map(\.deadline).min() { return earliest }
        state.deadlineWaiters.append(continuation)
        return nil
      }
      if let earliest { continuation.resume(returning: earliest) }
    }
    return state.withLock { $0.sleepers.map(\.deadline).min() } ?? deadline
  }

  /// Advances to the earliest sleeper's deadline, waiting for one to appear first; returns it.
  @discardableResult
  public func advanceToNextDeadline() async -> Duration {
    let deadline = await nextDeadline()
    advance(to: deadline)
    return deadline
  }

  /// Whole milliseconds in `duration`, rounded towards negative infinity.
  static func milliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    let ms = attoseconds / 1_000_000_000_000_000
    return seconds * 1000
      + (attoseconds < 0 && attoseconds % 1_000_000_000_000_000 != 0 ? ms - 1 : ms)
  }
}
