import Glibc
import LocationCore
import LocationProtocol
import ServiceCore
import Synchronization
import TrackStore

/// The daemon's track recording: a ``TrackRecorder`` fed by the service's hub
/// (``LocationService/recordedFixes()``, lossless and in order), the one path every fix takes to
/// the watchers; the store's writes happen on the recorder's own queue and never delay the hub.
///
/// The store is opened on first use (the first location, or a caller of ``store``), not at start:
/// a daemon that never tracks does not load libsqlite3 (1.4 MB of RSS). It is opened once and
/// shared: the recorder and any other user of ``store`` (a store-and-forward outbox) go through
/// the same connection. A store that cannot be opened (libsqlite3 missing, an unusable file) is
/// logged once as `trackStoreUnavailable` and the daemon goes on without recording; a store that
/// fills up is logged once as `trackStoreFailed` and tracking goes on. A file that is not a
/// locationd track store, or is damaged, is set aside (`trackStoreRejected`, with the reason and
/// the name it is kept under) and a fresh store is started.
final class TrackRecording: Sendable {
  private struct Opening {
    var store: TrackStore?
    var tried = false
    /// Why the store could not be opened (the `trackStoreUnavailable` reason).
    var failure: String?
  }

  private let path: String
  private let limits: TrackStoreConfiguration
  private let opening = Mutex(Opening())
  private let recorder = Mutex<TrackRecorder?>(nil)
  private let task = Mutex<Task<Void, Never>?>(nil)
  /// The files set aside this run (the store's own list is behind the lock its writes hold).
  private let rejected = Mutex<[String]>([])

  private init(path: String, limits: TrackStoreConfiguration) {
    self.path = path
    self.limits = limits
  }

  /// The store when it is open or its file exists (then opened as ``store`` opens it); `nil`
  /// otherwise, without creating it: a daemon that records nothing (a simulation with
  /// `track = live`) leaves no `track.sqlite` behind.
  var existingStore: TrackStore? {
    if opening.withLock({ $0.tried }) { return store }
    var info = stat()
    return lstat(path, &info) == 0 ? store : nil
  }

  /// The shared store, opened on the first call; `nil` when it cannot be opened (logged once).
  var store: TrackStore? {
    opening.withLock { opening -> TrackStore? in
      if opening.tried { return opening.store }
      opening.tried = true
      do throws(TrackStoreError) {
        opening.store = try TrackStore(path: path, configuration: limits) { rejection in
          self.rejected.withLock { $0.append(rejection.keptAs) }
          Self.logRejection(rejection)
        }
        Log.event("trackStoreOpened", ["path": path])
      } catch {
        opening.failure = error.description
        Log.event("trackStoreUnavailable", ["path": path, "reason": error.description])
      }
      return opening.store
    }
  }

  /// One `trackStoreRejected` line for a store file set aside (at open, or damaged while in use).
  @Sendable static func logRejection(_ rejection: TrackStoreRejection) {
    Log.event("trackStoreRejected", ["path": rejection.path, "reason": rejection.reason, "keptAs": rejection.keptAs])
  }

