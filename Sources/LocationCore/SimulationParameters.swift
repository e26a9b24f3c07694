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
  /// Standard deviation of the Gaussian position noise, metres per axis (east, north), `>= 0`;
  /// altitude noise is 1.5 times this.
  public var noiseSigma: Double
  /// Seed of the pseudo-random generator: the same seed gives the same fixes.
  public var seed: UInt64
  /// Ranges with no fix at all.
  public var outages: [SimulationOutage]
  /// Fix mode degradations and recoveries; 3D until the first change.
  public var modeChanges: [SimulationModeChange]
  /// Altitude above MSL in metres when the route has no elevations.
  public var altitude: Double

  /// Creates parameters; the defaults follow the default loop at 10 m/s, 1 Hz, 2.5 m noise, seed 1.
  public init(
    route: SimulatedRoute = .defaultLoop, speed: Double = 10, rate: Double = 1,
    noiseSigma: Double = 2.5,
    seed: UInt64 = 1, outages: [SimulationOutage] = [], modeChanges: [SimulationModeChange] = [],
    altitude: Double = 60
  ) {
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
