import NMEA
import Synchronization
import LocationModel

/// Where to move a replay to.
public enum ReplayPosition: Sendable, Hashable {
  /// The first epoch at or after this UTC time, milliseconds since 1970 as in the log (`Fix.time`).
  /// Epochs that carry only a time of day are compared with `time` modulo one day.
  case time(Int64)
  /// The first epoch at least this far (log time) after the log's first epoch.
  case offset(Duration)
  /// The first epoch at this fraction, `0...1`, of the log's time span.
  case fraction(Double)
}

/// How replayed fixes are timestamped.
public enum ReplayTimestamps: String, Sendable, Hashable, Codable {
  /// As in the log.
  case original
  /// Shifted so that the first epoch of each pass carries the clock's current wall time; the
  /// spacing between epochs stays as in the log.
  case shifted
}

/// What a replay does with a gap in its log (an interval between consecutive epochs longer than
/// ``ReplayBackend/gapThresholdMilliseconds`` and ten times the interval before it).
public enum ReplayGaps: String, Sendable, Hashable, Codable {
  /// Waits the gap out at the replay's speed, and says so in a ``BackendStatus/connected`` status
  /// whose detail reads like `gap of 630 s in the log, next fix in 63 s`.
  case keep
  /// Replaces the gap by the interval before it, and says so in a status whose detail reads like
  /// `skipped a gap of 630 s in the log`. Positions (seek, replies) stay in log time.
  case skip
}

/// A replay control as a client gives it, for ``ReplayBackend/perform(_:)``.
public enum ReplayControl: Sendable, Hashable {
  /// Freezes the log clock.
  case pause
  /// Restarts the log clock where it stands.
  case resume
  /// Emits the next `epochs` epochs (at least one) and leaves the replay paused.
  case step(epochs: Int)
  /// Changes the speed factor (`>= 0`, 0 = as fast as possible).
  case speed(Double)
  /// Moves the replay to a position.
  case seek(ReplayPosition)
}

/// Where a replay stands.
public struct ReplayProgress: Sendable, Hashable {
  /// 1-based pass number (increments when a looping replay restarts).
  public var pass: Int
  /// Epochs emitted since start.
  public var fixesEmitted: Int
  /// Line of the last emitted epoch's first sentence; `nil` before the first.
  public var line: Int?
  /// Where the replay stands in log time since the first epoch of its pass, milliseconds: the
  /// last emitted epoch, or after a seek the epoch found (emitted next); `nil` before either.
  public var logOffsetMilliseconds: Int64?
  /// Whether the replay is paused.
  public var isPaused: Bool
  /// Whether the replay reached the end of its log and does not loop.
  public var isAtEnd: Bool
  /// The speed factor (0 = as fast as possible).
  public var speed: Double
  /// Whether the replay restarts at the end.
  public var loops: Bool
}

/// Replays an NMEA 0183 log as a ``LocationBackend``, paced by the log's own timestamps.
///
/// Epochs are paced by the differences between their UTC times (`Fix.time`, or the time of day
/// while no date is known) divided by ``speed``: 1 is real time, 10 ten times faster, 0 as fast as
/// the consumer takes them. Pause, resume, seek, single-step, speed and loop can be changed at any
/// time. Every fix is marked ``Provenance/isSimulated`` with its log line in ``Provenance/line``.
/// The log is read in 64 KiB chunks; memory stays bounded.
public final class ReplayBackend: BatchingLocationBackend {
  /// Settings from a `replay:` URI.
  public struct Options: Sendable, Hashable {
    /// The log file, or `-` for standard input.
    public var path: String
    /// Speed factor: 0 = as fast as possible, 1 = real time; the URI accepts `0...1000000`.
    public var speed: Double
    /// Whether to restart at the beginning after the last epoch.
    public var loop: Bool
    /// Timestamps as in the log or shifted to now.
    public var timestamps: ReplayTimestamps
    /// Whether to start paused (then ``ReplayBackend/step()`` or ``ReplayBackend/resume()``).
    public var startPaused: Bool
    /// GPS week-rollover floor, days since 1970-01-01: dates before it move forward in 1024-week
    /// steps until they are not. `nil` (the default for recorded logs): dates as recorded.
    public var rolloverFloor: Int? = nil
    /// What to do with gaps in the log (default ``ReplayGaps/keep``).
    public var gaps: ReplayGaps

