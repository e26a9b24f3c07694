import Glibc

/// `CLOCK_MONOTONIC` (POSIX `clock_gettime(2)`): time since an unspecified start (on Linux, the
/// boot), never set back and not advanced by changes of the wall clock. The one clock of every
/// interval, deadline and timeout measured in the daemon, the client and the benchmarks; the
/// fix times on a source's timeline are UTC milliseconds instead (`UTCTime` in LocationModel).
///
/// Readings fit a `UInt64` of nanoseconds for about 584 years of uptime; `clock_gettime` on
/// `CLOCK_MONOTONIC` cannot fail on Linux, so every reading is a plain value.
public enum MonotonicClock {
  /// Now, in nanoseconds since the clock's start.
  @inline(__always)
  public static func nanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
  }

  /// Now, in whole microseconds since the clock's start (systemd's `MONOTONIC_USEC`, D-Bus
  /// timestamps).
  public static func microseconds() -> UInt64 { nanoseconds() / 1000 }

  /// Now, in seconds with a fraction (nanosecond resolution, exact to about 0.1 µs over a year
  /// of uptime).
  public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }

  /// Now as a `Duration` since the clock's start; the difference of two readings is the time
  /// between them.
  public static func now() -> Duration { .nanoseconds(Int64(clamping: nanoseconds())) }

  /// Whole nanoseconds of a non-negative `duration`, at most `UInt64.max`; a negative one is 0.
  public static func nanoseconds(of duration: Duration) -> UInt64 {
    // Both components carry the sign: -5 ns is (0 s, -5e9 as).
    let (seconds, attoseconds) = duration.components
    guard seconds >= 0, attoseconds >= 0 else { return 0 }
    let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
    guard !overflow else { return .max }
    let (total, carry) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
    return carry ? .max : total
  }
}

/// `CLOCK_REALTIME` (POSIX `clock_gettime(2)`): UTC wall time since 1970-01-01T00:00:00Z, leap
/// seconds not counted (POSIX time). It can be set back or jump; intervals are measured on
/// ``MonotonicClock``. The one reading of the wall clock for timestamps: a fix's reception time
/// (D-Bus `Timestamp`), the track store's retention reference, the daemon's `LocationClock`, the
/// benchmarks' emission times.
public enum WallClock {
  /// Now, in nanoseconds since 1970 (negative only on a clock set before 1970).
  @inline(__always)
  public static func nanoseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
  }

  /// Now, in whole milliseconds since 1970 (rounded toward the past), the unit of fix times.
  public static func milliseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return Int64(time.tv_sec) &* 1000 &+ Int64(time.tv_nsec / 1_000_000)
  }
}
