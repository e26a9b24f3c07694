import Synchronization

/// Where a location came from.
public struct Provenance: Sendable, Hashable, Codable {
  /// What produced the fix: a backend URI such as `simulate`, `replay:/path/log.nmea`, `gpsd://localhost:2947`.
  public var backend: String
  /// The device or file path, when the backend has one (a serial device, a log file).
  public var source: String?
  /// For replays, the 1-based line number of the epoch's first sentence in the log.
  public var line: Int?
  /// Whether the fix was simulated or replayed rather than measured live.
  public var isSimulated: Bool
  /// GPS weeks (a multiple of 1024) added to the receiver's date because it fell before the
  /// source's week-rollover floor; `nil` when the date is as the receiver sent it.
  public var rolloverWeeks: Int?
  /// The timeline the fix's time belongs to. `0` (``Provenance/liveTimeline``): the live wall
  /// clock (gpsd, a receiver): the fix's time is compared with the daemon's UTC clock. Any other
  /// value names one segment of a recorded or simulated source's own timeline (a replay's log
  /// time, original or shifted; a simulation's clock): that source defines "now" by its fixes'
  /// times, and a new segment begins at each jump the source makes on purpose (a new run, a
  /// seek, a speed change, each pass of a loop), so times are ordered within a segment only.
  /// Segment numbers are unique within one process (``Provenance/nextTimelineSegment()``).
  public var timelineSegment: UInt64

  /// The segment number of the live wall clock.
  public static let liveTimeline: UInt64 = 0

  /// Whether the fix's time is on the live wall clock (``timelineSegment`` is
  /// ``liveTimeline``) rather than on a recorded or simulated source's own timeline.
  public var isLiveTimeline: Bool { timelineSegment == Self.liveTimeline }

  private static let segments = Atomic<UInt64>(0)

  /// A timeline segment number never returned before in this process, `>= 1`.
  public static func nextTimelineSegment() -> UInt64 {
    segments.add(1, ordering: .relaxed).newValue
  }

  /// Creates a provenance record.
  ///
  /// - Parameter timelineSegment: ``liveTimeline`` (default) for a live source; for a replay or
  ///   simulation a number from ``nextTimelineSegment()``.
  public init(
    backend: String, source: String? = nil, line: Int? = nil, isSimulated: Bool, rolloverWeeks: Int? = nil,
    timelineSegment: UInt64 = Provenance.liveTimeline
  ) {
    self.backend = backend
    self.source = source
    self.line = line
    self.isSimulated = isSimulated
    self.rolloverWeeks = rolloverWeeks
    self.timelineSegment = timelineSegment
  }
}

/// A location as clients see it (CoreLocation's `CLLocation`): a ``Fix`` plus where it came from.
public struct Location: Sendable, Hashable {
  /// The GNSS solution (position, altitude, velocity, errors, sky view), SI units.
  public var fix: Fix
  /// Which backend, device or file produced it.
  public var provenance: Provenance

  /// Creates a location.
  public init(fix: Fix, provenance: Provenance) {
    self.fix = fix
    self.provenance = provenance
  }
}

/// The state of a backend's source of fixes, reported as events.
public enum BackendStatus: String, Sendable, Hashable, Codable {
  /// Not started, or stopped.
  case stopped
  /// Starting or reconnecting.
  case connecting
  /// Connected to its source and receiving data.
  case connected
  /// The source went away (gpsd died, the device vanished); the backend retries on its own.
  case disconnected
  /// Connected, but the receiver reports no fix (or has been silent too long).
  case noFix
  /// The receiver's device is gone: unplugged, a read error, `ENODEV`, a hang-up, its node
  /// removed, or gpsd announcing that it closed the device (`DEVICE` with `activated` 0).
  /// Distinct from ``noFix`` (the receiver is there without a position) and ``disconnected``
  /// (the connection to a server or gpsd is lost). The backend reopens the device when its path
  /// returns (or gpsd reopens it) and reports ``connected`` again.
  case deviceRemoved
  /// A replay reached the end of its log (and does not loop).
  case endOfData
  /// A replay is paused.
  case paused
}