    /// Creates options; see the properties for ranges.
    public init(
      path: String, speed: Double = 1, loop: Bool = false, timestamps: ReplayTimestamps = .original,
      startPaused: Bool = false, gaps: ReplayGaps = .keep
    ) {
      self.path = path
      self.speed = speed
      self.loop = loop
      self.timestamps = timestamps
      self.startPaused = startPaused
      self.gaps = gaps
    }

    static let parameterNames = ["speed", "loop", "timestamps", "paused", "gaps", "rollover-floor"]

    /// Parses
    /// `replay:PATH[?speed=S&loop=BOOL&timestamps=original|shifted&paused=BOOL&gaps=keep|skip&rollover-floor=YYYY-MM-DD]`.
    ///
    /// `PATH` is `-` for standard input. `speed` is a finite number `>= 0`.
    /// - Throws: ``BackendURIError`` naming the bad part.
    public static func parse(_ uri: String) throws(BackendURIError) -> Options {
      let parts = try BackendURIParts.parse(uri, scheme: "replay", allowed: parameterNames)
      guard let path = parts.path else { throw .missingPath(uri: uri) }
      var options = Options(path: path)
      for (key, value) in parts.parameters {
        switch key {
        case "speed":
          options.speed = try BackendURIParts.double(
            value, key: key, range: 0...1_000_000,
            expected: "a number >= 0 (0 = as fast as possible)")
        case "loop":
          options.loop = try BackendURIParts.bool(value, key: key)
        case "paused":
          options.startPaused = try BackendURIParts.bool(value, key: key)
        case "rollover-floor":
          // "none" is the default for a recorded log, accepted as for gpsd:// sources.
          if value == "none" {
            options.rolloverFloor = nil
          } else {
            guard let day = CivilDate.days(iso: value) else {
              throw .invalidValue(key: key, value: value, expected: "a date YYYY-MM-DD (1980 to 2079) or none")
            }
            options.rolloverFloor = day
          }
        case "gaps":
          guard let gaps = ReplayGaps(rawValue: value) else {
            throw .invalidValue(key: key, value: value, expected: "keep or skip")
          }
          options.gaps = gaps
        default:
          guard let timestamps = ReplayTimestamps(rawValue: value) else {
            throw .invalidValue(key: key, value: value, expected: "original or shifted")
          }
          options.timestamps = timestamps
        }
      }
      return options
    }
  }

