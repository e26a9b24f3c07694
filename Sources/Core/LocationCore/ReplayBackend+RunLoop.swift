import LocationModel
import NMEA

/// The replay task: reads epochs, waits until each is due on the log clock, and hands the events
/// over to the backend's queue.
extension ReplayBackend {
  final class CursorBox: @unchecked Sendable {
    var cursor: any ReplayCursor
    init(_ cursor: any ReplayCursor) { self.cursor = cursor }
  }

  /// Events produced back to back at speed 0 are queued in bursts of this size, so the consumer
  /// wakes once per burst instead of once per epoch.
  static let batchSize = 256

  /// Queues the outbox as one burst, first waiting while the queue holds ``queueCapacity``
  /// unread locations.
  func flush(_ outbox: inout [BackendEvent]) async {
    guard !outbox.isEmpty else { return }
    await queue.push(contentsOf: outbox)
    outbox.removeAll(keepingCapacity: true)
  }

  func waitForChange(since generation: UInt64) async {
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

  func sleep(until deadline: Duration, generation: UInt64) async {
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

  func run(_ box: CursorBox) async {
    var cursor = box.cursor
    var timeline = Timeline(gaps: gaps)
    var pass = 1
    var passWallBase: Int64?
    /// Shifted timestamps keep the log's own order: the pass's first epoch with a UTC time, its
    /// log time, its shifted time, and the log time skipped (gaps=skip) before it.
    var shiftAnchor: (original: Int64, shifted: Int64, skipped: Int64)?
    var passFirstPace: Int64 = 0
    var passFirstElapsed: Int64 = 0
    var reportedEnd = false
    /// Epochs emitted before this pass began: a pass that emits none is not looped at once.
    var emittedBeforePass = 0
    /// Whether the "pass found no fixes" warning was given for the current run of empty passes.
    var reportedEmptyPass = false
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
            shiftAnchor = nil
          }
          // Past the last epoch, the replay stands at the end of the log.
          let offset = (found ?? end) - passFirstElapsed
          control.withLock { control in
            control.lastEmittedPace = nil
            control.progress.logOffsetMilliseconds = offset
            control.timelineSegment = Provenance.nextTimelineSegment()
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
          let (loop, generation, emitted) = control.withLock { control in
            control.pendingSteps = 0
            return (control.loop, control.generation, control.progress.fixesEmitted)
          }
          // A log without any epoch is not looped (each pass would end at once: a core spinning
          // and one BACKEND event per pass); it ends as a replay without loop does.
          if loop && source.isRewindable && emitted > 0 {
            let emptyPass = emitted == emittedBeforePass
            if emptyPass {
              // This pass found nothing although earlier ones did: the log was emptied or
              // rotated. Said once; read again every second (a pause, seek or stop interrupts
              // the wait) until it holds epochs again.
              if !reportedEmptyPass {
                reportedEmptyPass = true
                outbox.append(
                  .error("\(source.name): pass \(pass) found no fixes (emptied or rotated?): reading it again every second"))
              }
              await flush(&outbox)
              await sleep(until: clock.now + .seconds(1), generation: generation)
              if Task.isCancelled { break outer }
            } else {
              reportedEmptyPass = false
              emittedBeforePass = emitted
            }
            do throws(ReplayError) {
              cursor = try source.open()
            } catch {
              outbox.append(.error(error.description))
              break outer
            }
            timeline.restart()
            // An empty read is not a pass: no count, no BACKEND event.
            if emptyPass { continue outer }
            pass += 1
            passWallBase = nil
            shiftAnchor = nil
            passFirstPace = timeline.pace
            passFirstElapsed = timeline.elapsed
            reportedEnd = false
            control.withLock { control in
              control.progress.pass = pass
              control.timelineSegment = Provenance.nextTimelineSegment()
            }
            outbox.append(.status(.connected, detail: "replaying \(source.name), pass \(pass)"))
            continue outer
          }
          if !reportedEnd {
            reportedEnd = true
            reportedPausedAt = nil
            if loop && !source.isRewindable {
              outbox.append(.error(ReplayError.notRewindable(source.name).description))
            }
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
      /// Log time dropped by gaps=skip so far on this timeline.
      let skipped = timeline.elapsed - timeline.pace
      let gap = timeline.lastGap
      /// The control generation the last gap notice was computed for: a speed change, pause and
      /// resume or seek during the gap makes it stale, so it is said again with the new wait.
      var gapNoticeGeneration: UInt64?
      var dueWall: Int64?
      var timelineSegment = Provenance.liveTimeline

      // Wait until the epoch is due, honouring pause, step, speed changes and seeks.
      wait: while true {
        if Task.isCancelled { break outer }
        let clock = self.clock
        let line = decoded.line
        enum Decision {
          /// Emit now; the wall time (ms) at which the epoch was due, when known exactly, and the
          /// timeline segment the fix belongs to.
          case emit(Int64?, paused: Bool, generation: UInt64?, segment: UInt64)
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
            let segment = control.timelineSegment
            guard let wall = control.anchorWall, let anchor = control.anchorPace,
              !control.paused, control.speed > 0
            else { return .emit(nil, paused: control.paused, generation: applied, segment: segment) }
            let ahead = Self.clampedAhead(Double(pace - anchor) / control.speed) * 1_000_000
            return .emit(
              (wall + Int64(ahead.rounded(.down))) / 1_000_000, paused: false, generation: applied,
              segment: segment)
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
        case .emit(let wall, let paused, let generation, let segment):
          dueWall = wall
          timelineSegment = segment
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
        var time = base + (pace - passFirstPace)
        if let original = fix.time {
          // A constant shift of the log's own times (less what gaps=skip dropped): a log whose
          // times jump back keeps the jump, so its shifted epochs are judged in the same order
          // as its original ones (a repeated stretch is out of order in both).
          if let anchor = shiftAnchor {
            time = anchor.shifted + (original - anchor.original) - (skipped - anchor.skipped)
          } else {
            shiftAnchor = (original, time, skipped)
          }
        }
        fix.time = time
        let dayMs = ((time % 86_400_000) + 86_400_000) % 86_400_000
        fix.timeOfDay = Int32(dayMs)
      }
      let location = Location(
        fix: fix,
        provenance: Provenance(
          backend: uri, source: source.name, line: decoded.line, isSimulated: true,
          rolloverWeeks: decoded.rolloverWeeks == 0 ? nil : decoded.rolloverWeeks,
          timelineSegment: timelineSegment))
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
}
