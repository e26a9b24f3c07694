import LocationCore
import ServiceCore
import TrackStore

/// The daemon's track recording: a ``TrackRecorder`` fed by its own lossless observation of the
/// manager, so every fix the manager accepts while tracking reaches the store's queue without
/// waiting for the socket hub or the map state, and the store's writes never delay either.
///
/// The store is opened when the first location arrives, not at start: a daemon that is not
/// tracking does not load libsqlite3 (1.4 MB of RSS). A store that cannot be opened (libsqlite3
/// missing, an unusable file) is logged once as `trackStoreUnavailable` and the daemon goes on
/// without recording; a store that fills up is logged once as `trackStoreFailed` and tracking
/// goes on.
final class TrackRecording: Sendable {
  private let task: Task<TrackRecorder?, Never>

  private init(task: Task<TrackRecorder?, Never>) {
    self.task = task
  }

  /// Starts observing `manager` for `STATE-DIR/track.sqlite`; `nil` when recording is off.
  static func start(_ configuration: Configuration, manager: LocationManager) async -> TrackRecording? {
    guard configuration.trackEnabled else { return nil }
    var limits = TrackStoreConfiguration()
    limits.maxAge = configuration.trackMaxAge
    limits.maxBytes = configuration.trackMaxSize
    let path = configuration.stateDirectory + "/" + TrackStore.fileName
    let events = await manager.observe(coalescing: false)
    let task = Task { () -> TrackRecorder? in
      var recorder: TrackRecorder?
      var unavailable = false
      for await event in events {
        guard case .location(let location, _) = event else { continue }
        if recorder == nil && !unavailable {
          do throws(TrackStoreError) {
            let store = try TrackStore(path: path, configuration: limits)
            recorder = TrackRecorder(store: store) { event, detail in Log.event(event, ["detail": detail]) }
            Log.event("trackStoreOpened", ["path": path])
          } catch {
            Log.event("trackStoreUnavailable", ["path": path, "reason": error.description])
            unavailable = true
          }
        }
        recorder?.record(location)
      }
      return recorder
    }
    return TrackRecording(task: task)
  }

  /// After the manager has shut down (which ends its observation): records the last fixes,
  /// commits what is queued and closes the store; logs the counters.
  func stop() async {
    guard let recorder = await task.value else { return }
    recorder.flush()
    let counters = recorder.counters
    Log.event(
      "trackStoreClosed",
      [
        "recorded": String(counters.recorded), "dropped": String(counters.dropped), "failed": String(counters.failed),
        "expired": String(counters.expired),
      ])
    recorder.store.close()
  }
}