  private struct Control {
    var speed: Double
    var loop: Bool
    var paused: Bool
    var pendingSteps = 0
    var pendingSeek: ReplayPosition?
    var generation: UInt64 = 0
    var wake: CheckedContinuation<Void, Never>?
    var sleepTask: Task<Void, any Error>?
    var runTask: Task<Void, Never>?
    /// Log clock: log time `anchorPace` (ms) was at clock instant `anchorInstant`.
    var anchorPace: Int64?
    var anchorInstant: Duration = .zero
    /// The wall time (ns since 1970) at `anchorInstant`, when the anchor was put on a whole wall
    /// millisecond for shifted timestamps; `nil` after pause, resume, step, speed changes.
    var anchorWall: Int64?
    var lastEmittedPace: Int64?
    var progress: ReplayProgress
    /// The newest ``generation`` the run loop has fully acted on (seeks done, steps emitted).
    var appliedGeneration: UInt64 = 0
    /// ``settled()`` callers waiting for a generation to be applied.
    var settleWaiters: [(generation: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
  }

  /// The backend URI.
  public let uri: String
  /// Every event for the backend's whole life; one consumer.
  public let events: AsyncStream<BackendEvent>
  private let queue = EventQueue<BackendEvent>(capacity: 1024)
  private let source: any ReplaySource
  private let clock: any LocationClock
  private let timestamps: ReplayTimestamps
  private let control: Mutex<Control>
  private let startPaused: Bool
  private let initialSpeed: Double
  private let initialLoop: Bool
  private let gaps: ReplayGaps
  private let batchQueue = EventQueue<[BackendEvent]>(capacity: 8)
  private let batched = Mutex(false)

  /// Creates a replay of `options.path` on `clock`.
  public convenience init(
    options: Options, clock: any LocationClock = SystemClock(), uri: String? = nil
  ) {
    self.init(
      source: NMEAFileSource(path: options.path, rolloverFloor: options.rolloverFloor), options: options,
      clock: clock,
      uri: uri ?? "replay:\(options.path)")
  }

  /// Creates a replay of any ``ReplaySource`` (`options.path` is ignored).
  public init(source: any ReplaySource, options: Options, clock: any LocationClock, uri: String) {
    self.uri = uri
    self.source = source
    self.clock = clock
    self.timestamps = options.timestamps
    self.startPaused = options.startPaused
    self.gaps = options.gaps
    let speed = options.speed.isFinite && options.speed >= 0 ? options.speed : 1
    self.initialSpeed = speed
    self.initialLoop = options.loop
    self.control = Mutex(
      Control(
        speed: speed, loop: options.loop, paused: options.startPaused,
        progress: ReplayProgress(
          pass: 1, fixesEmitted: 0, isPaused: options.startPaused, isAtEnd: false, speed: speed,
          loops: options.loop)))
    events = queue.stream
  }

  deinit {
    queue.finish()
    batchQueue.finish()
  }

  /// Switches to batch delivery (see ``BatchingLocationBackend``); a second call returns a
  /// stream that has already finished.
  public func makeEventBatches() -> AsyncStream<[BackendEvent]> {
    let first: Bool = batched.withLock { batched in
      defer { batched = true }
      return !batched
    }
    guard first else { return AsyncStream { $0.finish() } }
    return batchQueue.stream
  }

  // MARK: Controls

  /// Where the replay stands.
  public var progress: ReplayProgress { control.withLock { $0.progress } }

  /// The current speed factor (0 = as fast as possible).
  public var speed: Double { control.withLock { $0.speed } }

  /// Changes the speed factor; the log clock continues from where it is.
  ///
  /// - Throws: ``ReplayError/invalidControl(_:)`` unless `speed` is finite and `>= 0`.
  public func setSpeed(_ speed: Double) throws(ReplayError) {
    guard speed.isFinite, speed >= 0 else {
      throw .invalidControl("speed must be a finite number >= 0, got \(speed)")
    }
    let now = clock.now
    changeControl { control in
      if let position = Self.logPosition(control, now: now) {
        control.anchorPace = position
        control.anchorInstant = now
        control.anchorWall = nil
      }
      control.speed = speed
      control.progress.speed = speed
    }
  }

  /// Turns looping on or off; turning it on at the end of the log restarts the replay.
  public func setLoop(_ loop: Bool) {
    changeControl { control in
      control.loop = loop
      control.progress.loops = loop
    }
  }

  /// Freezes the log clock; nothing is emitted until ``resume()`` or ``step()``.
  public func pause() {
    let now = clock.now
    changeControl { control in
      guard !control.paused else { return }
      if let position = Self.logPosition(control, now: now) {
        control.anchorPace = position
      }
      control.anchorWall = nil
      control.paused = true
      control.progress.isPaused = true
    }
  }

  /// Restarts the log clock from where ``pause()`` froze it.
  public func resume() {
    let now = clock.now
    changeControl { control in
      guard control.paused else { return }
      control.anchorInstant = now
      control.anchorWall = nil
      control.paused = false
      control.progress.isPaused = false
    }
  }

  /// Emits exactly the next epoch (`epochs` of them) and leaves the replay paused (pausing it
  /// first if it ran).
  public func step(epochs: Int = 1) {
    let now = clock.now
    changeControl { control in
      if !control.paused, let position = Self.logPosition(control, now: now) {
        control.anchorPace = position
      }
      control.anchorWall = nil
      control.paused = true
      control.progress.isPaused = true
      control.pendingSteps += max(1, epochs)
    }
  }

  /// Moves the replay to `position`; the epoch found is emitted at once (or by the next
  /// ``step()`` when paused) and pacing continues from it.
  ///
  /// - Throws: ``ReplayError/invalidControl(_:)`` for a fraction outside `0...1` or a negative
  ///   offset.
  public func seek(to position: ReplayPosition) throws(ReplayError) {
    switch position {
    case .fraction(let fraction):
      guard fraction.isFinite, (0...1).contains(fraction) else {
        throw .invalidControl("fraction must be within 0...1, got \(fraction)")
      }
    case .offset(let offset):
      guard offset >= .zero else { throw .invalidControl("offset must not be negative") }
    case .time:
      break
    }
    changeControl { control in control.pendingSeek = position }
  }

  /// Seeks to the first epoch at or after UTC `time` (milliseconds since 1970, as in the log).
  public func seek(toTime time: Int64) throws(ReplayError) { try seek(to: .time(time)) }

  /// Seeks to `fraction` (`0...1`) of the log's time span.
  public func seek(toFraction fraction: Double) throws(ReplayError) {
    try seek(to: .fraction(fraction))
  }

  /// Whether the replay runs (between ``start()`` and ``stop()``).
  public var isRunning: Bool { control.withLock { $0.runTask != nil } }

  /// Applies a client's control and returns where the replay stands once the run loop has acted
  /// on it: after a seek, the position of the epoch found; after a step, that of the last epoch
  /// stepped (already emitted).
  ///
  /// Controls apply only to a running replay: a speed, pause or seek given while nothing tracks
  /// would otherwise be lost or silently carried into a later session, so every control is
  /// refused then, and each ``start()`` begins with the URI's `speed`, `loop` and `paused`.
  ///
  /// - Throws: ``ReplayError/notRunning`` while stopped; ``ReplayError/invalidControl(_:)`` for
  ///   a negative or non-finite speed, a fraction outside `0...1` or a negative offset.
  public func perform(_ command: ReplayControl) async throws(ReplayError) -> ReplayProgress {
    guard isRunning else { throw .notRunning }
    switch command {
    case .pause: pause()
    case .resume: resume()
    case .step(let epochs): step(epochs: max(1, epochs))
    case .speed(let speed): try setSpeed(speed)
    case .seek(let position): try seek(to: position)
    }
    return await settled()
  }

  /// Waits until the run loop has acted on every control given so far (a pending seek found its
  /// epoch, pending steps were emitted or the log ended), then returns ``progress``. Returns at
  /// once when the replay is not running.
  public func settled() async -> ReplayProgress {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done: Bool = control.withLock { control in
        if control.runTask == nil || control.appliedGeneration >= control.generation { return true }
        control.settleWaiters.append((control.generation, continuation))
        return false
      }
      if done { continuation.resume() }
    }
    return progress
  }

