import LocationModel

/// Pause, resume, step, speed, loop and seek: each changes the shared control state under its lock
/// and wakes the run loop, which acts on it.
extension ReplayBackend {
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
      if control.speed != speed { control.timelineSegment = Provenance.nextTimelineSegment() }
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
  func markApplied(_ generation: UInt64) {
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

  func changeControl(_ body: (inout Control) -> Void) {
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

  static func logPosition(_ control: Control, now: Duration) -> Int64? {
    guard let anchor = control.anchorPace else { return control.lastEmittedPace }
    if control.paused || control.speed == 0 {
      return max(anchor, control.lastEmittedPace ?? anchor)
    }
    let elapsed = Double(VirtualClock.milliseconds(now - control.anchorInstant))
    return anchor + Int64((elapsed * control.speed).rounded(.down))
  }
}
