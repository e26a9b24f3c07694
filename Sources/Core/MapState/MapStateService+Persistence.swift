import LocationModel

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

// MARK: Saving

/// Saving the map state through the ``StateSaver``: after each change that touches viewport,
/// mode or annotations, and on demand at shutdown.
extension MapStateService {
  /// Saves the state when it differs from what was last saved, or again after a failed save,
  /// and waits up to `timeout` for the disk (at shutdown).
  ///
  /// - Returns: why the state is not on disk (``MapStoreError/stalled(path:seconds:)`` when the
  ///   disk did not finish in time), or `nil` when it is (or there is no store).
  @discardableResult public func saveIfNeeded(timeout: Duration = .seconds(10)) async -> MapStoreError? {
    guard let saver, let store else { return nil }
    if saver.failure != nil { lastSubmitted = nil }
    persistIfChanged()
    return await saver.outcome(of: lastTicket, timeout: timeout, path: store.path)
  }

  /// Waits until every save handed over so far has completed (or `timeout` passed), without
  /// starting another: what is on disk then is the newest state (or the newest failure).
  ///
  /// - Returns: `false` when the disk did not finish in time.
  @discardableResult public func savesSettled(timeout: Duration = .seconds(30)) async -> Bool {
    guard let saver else { return true }
    return await saver.flush(timeout: timeout)
  }

  /// Hands the state to the saver when it differs from what was last handed over, or when the
  /// last save failed (every change retries).
  func persistIfChanged() {
    guard let saver else { return }
    let current = PersistedMapState(
      viewport: viewport, mode: mode,
      annotations: annotationOrder.compactMap { annotationsByID[$0] })
    guard current != lastSubmitted || saver.failure != nil else { return }
    lastSubmitted = current
    lastTicket = saver.submit(current)
  }
}