  /// Records that the run loop has acted on every control up to `generation`.
  private func markApplied(_ generation: UInt64) {
    let ready: [CheckedContinuation<Void, Never>] = control.withLock { control in
      guard generation > control.appliedGeneration else { return [] }
      control.appliedGeneration = generation
      guard !control.settleWaiters.isEmpty else { return [] }
      var ready: [CheckedContinuation<Void, Never>] = []
      control.settleWaiters.removeAll { waiter in
        guard waiter.generation <= generation else { return false }
        ready.append(waiter.continuation)
        return true
      }
      return ready
    }
    for continuation in ready { continuation.resume() }
  }

  private func changeControl(_ body: (inout Control) -> Void) {
    let (wake, sleep): (CheckedContinuation<Void, Never>?, Task<Void, any Error>?) =
      control.withLock { control in
        body(&control)
        control.generation &+= 1
        let wake = control.wake
        let sleep = control.sleepTask
        control.wake = nil
        control.sleepTask = nil
        return (wake, sleep)
      }
    sleep?.cancel()
    wake?.resume()
  }

  private static func logPosition(_ control: Control, now: Duration) -> Int64? {
    guard let anchor = control.anchorPace else { return control.lastEmittedPace }
    if control.paused || control.speed == 0 {
      return max(anchor, control.lastEmittedPace ?? anchor)
    }
    let elapsed = Double(VirtualClock.milliseconds(now - control.anchorInstant))
    return anchor + Int64((elapsed * control.speed).rounded(.down))
  }

  // MARK: Lifecycle

  /// Opens the log and starts emitting from its first epoch; does nothing when already running.
  ///
  /// - Throws: ``ReplayError/cannotOpen(path:errno:message:)`` when the log cannot be opened.
  public func start() async throws {
    if control.withLock({ $0.runTask != nil }) { return }
    let cursor = CursorBox(try source.open())
    control.withLock { control in
      if control.runTask != nil { return }
      // Every session starts from the URI's settings, whatever the last one was changed to. The
      // state is reset before the task exists, so that the task never sees the last session's.
      control.speed = initialSpeed
      control.loop = initialLoop
      control.paused = startPaused
      control.pendingSteps = 0
      control.pendingSeek = nil
      control.anchorPace = nil
      control.anchorWall = nil
      control.lastEmittedPace = nil
      control.progress = ReplayProgress(
        pass: 1, fixesEmitted: 0, isPaused: startPaused, isAtEnd: false, speed: initialSpeed,
        loops: initialLoop)
      control.runTask = Task { [self] in await run(cursor) }
    }
  }

