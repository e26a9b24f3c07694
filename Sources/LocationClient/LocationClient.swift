import LocationProtocol
import Synchronization

/// The Swift API of locationd (CoreLocation's `CLLocationManager` and MapKit's map state, over
/// the daemon's socket protocol, docs/PROTOCOL.md). See docs/client.md.
///
/// Commands share one connection, opened on first use and opened again after the daemon
/// restarts (after a `SHUTDOWN` event, or whenever the previous connection has ended); the
/// client then asks for authorization again on it if ``requestAuthorization()`` was called
/// before. Each iteration of an event sequence (``locationUpdates``, ``mapChanges``,
/// ``regionEvents``) has a connection of its own, which watches, so tracks, while it is
/// iterated, and reconnects by itself when the daemon restarts. Every connection is closed when
/// the client is released. All methods may be called from any task; none blocks a thread.
public final class LocationClient: Sendable {
  /// The daemon's socket unless told otherwise: `/run/locationd/locationd.sock`.
  public static let defaultSocketPath = ServiceSocket.defaultPath

  private struct State {
    var channel: Channel?
    var authorizationRequested = false
  }

  /// The connection that overlapping ``requestLocation(timeout:)`` calls share.
  private struct OneShot {
    var task: Task<Void, Never>?
    /// Bumped when a connection opens or is given up, so that an old one delivers nothing.
    var generation = 0
    var nextWaiter = 0
    var waiters: [Int: CheckedContinuation<Location, any Error>] = [:]
  }

  private let makeTransport: @Sendable () -> any LocationTransport
  private let state = Mutex(State())
  private let oneShot = Mutex(OneShot())
  /// How long each request waits for its reply.
  public let timeout: Duration
  /// The error every request throws when ``timeout`` is not more than zero.
  let invalidTimeout: LocationClientError?
  let sleep: @Sendable (Duration) async throws -> Void
  /// The pause between attempts to reconnect an event sequence after the daemon went away.
  let reconnectDelay: Duration
  /// How many attempts an event sequence makes before it throws the last connection error.
  let reconnectAttempts: Int

  /// A client of the daemon listening at `socketPath`; connects on first use.
  ///
  /// - Parameters:
  ///   - socketPath: the daemon's socket (``defaultSocketPath``, or `--socket` of locationd).
  ///   - timeout: how long the daemon may take to accept a connection and to answer a request
  ///     (more than zero); a request without an answer by then throws
  ///     ``LocationClientError/Code/timedOut``. With zero or less, every request and sequence
  ///     throws ``LocationClientError/Code/invalidArgument`` and nothing is sent.
  public convenience init(
    socketPath: String = LocationClient.defaultSocketPath, timeout: Duration = .seconds(30)
  ) {
    let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
    self.init(timeout: timeout, clock: ContinuousClock()) {
      UnixSocketTransport(path: socketPath, connectTimeout: seconds > 0 ? seconds : nil)
    }
  }

  /// A client over transports that `makeTransport` creates, one per connection: for tests that
  /// play the daemon, and for other carriers of the protocol.
  ///
  /// - Parameters:
  ///   - timeout: how long a request waits for its reply, on `clock` (more than zero; otherwise
  ///     every request throws ``LocationClientError/Code/invalidArgument``).
  ///   - clock: the clock of every wait: reply timeouts, ``requestLocation(timeout:)``,
  ///     reconnection pauses (a test passes a virtual clock).
  ///   - reconnectDelay: the pause between reconnection attempts of an event sequence.
  ///   - reconnectAttempts: attempts (at least 1) before an event sequence gives up.
  ///   - makeTransport: a new, unopened transport.
  public init<C: Clock<Duration>>(
    timeout: Duration, clock: C, reconnectDelay: Duration = .milliseconds(250),
    reconnectAttempts: Int = 120,
    makeTransport: @escaping @Sendable () -> any LocationTransport
  ) {
    self.timeout = timeout
    self.invalidTimeout =
      timeout > .zero
      ? nil
      : LocationClientError(
        .invalidArgument,
        "the client's timeout must be more than zero (got \(timeout)): give LocationClient a timeout such as .seconds(30)"
      )
    self.makeTransport = makeTransport
    self.sleep = { try await clock.sleep(for: $0) }
    self.reconnectDelay = reconnectDelay
    self.reconnectAttempts = max(1, reconnectAttempts)
  }

