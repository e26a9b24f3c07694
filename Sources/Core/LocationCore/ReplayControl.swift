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
