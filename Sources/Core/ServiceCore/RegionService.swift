import LocationCore
import LocationModel
import LocationProtocol
import MapState
import Regions

/// Saves and restores the regions and their states as `regions.json` in the state directory,
/// with the map state's rules (``StateFile``: atomic replacement, nothing followed that someone
/// else could plant, the directory checked at every load and save).
///
/// The file is ``RegionMonitor/persisted()`` written as compact JSON and read back with
/// ``RegionMonitor/init(restoring:configuration:)``, which validates every region and state.
public struct RegionStore: Sendable {
  /// File name inside the state directory.
  public static let fileName = "regions.json"
  /// Largest file accepted on load, bytes (256 MiB: a hundred thousand regions of a few hundred
  /// vertices each).
  public static let maxFileSize = 256 * 1024 * 1024

  /// The file.
  public let file: StateFile

  /// Creates a store for `directory` (the daemon's `--state-dir`); nothing is touched until
  /// ``load(configuration:)`` or ``save(_:)``.
  ///
  /// - Parameters:
  ///   - log: receives one line per problem.
  ///   - failureInjector: makes chosen steps of a save fail (tests), as for ``MapStateStore``.
  public init(
    directory: String, log: @escaping @Sendable (String) -> Void = MapStateStore.logToStandardError,
    failureInjector: MapStateStore.FailureInjector? = nil
  ) {
    file = StateFile(
      directory: directory, fileName: Self.fileName, subject: "regions",
      fallback: "starting with no regions",
      maxFileSize: Self.maxFileSize, log: log, failureInjector: failureInjector)
  }

  /// Full path of `regions.json`.
  public var path: String { file.path }

  /// The saved regions and states, or `nil` (no regions) when the file is missing, unusable,
  /// not JSON or refused by the engine; each case but a missing file logs one line
  /// (`regions file corrupt, starting with no regions path=... error=... keptAs=regions.json.rejected`)
  /// and sets the file aside as `regions.json.rejected`. Never throws, never traps.
  public func load(configuration: RegionMonitorConfiguration) -> RegionMonitor? {
    guard case .bytes(let bytes) = file.load() else { return nil }
    let value: JSONValue
    do {
      value = try JSONValue.parse(bytes)
    } catch {
      file.reject(byteCount: bytes.count, reason: error.description)
      return nil
    }
    // A name given twice is read differently by different parsers: the file is ambiguous.
    if let path = value.firstDuplicateMemberPath {
      file.reject(byteCount: bytes.count, reason: "duplicate member \"\(path.prefix(200))\"")
      return nil
    }
    do {
      return try RegionMonitor(restoring: value, configuration: configuration)
    } catch {
      file.reject(byteCount: bytes.count, reason: error.description)
      return nil
    }
  }

  /// Saves `monitor`'s regions and states atomically.
  ///
  /// - Throws: ``MapStoreError`` naming the failed step; the previous file is then unchanged.
  public func save(_ monitor: RegionMonitor) throws(MapStoreError) {
    try file.save(try Self.encode(monitor))
  }

  /// The file's bytes for `monitor`'s regions and states (compact JSON and a newline).
  ///
  /// - Throws: ``MapStoreError/encoding(_:)`` for a number that JSON cannot hold.
  public static func encode(_ monitor: RegionMonitor) throws(MapStoreError) -> [UInt8] {
    let value = monitor.persisted()
    guard !value.containsNonFiniteNumber else {
      throw .encoding("a region number is NaN or infinite")
    }
    var bytes = value.encoded
    bytes.append(UInt8(ascii: "\n"))
    return bytes
  }
}

