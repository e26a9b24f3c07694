import FoundationEssentials
import Glibc
import JSON
import LocationModel
import LocationProtocol
import OwnTracks
import Regions
import ServiceCore
import Synchronization

/// Counters of the MQTT front-end, for the log and tests.
public struct OwnTracksCounters: Sendable, Hashable {
  /// Fixes queued for publishing (after the minimum interval and distance).
  public var queued = 0
  /// Fixes not queued because of the minimum interval or distance.
  public var limited = 0
  /// Messages (locations and transitions) lost because the queue failed (disk full...).
  public var queueFailures = 0
  /// Region transitions (`REGION` events `enter` and `exit`) queued as OwnTracks `transition` messages.
  public var transitions = 0
  /// Fleet messages received.
  public var received = 0
  /// Fleet messages refused as malformed (not OwnTracks JSON, bad member).
  public var malformed = 0
  /// Fleet messages refused as larger than ``OwnTracksMessage/maxPayloadBytes``.
  public var oversized = 0
  /// Fleet annotations the map state refused (its limits).
  public var rejected = 0
  /// Fleet annotations applied to the map state.
  public var applied = 0
}

/// The MQTT front-end: publishes the daemon's fixes as OwnTracks `location` messages and its region
/// transitions as OwnTracks `transition` messages and, with a subscription, shows other devices on
/// the map (the fleet view).
///
/// Like the Unix socket's clients it goes through the service core: it is one client
/// (``ClientChannel``, numbered by ``ConnectionNumber/next()``) with the daemon's own credentials;
/// at ``start()`` it sends `request` and a lossless `watch`, so the backend runs while MQTT is
/// enabled (`status` shows `backendActive` and one more client), and every fix reaches it as a
/// TPV event. Fleet positions go in as `annotate` requests, as `locationctl annotate` sends
/// them, so every map renderer shows them and the map's limits apply.
///
/// Fix to broker: TPV → ``OwnTracksLocation`` → ``PublishLimiter`` → ``MQTTOutbox`` (appended
/// before anything is sent) → ``MQTTSession`` (in order, bounded rate, removed when acknowledged).
///
/// Region to broker: a `REGION` event `enter` or `exit` (`dwell` has no OwnTracks event and is
/// skipped) → the region's title, asked of the service with `region` `state` (its id when the
/// region has none or was removed meanwhile) → ``OwnTracksTransition`` → ``MQTTOutbox`` on the
/// topic plus `/event`, never retained, not subject to the ``PublishLimiter``. Transitions are
/// queued one at a time in the order of their events.
public final class OwnTracksFrontEnd: ClientChannel, FrontEnd {
  /// The client number.
  public let id: UInt64
  private let settings: MQTTSettings
  private let handler: any RequestHandler
  private let outbox: any MQTTOutbox
  private let session: MQTTSession
  private let topic: String
  private let trackerID: String
  private let state: Mutex<State>
  private let wake: AsyncStream<Void>.Continuation
  private let wakeStream: AsyncStream<Void>
  private let tasks = Mutex<[Task<Void, Never>]>([])
  private let regionEvents: AsyncStream<RegionTransition>.Continuation
  private let regionEventStream: AsyncStream<RegionTransition>

  private struct State {
    var limiter: PublishLimiter
    var roster: FleetRoster
    var counters = OwnTracksCounters()
    var pending: [String: Annotation] = [:]
    var running = false
    var connection: MQTTConnectionState?
  }