  /// Starts recording the fixes `service` dispatches in `STATE-DIR/track.sqlite`; `nil` when
  /// recording is off.
  static func start(_ configuration: Configuration, service: LocationService) async -> TrackRecording? {
    guard configuration.trackEnabled else { return nil }
    var limits = TrackStoreConfiguration()
    limits.maxAge = configuration.trackMaxAge
    limits.maxBytes = configuration.trackMaxSize
    let recording = TrackRecording(path: configuration.stateDirectory + "/" + TrackStore.fileName, limits: limits)
    let fixes = await service.recordedFixes()
    let liveOnly = configuration.trackRecording == .live
    let task = Task {
      var recorder: TrackRecorder?
      var unavailable = false
      // Per replayed or simulated source, how far it was recorded this run: a replay's log line
      // (it names the fix whatever its time, shifted or not), a simulation's fix time.
      var newest: [String: Int64] = [:]
      var repeated = 0
      for await location in fixes {
        // A replay or simulation is not history (--track all records it, marked as such).
        if liveOnly && location.provenance.isSimulated { continue }
        // Another pass of a looping replay, or a seek back, gives fixes already recorded (with
        // the same times, or with times shifted again to now): they are not new history, and
        // interleaved with the first pass they would draw a track that jumps back and forth. A
        // replay's fix is recorded once per log line, a simulation's once per time. A live
        // receiver's fixes are kept whatever their times do (a clock that steps back must not
        // stop the history).
        if location.provenance.isSimulated,
          let position = location.provenance.line.map(Int64.init) ?? location.fix.time
        {
          let key = location.provenance.backend + "\u{0}" + (location.provenance.source ?? "")
          if let last = newest[key], position <= last {
            repeated += 1
            if LogThrottle.powersOfTwo.logs(repeated) {
              Log.event("trackRepeatSkipped", ["count": String(repeated), "source": location.provenance.backend])
            }
            continue
          }
          if newest[key] == nil, newest.count >= 64 { newest.removeAll() }
          newest[key] = position
        }
        if recorder == nil && !unavailable {
          if let store = recording.store {
            let created = TrackRecorder(store: store) { event, detail in Log.event(event, ["detail": detail]) }
            recording.recorder.withLock { $0 = created }
            recorder = created
          } else {
            unavailable = true
          }
        }
        recorder?.record(location)
      }
    }
    recording.task.withLock { $0 = task }
    return recording
  }

  /// The track store's part of `status`'s `storage`, from memory (never the disk):
  /// `{"state":S,"path":P,"recorded":N,"failed":N,"dropped":N,"waiting":N,"detail":TEXT|null,"rejected":[FILE...]}`
  /// where `state` is `notOpened` (no fix to record yet), `opening` (the disk has not finished
  /// opening it yet), `unavailable` (the store cannot be
  /// opened: `detail` says why, nothing is recorded this run), `failing` (commits fail now, a full
  /// or read-only disk: `detail` is the `trackStoreFailed` text) or `recording`; `rejected` names
  /// the files set aside this run (`trackStoreRejected`); `waiting` counts the fixes queued for
  /// the disk (``TrackRecorder/waiting``: it grows while a stalled disk holds a write).
  var report: JSONValue {
    // The open runs under `opening`'s lock: a disk that stalls it is reported, not waited for.
    let opened = opening.withLockIfAvailable { ($0.tried, $0.store, $0.failure) }
    let (tried, store, failure) = opened ?? (true, nil, nil)
    let counters = recorder.withLock { $0?.counters }
    let waiting = Int64(recorder.withLock { $0?.waiting } ?? 0)
    let state: String
    var detail: String?
    if opened == nil {
      state = "opening"
    } else if !tried {
      state = "notOpened"
    } else if store == nil {
      state = "unavailable"
      detail = failure
    } else if let error = counters?.lastError {
      state = "failing"
      detail = error.description
    } else {
      state = "recording"
    }
    let recorded = Int64(counters?.recorded ?? 0)
    let failed = Int64(counters?.failed ?? 0)
    let dropped = Int64(counters?.dropped ?? 0)
    let files: [JSONValue] = rejected.withLock { $0 }.map { JSONValue.string($0) }
    let members: [JSONMember] = [
      JSONMember("state", JSONValue.string(state)), JSONMember("path", JSONValue.string(path)),
      JSONMember("recorded", JSONValue.int(recorded)), JSONMember("failed", JSONValue.int(failed)),
      JSONMember("dropped", JSONValue.int(dropped)), JSONMember("waiting", JSONValue.int(waiting)),
      JSONMember("detail", JSONValue.string(detail)),
      JSONMember("rejected", JSONValue.array(files)),
    ]
    return JSONValue.object(members)
  }

  /// After the service core has shut down (which ends its fixes): records the last fixes,
  /// commits what is queued and closes the store; logs the counters.
  func stop() async {
    if let task = task.withLock({ $0 }) { await task.value }
    if let recorder = recorder.withLock({ $0 }) {
      recorder.flush()
      let counters = recorder.counters
      Log.event(
        "trackStoreClosed",
        [
          "recorded": String(counters.recorded), "dropped": String(counters.dropped),
          "failed": String(counters.failed), "expired": String(counters.expired),
        ])
    }
    opening.withLock { $0.store?.close() }
  }
}