  /// Stops emitting, waits until the replay task has ended, then reports ``BackendStatus/stopped``.
  public func stop() async {
    let task: Task<Void, Never>? = control.withLock { control in
      let task = control.runTask
      control.runTask = nil
      return task
    }
    guard let task else { return }
    task.cancel()
    changeControl { _ in }
    await task.value
    let waiters = control.withLock { control in
      defer { control.settleWaiters.removeAll() }
      return control.settleWaiters.map(\.continuation)
    }
    for waiter in waiters { waiter.resume() }
    // A status is never held back by a full queue.
    if batched.withLock({ $0 }) {
      batchQueue.pushUrgent([.status(.stopped, detail: nil)])
    } else {
      queue.pushUrgent(.status(.stopped, detail: nil))
    }
  }

  // MARK: Run loop

  private final class CursorBox: @unchecked Sendable {
    var cursor: any ReplayCursor
    init(_ cursor: any ReplayCursor) { self.cursor = cursor }
  }

  /// The shortest interval between two epochs that counts as a gap in the log (when it is also
  /// more than ten times the interval before it), milliseconds.
  public static let gapThresholdMilliseconds: Int64 = 10_000

  /// Computes a monotone pacing time line (ms) from the epochs' UTC times.
  ///
  /// `elapsed` is log time (every positive interval); `pace` is what the replay waits by, the same
  /// except that with ``ReplayGaps/skip`` a gap counts as the interval before it.
  struct Timeline {
    var lastTime: Int64?
    var lastTimeOfDay: Int64?
    var pace: Int64 = 0
    var elapsed: Int64 = 0
    var started = false
    var lastPositiveDelta: Int64 = 1000
    var gaps: ReplayGaps = .keep
    /// The gap (log time, ms) before the epoch last advanced to, `nil` when there was none.
    var lastGap: Int64?

    init(gaps: ReplayGaps = .keep) { self.gaps = gaps }

    mutating func advance(_ fix: Fix) -> Int64 {
      var delta: Int64?
      if let time = fix.time, let last = lastTime {
        delta = time - last
      } else if let tod = fix.timeOfDay, let last = lastTimeOfDay {
        var d = Int64(tod) - last
        if d < -43_200_000 { d += 86_400_000 }
        delta = d
      }
      lastGap = nil
      if started, let delta, delta > 0 {
        elapsed += delta
        if delta > ReplayBackend.gapThresholdMilliseconds && delta > 10 * lastPositiveDelta {
          lastGap = delta
          pace += gaps == .skip ? lastPositiveDelta : delta
        } else {
          pace += delta
          lastPositiveDelta = delta
        }
      }
      started = true
      if let time = fix.time { lastTime = time }
      if let tod = fix.timeOfDay { lastTimeOfDay = Int64(tod) }
      return pace
    }

    /// Starts a new pass after the last epoch: the next epoch follows one usual interval later.
    mutating func restart() {
      let next = pace + lastPositiveDelta
      let nextElapsed = elapsed + lastPositiveDelta
      self = Timeline(gaps: gaps)
      pace = next
      elapsed = nextElapsed
    }
  }
  /// Events produced back to back at speed 0 are handed over in batches of this size, so the
  /// consumer wakes once per batch instead of once per epoch.
  static let batchSize = 256

  private func flush(_ outbox: inout [BackendEvent]) async {
    guard !outbox.isEmpty else { return }
    if batched.withLock({ $0 }) {
      await batchQueue.push(outbox)
    } else {
      for event in outbox {
        if case .location = event {
          await queue.push(event)
        } else {
          queue.pushUrgent(event)
        }
      }
    }
    outbox.removeAll(keepingCapacity: true)
  }