  deinit {
    state.withLock { $0.channel?.close() }
    oneShot.withLock { $0.task?.cancel() }
  }

  // MARK: Commands

  /// The open command connection, opening one (and asking for authorization again when it was
  /// asked before) when there is none or the last one ended.
  /// `asking`: whether to ask for authorization on a new connection (not when the command to
  /// send is the request itself).
  private func commandChannel(asking: Bool) async throws -> Channel {
    if let channel = state.withLock({ $0.channel }), !channel.isClosed { return channel }
    let channel = Channel(transport: makeTransport(), timeout: timeout, sleep: sleep) { _ in }
    try await channel.open()
    if asking, state.withLock({ $0.authorizationRequested }) {
      _ = try await channel.exchange("request")
    }
    return state.withLock { state in
      if let current = state.channel, !current.isClosed, current !== channel {
        channel.close()
        return current
      }
      state.channel = channel
      return channel
    }
  }

  /// Sends one command on the command connection and returns its successful reply; a request
  /// that found the connection ended is sent once more on a new one.
  ///
  /// - Throws: ``LocationClientError``: the daemon's error reply, or a connection failure.
  func call(_ command: String, _ members: [JSONMember] = []) async throws -> JSONValue {
    if let invalid = invalidTimeout { throw invalid }
    if let name = Self.nonFiniteMember(members) {
      // JSON has no NaN or infinity: sent, it would arrive as null and read as "missing".
      throw LocationClientError(
        .invalidArgument,
        "\(command): \"\(name)\" must be a finite number, not NaN or an infinity; nothing was sent")
    }
    var attempt = 0
    while true {
      attempt += 1
      let channel = try await commandChannel(asking: command != "request")
      do {
        return try await channel.call(command, members)
      } catch let error as LocationClientError
        where error.code == .notAuthorized && command != "request"
        && !state.withLock({ $0.authorizationRequested })
      {
        throw LocationClientError(
          .notAuthorized,
          "\(command) needs authorization: call requestAuthorization() first (locationd: \(error.message))",
          reply: error.reply)
      } catch let closed as ClosedBeforeSending {
        if attempt >= 2 { throw closed.error }
      } catch let error as LocationClientError
        where error.code == .connectionClosed && command == "request"
      {
        // `request` changes nothing: ask again on a new connection.
        if attempt >= 2 { throw error }
      }
    }
  }

  /// The name (`a.b` for a nested member) of the first number in `members` that is NaN or an
  /// infinity; `nil` when every number is finite.
  static func nonFiniteMember(_ members: [JSONMember], prefix: String = "") -> String? {
    for member in members {
      let name = prefix.isEmpty ? member.key : prefix + "." + member.key
      switch member.value {
      case .double(let value) where !value.isFinite: return name
      case .object(let nested):
        if let found = nonFiniteMember(nested, prefix: name) { return found }
      default: continue
      }
    }
    return nil
  }

  /// Asks the daemon for authorization (CoreLocation's `requestWhenInUseAuthorization()`): it
  /// decides from this process's credentials (root or the daemon's group).
  ///
  /// - Returns: ``AuthorizationStatus/authorized``, or ``AuthorizationStatus/denied`` when the
  ///   daemon refuses (not thrown).
  /// - Throws: ``LocationClientError`` when the daemon cannot be reached or does not answer.
  public func requestAuthorization() async throws -> AuthorizationStatus {
    state.withLock { $0.authorizationRequested = true }
    do {
      let reply = try await call("request")
      guard let name = reply["authorization"]?.stringValue,
        let status = AuthorizationStatus(rawValue: name)
      else {
        throw Wire.bad("an AUTHORIZATION reply without authorization", reply)
      }
      return status
    } catch let error as LocationClientError where error.code == .notAuthorized {
      return .denied
    }
  }

  /// Starts the user's tracking (as `locationctl start`): it goes on after this client is gone,
  /// until ``stopTracking()`` from any of the user's clients. The daemon's backend runs while
  /// anyone tracks.
  ///
  /// - Parameter filter: distance filter (metres), minimum interval (seconds) and desired
  ///   accuracy (metres) for this user's deliveries.
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notAuthorized`` before
  ///   authorization).
  public func startTracking(filter: LocationFilter = LocationFilter()) async throws {
    var members: [JSONMember] = []
    if let value = filter.distanceFilter {
      members.append(JSONMember("distanceFilter", .number(value)))
    }
    if let value = filter.minimumInterval {
      members.append(JSONMember("minInterval", .number(value)))
    }
    if let value = filter.desiredAccuracy {
      members.append(JSONMember("desiredAccuracy", .number(value)))
    }
    _ = try await call("start", members)
  }

