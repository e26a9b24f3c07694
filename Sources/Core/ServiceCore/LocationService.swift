import FoundationEssentials
import LocationCore
import MapState
import LocationModel
import LocationProtocol
import Regions

/// The daemon's request handler: ties the socket protocol to one ``LocationManager`` and one
/// ``MapStateService``.
///
/// Tracking has two owners, as `locationctl` needs them:
/// - `start`/`stop` track on behalf of the client's user (its uid), so tracking asked for by
///   `locationctl start` outlives that command's connection until some `stop`;
/// - `watch` tracks on behalf of its connection and ends with it.
/// The backend runs while either kind of tracking exists (the manager counts references).
///
/// Authorization is decided here and nowhere else (``AuthorizationAuthority``): `request` asks the
/// authority, every other command except `status` needs the connection to be authorized, and the
/// manager is told each decision. ``reloadAuthorization(_:)`` replaces the rule and re-decides
/// every connection that has asked and every user that tracks: one that loses its authorization
/// loses its watch and its tracking at once and is told with `{"class":"AUTHORIZATION",
/// "authorization":"denied"}`; one that gains it is told `"authorized"`.
///
/// This file holds the requests and the hub; authorization and its reload are in
/// LocationService+Authorization.swift, the map and replay commands in LocationService+Map.swift.
///
/// Locations reach watchers through one hub: each fix is encoded once (gpsd TPV plus provenance)
/// and queued for every watching connection whose filter accepts it; the server coalesces
/// location events for a slow client (`"missed":N`) unless it asked for every fix.
///
/// The service runs on its manager's ``ServiceExecutor``, and the hub's task prefers it: a fix
/// goes from the manager's delivery to the watchers' sockets on the thread that took it from the
/// backend's queue.
public actor LocationService: AnnotationBatchHandler {
  struct Watcher {
    var connection: any ClientChannel
    var filter: LocationFilter
    var lossless: Bool
  }

  /// The watchers' connections by delivery: every fix coalesced, every fix lossless, and those
  /// whose filter decides per fix. Rebuilt when the watchers change, so that a fix reaches a
  /// thousand watchers without a dictionary walk.
  private struct Audience {
    var coalescing: [any ClientChannel] = []
    var lossless: [any ClientChannel] = []
    var filtered: [UInt64] = []
    var all: [any ClientChannel] = []
  }

  /// A connection that asked for authorization, with the decision in force for it.
  struct Decided {
    var connection: any ClientChannel
    var peer: PeerCredentials
    var status: AuthorizationStatus
  }

  let manager: LocationManager
  /// The service's jobs run on its manager's executor.
  public nonisolated var unownedExecutor: UnownedSerialExecutor { manager.executor.asUnownedSerialExecutor() }
  let map: MapStateService
  /// Region monitoring: fed every fix the map gets, advanced once a second of its clock.
  let regions: RegionService
  /// When the current location arrived, on ``RegionService/clock`` (monotonic).
  var lastFixInstant: Duration?
  /// Whether watchers were told that the current location is stale (until the next fix).
  var staleReported = false
  /// Whether the newest location from the source had no position: the current location is then
  /// stale at once, whatever its age, as the map's `location` annotation is gone (until the next
  /// fix with a position).
  var sourceReportsNoFix = false
  /// The backend state last written to the log.
  var lastLoggedStatus: BackendStatus?
  let backend: any LocationBackend
  let authority: AuthorizationAuthority
  /// Connections that sent `request`, by client number (others are `notDetermined`).
  var decided: [UInt64: Decided] = [:]
  /// Users whose `start` tracking is on, with the credentials of the connection that started it
  /// (a reload re-decides them).
  var trackingUsers: [UInt32: PeerCredentials] = [:]
  /// Refused `request`s per uid since start (at most 1024 uids; more clears the table), for the
  /// aggregated `authorization` log line: a refusal is logged when its uid's count is 1, 2, 4,
  /// 8... with the count, so a client repeating refused requests cannot flood the log.
  var refusals: [UInt32: Int] = [:]
  private var frontEnds: [any FrontEnd] = []
  var watchers: [UInt64: Watcher] = [:] {
    didSet { audienceValue = nil }
  }
  private var audienceValue: Audience?
  /// The last location delivered to each watcher with a filter (its filter compares with it).
  private var lastDelivered: [UInt64: Location] = [:]
  private var wasTracking = false
  /// Whether the last `deviceRemoved` was logged and the device has not come back since.
  private var lastLoggedRemoval = false
  /// The backend's warnings since its last run began (a journal line for the first ten, then
  /// every hundredth: each is already a summary, a looping log with bad lines repeats them).
  private var backendWarnings = 0
  private var tasks: [Task<Void, Never>] = []
  /// The task that dispatches the manager's events (one of ``tasks``): shutdown lets it finish.
  private var hub: Task<Void, Never>?
  /// Where ``recordedFixes()`` streams go.
  private var fixRecorders: [AsyncStream<Location>.Continuation] = []
  /// Shutting down, the manager stopped: what the hub still dispatches goes to the recorders only.
  private var draining = false
  /// The daemon's disk state for `status` (``setStorageReport(_:)``); none by default.
  private var storageReport: (@Sendable () -> JSONValue?)?

  /// Creates the service; call ``attach(_:)`` for each front-end and ``start()`` before serving.
  ///
  /// - Parameters:
  ///   - manager: the manager; the service records each client's authorization in it.
  ///   - authority: the rule for `request`, replaced by ``reloadAuthorization(_:)``.
  ///   - regions: region monitoring (its store, thresholds and clock); by default in memory on
  ///     the system clock.
  public init(
    manager: LocationManager, map: MapStateService, backend: any LocationBackend,
    authority: AuthorizationAuthority, regions: RegionService = RegionService()
  ) {
    self.manager = manager
    self.map = map
    self.regions = regions
    self.backend = backend
    self.authority = authority
  }

  /// Sets what `status` reports as `storage` to an authorized client: called for each `status`,
  /// it must answer at once (from counters in memory, never from the disk); `nil` leaves it out.
  public func setStorageReport(_ report: @escaping @Sendable () -> JSONValue?) {
    storageReport = report
  }

  /// Every location the hub dispatches, typed, in order and none left out (an unbounded stream):
  /// what the track recorder stores, so that it records the fixes the watchers get, from the
  /// same path. Call before ``start()`` to get the first; the stream ends at ``shutdown(reason:)``
  /// after the last location the manager produced.
  public func recordedFixes() -> AsyncStream<Location> {
    let (stream, continuation) = AsyncStream.makeStream(of: Location.self, bufferingPolicy: .unbounded)
    fixRecorders.append(continuation)
    return stream
  }

  /// Registers a front-end whose clients the service serves (counted in `status`).
  public func attach(_ frontEnd: any FrontEnd) {
    frontEnds.append(frontEnd)
  }

  /// Starts the hub tasks: manager events to the map state, the regions and watchers, map
  /// changes to watchers, and the region clock (dwell times) once a second of the regions' clock.
  public func start() async {
    await map.setRegions(await regions.statuses)
    let events = await manager.observe(coalescing: false)
    let mapEvents = await map.events()
    let regions = regions
    // The service's tasks resume on the service's executor: a manager event, a map change or a
    // tick reaches the service without waking another thread of the pool.
    let executor = manager.executor
    // The ticks count from this call, not from when the task first runs: a clock that moves on
    // before then (a virtual clock in a test, a loaded machine) is caught up by the first tick
    // instead of moving the whole schedule after it.
    let clock = regions.clock
    let origin = clock.now
    tasks.append(
      Task(executorPreference: executor.taskExecutor) { [weak self] in
        var deadline = origin
        while !Task.isCancelled {
          deadline += .seconds(1)
          do { try await clock.sleep(until: deadline) } catch { return }
          // A clock moved on by more than a second (a virtual clock, a suspended machine) is
          // caught up in one step: the monitor compares times, it does not count ticks.
          if deadline < clock.now { deadline = clock.now }
          let transitions = await regions.advance()
          guard let self else { return }
          if !transitions.isEmpty { await self.regionsChanged(transitions) }
          await self.checkStaleness()
        }
      })
    let hub = Task(executorPreference: executor.taskExecutor) { [weak self] in
      for await event in events {
        guard let self else { return }
        await self.dispatch(event)
      }
    }
    self.hub = hub
    tasks.append(hub)
    tasks.append(
      Task(executorPreference: executor.taskExecutor) { [weak self] in
        for await change in mapEvents {
          guard let self else { return }
          await self.dispatch(change)
        }
      })
  }

  /// Ends tracking and the hub tasks (daemon shutdown). The map state is saved on every change;
  /// a save that failed is tried once more here (logged as `mapStateLost` if it fails again).
  public func shutdown(reason: String) async {
    let event = Event(body: ["class": "SHUTDOWN", "reason": .string(reason)])
    for watcher in watchers.values { watcher.connection.send(event) }
    await manager.shutdown()
    // The manager has finished its events: the hub dispatches what is left of them (the last
    // fixes reach the recorders), then the recorders' streams end.
    draining = true
    await hub?.value
    for recorder in fixRecorders { recorder.finish() }
    fixRecorders.removeAll()
    if wasTracking {
      wasTracking = false
      await map.trackingStopped()
    }
    await map.finishEvents()
    // A change whose save failed is retried once more before the process ends.
    if let failure = await map.saveIfNeeded() {
      Log.event("mapStateLost", ["reason": failure.description])
    }
    if let failure = await regions.saveIfNeeded() {
      Log.event("regionsLost", ["reason": failure.description])
    }
    for task in tasks { task.cancel() }
    tasks.removeAll()
  }

  // MARK: - RequestHandler

  /// Answers one request (see docs/PROTOCOL.md): `request` is decided by the authority; until
  /// the connection is authorized every command but `status` and `request` gets `notAuthorized`.
  public func handle(_ request: Request, from client: ClientContext) async -> Reply {
    if request.command == .requestAuthorization {
      _ = await requestAuthorization(client)
      // Answered with the decision in force when the reply leaves: a reload while the manager
      // was being told may have changed it (and sent its event).
      return authorization(of: client.id) == .authorized
        ? .authorization(.authorized) : notAuthorizedReply(client)
    }
    let status = authorization(of: client.id)
    if status != .authorized && !request.command.isAllowedUnauthorized {
      return notAuthorizedReply(client)
    }
    let reply: Reply
    do {
      reply = try await answer(request.command, client)
    } catch let error as ServiceError {
      return .error(error.code, message: error.message)
    } catch {
      return .error(.internal, message: "\(error)")
    }
    // A reload may have revoked the connection during the awaits above (and told it so): a reply
    // computed with the old decision must not reach it after that event.
    if !request.command.isAllowedUnauthorized && authorization(of: client.id) != .authorized {
      await revokedDuringRequest(request.command, client)
      return notAuthorizedReply(client)
    }
    return reply
  }

  /// The `notAuthorized` error for a command from a connection that is not authorized now.
  func notAuthorizedReply(_ client: ClientContext) -> Reply {
    guard authorization(of: client.id) == .denied else {
      return .error(
        .notAuthorized, message: "send {\"cmd\":\"request\"} first to ask for authorization")
    }
    let group = authority.groupName.flatMap { $0.isEmpty ? nil : $0 }
    let hint =
      group.map { "\(authority.remedy) (usermod -aG \($0) USER, then log in again)" }
      ?? authority.remedy
    return .error(.notAuthorized, message: "uid \(client.peer.uid) is not authorized: \(hint)")
  }

  /// Undoes what a command started for a connection that a reload revoked while it ran: the
  /// reload ended the watch and the tracking it knew of, not what the command set up after it.
  private func revokedDuringRequest(_ command: Command, _ client: ClientContext) async {
    switch command {
    case .start:
      if trackingUsers[client.peer.uid] == nil {
        await manager.setAuthorization(.denied, for: Self.userClient(client.peer.uid))
      }
    case .watch:
      watchers[client.id] = nil
      await manager.setAuthorization(.denied, for: Self.connectionClient(client.id))
    default:
      return
    }
    await trackingChanged()
  }

  /// The authority's verdict on `peer` now, recorded nowhere (a front-end's quota).
  public func wouldAuthorize(_ peer: PeerCredentials) async -> Bool {
    authority.decide(for: peer).status == .authorized
  }

  /// Forgets the connection: its watch and its connection-scoped tracking end.
  public func clientDisconnected(_ client: ClientContext) async {
    watchers[client.id] = nil
    decided[client.id] = nil
    await manager.disconnect(client: Self.connectionClient(client.id))
    await trackingChanged()
  }

  struct ServiceError: Error {
    var code: ErrorCode
    var message: String
  }

  private func answer(_ command: Command, _ client: ClientContext) async throws -> Reply {
    switch command {
    case .requestAuthorization:
      return await requestAuthorization(client)
    case .status:
      return await statusReply(client)
    case .start(let options):
      let user = Self.userClient(client.peer.uid)
      // Recorded before any await, so that a reload meanwhile re-decides this user too.
      trackingUsers[client.peer.uid] = client.peer
      await manager.setAuthorization(.authorized, for: user)
      await trackingWillStart()
      do {
        try await manager.startUpdating(client: user, filter: options)
      } catch {
        if await !manager.isTracking(client: user) { trackingUsers[client.peer.uid] = nil }
        await trackingChanged()
        throw Self.trackingError(error)
      }
      return .tracking(true, options: options, backendActive: await manager.isTracking)
    case .stop:
      trackingUsers[client.peer.uid] = nil
      await manager.stopUpdating(client: Self.userClient(client.peer.uid))
      await manager.stopUpdating(client: Self.connectionClient(client.id))
      await trackingChanged()
      return .tracking(false, backendActive: await manager.isTracking)
    case .location:
      let initial = await manager.initialLocation.map(EventEncoding.tpv)
      let current = await manager.currentLocation.map(EventEncoding.tpv)
      let age = await currentAge()
      return .location(initial: initial, current: current, age: age, stale: isStale(age: age))
    case .watch(let enable, let coalesce, let options):
      return try await watch(enable: enable, lossless: !coalesce, options: options, client)
    case .centerOnLocation:
      do {
        try await map.centerOnCurrentLocation()
      } catch {
        throw ServiceError(code: .noFix, message: error.description)
      }
      return try await changedMapReply()
    case .setCenter(let coordinate):
      do { try await map.setCenter(coordinate) } catch { throw Self.mapError(error) }
      return try await changedMapReply()
    case .zoom(let zoom):
      do { try await map.setZoom(zoom) } catch { throw Self.mapError(error) }
      return try await changedMapReply()
    case .mode(let mode):
      await map.setMode(mode)
      return try await changedMapReply()
    case .annotate(let annotation):
      // The fleet's namespace is the MQTT front-end's alone (it adds through
      // ``annotate(_:from:)``): a client's annotation never shares an id with a device.
      guard !Annotation.isFleetIdentifier(annotation.id) else {
        throw Self.mapError(.fleetIdentifier(annotation.id))
      }
      do { try await map.addAnnotation(annotation) } catch { throw Self.mapError(error) }
      return try await changedMapReply()
    case .removeAnnotation(let id):
      do { try await map.removeAnnotation(id: id) } catch { throw Self.mapError(error) }
      return try await changedMapReply()
    case .map(let format):
      switch format {
      case .json:
        return try await mapReply()
      // Refused before they are built when the reply could not be sent (Reply.maximumBytes):
      // a map of many regions would otherwise take seconds and hundreds of megabytes here.
      case .geojson:
        do {
          return .mapGeoJSON(Array(try await map.geoJSON(maxBytes: Reply.maximumBytes - 64).utf8))
        } catch {
          throw ServiceError(code: .limitExceeded, message: error.description)
        }
      case .svg:
        do {
          return .mapSVG(try await map.svg(maxBytes: Reply.maximumBytes - 64))
        } catch {
          throw ServiceError(code: .limitExceeded, message: error.description)
        }
      }
    case .replay(let action):
      return try await replay(action)
    case .region(let action):
      return try await region(action)
    }
  }

  // MARK: - Status and watch

  /// `status` is open to unauthorized clients, so it carries locations only for authorized ones.
  private func statusReply(_ client: ClientContext) async -> Reply {
    let status = await manager.backendStatus
    let userTracking = await manager.isTracking(client: Self.userClient(client.peer.uid))
    let connectionTracking = await manager.isTracking(client: Self.connectionClient(client.id))
    let backendActive = await manager.isTracking
    let detail = await manager.backendStatusDetail
    let initial = await manager.initialLocation.map(EventEncoding.tpv)
    let current = await manager.currentLocation.map(EventEncoding.tpv)
    let age = await currentAge()
    // Read after the last await: a reload meanwhile must not leave "authorized" (or a location,
    // or own tracking) in a reply that follows its `denied` event.
    let authorization = authorization(of: client.id)
    let authorized = authorization == .authorized
    // What tracks for the caller's user: its `start`, and the watches of its connections (this
    // one and others, such as a `locationctl watch` in another terminal).
    let uid = client.peer.uid
    let userWatches = watchers.filter { id, watcher in
      decided[id]?.peer.uid == uid && !watcher.connection.isDaemonClient
    }.count
    let userReasons: JSONValue? =
      authorized
      ? .object([
        JSONMember("uid", .int(Int64(uid))), JSONMember("start", .bool(userTracking)),
        JSONMember("watches", .int(Int64(userWatches))), JSONMember("thisConnection", .bool(connectionTracking)),
      ]) : nil
    return .status(
      authorization: authorization, tracking: authorized && (userTracking || connectionTracking),
      userTracking: userReasons,
      backendActive: backendActive, backendURI: backend.uri,
      backendState: status, detail: detail,
      initial: authorized ? initial : nil,
      current: authorized ? current : nil,
      clients: frontEnds.reduce(0) { $0 + $1.clientCount },
      http: frontEnds.lazy.compactMap(\.endpoint).first.map {
        .object([JSONMember("url", .string($0.url)), JSONMember("tokenFile", .string($0.tokenFile))])
      }, storage: authorized ? storageReport?() : nil, age: authorized ? age : nil,
      stale: authorized && isStale(age: age))
  }

  /// Starts (or ends) streaming events to the connection, with connection-scoped tracking.
  ///
  /// The watcher is registered before tracking starts, so a replay at full speed loses nothing.
  private func watch(enable: Bool, lossless: Bool, options: LocationFilter, _ client: ClientContext) async throws
    -> Reply
  {
    let id = Self.connectionClient(client.id)
    guard enable else {
      watchers[client.id] = nil
      await manager.stopUpdating(client: id)
      await trackingChanged()
      return .watch(enabled: false)
    }
    watchers[client.id] = Watcher(
      connection: client.connection, filter: options, lossless: lossless)
    lastDelivered[client.id] = nil
    client.connection.send(
      .backend(uri: backend.uri, state: await manager.backendStatus, detail: await manager.backendStatusDetail))
    await trackingWillStart()
    do {
      try await manager.startUpdating(client: id, filter: options)
    } catch {
      watchers[client.id] = nil
      await trackingChanged()
      throw Self.trackingError(error)
    }
    return .watch(enabled: true)
  }

  /// Tells the map state that tracking is about to start, before the backend can deliver the
  /// initial fix (which the map centers on).
  private func trackingWillStart() async {
    guard !wasTracking else { return }
    wasTracking = true
    await map.trackingStarted()
  }

  /// Tells the map state when tracking as a whole starts or stops.
  func trackingChanged() async {
    let tracking = await manager.isTracking
    guard tracking != wasTracking else { return }
    wasTracking = tracking
    if tracking {
      await map.trackingStarted()
    } else {
      // The manager forgets the current location when tracking stops; so does the map, so that
      // "center" cannot center on a stale fix.
      await map.update(fix: nil)
      await map.trackingStopped()
      sourceReportsNoFix = false
    }
  }

  // MARK: - Hub

  /// Hands `location` to every fix recorder (the track store), shutting down or not.
  private func record(_ location: Location) {
    for recorder in fixRecorders { recorder.yield(location) }
  }

  /// Manager events dispatched to the watchers, the regions and the map so far (tests wait on it).
  private(set) var dispatchedEvents = 0
  /// Of those, the locations: a test that sends one fix waits on this, as a status event of the
  /// backend's start may be dispatched in between.
  private(set) var dispatchedLocations = 0

  private func dispatch(_ event: ManagerEvent) async {
    defer {
      dispatchedEvents += 1
      if case .location = event { dispatchedLocations += 1 }
    }
    // After SHUTDOWN the watchers, the map and the regions hear nothing more.
    if draining {
      if case .location(let location, _) = event { record(location) }
      return
    }
    switch event {
    case .location(let location, _):
      // The fix goes to the watchers before the map state hears of it: awaiting the map first
      // let the MAP event of the previous fix (a write per watcher, about 2 ms for 1000) slip in
      // ahead of this TPV. The next manager event is dispatched only after the map has this
      // fix, so a client that waits for, say, endOfData sees a map state that knows every fix.
      let positioned = location.fix.mode.hasPosition
      if positioned {
        lastFixInstant = regions.clock.now
        sourceReportsNoFix = false
        if staleReported {
          staleReported = false
          broadcastToWatchers(.stale(false, age: 0))
        }
      }
      if !watchers.isEmpty { broadcast(location) }
      // An epoch without a position: the current location is no longer where the source is.
      if !positioned, wasTracking {
        sourceReportsNoFix = true
        await reportStale(reason: "noFix")
      }
      // The recorders' tasks are woken after the watchers' sockets are written, and a receiver's
      // thread that wrote them goes back to its source: the regions and the map take the fix on a
      // thread of the pool.
      record(location)
      ServiceExecutor.endInlineRun()
      // Its REGION events follow the fix's TPV.
      let outcome = await regions.update(with: location)
      if outcome.statesChanged || !outcome.transitions.isEmpty { await regionsChanged(outcome.transitions) }
      // A fix without a position clears the location. Tracking may stop while this fix waits
      // (a client's `stop` is served between these awaits): the manager has forgotten the fix
      // then, and so must the map, whichever of the two map updates it runs first.
      guard wasTracking || !location.fix.mode.hasPosition else { return }
      await map.update(fix: location.fix)
      if !wasTracking { await map.update(fix: nil) }
    case .status(let status, let detail):
      if status != lastLoggedStatus {
        lastLoggedStatus = status
        Log.event("backendState", ["backend": backend.uri, "state": status.rawValue, "detail": detail ?? ""])
      }
      if status == .stopped { backendWarnings = 0 }
      if status == .stopped, await !manager.isTracking {
        await trackingChanged()
      }
      // A receiver that goes or comes back is worth a line in the journal (unplugged, replugged).
      if status == .deviceRemoved {
        Log.event("deviceRemoved", ["backend": backend.uri, "detail": detail ?? ""])
      } else if status == .connected, lastLoggedRemoval {
        Log.event("deviceReturned", ["backend": backend.uri, "detail": detail ?? ""])
      }
      lastLoggedRemoval =
        status == .deviceRemoved
        || (lastLoggedRemoval && status != .connected && status != .stopped)
      broadcastToWatchers(.backend(uri: backend.uri, state: status, detail: detail))
    case .error(let message):
      backendWarnings += 1
      if LogThrottle.firstThenEvery(first: 10, every: 100).logs(backendWarnings) {
        Log.event(
          "backendWarning",
          ["backend": backend.uri, "message": message, "count": String(backendWarnings)])
      }
      broadcastToWatchers(.warning(message))
    }
  }

  /// Sends a location to every watcher whose filter accepts it, encoded once, with the typed
  /// `Location` beside the bytes (``EncodedEvent/location``): the one fix path of every front-end.
  private func broadcast(_ location: Location) {
    let tpv = EventEncoding.tpv(location)
    let audience = audience()
    var coalescing = audience.coalescing
    var lossless = audience.lossless
    for id in audience.filtered {
      guard let watcher = watchers[id] else { continue }
      if location.fix.mode.hasPosition {
        guard watcher.filter.accepts(location, after: lastDelivered[id]) else { continue }
        lastDelivered[id] = location
      }
      if watcher.lossless { lossless.append(watcher.connection) } else { coalescing.append(watcher.connection) }
    }
    if !coalescing.isEmpty {
      Self.fanOut(Event(body: tpv, coalescingKey: "TPV", location: location), to: coalescing)
    }
    if !lossless.isEmpty { Self.fanOut(Event(body: tpv, location: location), to: lossless) }
  }

  private func dispatch(_ change: MapEvent) {
    guard !watchers.isEmpty else { return }
    broadcastToWatchers(Event(body: Self.mapJSON(change.map, changes: change.changes), coalescingKey: "MAP"))
  }

  func broadcastToWatchers(_ event: Event) {
    guard !watchers.isEmpty else { return }
    Self.fanOut(event, to: audience().all)
  }

  /// Gives events encoded once, produced together, to every watcher as one burst each.
  func broadcastBurstToWatchers(_ events: [EncodedEvent]) {
    guard !watchers.isEmpty, !events.isEmpty else { return }
    for channel in audience().all { channel.deliverBurst(events) }
  }

  /// Encodes `event` once and gives it to every channel.
  private static func fanOut(_ event: Event, to channels: [any ClientChannel]) {
    let encoded = EncodedEvent(event)
    for channel in channels { channel.deliver(encoded) }
  }

  private func audience() -> Audience {
    if let audienceValue { return audienceValue }
    var audience = Audience()
    for (id, watcher) in watchers.sorted(by: { $0.key < $1.key }) {
      audience.all.append(watcher.connection)
      if !watcher.filter.acceptsEverything {
        audience.filtered.append(id)
      } else if watcher.lossless {
        audience.lossless.append(watcher.connection)
      } else {
        audience.coalescing.append(watcher.connection)
      }
    }
    lastDelivered = lastDelivered.filter { watchers[$0.key] != nil }
    audienceValue = audience
    return audience
  }
}
