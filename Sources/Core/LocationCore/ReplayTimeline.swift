import LocationModel
import NMEA

/// The log's pacing time line and seeking in it.
extension ReplayBackend {
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

  func seekAwareNext(_ cursor: inout any ReplayCursor, _ timeline: inout Timeline)
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
  func reposition(
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