/// The daemon's region monitoring: one ``RegionMonitor`` (the pure engine) fed every accepted
/// fix, advanced on a ``LocationClock`` for dwell times and outages, and saved in a
/// ``RegionStore`` by a ``StateSaver`` on its own thread (no fix and no request waits for the
/// disk): after every change of the regions (`add`, `remove`: the reply waits up to
/// ``replyWait`` to say whether it is on disk), and after transitions with the next
/// ``advance()`` (at most one save a second however many transitions, since every save rewrites
/// the whole file).
///
/// ``LocationService`` owns it: the hub calls ``update(with:)`` for each fix right after the
/// fix's TPV went to the watchers, and a task calls ``advance()`` once a second of the clock;
/// the transitions they return become `REGION` events.
///
/// "Now" is the timeline of the source that produced the fixes (``Provenance/timelineSegment``):
/// for a live source the clock's UTC wall time in milliseconds
/// (``LocationClock/wallTimeMilliseconds``), against which fix ages are judged; for a replay or
/// a simulation the time of its newest fix in the current segment, so a recorded drive decides
/// the same events at any speed, with original or shifted timestamps, on every pass of a loop
/// (see docs/regions.md). A change of segment is a ``RegionMonitor/beginSegment()``.
public actor RegionService {
  private var monitor: RegionMonitor
  private let store: RegionStore?
  /// The clock the monitor's `now` comes from.
  public nonisolated let clock: any LocationClock
  /// Saves a copy of the monitor (its arrays are shared until this actor changes them): the
  /// whole file is encoded on the saver's thread, not here, so that with thousands of regions
  /// an `add` does not hold up the fixes and requests behind it while megabytes of JSON are
  /// written, and a burst of changes is encoded once for the newest of them.
  private let saver: StateSaver<RegionMonitor>?
  private var lastTicket: UInt64 = 0
  /// How long a reply waits for its change's save (``unsavedChanges``).
  public nonisolated let replyWait: Duration
  /// Transitions changed states that are not saved yet (saved by the next ``advance()``).
  private var statesChanged = false
  /// The timeline segment of the last fix (`nil` before the first).
  private var segment: UInt64?
  /// For a recorded or simulated source: the newest fix time of the current segment, ms.
  private var sourceNow: Int64?

  /// Creates the service, restoring the regions and states saved in `store` (a missing or bad
  /// file gives no regions, see ``RegionStore/load(configuration:)``).
  ///
  /// - Parameters:
  ///   - store: where regions persist; `nil` keeps them in memory only.
  ///   - configuration: the engine's thresholds (`--region-*` options).
  ///   - clock: the time source for fix ages, dwell and outages (a ``VirtualClock`` in tests).
  ///   - replyWait: how long ``unsavedChanges`` waits for the newest save (the daemon: 50 ms).
  public init(
    store: RegionStore? = nil, configuration: RegionMonitorConfiguration = .default,
    clock: any LocationClock = SystemClock(), replyWait: Duration = .seconds(5)
  ) {
    self.store = store
    self.clock = clock
    self.replyWait = replyWait
    saver = store.map { store in
      StateSaver(
        label: "locationd.region-saves",
        save: { (monitor: RegionMonitor) throws(MapStoreError) in
          try store.file.save(try RegionStore.encode(monitor))
        },
        report: { failure, _ in
          // Once per run of the same failure, and once when saving works again.
          if let failure {
            Log.event("regionsNotSaved", ["path": store.path, "error": failure.description])
          } else {
            Log.event("regionsSaved", ["path": store.path, "after": "an earlier failure"])
          }
        })
    }
    monitor =
      store?.load(configuration: configuration) ?? RegionMonitor(configuration: configuration)
  }

  /// The engine's thresholds.
  public var configuration: RegionMonitorConfiguration { monitor.configuration }

  /// The number of regions.
  public var count: Int { monitor.count }

  /// Every region with its state, sorted by id.
  public var statuses: [RegionStatus] {
    monitor.regions.compactMap { monitor.status(id: $0.id) }
  }

  /// The region `id` with its state, `nil` when there is none.
  public func status(id: String) -> RegionStatus? { monitor.status(id: id) }

  /// The newest completed save's failure, after waiting up to ``replyWait`` for the newest
  /// change's own save (a stalled disk answers with the save before); `nil` when it is on disk.
  public var unsavedChanges: MapStoreError? {
    get async {
      guard let saver else { return nil }
      _ = await saver.wait(for: lastTicket, timeout: replyWait)
      return saver.failure
    }
  }

  /// Whether the last save failed (encoding or disk).
  private var lastSaveFailed: Bool { saver?.failure != nil }

  /// Adds `region`, or replaces the region with its id (whose state starts again at
  /// `unknown`), and saves.
  ///
  /// - Returns: whether a region was replaced, and the region's status now.
  public func add(_ region: Region) -> (replaced: Bool, status: RegionStatus) {
    let replaced = monitor.add(region)
    save()
    let status =
      monitor.status(id: region.id)
      ?? RegionStatus(region: region, state: .unknown, since: nil, distanceToBoundary: nil)
    return (replaced, status)
  }

  /// Removes the region `id` and saves.
  ///
  /// - Returns: the region's status just before it was removed, `nil` when there was none.
  public func remove(id: String) -> RegionStatus? {
    guard let status = monitor.status(id: id), monitor.remove(id: id) else { return nil }
    save()
    return status
  }

  /// What one fix or one tick of the clock did to the regions.
  public struct Outcome: Sendable {
    /// The transitions decided, in region id order (the `REGION` events).
    public var transitions: [RegionTransition]
    /// Whether some region's confirmed state changed, with or without an event (an unknown
    /// region confirmed outside fires none): the map's renderers need the new states.
    public var statesChanged: Bool
  }

  /// "Now" on the current source's timeline, ms since 1970 UTC; `nil` for a recorded source
  /// that has not given a fix time in this segment yet.
  public var now: Int64? {
    guard let segment, segment != Provenance.liveTimeline else { return clock.wallTimeMilliseconds }
    return sourceNow
  }

  /// Feeds one accepted fix; saves when a region changed state.
  ///
  /// - Returns: the transitions it decided, in region id order, and whether a state changed.
  public func update(with location: Location) -> Outcome {
    let fixSegment = location.provenance.timelineSegment
    if fixSegment != segment {
      if segment != nil { monitor.beginSegment() }
      segment = fixSegment
      sourceNow = nil
    }
    if !location.provenance.isLiveTimeline, let time = location.fix.time {
      sourceNow = max(sourceNow ?? time, time)
    }
    guard monitor.count > 0, let now else { return Outcome(transitions: [], statesChanged: false) }
    let revision = monitor.stateRevision
    let transitions = monitor.update(with: location, now: now)
    let changed = revision != monitor.stateRevision
    if changed || !transitions.isEmpty { statesChanged = true }
    return Outcome(transitions: transitions, statesChanged: changed)
  }

  /// Advances the monitor to the clock's time without a fix (dwell times, outages), and saves
  /// when a transition since the last save changed a state or the last save failed.
  ///
  /// - Returns: the transitions it decided, in region id order.
  public func advance() -> [RegionTransition] {
    guard monitor.count > 0, let now else { return [] }
    let transitions = monitor.advance(to: now)
    if statesChanged || lastSaveFailed || !transitions.isEmpty { save() }
    return transitions
  }

  /// Saves once more when the last save failed or states changed since the last save (at
  /// shutdown), and waits up to `timeout` for the disk; with nothing unsaved, touches nothing.
  ///
  /// - Returns: the failure when the save failed again or did not finish
  ///   (``MapStoreError/stalled(path:seconds:)``), `nil` when the file is up to date.
  @discardableResult public func saveIfNeeded(timeout: Duration = .seconds(10)) async -> MapStoreError? {
    guard let saver, let store else { return nil }
    if statesChanged || lastSaveFailed { save() }
    return await saver.outcome(of: lastTicket, timeout: timeout, path: store.path)
  }

  /// Hands a copy of the monitor to the saver, which encodes and writes it (an encoding failure
  /// is a failed save: logged as `regionsNotSaved`, reported by ``unsavedChanges``).
  private func save() {
    guard let saver else { return }
    statesChanged = false
    lastTicket = saver.submit(monitor)
  }
}
