import LocationModel

/// Keeps one fix per epoch: emits a 3D fix at once, holds lesser ones until the epoch is over.
///
/// Pure and synchronous; times are `CLOCK_MONOTONIC` nanoseconds supplied by the caller.
public struct EpochDeduplicator: Sendable {
  /// How long a lesser fix waits for a better one of the same epoch, nanoseconds.
  public var settleNanoseconds: UInt64
  private var pending: Fix?
  private var pendingSince: UInt64 = 0
  private var lastEmittedTime: Int64?

  /// Creates a deduplicator with the given settle delay.
  public init(settleNanoseconds: UInt64) { self.settleNanoseconds = settleNanoseconds }

  /// When ``flush(now:)`` should next be called, or `nil` when nothing is held.
  public var deadline: UInt64? { pending == nil ? nil : pendingSince + settleNanoseconds }

  /// Adds a report; returns the fixes to emit now, in order (0, 1 or 2).
  public mutating func add(_ fix: Fix, now: UInt64) -> [Fix] {
    guard let time = fix.time else {
      // No epoch time: nothing to merge with; emit as is.
      return flushAll() + [fix]
    }
    if time == lastEmittedTime { return [] }
    var out: [Fix] = []
    if let held = pending, held.time == time {
      // Same epoch again: keep the better report (higher mode; on a tie the later one).
      if fix.mode >= held.mode { pending = fix }
    } else {
      out = flushAll()
      pending = fix
      pendingSince = now
    }
    if let held = pending, held.mode == .fix3D {
      out.append(held)
      lastEmittedTime = held.time
      pending = nil
    }
    return out
  }

  /// Emits the held fix if its settle delay has passed.
  public mutating func flush(now: UInt64) -> [Fix] {
    guard let deadline, now >= deadline else { return [] }
    return flushAll()
  }

  /// Emits the held fix, if any, regardless of time.
  public mutating func flushAll() -> [Fix] {
    guard let held = pending else { return [] }
    pending = nil
    lastEmittedTime = held.time
    return [held]
  }
}
