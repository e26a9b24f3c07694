import LocationCore
import ServiceCore
import TrackStore

/// The daemon's track recording: a ``TrackRecorder`` fed by its own lossless observation of the
/// manager, so every fix the manager accepts while tracking reaches the store's queue without
/// waiting for the socket hub or the map state, and the store's writes never delay either.
///
/// A store that cannot be opened (libsqlite3 missing, an unusable file) is logged as
/// `trackStoreUnavailable` and the daemon serves without recording; a store that fills up is
/// logged once as `trackStoreFailed` and tracking goes on.
final class TrackRecording: Sendable {
  let store: TrackStore
  let recorder: TrackRecorder
  private let task: Task<Void, Never>

  private init(store: TrackStore, recorder: TrackRecorder, task: Task<Void, Never>) {
    self.store = store
    self.recorder = recorder
    self.task = task
  }

  /// Opens `STATE-DIR/track.sqlite` and starts recording `manager`'s locations; `nil` when
  /// recording is off or the store cannot be opened (logged).
  static func start(_ configuration: Configuration, manager: LocationManager) async -> TrackRecording? {
    guard configuration.trackEnabled else { return nil }
    var limits = TrackStoreConfiguration()
    limits.maxAge = configuration.trackMaxAge
    limits.maxBytes = configuration.trackMaxSize
    // The MQTT front-end queues in this store's outbox; its bound is mqtt-queue-limit.
    if let mqtt = configuration.mqtt { limits.outboxLimit = mqtt.queueLimit }
    let path = configuration.stateDirectory + "/" + TrackStore.fileName
    let store: TrackStore
    do {
      store = try TrackStore(path: path, configuration: limits)
    } catch {
      Log.event("trackStoreUnavailable", ["path": path, "reason": error.description])
      return nil
    }
    let recorder = TrackRecorder(store: store) { event, detail in Log.event(event, ["detail": detail]) }
    let events = await manager.observe(coalescing: false)
    let task = Task {
      for await event in events {
        if case .location(let location, _) = event { recorder.record(location) }
      }
    }
    return TrackRecording(store: store, recorder: recorder, task: task)
  }

  /// After the manager has shut down (which ends its observation): records the last fixes,
  /// commits what is queued and closes the store; logs the counters.
  func stop() async {
    await task.value
    recorder.flush()
    let counters = recorder.counters
    Log.event(
      "trackStoreClosed",
      [
        "recorded": String(counters.recorded), "dropped": String(counters.dropped), "failed": String(counters.failed),
        "expired": String(counters.expired),
      ])
    store.close()
  }
}
