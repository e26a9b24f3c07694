import NMEA
import Queues
import Synchronization
import LocationModel

/// Replays an NMEA 0183 log as a ``LocationBackend``, paced by the log's own timestamps.
///
/// Epochs are paced by the differences between their UTC times (`Fix.time`, or the time of day
/// while no date is known) divided by ``speed``: 1 is real time, 10 ten times faster, 0 as fast as
/// the consumer takes them. Pause, resume, seek, single-step, speed and loop can be changed at any
/// time. Every fix is marked ``Provenance/isSimulated`` with its log line in ``Provenance/line``.
/// The log is read in 64 KiB chunks; memory stays bounded.
public final class ReplayBackend: LocationBackend {
  struct Control {
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
    /// The timeline segment of the fixes emitted now (``Provenance/timelineSegment``): a new
    /// one at each start, seek, speed change and pass of a loop.
    var timelineSegment: UInt64 = Provenance.nextTimelineSegment()
    var progress: ReplayProgress
    /// The newest ``generation`` the run loop has fully acted on (seeks done, steps emitted).
    var appliedGeneration: UInt64 = 0
    /// ``settled()`` callers waiting for a generation to be applied.
    var settleWaiters: [(generation: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
  }

  /// The backend URI.
  public let uri: String
  /// Every event for the backend's whole life; one consumer.
  public let events: BackendEvents
  /// Most unread locations before the replay waits for its consumer (back-pressure: a replay can
  /// always wait, so nothing is dropped).
  static let queueCapacity = 1024
  /// The backend's one queue: locations wait beyond ``queueCapacity``; statuses never wait.
  let queue = EventQueue<BackendEvent>(capacity: ReplayBackend.queueCapacity, overflow: .waitForSpace)
  let source: any ReplaySource
  let clock: any LocationClock
  let timestamps: ReplayTimestamps
  let control: Mutex<Control>
  let startPaused: Bool
  let initialSpeed: Double
  let initialLoop: Bool
  let gaps: ReplayGaps

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
    events = BackendEvents(queue)
  }

  deinit {
    queue.finish()
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
      control.timelineSegment = Provenance.nextTimelineSegment()
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
    queue.post(.status(.stopped, detail: nil))
  }

}