  /// Creates the front-end; nothing connects before ``start()``.
  ///
  /// - Parameters:
  ///   - settings: the `mqtt*` settings.
  ///   - credentials: read from ``MQTTSettings/credentialsFile`` by the caller.
  ///   - outbox: the store-and-forward queue (durable: the track store's; else ``MemoryOutbox``).
  ///   - handler: the service core.
  public init(
    settings: MQTTSettings, credentials: MQTTCredentials?, outbox: any MQTTOutbox, handler: any RequestHandler
  ) {
    id = ConnectionNumber.next()
    self.settings = settings
    self.handler = handler
    // Appends leave the hub's task at once: a slow or stalled disk under the durable outbox
    // delays queueing only, never the delivery of fixes to the other front-ends.
    let failures = Mutex(0)
    let writer = OutboxWriter(outbox) { error in
      let count = failures.withLock { count in
        count += 1
        return count
      }
      if LogThrottle.firstThenEvery(first: 1, every: 1000).logs(count) {
        Log.event("mqttQueueFailed", ["reason": error.description, "lost": String(count)])
      }
    }
    self.outbox = writer
    topic = settings.effectiveTopic
    trackerID = settings.effectiveTrackerID
    state = Mutex(
      State(
        limiter: PublishLimiter(minimumInterval: settings.minimumInterval, minimumDistance: settings.minimumDistance),
        roster: FleetRoster(staleAfter: settings.staleAfter, ownTopic: settings.effectiveTopic)))
    (wakeStream, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    (regionEventStream, regionEvents) = AsyncStream.makeStream(of: RegionTransition.self, bufferingPolicy: .unbounded)
    let uri = settings.broker.description
    let topic = settings.effectiveTopic
    let box = WeakBox()
    session = MQTTSession(
      options: MQTTSessionOptions(
        settings: settings, credentials: credentials, maxPayloadBytes: OwnTracksMessage.maxPayloadBytes,
        lastWill: { OwnTracksLastWill(timestamp: $0).encoded },
        onMessage: { topic, payload, byteCount in box.value?.received(topic: topic, payload: payload, byteCount: byteCount) },
        onState: { state in
          box.value?.connectionChanged(state)
          Self.log(state, uri: uri, topic: topic)
        }),
      outbox: writer)
    box.value = self
  }

  /// Connects, starts tracking through the service and, with a subscription, the fleet view.
  ///
  /// - Throws: ``MQTTSettingError`` when libmosquitto cannot be loaded; the service's refusal
  ///   (`notAuthorized` when the daemon's own user is not authorized) as an ``MQTTSettingError`` too.
  public func start() async throws(MQTTSettingError) {
    state.withLock { $0.running = true }
    let serviceSession: ClientSession
    do throws(SessionRefusal) {
      serviceSession = try await handler.open(peer: Self.ownCredentials(), channel: self)
    } catch {
      throw MQTTSettingError(
        key: "mqtt", value: settings.broker.description,
        reason: "the service refused the MQTT front-end: \(error.message)")
    }
    let context = serviceSession.context
    await removePreviousFleet(context)
    try session.start()
    do throws(SessionRefusal) {
      try await serviceSession.watch(coalescing: false)
    } catch {
      session.stop()
      throw MQTTSettingError(
        key: "mqtt", value: settings.broker.description,
        reason: "cannot start tracking: \(error.message)")
    }
    let handler = handler
    let regionEventStream = regionEventStream
    tasks.withLock { tasks in
      tasks.append(
        Task { [weak self] in
          for await event in regionEventStream {
            guard let self else { return }
            await self.queueTransition(event, handler: handler, context: context)
          }
        })
    }
    guard settings.subscribe != nil else { return }
    let wakeStream = wakeStream
    tasks.withLock { tasks in
      tasks.append(
        Task { [weak self] in
          for await _ in wakeStream {
            guard let self else { return }
            await self.applyPending(handler: handler, context: context)
            // Updates arriving meanwhile wait and go in the next batch: at most
            // 1 / fleetBatchInterval map changes (events, saves) per second however large the fleet.
            try? await Task.sleep(for: Self.fleetBatchInterval)
          }
        })
      tasks.append(
        Task { [weak self] in
          while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            guard let self else { return }
            self.expireStale()
          }
        })
    }
  }

