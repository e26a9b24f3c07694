import LocationModel

extension ReplayBackend {
  /// Settings from a `replay:` URI.
  public struct Options: Sendable, Hashable {
    /// The log file, or `-` for standard input.
    public var path: String
    /// Speed factor: 0 = as fast as possible, 1 = real time; the URI accepts `0...1000000`.
    public var speed: Double
    /// Whether to restart at the beginning after the last epoch.
    public var loop: Bool
    /// Timestamps as in the log or shifted to now.
    public var timestamps: ReplayTimestamps
    /// Whether to start paused (then ``ReplayBackend/step()`` or ``ReplayBackend/resume()``).
    public var startPaused: Bool
    /// GPS week-rollover floor, days since 1970-01-01: dates before it move forward in 1024-week
    /// steps until they are not. `nil` (the default for recorded logs): dates as recorded.
    public var rolloverFloor: Int? = nil
    /// What to do with gaps in the log (default ``ReplayGaps/keep``).
    public var gaps: ReplayGaps

    /// Creates options; see the properties for ranges.
    public init(
      path: String, speed: Double = 1, loop: Bool = false, timestamps: ReplayTimestamps = .original,
      startPaused: Bool = false, gaps: ReplayGaps = .keep
    ) {
      self.path = path
      self.speed = speed
      self.loop = loop
      self.timestamps = timestamps
      self.startPaused = startPaused
      self.gaps = gaps
    }

    static let parameterNames = ["speed", "loop", "timestamps", "paused", "gaps", "rollover-floor"]

    /// Parses
    /// `replay:PATH[?speed=S&loop=BOOL&timestamps=original|shifted&paused=BOOL&gaps=keep|skip&rollover-floor=YYYY-MM-DD]`.
    ///
    /// `PATH` is `-` for standard input. `speed` is a finite number `>= 0`.
    /// - Throws: ``BackendURIError`` naming the bad part.
    public static func parse(_ uri: String) throws(BackendURIError) -> Options {
      let parts = try BackendURIParts.parse(uri, scheme: "replay", allowed: parameterNames)
      guard let path = parts.path else { throw .missingPath(uri: uri) }
      var options = Options(path: path)
      for (key, value) in parts.parameters {
        switch key {
        case "speed":
          options.speed = try BackendURIParts.double(
            value, key: key, range: 0...1_000_000,
            expected: "a number within 0...1000000 (0 = as fast as possible)")
        case "loop":
          options.loop = try BackendURIParts.bool(value, key: key)
        case "paused":
          options.startPaused = try BackendURIParts.bool(value, key: key)
        case "rollover-floor":
          // "none" is the default for a recorded log, accepted as for gpsd:// sources.
          if value == "none" {
            options.rolloverFloor = nil
          } else {
            guard let day = CivilDate.days(iso: value) else {
              throw .invalidValue(key: key, value: value, expected: "a date YYYY-MM-DD (1980 to 2079) or none")
            }
            options.rolloverFloor = day
          }
        case "gaps":
          guard let gaps = ReplayGaps(rawValue: value) else {
            throw .invalidValue(key: key, value: value, expected: "keep or skip")
          }
          options.gaps = gaps
        default:
          guard let timestamps = ReplayTimestamps(rawValue: value) else {
            throw .invalidValue(key: key, value: value, expected: "original or shifted")
          }
          options.timestamps = timestamps
        }
      }
      return options
    }
  }
}
