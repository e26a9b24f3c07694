import NMEA
import LocationModel

/// Identifies one client of a ``LocationManager`` (one socket connection in the daemon).
public struct ClientID: Sendable, Hashable, Codable, CustomStringConvertible {
  /// The opaque number the server assigned.
  public let rawValue: UInt64

  /// Wraps a server-assigned number.
  public init(_ rawValue: UInt64) {
    self.rawValue = rawValue
  }

  /// `client#N`.
  public var description: String { "client#\(rawValue)" }
}

extension LocationFilter {
  /// ``accepts(_:after:)`` on shared locations, without copying them.
  func accepts(_ location: SharedLocation, after last: SharedLocation?) -> Bool {
    if acceptsEverything { return true }
    guard let last else { return accepts(location.value, after: nil) }
    return accepts(location.value, after: last.value)
  }
}

/// Why a ``LocationManager`` request failed.
public enum LocationManagerError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The client is not authorized (its status is given).
  case notAuthorized(ClientID, AuthorizationStatus)
  /// The backend could not start; the message says why.
  case backendFailed(String)
  /// The manager has shut down.
  case shutDown

  /// A one-line message for logs and error replies.
  public var description: String {
    switch self {
    case .notAuthorized(let client, let status):
      return "\(client) is not authorized (\(status.rawValue))"
    case .backendFailed(let message): return "backend failed to start: \(message)"
    case .shutDown: return "location manager has shut down"
    }
  }
}

/// Counters kept by a ``LocationManager``.
public struct LocationManagerStatistics: Sendable, Hashable {
  /// Location events received from the backend.
  public var locationsReceived = 0
  /// Of those, fixes with a position (2D or 3D).
  public var fixesWithPosition = 0
  /// Locations handed to client subscriptions (after filtering, before coalescing).
  public var deliveries = 0
  /// Creates zeroed counters.
  public init() {}
}