  /// Stops the user's tracking (as `locationctl stop`); other users' tracking goes on.
  ///
  /// - Throws: ``LocationClientError``.
  public func stopTracking() async throws {
    _ = try await call("stop")
  }

  /// The first location with a position since tracking started (kept until tracking stops);
  /// `nil` before one. After a daemon restart, the new run's.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notAuthorized`` before
  ///   authorization).
  public var initialLocation: Location? {
    get async throws { try await call("location")["initial"].flatMap(Wire.location) }
  }

  /// The newest location with a position; `nil` before one (never a made-up coordinate).
  ///
  /// - Throws: ``LocationClientError``.
  public var currentLocation: Location? {
    get async throws { try await call("location")["current"].flatMap(Wire.location) }
  }

  /// The daemon's status: authorization, tracking, backend, initial and current location.
  ///
  /// - Throws: ``LocationClientError``.
  public func status() async throws -> ServiceStatus {
    try ServiceStatus(try await call("status"))
  }

  // MARK: Map

  /// The daemon's map state.
  ///
  /// - Throws: ``LocationClientError``.
  public var mapState: MapStateSnapshot {
    get async throws { try MapStateSnapshot(map: try await call("map")) }
  }

  /// Centres the map on `coordinate` (a centre set by hand: `follow` becomes `none`, as a pan in
  /// MapKit), or with `nil` on the current location (the mode stays).
  ///
  /// - Returns: the map after the change.
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/noFix`` for `nil` without a
  ///   fix, ``LocationClientError/Code/invalidArgument`` for a coordinate out of range).
  @discardableResult public func center(on coordinate: Coordinate?) async throws -> MapStateSnapshot
  {
    guard let coordinate else { return try MapStateSnapshot(map: try await call("center")) }
    return try MapStateSnapshot(
      map: try await call(
        "setCenter",
        [
          JSONMember("lat", .number(coordinate.latitude)),
          JSONMember("lon", .number(coordinate.longitude)),
        ]
      ))
  }

  /// Sets the zoom level (Web Mercator, `0...22`); a zoom by hand switches `follow` to `none`.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/invalidArgument`` out of range).
  @discardableResult public func setZoom(_ level: Double) async throws -> MapStateSnapshot {
    try MapStateSnapshot(map: try await call("zoom", [JSONMember("zoom", .number(level))]))
  }

  /// Sets how the map follows the current location (MapKit's `MKUserTrackingMode`).
  ///
  /// - Throws: ``LocationClientError``.
  @discardableResult public func setUserTrackingMode(_ mode: UserTrackingMode) async throws
    -> MapStateSnapshot
  {
    try MapStateSnapshot(map: try await call("mode", [JSONMember("mode", .string(mode.rawValue))]))
  }

  /// Adds an annotation, or replaces the one with the same identifier (MapKit's
  /// `addAnnotation` with an identity).
  ///
  /// - Parameters:
  ///   - identifier: 1...256 bytes of UTF-8, no control or format characters; `location` and
  ///     `fleet:...` are reserved.
  ///   - coordinate: WGS84 degrees.
  ///   - title: at most 1,024 bytes of UTF-8.
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/invalidArgument``,
  ///   ``LocationClientError/Code/limitExceeded`` beyond 1,000 annotations or 64 KiB of text).
  @discardableResult public func addAnnotation(
    identifier: String, coordinate: Coordinate, title: String = ""
  )
    async throws -> MapStateSnapshot
  {
    let annotation: JSONValue = .object([
      JSONMember("id", .string(identifier)), JSONMember("lat", .number(coordinate.latitude)),
      JSONMember("lon", .number(coordinate.longitude)), JSONMember("title", .string(title)),
    ])
    return try MapStateSnapshot(
      map: try await call("annotate", [JSONMember("annotation", annotation)]))
  }

  /// Removes the annotation with this identifier.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notFound``).
  @discardableResult public func removeAnnotation(identifier: String) async throws
    -> MapStateSnapshot
  {
    try MapStateSnapshot(
      map: try await call("remove", [JSONMember("annotation", .string(identifier))]))
  }

  // MARK: Regions