  /// Stops tracking and disconnects cleanly (the broker keeps the retained last location and
  /// does not publish the Last Will).
  public func stop() async {
    let wasRunning = state.withLock { state in
      defer { state.running = false }
      return state.running
    }
    guard wasRunning else { return }
    for task in tasks.withLock({ $0 }) { task.cancel() }
    wake.finish()
    regionEvents.finish()
    await handler.clientDisconnected(ClientContext(connection: self, peer: Self.ownCredentials()))
    session.stop()
    for _ in 0..<40 where !session.hasFinished { try? await Task.sleep(for: .milliseconds(10)) }
  }

  /// Fleet updates are applied to the map in batches at most this often (one map event and one
  /// save of the state file per batch).
  public static let fleetBatchInterval = Duration.milliseconds(250)

  /// The counters so far.
  public var counters: OwnTracksCounters { state.withLock { $0.counters } }
  /// The connection's state, `nil` before the first attempt.
  public var connectionState: MQTTConnectionState? { state.withLock { $0.connection } }
  /// The topic locations are published to.
  public var publishTopic: String { topic }
  /// The topic transitions are published to: ``publishTopic`` plus `/event`, as the OwnTracks
  /// apps publish theirs (booklet "JSON", Topics).
  public var eventTopic: String { topic + "/event" }

  // MARK: - FrontEnd and ClientChannel

  /// 1 while started (the publisher is one client of the service).
  public var clientCount: Int { state.withLock { $0.running ? 1 : 0 } }

  /// The MQTT publisher is the daemon tracking for itself, not one of a user's watches.
  public var isDaemonClient: Bool { true }

  /// Events other than fixes and region transitions (BACKEND, MAP...) are not published.
  @discardableResult public func send(_ event: Event) -> Bool { isConnected }

  /// A fix (TPV) becomes an OwnTracks `location` message in the queue when the limiter admits
  /// it; a region transition (`REGION`) becomes an OwnTracks `transition` message (see the type's
  /// discussion).
  @discardableResult public func deliver(_ event: EncodedEvent) -> Bool {
    guard isConnected else { return false }
    if let transition = event.transition {
      regionEvents.yield(transition)
      return true
    }
    // Fixes come typed from the hub (the TPV event's `location`): nothing to parse.
    guard let fix = event.location?.fix,
      let location = OwnTracksLocation(fix: fix, trackerID: trackerID, trigger: .timer)
    else { return true }
    let admitted = state.withLock { state in
      let admitted = state.limiter.admit(location)
      if !admitted { state.counters.limited += 1 }
      return admitted
    }
    guard admitted else { return true }
    if queue(topic: topic, payload: location.encoded, retain: settings.retain) {
      state.withLock { $0.counters.queued += 1 }
    }
    return true
  }


  /// Appends to the outbox; a failure is counted and logged (the first, then every thousandth).
  private func queue(topic: String, payload: [UInt8], retain: Bool) -> Bool {
    do {
      try outbox.append(topic: topic, payload: payload, retain: retain)
      return true
    } catch {
      let failures = state.withLock { state in
        state.counters.queueFailures += 1
        return state.counters.queueFailures
      }
      if LogThrottle.firstThenEvery(first: 1, every: 1000).logs(failures) {
        Log.event("mqttQueueFailed", ["reason": error.description, "lost": String(failures)])
      }
      return false
    }
  }

  /// Queues the OwnTracks `transition` message of a `REGION` event (none for `dwell`).
  func queueTransition(
    _ event: RegionTransition, handler: any RequestHandler, context: ClientContext
  ) async {
    let kind = event.event.rawValue
    let regionID = event.id
    guard OwnTracksTransitionEvent(regionEvent: kind) != nil else { return }
    var title: String?
    let reply = await handler.handle(Request(command: .region(.state(id: regionID))), from: context)
    if case .object("REGION", let members) = reply {
      title = JSONValue.object(members)["region"]?["title"]?.stringValue
    }
    // locationd keeps no creation time for a region: wtst is 0 (docs/mqtt.md).
    guard
      let transition = OwnTracksTransition(
        regionID: regionID, kind: kind, time: event.time, fix: event.location.fix, title: title,
        trackerID: trackerID)
    else { return }
    if queue(topic: eventTopic, payload: transition.encoded, retain: false) {
      state.withLock { $0.counters.transitions += 1 }
    }
  }