  private func waitForChange(since generation: UInt64) async {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (wake: CheckedContinuation<Void, Never>) in
        let now: Bool = control.withLock { control in
          if control.generation != generation || Task.isCancelled { return true }
          control.wake = wake
          return false
        }
        if now { wake.resume() }
      }
    } onCancel: {
      let wake: CheckedContinuation<Void, Never>? = control.withLock { control in
        let wake = control.wake
        control.wake = nil
        return wake
      }
      wake?.resume()
    }
  }

  /// Log milliseconds divided by the speed factor, limited to about 31 years either way: a tiny
  /// speed (any positive factor is accepted) or a log spanning centuries would otherwise give a
  /// due time that no `Duration` or nanosecond count holds. An epoch that far ahead is never
  /// reached in practice, so the limit changes no replay.
  static func clampedAhead(_ milliseconds: Double) -> Double {
    let limit = 1.0e12
    return milliseconds.isNaN ? limit : min(max(milliseconds, -limit), limit)
  }

  private func sleep(until deadline: Duration, generation: UInt64) async {
    let clock = self.clock
    let task = Task { try await clock.sleep(until: deadline) }
    let current: Bool = control.withLock { control in
      guard control.generation == generation else { return false }
      control.sleepTask = task
      return true
    }
    if !current { task.cancel() }
    await withTaskCancellationHandler {
      _ = try? await task.value
    } onCancel: {
      task.cancel()
    }
    control.withLock { control in
      if control.generation == generation { control.sleepTask = nil }
    }
  }

  private func run(_ box: CursorBox) async {
    var cursor = box.cursor
    var timeline = Timeline(gaps: gaps)
    var pass = 1
    var passWallBase: Int64?
    var passFirstPace: Int64 = 0
    var passFirstElapsed: Int64 = 0
    var reportedEnd = false
    /// The log offset the last "paused at" status named, `nil` when the last status was not one:
    /// a pause at another position (after a step or seek) is said again.
    var reportedPausedAt: Int64?
    let replaying = "replaying \(source.name)"
    var outbox: [BackendEvent] = []
    outbox.reserveCapacity(Self.batchSize)
    // Said at once: the first epoch may take long to read (a slow pipe, a device).
    outbox.append(.status(.connected, detail: replaying))
    await flush(&outbox)

    outer: while !Task.isCancelled {
      // A seek restarts from the beginning (or skips forward on standard input).
      if let target = control.withLock({ control -> ReplayPosition? in
        let seek = control.pendingSeek
        control.pendingSeek = nil
        return seek
      }) {
        do throws(ReplayError) {
          let (rewound, found, end) = try reposition(
            to: target, cursor: &cursor, timeline: &timeline)
          if rewound {
            passFirstPace = 0
            passFirstElapsed = 0
          }
          // Past the last epoch, the replay stands at the end of the log.
          let offset = (found ?? end) - passFirstElapsed
          control.withLock { control in
            control.lastEmittedPace = nil
            control.progress.logOffsetMilliseconds = offset
          }
        } catch {
          outbox.append(.error(error.description))
        }
      }

      let decoded: DecodedFix
      do throws(ReplayError) {
        guard let next = try seekAwareNext(&cursor, &timeline) else {
          if Task.isCancelled { break outer }  // stopped while reading, not the end of the log
          if let report = cursor.takeRejectionReport() { outbox.append(.error(report)) }
          // End of the log: steps beyond it have nothing to emit.
          let (loop, generation) = control.withLock { control in
            control.pendingSteps = 0
            return (control.loop, control.generation)
          }
          if loop && source.isRewindable {
            do throws(ReplayError) {
              cursor = try source.open()
            } catch {
              outbox.append(.error(error.description))
              break outer
            }
            timeline.restart()
            pass += 1
            passWallBase = nil
            passFirstPace = timeline.pace
            passFirstElapsed = timeline.elapsed
            reportedEnd = false
            control.withLock { $0.progress.pass = pass }
            outbox.append(.status(.connected, detail: "replaying \(source.name), pass \(pass)"))
            continue outer
          }
          if !reportedEnd {
            reportedEnd = true
            reportedPausedAt = nil
            if loop { outbox.append(.error(ReplayError.notRewindable(source.name).description)) }
            let nothing: Bool = control.withLock { control in
              control.progress.isAtEnd = true
              return control.progress.fixesEmitted == 0 && pass == 1
            }
            outbox.append(
              .status(
                .endOfData,
                detail: nothing
                  ? "end of \(source.name): no NMEA sentences found in \(source.name)"
                  : "end of \(source.name)"))
          }
          await flush(&outbox)
          markApplied(generation)
          await waitForChange(since: generation)
          continue outer
        }
        if reportedEnd {
          // A seek (or loop turned on) found an epoch again after the end: playing once more.
          reportedEnd = false
          outbox.append(.status(.connected, detail: replaying))
        }
        decoded = next
        if let report = cursor.takeRejectionReport() { outbox.append(.error(report)) }
      } catch {
        outbox.append(.error(error.description))
        break outer
      }

      let pace = timeline.pace
      let offset = timeline.elapsed - passFirstElapsed
      let gap = timeline.lastGap
      /// The control generation the last gap notice was computed for: a speed change, pause and
      /// resume or seek during the gap makes it stale, so it is said again with the new wait.
      var gapNoticeGeneration: UInt64?
      var dueWall: Int64?

      // Wait until the epoch is due, honouring pause, step, speed changes and seeks.
      wait: while true {
        if Task.isCancelled { break outer }
        let clock = self.clock
        let line = decoded.line
        enum Decision {
          /// Emit now; the wall time (ms) at which the epoch was due, when known exactly.
          case emit(Int64?, paused: Bool, generation: UInt64?)
          case seek
          case waitForChange(UInt64, position: Int64?)
          case sleep(Duration, UInt64, wait: Duration, speed: Double)
        }
        let decision: Decision = control.withLock { control in
          func emitting() -> Decision {
            control.lastEmittedPace = pace
            control.progress.fixesEmitted += 1
            control.progress.line = line
            control.progress.logOffsetMilliseconds = offset
            control.progress.isAtEnd = false
            // Every control so far is acted on once no seek or step is left.
            let applied = control.pendingSteps == 0 ? control.generation : nil
            guard let wall = control.anchorWall, let anchor = control.anchorPace,
              !control.paused, control.speed > 0
            else { return .emit(nil, paused: control.paused, generation: applied) }
            let ahead = Self.clampedAhead(Double(pace - anchor) / control.speed) * 1_000_000
            return .emit(
              (wall + Int64(ahead.rounded(.down))) / 1_000_000, paused: false, generation: applied)
          }
          if control.pendingSeek != nil { return .seek }
          if control.anchorPace == nil {
            control.anchorPace = pace
            control.anchorInstant = clock.now
            control.anchorWall = nil
            if timestamps == .shifted && !control.paused && control.speed > 0 {
              // Put the anchor on the next whole wall millisecond, so that a shifted timestamp
              // (milliseconds, as gpsd writes them) is the exact time its epoch is due rather
              // than up to 1 ms before it.
              let wall = clock.wallTimeNanoseconds
              let wait = (1_000_000 - wall % 1_000_000) % 1_000_000
              control.anchorInstant += .nanoseconds(wait)
              control.anchorWall = wall + wait
            }
          }
          if control.paused {
            if control.pendingSteps > 0 {
              control.pendingSteps -= 1
              control.anchorPace = pace
              return emitting()
            }
            return .waitForChange(
              control.generation, position: control.progress.logOffsetMilliseconds)
          }
          if control.speed == 0 { return emitting() }
          let anchor = control.anchorPace ?? pace
          let ahead = Self.clampedAhead(Double(pace - anchor) / control.speed)
          let due = control.anchorInstant + .milliseconds(ahead)
          let now = clock.now
          if due <= now { return emitting() }
          return .sleep(due, control.generation, wait: due - now, speed: control.speed)
        }
        switch decision {
        case .emit(let wall, let paused, let generation):
          dueWall = wall
          if reportedPausedAt != nil && !paused {
            reportedPausedAt = nil
            outbox.append(.status(.connected, detail: replaying))
          }
          if let gap, gaps == .skip {
            outbox.append(
              .status(.connected, detail: "skipped a gap of \(Self.seconds(gap)) s in the log"))
          }
          if let generation { markApplied(generation) }
          break wait
        case .seek:
          // The gap notice was about the epoch left behind.
          if gapNoticeGeneration != nil && reportedPausedAt == nil {
            outbox.append(.status(.connected, detail: replaying))
          }
          continue outer
        case .waitForChange(let generation, let position):
          gapNoticeGeneration = nil
          if reportedPausedAt != position ?? 0 {
            reportedPausedAt = position ?? 0
            outbox.append(
              .status(
                .paused,
                detail: "paused at \(Self.seconds(position ?? 0)) s of \(source.name)"))
          }
          await flush(&outbox)
          markApplied(generation)
          await waitForChange(since: generation)
        case .sleep(let due, let generation, let wait, let speed):
          if let gap, gaps == .keep, gapNoticeGeneration != generation {
            gapNoticeGeneration = generation
            reportedPausedAt = nil
            outbox.append(
              .status(
                .connected,
                detail: "gap of \(Self.seconds(gap)) s in the log, next fix in "
                  + "\(Self.seconds(VirtualClock.milliseconds(wait))) s"
                  + (speed == 1 ? "" : " at speed \(Self.speedText(speed))")))
          } else if reportedPausedAt != nil {
            reportedPausedAt = nil
            outbox.append(.status(.connected, detail: replaying))
          }
          await flush(&outbox)
          markApplied(generation)
          await sleep(until: due, generation: generation)
        }
      }
      if gapNoticeGeneration != nil {
        outbox.append(.status(.connected, detail: replaying))
      }

      var fix = decoded.fix
      if timestamps == .shifted, fix.time != nil || fix.timeOfDay != nil {
        let base = passWallBase ?? dueWall ?? clock.wallTimeMilliseconds
        passWallBase = base
        let time = base + (pace - passFirstPace)
        fix.time = time
        let dayMs = ((time % 86_400_000) + 86_400_000) % 86_400_000
        fix.timeOfDay = Int32(dayMs)
      }
      let location = Location(
        fix: fix,
        provenance: Provenance(
          backend: uri, source: source.name, line: decoded.line, isSimulated: true,
          rolloverWeeks: decoded.rolloverWeeks == 0 ? nil : decoded.rolloverWeeks))
      outbox.append(.location(location))
      if outbox.count >= Self.batchSize { await flush(&outbox) }
    }
    await flush(&outbox)
  }

  /// Milliseconds as seconds with at most one decimal, for status details: `630`, `2.5`.
  static func seconds(_ milliseconds: Int64) -> String {
    let tenths = (milliseconds + 50) / 100
    return tenths % 10 == 0 ? "\(tenths / 10)" : "\(tenths / 10).\(tenths % 10)"
  }

  static func speedText(_ speed: Double) -> String {
    speed == speed.rounded() && speed < 1e9 ? "\(Int64(speed))" : "\(speed)"
  }

  private func seekAwareNext(_ cursor: inout any ReplayCursor, _ timeline: inout Timeline)
    throws(ReplayError)
    -> DecodedFix?
  {
    guard let next = try cursor.next() else { return nil }
    _ = timeline.advance(next.fix)
    return next
  }

  /// Positions `cursor` so that its next epoch is the first one matching `target`.
  /// Returns whether the input was read again from the beginning, the log time (`elapsed`,
  /// ms) of the epoch found, `nil` when none matched, and the log time of the last epoch read
  /// (where the replay stands when none matched: the end of the log).
  private func reposition(
    to target: ReplayPosition, cursor: inout any ReplayCursor, timeline: inout Timeline
  )
    throws(ReplayError) -> (rewound: Bool, found: Int64?, end: Int64)
  {
    var offsetTarget: Int64?
    var timeTarget: Int64?
    switch target {
    case .time(let time): timeTarget = time
    case .offset(let offset): offsetTarget = VirtualClock.milliseconds(offset)
    case .fraction(let fraction):
      guard source.isRewindable else { throw .notRewindable(source.name) }
      let scan = try source.open()
      var scanLine = Timeline(gaps: gaps)
      var span: Int64 = 0
      while let decoded = try scan.next() {
        _ = scanLine.advance(decoded.fix)
        span = scanLine.elapsed
      }
      offsetTarget = Int64((Double(span) * fraction).rounded(.down))
    }
    var rewound = false
    if source.isRewindable {
      cursor = try source.open()
      timeline = Timeline(gaps: gaps)
      rewound = true
    }
    // Find the first matching epoch, then rewind by one so that the run loop reads it next.
    let replayCursor = PeekCursor(cursor)
    var probe = timeline
    var found: Int64?
    while let decoded = try replayCursor.peek() {
      var trial = probe
      _ = trial.advance(decoded.fix)
      let matches: Bool
      if let offsetTarget {
        matches = trial.elapsed >= offsetTarget
      } else if let timeTarget {
        if let time = decoded.fix.time {
          matches = time >= timeTarget
        } else if let tod = decoded.fix.timeOfDay {
          matches = Int64(tod) >= ((timeTarget % 86_400_000) + 86_400_000) % 86_400_000
        } else {
          matches = false
        }
      } else {
        matches = true
      }
      if matches {
        found = trial.elapsed
        break
      }
      probe = trial
      replayCursor.consume()
    }
    cursor = replayCursor
    timeline = probe
    control.withLock { control in
      control.anchorPace = nil
      control.anchorWall = nil
      control.progress.isAtEnd = false
    }
    return (rewound, found, probe.elapsed)
  }
}

/// A cursor with one epoch of look-ahead.
final class PeekCursor: ReplayCursor {
  private let base: any ReplayCursor
  private var peeked: DecodedFix?

  init(_ base: any ReplayCursor) { self.base = base }

  func peek() throws(ReplayError) -> DecodedFix? {
    if peeked == nil { peeked = try base.next() }
    return peeked
  }

  func consume() { peeked = nil }

  func next() throws(ReplayError) -> DecodedFix? {
    if let peeked {
      self.peeked = nil
      return peeked
    }
    return try base.next()
  }
}