  /// Starts monitoring `region` (CoreLocation's `CLMonitor.add`), replacing one with the same
  /// identifier (whose state starts again at `unknown`). Transitions arrive on ``regionEvents``.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/invalidArgument`` for a
  ///   region the daemon's rules refuse, with the reason).
  public func monitor(_ region: Region) async throws {
    _ = try await call(
      "region", [JSONMember("action", "add"), JSONMember("region", RegionWire.json(region))])
  }

  /// Stops monitoring the region with this identifier.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notFound``).
  public func stopMonitoring(identifier: String) async throws {
    _ = try await call(
      "region", [JSONMember("action", "remove"), JSONMember("region", .string(identifier))])
  }

  /// The monitored region's state: `unknown` until a fix decides, then `inside` or `outside`.
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notFound``).
  public func state(of identifier: String) async throws -> RegionState {
    let reply = try await call(
      "region", [JSONMember("action", "state"), JSONMember("region", .string(identifier))])
    guard let name = reply["region"]?["state"]?.stringValue, let state = RegionState(rawValue: name)
    else {
      throw Wire.bad("a REGION reply without state", reply)
    }
    return state
  }

  // MARK: Replay

  /// Sends a replay control (the backend must be a `replay:` one, and someone must track).
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/notReplay``,
  ///   ``LocationClientError/Code/unavailable`` while nothing tracks).
  @discardableResult public func replay(_ action: ReplayAction) async throws -> ReplayStatus {
    var members = [JSONMember]()
    switch action {
    case .pause: members = [JSONMember("action", "pause")]
    case .resume: members = [JSONMember("action", "resume")]
    case .seek(let seconds):
      members = [JSONMember("action", "seek"), JSONMember("value", .number(seconds))]
    case .speed(let factor):
      members = [JSONMember("action", "speed"), JSONMember("value", .number(factor))]
    case .step(let epochs):
      members = [JSONMember("action", "step"), JSONMember("value", .int(Int64(epochs)))]
    }
    let reply = try await call("replay", members)
    guard let state = reply["state"]?.stringValue, let speed = reply["speed"]?.doubleValue else {
      throw Wire.bad("a REPLAY reply without state or speed", reply)
    }
    return ReplayStatus(state: state, speed: speed, position: reply["position"]?.doubleValue)
  }

  /// Pauses the replay.
  @discardableResult public func pauseReplay() async throws -> ReplayStatus {
    try await replay(.pause)
  }
  /// Resumes a paused replay.
  @discardableResult public func resumeReplay() async throws -> ReplayStatus {
    try await replay(.resume)
  }
  /// Moves the replay to `seconds` (`>= 0`) after the log's first epoch.
  @discardableResult public func seekReplay(to seconds: Double) async throws -> ReplayStatus {
    try await replay(.seek(seconds: seconds))
  }
  /// Sets the replay's speed factor (`0...1_000_000`; 1 = real time, 0 = as fast as possible).
  @discardableResult public func setReplaySpeed(_ factor: Double) async throws -> ReplayStatus {
    try await replay(.speed(factor))
  }
  /// Emits the next `epochs` (`1...10_000`) epochs of a paused replay.
  @discardableResult public func stepReplay(epochs: Int = 1) async throws -> ReplayStatus {
    try await replay(.step(epochs: epochs))
  }

  // MARK: Event sequences

  /// Every location with a position while iterated, newest-first: when this task falls behind,
  /// the daemon skips to the newest fix (as `CLLocationUpdate.liveUpdates()`). Iterating
  /// tracks (the connection watches); breaking the loop, or cancelling the task, closes the
  /// connection, and the daemon stops the tracking that came with it. Resumes by itself after a
  /// daemon restart.
  ///
  /// - Throws (from the iteration): ``LocationClientError`` (``LocationClientError/Code/notAuthorized``
  ///   when refused or withdrawn; the last connection error when the daemon stays away).
  public var locationUpdates: some AsyncSequence<Location, any Error> {
    locationUpdates(everyFix: false)
  }

  /// ``locationUpdates``; with `everyFix` every location, none skipped (for recording): a task
  /// that cannot keep up is then disconnected by the daemon, and the sequence reconnects.
  public func locationUpdates(everyFix: Bool) -> ClientEvents<Location> {
    ClientEvents(client: self, coalesce: !everyFix, keepsEvery: everyFix) { Wire.location($0) }
  }

  /// The daemon's map state after each change, with what changed in
  /// ``MapStateSnapshot/changes``. The events come on a watching connection, so iterating
  /// tracks, as ``locationUpdates`` does.
  public var mapChanges: some AsyncSequence<MapStateSnapshot, any Error> {
    mapChanges(onWatching: nil)
  }

  /// ``mapChanges``, calling `onWatching` each time its connection starts watching (at first
  /// and after each reconnection): changes made before then are not in the sequence.
  func mapChanges(onWatching: (@Sendable () -> Void)?) -> ClientEvents<MapStateSnapshot> {
    var events = ClientEvents(client: self, coalesce: true, keepsEvery: true) { event in
      event["class"] == "MAP" ? try? MapStateSnapshot(map: event) : nil
    }
    events.onWatching = onWatching
    return events
  }

  /// Region transitions (CoreLocation's `CLMonitor.events`): `enter`, `exit`, `dwell`. Iterating
  /// tracks, as ``locationUpdates`` does; none is dropped for a slow task.
  public var regionEvents: some AsyncSequence<RegionEvent, any Error> {
    ClientEvents(client: self, coalesce: true, keepsEvery: true) { Wire.regionEvent($0) }
  }

  /// One location (CoreLocation's `requestLocation()`): watches on a connection, which starts
  /// the backend when nobody tracks, and returns the first location with a position; the
  /// connection is closed then, so tracking ends with it unless someone else tracks. Calls
  /// that overlap share one connection and its first fix (a thousand concurrent calls cost
  /// the daemon one client, not a thousand).
  ///
  /// - Parameter timeout: how long to wait for the fix (more than zero).
  /// - Throws: ``LocationClientError/Code/invalidArgument`` for a timeout of zero or less
  ///   (nothing is sent); ``LocationClientError/Code/timedOut`` when no fix came in time; the
  ///   connection's errors (``LocationClientError/Code/notAuthorized``...); `CancellationError`
  ///   when the calling task is cancelled.
  public func requestLocation(timeout: Duration) async throws -> Location {
    guard timeout > .zero else {
      throw LocationClientError(
        .invalidArgument, "requestLocation's timeout must be more than zero (got \(timeout))")
    }
    let sleep = sleep
    return try await withThrowingTaskGroup(of: Location.self) { group in
      group.addTask { try await self.sharedFirstFix() }
      group.addTask {
        try await sleep(timeout)
        throw LocationClientError(
          .timedOut, "no fix within \(timeout): the backend gave no position in that time")
      }
      defer { group.cancelAll() }
      guard let location = try await group.next() else {
        throw LocationClientError(.connectionClosed, "locationd ended the updates before a fix")
      }
      return location
    }
  }

  /// Waits for the first fix of the one-shot connection that overlapping
  /// ``requestLocation(timeout:)`` calls share, opening it when none is open; the last waiter
  /// to be cancelled closes it.
  private func sharedFirstFix() async throws -> Location {
    let id = oneShot.withLock { state -> Int in
      state.nextWaiter += 1
      return state.nextWaiter
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let cancelled = oneShot.withLock { state -> Bool in
          if Task.isCancelled { return true }
          state.waiters[id] = continuation
          if state.task == nil {
            state.generation += 1
            let generation = state.generation
            let updates = locationUpdates(everyFix: false)
            state.task = Task { [weak self] in
              var result: Result<Location, any Error> = .failure(
                LocationClientError(.connectionClosed, "locationd ended the updates before a fix"))
              do {
                for try await location in updates {
                  result = .success(location)
                  break
                }
              } catch {
                result = .failure(error)
              }
              self?.deliverFirstFix(result, generation: generation)
            }
          }
          return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
      }
    } onCancel: {
      let (waiter, task) = oneShot.withLock { state in
        let waiter = state.waiters.removeValue(forKey: id)
        guard state.waiters.isEmpty, let task = state.task else {
          return (waiter, Task<Void, Never>?.none)
        }
        // Nobody waits any more: the connection closes, and the tracking it brought ends.
        state.task = nil
        state.generation += 1
        return (waiter, task)
      }
      task?.cancel()
      waiter?.resume(throwing: CancellationError())
    }
  }

  /// How many ``requestLocation(timeout:)`` calls wait for the shared connection's fix (tests).
  var oneShotWaiterCount: Int { oneShot.withLock { $0.waiters.count } }

  /// Hands the shared one-shot connection's outcome to every call waiting for it.
  private func deliverFirstFix(_ result: Result<Location, any Error>, generation: Int) {
    let waiters = oneShot.withLock { state -> [CheckedContinuation<Location, any Error>] in
      guard state.generation == generation else { return [] }
      state.task = nil
      defer { state.waiters.removeAll() }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume(with: result) }
  }

  /// Runs one event sequence: opens a connection, asks for authorization, watches, and yields
  /// what `transform` makes of each event; reconnects after the daemon went away; closes the
  /// connection when the consumer stops.
  func runEvents<Element: Sendable>(
    coalesce: Bool, onWatching: (@Sendable () -> Void)? = nil,
    transform: @Sendable (JSONValue) -> Element?,
    into continuation: AsyncThrowingStream<Element, any Error>.Continuation
  ) async {
    if let invalid = invalidTimeout {
      continuation.finish(throwing: invalid)
      return
    }
    var connectedBefore = false
    var failures = 0
    while !Task.isCancelled {
      let (inputs, feed) = AsyncStream<TransportInput>.makeStream()
      let channel = Channel(transport: makeTransport(), timeout: timeout, sleep: sleep) { input in
        feed.yield(input)
        if case .closed = input { feed.finish() }
      }
      do {
        try await channel.open()
        _ = try await channel.call("request")
        _ = try await channel.call("watch", coalesce ? [] : [JSONMember("coalesce", false)])
        connectedBefore = true
        failures = 0
        onWatching?()
      } catch let error as LocationClientError
        where connectedBefore && error.code != .notAuthorized && error.code != .permissionDenied
      {
        channel.close()
        failures += 1
        if failures >= reconnectAttempts {
          continuation.finish(throwing: error)
          return
        }
        do { try await sleep(reconnectDelay) } catch { break }
        continue
      } catch let closed as ClosedBeforeSending where connectedBefore {
        channel.close()
        failures += 1
        if failures >= reconnectAttempts {
          continuation.finish(throwing: closed.error)
          return
        }
        do { try await sleep(reconnectDelay) } catch { break }
        continue
      } catch let closed as ClosedBeforeSending {
        channel.close()
        continuation.finish(throwing: closed.error)
        return
      } catch {
        channel.close()
        if error is CancellationError || Task.isCancelled { break }
        continuation.finish(throwing: error)
        return
      }
      for await input in inputs {
        guard case .message(let event) = input else { break }
        if event["class"] == "AUTHORIZATION", event["authorization"] != "authorized" {
          channel.close()
          continuation.finish(
            throwing: LocationClientError(
              .notAuthorized, "locationd withdrew this client's authorization (its group changed)",
              reply: event))
          return
        }
        if event["class"] == "ERROR" {
          channel.close()
          continuation.finish(throwing: LocationClientError(errorReply: event))
          return
        }
        if let element = transform(event) { continuation.yield(element) }
      }
      channel.close()
    }
    continuation.finish()
  }
}