  /// Ignored and rejected messages: the first ten lines, then every thousandth (docs/mqtt.md).
  static let messageThrottle = LogThrottle.firstThenEvery(first: 10, every: 1000)

  /// Whether started.
  public var isConnected: Bool { state.withLock { $0.running } }

  /// The service closes a client whose authorization was revoked: tracking ends, MQTT stays connected.
  public func close() {}

  // MARK: - Fleet view

  func received(topic: String, payload: [UInt8], byteCount: Int) {
    let message: OwnTracksMessage
    do throws(OwnTracksError) {
      if byteCount > OwnTracksMessage.maxPayloadBytes { throw .oversized(byteCount: byteCount) }
      message = try OwnTracksMessage.parse(payload)
    } catch {
      let count = state.withLock { state in
        state.counters.received += 1
        if case .oversized = error { state.counters.oversized += 1 } else { state.counters.malformed += 1 }
        return state.counters.malformed + state.counters.oversized
      }
      if Self.messageThrottle.logs(count) {
        Log.event("mqttMessageIgnored", ["topic": topic, "reason": error.description, "ignored": String(count)])
      }
      return
    }
    let now = Int64(time(nil))
    let (changed, refusal) = state.withLock { state -> (Bool, (String, Int)?) in
      state.counters.received += 1
      let before = (state.roster.futureRefused, state.roster.topicRefused, state.roster.capacityRefused)
      guard let annotation = state.roster.receive(message, topic: topic, at: now) else {
        if state.roster.futureRefused > before.0 {
          return (false, ("tst more than \(FleetRoster.futureTolerance) s ahead of the clock", state.roster.futureRefused))
        }
        if state.roster.topicRefused > before.1 {
          return (false, (FleetRoster.topicProblem(topic) ?? "topic refused", state.roster.topicRefused))
        }
        if state.roster.capacityRefused > before.2 {
          let reason = "the fleet view is full (\(FleetRoster.maxDevices) devices, \(FleetRoster.maxTextBytes) bytes)"
          return (false, (reason, state.roster.capacityRefused))
        }
        return (false, nil)
      }
      state.pending[annotation.id] = annotation
      return (true, nil)
    }
    if let (reason, count) = refusal, Self.messageThrottle.logs(count) {
      Log.event("mqttMessageIgnored", ["topic": String(topic.prefix(160)), "reason": reason, "ignored": String(count)])
    }
    if changed { wake.yield() }
  }

  /// Removes the fleet annotations (ids in the fleet's namespace, ``Annotation/fleetPrefix``,
  /// of one of ``FleetRoster/kinds``) a previous run left in the map state: nothing updates or
  /// expires them any more, and they would hold the map's annotation room. The broker's retained
  /// messages bring the devices back. A user's annotation is never among them: clients cannot
  /// add ids in the fleet's namespace.
  private func removePreviousFleet(_ context: ClientContext) async {
    guard case .object(_, let members) = await handler.handle(Request(command: .map(.json)), from: context),
      let annotations = members.first(where: { $0.key == "annotations" })?.value.arrayValue
    else { return }
    let ids = annotations.compactMap { annotation -> String? in
      guard let kind = annotation["kind"]?.stringValue, FleetRoster.kinds.contains(kind),
        let id = annotation["id"]?.stringValue, Annotation.isFleetIdentifier(id)
      else { return nil }
      return id
    }
    guard !ids.isEmpty else { return }
    var removed = 0
    if let batcher = handler as? any AnnotationBatchHandler {
      // One map change (one save of the state file, one MAP event) for the whole fleet.
      removed = await batcher.removeAnnotations(ids, from: context) ?? 0
    } else {
      for id in ids {
        if case .object = await handler.handle(Request(command: .removeAnnotation(id: id)), from: context) { removed += 1 }
      }
    }
    if removed > 0 { Log.event("mqttFleetCleared", ["removed": String(removed), "detail": "fleet devices of the previous run"]) }
  }