/// CoreLocation's `CLLocationManager` for many clients over one ``LocationBackend``.
///
/// This file holds the clients' API (authorization, tracking, streams); how backend events reach
/// them (consumption, batching, filtering, the backend's start and stop) is in
/// LocationManager+Delivery.swift.
///
/// - Authorization: the manager decides nothing; it records what its owner decided for each
///   client with ``setAuthorization(_:for:)`` (the daemon: its service holds the one rule and
///   re-decides at reload) and delivers nothing to a client that is not authorized.
/// - Tracking is reference-counted: the backend starts when the first client starts updating and
///   stops when the last one stops (or disconnects).
/// - ``currentLocation`` is the newest fix with a position, ``initialLocation`` the first since
///   tracking started; both are `nil` ("no fix") until there is one and are cleared when tracking
///   stops. No coordinate is ever invented.
/// - Each client has a ``LocationFilter``; each subscription has its own stream, and a slow
///   subscriber is coalesced to the newest fix, never delaying the backend or anyone else.
public actor LocationManager {
  /// One client: its authorization, tracking, filter and subscriptions.
  final class ClientRecord {
    var authorization = AuthorizationStatus.notDetermined
    var isTracking = false
    var filter = LocationFilter()
    var lastDelivered: SharedLocation?
    var subscriptions: [UInt64: EventMailbox] = [:]
  }

  let backend: any LocationBackend
  /// The serial executor the manager runs on; the daemon's service shares it (see
  /// ``ServiceExecutor``).
  public nonisolated let executor: ServiceExecutor
  /// The manager's jobs run on ``executor``.
  public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
  var clients: [ClientID: ClientRecord] = [:]
  var trackingClients: [ClientRecord] = []
  var observers: [UInt64: EventMailbox] = [:]
  private var nextSubscriptionID: UInt64 = 0
  var backendActive = false
  var lifecycleBusy = false
  var lifecycleWaiters: [CheckedContinuation<Void, Never>] = []
  var consumer: Task<Void, Never>?
  var isShutDown = false
  var pendingWakes: [EventMailbox] = []

  var current: SharedLocation?
  var initial: SharedLocation?

  /// The newest fix with a position since tracking started; `nil` means no fix.
  public var currentLocation: Location? { current?.value }
  /// The first fix with a position since tracking started, kept until tracking stops; `nil`
  /// means no fix yet.
  public var initialLocation: Location? { initial?.value }
  /// The backend's last reported status.
  public internal(set) var backendStatus = BackendStatus.stopped
  /// The detail that came with ``backendStatus``.
  public internal(set) var backendStatusDetail: String?
  /// Counters.
  public internal(set) var statistics = LocationManagerStatistics()

  /// Creates a manager over `backend`, running on `executor` (a new one by default; pass the
  /// same one to the service built over it). Every client starts `notDetermined`: its owner sets
  /// its authorization with ``setAuthorization(_:for:)``.
  public init(
    backend: any LocationBackend, executor: ServiceExecutor = ServiceExecutor(label: "locationd.manager")
  ) {
    self.backend = backend
    self.executor = executor
  }

  /// The backend's URI.
  public nonisolated var backendURI: String { backend.uri }

  /// Whether the backend is running (at least one client is tracking).
  public var isTracking: Bool { backendActive }

  /// Whether `client` tracks (between its ``startUpdating(client:filter:)`` and
  /// ``stopUpdating(client:)`` or disconnect).
  public func isTracking(client: ClientID) -> Bool { clients[client]?.isTracking ?? false }

  /// Number of clients currently tracking.
  public var trackingClientCount: Int { trackingClients.count }

  // MARK: Authorization

  /// Sets `client`'s authorization, as its owner decided it (at a request, or when a reload
  /// changed the rule). A client that is no longer authorized stops tracking at once (the backend
  /// stops when no client tracks any more) and its subscriptions get nothing more until it is
  /// authorized again; they stay open.
  public func setAuthorization(_ status: AuthorizationStatus, for client: ClientID) async {
    let record = self.record(for: client)
    record.authorization = status
    guard status != .authorized, record.isTracking else { return }
    record.isTracking = false
    trackingClients.removeAll { $0 === record }
    try? await applyDesiredState()
  }

  /// `client`'s current authorization status (`notDetermined` for an unknown client).
  public func authorizationStatus(for client: ClientID) -> AuthorizationStatus {
    clients[client]?.authorization ?? .notDetermined
  }

  // MARK: Tracking

  /// Starts delivering locations to `client`'s subscriptions through `filter`; starts the backend
  /// if it is the first tracking client. Calling it again only replaces the filter. When there is
  /// already a current location, it is offered to the client at once.
  ///
  /// - Throws: ``LocationManagerError/notAuthorized(_:_:)`` unless the client is authorized;
  ///   ``LocationManagerError/backendFailed(_:)`` when the backend cannot start.
  public func startUpdating(client: ClientID, filter: LocationFilter = LocationFilter())
    async throws(LocationManagerError)
  {
    if isShutDown { throw .shutDown }
    guard let record = clients[client], record.authorization == .authorized else {
      throw .notAuthorized(client, clients[client]?.authorization ?? .notDetermined)
    }
    record.filter = filter
    if record.isTracking { return }
    record.isTracking = true
    record.lastDelivered = nil
    trackingClients.append(record)
    try await applyDesiredState()
    // A late tracker gets the current location at once, unless the backend already delivered
    // it while it was starting (a fast replay can run to its end during that await).
    if record.isTracking, let current, record.lastDelivered !== current {
      deliver(current, to: record)
      flushWakes()
    }
  }

  /// Stops delivering to `client`; stops the backend when no client tracks any more.
  public func stopUpdating(client: ClientID) async {
    guard let record = clients[client], record.isTracking else { return }
    record.isTracking = false
    trackingClients.removeAll { $0 === record }
    try? await applyDesiredState()
  }

  /// Forgets `client`: stops its tracking and ends its subscriptions.
  public func disconnect(client: ClientID) async {
    guard let record = clients.removeValue(forKey: client) else { return }
    for mailbox in record.subscriptions.values { mailbox.finish() }
    record.subscriptions = [:]
    if record.isTracking {
      record.isTracking = false
      trackingClients.removeAll { $0 === record }
      try? await applyDesiredState()
    }
  }

  /// Whether `client` is tracking.
  public func isUpdating(client: ClientID) -> Bool { clients[client]?.isTracking ?? false }

  /// `client`'s filter.
  public func filter(for client: ClientID) -> LocationFilter? { clients[client]?.filter }

  /// Stops the backend and ends every stream; later requests throw ``LocationManagerError/shutDown``.
  public func shutdown() async {
    isShutDown = true
    for record in trackingClients { record.isTracking = false }
    trackingClients = []
    try? await applyDesiredState()
    for record in clients.values {
      for mailbox in record.subscriptions.values { mailbox.finish() }
      record.subscriptions = [:]
    }
    for mailbox in observers.values { mailbox.finish() }
    observers = [:]
    consumer?.cancel()
    consumer = nil
  }

  // MARK: Streams

  /// A new stream of `client`'s events: locations (filtered, only while authorized and tracking)
  /// and backend status changes (only while authorized).
  ///
  /// With `coalescing` (the default) a slow reader gets only the newest location; without it every
  /// event is queued (memory grows with the backlog: for recording and tests only).
  public func subscribe(client: ClientID, coalescing: Bool = true) -> ManagerEventStream {
    let (mailbox, id) = newMailbox(coalescing: coalescing)
    if !isShutDown { record(for: client).subscriptions[id] = mailbox }
    return ManagerEventStream(
      handle: SubscriptionHandle(mailbox: mailbox) { [weak self] in
        guard let self else { return }
        Task { await self.removeSubscription(id, client: client) }
      })
  }

  /// A mailbox and its subscription number; finished at once after shutdown.
  private func newMailbox(coalescing: Bool) -> (EventMailbox, UInt64) {
    let mailbox = EventMailbox(coalesces: coalescing)
    nextSubscriptionID += 1
    if isShutDown { mailbox.finish() }
    return (mailbox, nextSubscriptionID)
  }

  /// A new stream of every backend event, unfiltered and without authorization (for the
  /// daemon's own use, such as the map state): all locations (with or without a position),
  /// status changes and errors. With `coalescing` (the default) a slow reader gets only the
  /// newest location; without it every event is kept, and while ``losslessBacklog`` of them wait
  /// unread the manager stops reading the backend (which then waits too, for a replay).
  public func observe(coalescing: Bool = true) -> ManagerEventStream {
    let (mailbox, id) = newMailbox(coalescing: coalescing)
    if !isShutDown { observers[id] = mailbox }
    ensureConsumer()
    return ManagerEventStream(
      handle: SubscriptionHandle(mailbox: mailbox) { [weak self] in
        guard let self else { return }
        Task { await self.removeObserver(id) }
      })
  }

  private func removeSubscription(_ id: UInt64, client: ClientID) {
    clients[client]?.subscriptions[id] = nil
  }

  private func removeObserver(_ id: UInt64) {
    observers[id] = nil
  }

  private func record(for client: ClientID) -> ClientRecord {
    if let record = clients[client] { return record }
    let record = ClientRecord()
    clients[client] = record
    return record
  }
}
