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

  /// Tells the watchers once when the current location becomes stale (``StaleLimit``).
  func checkStaleness() async {
    guard !staleReported, let age = await currentAge(), age > StaleLimit.seconds else { return }
    staleReported = true
    Log.event("fixStale", ["ageSeconds": String((age * 10).rounded() / 10)])
    broadcastToWatchers(.stale(true, age: age))
  }
}
