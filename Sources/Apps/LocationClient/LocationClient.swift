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

  struct State {
    var channel: Channel?
    var authorizationRequested = false
  }

  /// The connection that overlapping ``requestLocation(timeout:)`` calls share.
  struct OneShot {
    var task: Task<Void, Never>?
    /// Bumped when a connection opens or is given up, so that an old one delivers nothing.
    var generation = 0
    var nextWaiter = 0
    var waiters: [Int: CheckedContinuation<Location, any Error>] = [:]
  }

  let makeTransport: @Sendable () -> any LocationTransport
  let state = Mutex(State())
  let oneShot = Mutex(OneShot())
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
  func commandChannel(asking: Bool) async throws -> Channel {
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

  /// The newest location with a position; `nil` before one (never a made-up coordinate). While
  /// the receiver reports no fix it stays the last one known: ``status`` says whether it is
  /// stale (``ServiceStatus/isStale``).
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