/// An event sequence of a ``LocationClient`` (``LocationClient/locationUpdates``,
/// ``LocationClient/mapChanges``, ``LocationClient/regionEvents``): each iteration opens its own
/// watching connection when it starts and closes it when it ends (loop left, task cancelled).
public struct ClientEvents<Element: Sendable>: AsyncSequence, Sendable {
  /// The iteration's errors: ``LocationClientError``.
  public typealias Failure = any Error
  /// The iterator: an `AsyncThrowingStream`'s.
  public typealias AsyncIterator = AsyncThrowingStream<Element, any Error>.Iterator

  let client: LocationClient
  let coalesce: Bool
  /// Whether every element waits for the consumer (`false`: only the newest, as the daemon
  /// coalesces fixes for a slow client).
  let keepsEvery: Bool
  let transform: @Sendable (JSONValue) -> Element?
  /// Called each time the iteration's connection starts watching.
  var onWatching: (@Sendable () -> Void)? = nil

  /// Starts an iteration: connects, asks for authorization and watches.
  public func makeAsyncIterator() -> AsyncIterator {
    let (stream, continuation) = AsyncThrowingStream<Element, any Error>.makeStream(
      bufferingPolicy: keepsEvery ? .unbounded : .bufferingNewest(1))
    let client = client
    let coalesce = coalesce
    let transform = transform
    let onWatching = onWatching
    let task = Task {
      await client.runEvents(
        coalesce: coalesce, onWatching: onWatching, transform: transform, into: continuation)
    }
    continuation.onTermination = { _ in task.cancel() }
    return stream.makeAsyncIterator()
  }
}
