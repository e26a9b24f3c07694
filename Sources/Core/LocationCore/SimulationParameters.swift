import GNSSSky
import LocationModel

/// A time range, relative to the start of a simulation, with no fix at all (a tunnel).
public struct SimulationOutage: Sendable, Hashable {
  /// When the outage begins (inclusive), since the start.
  public var start: Duration
  /// When it ends (exclusive), since the start.
  public var end: Duration

  /// Creates an outage from `start` until `end`.
  public init(start: Duration, end: Duration) {
    self.start = start
    self.end = end
  }

  /// Whether `elapsed` falls inside the outage.
  public func contains(_ elapsed: Duration) -> Bool { elapsed >= start && elapsed < end }
}

/// A scheduled change of fix mode (3D, 2D or no fix) from a time since the start onwards.
public struct SimulationModeChange: Sendable, Hashable {
  /// When the change takes effect, since the start.
  public var at: Duration
  /// The fix mode from then on: ``FixMode/fix3D``, ``FixMode/fix2D`` or ``FixMode/noFix``.
  public var mode: FixMode

  /// Creates a change to `mode` at `at`.
  public init(at: Duration, mode: FixMode) {
    self.at = at
    self.mode = mode
  }
}

/// What the simulated GPS does.
public struct SimulationParameters: Sendable, Hashable {
  /// The route to follow.
  public var route: SimulatedRoute
  /// Speed along the route, m/s, `>= 0`.
  public var speed: Double
  /// Update rate, Hz, `1...10`.
  public var rate: Double
  /// User equivalent range error (UERE), metres, one sigma, `>= 0`: the position error of each
  /// fix is a seeded Gaussian draw with covariance `UERE² · Q` from the epoch's satellite geometry
  /// (so its size is DOP × UERE), and GST reports those sigmas.
  public var noiseSigma: Double
  /// Seed of the pseudo-random generator: the same seed gives the same fixes.
  public var seed: UInt64
  /// Ranges with no fix at all.
  public var outages: [SimulationOutage]
  /// Fix mode degradations and recoveries; 3D until the first change.
  public var modeChanges: [SimulationModeChange]
  /// Altitude above MSL in metres when the route has no elevations.
  public var altitude: Double
  /// The sky: almanac, systems, elevation mask.
  public var sky: SkyModel
  /// How the receiver starts: ``ReceiverStart/running`` (a fix from the first epoch) or a cold,
  /// warm or hot start whose time to first fix is drawn from ``timeToFirstFix``.
  public var start: ReceiverStart
  /// Time to first fix, seconds, drawn uniformly from this range for the start; `nil` for the
  /// start type's default (``ReceiverStart/defaultTimeToFirstFix``).
  public var timeToFirstFix: ClosedRange<Double>?
  /// Time to reacquire a fix after every satellite was lost (a tunnel), seconds, drawn uniformly;
  /// by default the hot-start range.
  public var reacquisition: ClosedRange<Double>
  /// What hides the sky on each leg of the route (leg `i` runs from waypoint `i` to the next);
  /// legs not listed are open sky.
  public var obstructions: [Int: Obstruction]
  /// UTC time of the first epoch, milliseconds since 1970, for the backend; `nil` for its clock's
  /// wall time at start.
  public var startTime: Int64?

  /// Creates parameters; the defaults follow the default loop at 10 m/s, 1 Hz, 2.5 m UERE, seed 1,
  /// the default sky (bundled almanac, four systems, 5° mask), a receiver already running.
  public init(
    route: SimulatedRoute = .defaultLoop, speed: Double = 10, rate: Double = 1,
    noiseSigma: Double = 2.5,
    seed: UInt64 = 1, outages: [SimulationOutage] = [], modeChanges: [SimulationModeChange] = [],
    altitude: Double = 60, sky: SkyModel = SkyModel(), start: ReceiverStart = .running,
    timeToFirstFix: ClosedRange<Double>? = nil,
    reacquisition: ClosedRange<Double> = ReceiverStart.hot.defaultTimeToFirstFix,
    obstructions: [Int: Obstruction] = [:], startTime: Int64? = nil
  ) {
    self.startTime = startTime
    self.sky = sky
    self.start = start
    self.timeToFirstFix = timeToFirstFix
    self.reacquisition = reacquisition
    self.obstructions = obstructions
    self.route = route
    self.speed = speed
    self.rate = rate
    self.noiseSigma = noiseSigma
    self.seed = seed
    self.outages = outages
    self.modeChanges = modeChanges
    self.altitude = altitude
  }

  /// The fix mode scheduled at `elapsed` (ignoring outages).
  public func scheduledMode(at elapsed: Duration) -> FixMode {
    var mode = FixMode.fix3D
    for change in modeChanges.sorted(by: { $0.at < $1.at }) where change.at <= elapsed {
      mode = change.mode
    }
    return mode
  }
}

/// How the simulated receiver starts (receiver datasheets' start types).
public enum ReceiverStart: String, Sendable, Hashable, CaseIterable {
  /// Already tracking: a fix from the first epoch (no start-up).
  case running
  /// No almanac, ephemeris, time or position: the receiver searches the whole sky.
  case cold
  /// Almanac, time and position known, no valid ephemeris.
  case warm
  /// Valid ephemeris, time and position (off for less than a few hours).
  case hot

  /// The default time-to-first-fix range, seconds: cold 26-35 s (u-blox NEO-M8 datasheet: 26 s;
  /// MediaTek MT3339 module datasheets: about 35 s), warm 25-30 s (the same datasheets: 25-33 s),
  /// hot 1-2 s (u-blox NEO-M8: 1 s; MT3339 modules: 1 s, under 2 s). `0...0` when running.
  public var defaultTimeToFirstFix: ClosedRange<Double> {
    switch self {
    case .running: return 0...0
    case .cold: return 26...35
    case .warm: return 25...30
    case .hot: return 1...2
    }
  }
}
