import LocationCore
import LocationProtocol

extension LocationService {
  // MARK: - Staleness

  /// Seconds since the current location arrived (monotonic), `nil` without a current location.
  func currentAge() async -> Double? {
    guard let instant = lastFixInstant, await manager.currentLocation != nil else { return nil }
    let elapsed = regions.clock.now - instant
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
  }

  /// Whether the current location is stale: the source's newest location had no position, or
  /// `age` (``currentAge()``) is over ``StaleLimit/seconds``. `false` without a current location.
  func isStale(age: Double?) -> Bool {
    guard let age else { return false }
    return sourceReportsNoFix || age > StaleLimit.seconds
  }

  /// Tells the watchers once when the current location becomes stale by age (``StaleLimit``).
  func checkStaleness() async {
    guard let age = await currentAge(), age > StaleLimit.seconds else { return }
    await reportStale(reason: "age")
  }

  /// Tells the watchers, once until the next fix with a position, that the current location is
  /// stale, and logs a `fixStale` line with `reason` (`age` or `noFix`). Nothing without a
  /// current location.
  func reportStale(reason: String) async {
    guard !staleReported, let age = await currentAge() else { return }
    staleReported = true
    Log.event("fixStale", ["ageSeconds": String((age * 10).rounded() / 10), "reason": reason])
    broadcastToWatchers(.stale(true, age: age))
  }
}
