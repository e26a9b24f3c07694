/// Which fixes a client wants (CoreLocation's `distanceFilter`, `desiredAccuracy`, plus a minimum
/// interval). `nil` disables a criterion. The first fix after starting is always delivered when
/// it meets ``desiredAccuracy``.
///
/// The `start` and `watch` requests carry it as `distanceFilter` (metres), `minInterval`
/// (seconds) and `desiredAccuracy` (metres); the `TRACKING` reply echoes those members.
public struct LocationFilter: Sendable, Hashable, Codable {
  /// Minimum distance in metres from the last delivered location, along the geodesic on the WGS84
  /// ellipsoid (``Location/distance(from:)``); `nil` or `<= 0` = every fix (`kCLDistanceFilterNone`).
  public var distanceFilter: Double?
  /// Minimum time in seconds between delivered fixes, measured between the fixes' UTC times;
  /// `nil` or `<= 0` = no minimum.
  public var minimumInterval: Double?
  /// Largest acceptable 95% horizontal error radius in metres (``Location/horizontalAccuracy95``);
  /// fixes with a larger or unknown error are not delivered. `nil` = any accuracy.
  public var desiredAccuracy: Double?

  /// Creates a filter; the default delivers every fix.
  public init(
    distanceFilter: Double? = nil, minimumInterval: Double? = nil, desiredAccuracy: Double? = nil
  ) {
    self.distanceFilter = distanceFilter
    self.minimumInterval = minimumInterval
    self.desiredAccuracy = desiredAccuracy
  }

  /// Whether `location` should be delivered after `last` (the previously delivered one).
  public func accepts(_ location: Location, after last: Location?) -> Bool {
    if let desired = desiredAccuracy {
      guard let error = location.horizontalAccuracy95, error <= desired else { return false }
    }
    guard let last else { return true }
    if let interval = minimumInterval, interval > 0,
      let elapsed = Self.elapsedMilliseconds(from: last.fix, to: location.fix),
      Double(elapsed) < interval * 1000
    {
      return false
    }
    if let minimum = distanceFilter, minimum > 0, let distance = location.distance(from: last),
      distance < minimum
    {
      return false
    }
    return true
  }

  /// Whether the filter lets every fix through (no accuracy, interval or distance condition), so
  /// that ``accepts(_:after:)`` is `true` whatever the locations.
  public var acceptsEverything: Bool {
    desiredAccuracy == nil && (minimumInterval ?? 0) <= 0 && (distanceFilter ?? 0) <= 0
  }

  /// Milliseconds from `a` to `b` by their UTC times (or times of day across midnight), `nil`
  /// when either has no time.
  static func elapsedMilliseconds(from a: Fix, to b: Fix) -> Int64? {
    if let start = a.time, let end = b.time { return end - start }
    if let start = a.timeOfDay, let end = b.timeOfDay {
      var delta = Int64(end) - Int64(start)
      if delta < -43_200_000 { delta += 86_400_000 }
      return delta
    }
    return nil
  }
}