  func expireStale() {
    let now = Int64(time(nil))
    let changed = state.withLock { state -> Bool in
      let stale = state.roster.expire(at: now)
      for annotation in stale { state.pending[annotation.id] = annotation }
      return !stale.isEmpty
    }
    if changed { wake.yield() }
  }

  private func applyPending(handler: any RequestHandler, context: ClientContext) async {
    let batch = state.withLock { state in
      defer { state.pending.removeAll(keepingCapacity: true) }
      return state.pending.values.sorted { $0.id < $1.id }
    }
    guard !batch.isEmpty else { return }
    if let batcher = handler as? any AnnotationBatchHandler {
      guard let refused = await batcher.annotate(batch, from: context) else { return }
      let rejected = state.withLock { state in
        state.counters.applied += batch.count - refused.count
        let before = state.counters.rejected
        state.counters.rejected += refused.count
        return before
      }
      for (offset, refusal) in refused.enumerated() {
        let count = rejected + offset + 1
        if Self.messageThrottle.logs(count) {
          Log.event("mqttFleetRejected", ["id": refusal.id, "reason": refusal.reason, "rejected": String(count)])
        }
      }
      return
    }
    for annotation in batch {
      let reply = await handler.handle(Request(command: .annotate(annotation)), from: context)
      let rejected: Int? = state.withLock { state in
        if case .error = reply {
          state.counters.rejected += 1
          return state.counters.rejected
        }
        state.counters.applied += 1
        return nil
      }
      if let rejected, case .error(let code, let message) = reply, Self.messageThrottle.logs(rejected) {
        Log.event("mqttFleetRejected", ["id": annotation.id, "code": "\(code)", "reason": message, "rejected": String(rejected)])
      }
    }
  }

  func connectionChanged(_ connection: MQTTConnectionState) {
    state.withLock { $0.connection = connection }
  }

  /// One line per state change, the shape of a `BACKEND` status: `uri`, `state`, `detail`
  /// (failures: what failed and when the next attempt is).
  static func log(_ state: MQTTConnectionState, uri: String, topic: String) {
    switch state {
    case .connecting:
      return
    case .connected:
      Log.event("mqtt", ["uri": uri, "state": "connected", "detail": "publishing to \(topic)"])
    case .failed(let detail, let retryIn):
      let retry = retryIn.isFinite ? "; retrying in \(Self.seconds(retryIn)) s" : "; not retrying: fix the configuration"
      Log.event("mqtt", ["uri": uri, "state": "failed", "detail": detail + retry])
    case .stopped:
      Log.event("mqtt", ["uri": uri, "state": "stopped", "detail": "disconnected"])
    }
  }

  static func seconds(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String(value)
  }

  /// The daemon's own credentials: the service authorizes the front-end as it would the daemon's
  /// user connecting to its own socket.
  static func ownCredentials() -> PeerCredentials {
    var groups = [gid_t](repeating: 0, count: 256)
    let count = getgroups(Int32(groups.count), &groups)
    return PeerCredentials(
      pid: getpid(), uid: geteuid(), gid: getegid(), groups: Array(groups.prefix(max(0, Int(count)))))
  }
}

/// A weak reference the session's callbacks hold, so the session does not keep the front-end alive.
private final class WeakBox: Sendable {
  private struct Reference: @unchecked Sendable {
    // Only read and written under the mutex below.
    weak var object: OwnTracksFrontEnd?
  }
  private let reference = Mutex(Reference())
  var value: OwnTracksFrontEnd? {
    get { reference.withLock { $0.object } }
    set { reference.withLock { $0.object = newValue } }
  }
}
