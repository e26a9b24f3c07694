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

/// Who a client is, as the server learned it (for a Unix socket: `SO_PEERCRED`).
public struct ClientCredentials: Sendable, Hashable, Codable {
  /// Process ID of the peer, when known.
  public var pid: Int32?
  /// Effective user ID.
  public var uid: UInt32
  /// Effective group ID.
  public var gid: UInt32
  /// Supplementary group IDs, when known.
  public var groups: [UInt32]
  /// A name the client gave for itself (informational only; never trusted for decisions).
  public var name: String?

  /// Creates credentials.
  public init(
    pid: Int32? = nil, uid: UInt32, gid: UInt32, groups: [UInt32] = [], name: String? = nil
  ) {
    self.pid = pid
    self.uid = uid
    self.gid = gid
    self.groups = groups
    self.name = name
  }
}

/// Decides a client's ``AuthorizationStatus`` from its credentials when it requests authorization.
public typealias AuthorizationPolicy = @Sendable (ClientCredentials) -> AuthorizationStatus

/// Which fixes a client wants (CoreLocation's `distanceFilter`, `desiredAccuracy`, plus a minimum
/// interval). `nil` disables a criterion. The first fix after starting is always delivered when
/// it meets ``desiredAccuracy``.
public struct LocationFilter: Sendable, Hashable, Codable {
  /// Minimum distance in metres from the last delivered location (haversine); `nil` or `<= 0` =
  /// every fix (`kCLDistanceFilterNone`).
  public var distanceFilter: Double?
  /// Minimum time in seconds between delivered fixes, measured between the fixes' UTC times;
  /// `nil` or `<= 0` = no minimum.
  public var minimumInterval: Double?
  /// Largest acceptable 95% horizontal error radius in metres (``Location/horizontalAccuracy95``);
  /// fixes with a larger or unknown error are not delivered. `nil` = any accuracy.
  public var desiredAccuracy: Double?

  /// Creates a filter; the default delivers every fix.
  public init(
    distanceFilter: Double? = nil, minimumInterval: Double? = nil, desiredAccuracy: Double? = nil
  ) {
    self.distanceFilter = distanceFilter
    self.minimumInterval = minimumInterval
    self.desiredAccuracy = desiredAccuracy
  }

  /// Whether `location` should be delivered after `last` (the previously delivered one).
  public func accepts(_ location: Location, after last: Location?) -> Bool {
    if let desired = desiredAccuracy {
      guard let error = location.horizontalAccuracy95, error <= desired else { return false }
    }
    guard let last else { return true }
    if let interval = minimumInterval, interval > 0,
      let elapsed = Self.elapsedMilliseconds(from: last.fix, to: location.fix),
      Double(elapsed) < interval * 1000
    {
      return false
    }
    if let minimum = distanceFilter, minimum > 0, let distance = location.distance(from: last),
      distance < minimum
    {
      return false
    }
    return true
  }

  /// Whether the filter lets every fix through (no accuracy, interval or distance condition), so
  /// that ``accepts(_:after:)`` is `true` whatever the locations.
  public var acceptsEverything: Bool {
    desiredAccuracy == nil && (minimumInterval ?? 0) <= 0 && (distanceFilter ?? 0) <= 0
  }

  /// ``accepts(_:after:)`` on shared locations, without copying them.
  func accepts(_ location: SharedLocation, after last: SharedLocation?) -> Bool {
    if acceptsEverything { return true }
    guard let last else { return accepts(location.value, after: nil) }
    return accepts(location.value, after: last.value)
  }

  static func elapsedMilliseconds(from a: Fix, to b: Fix) -> Int64? {
    if let start = a.time, let end = b.time { return end - start }
    if let start = a.timeOfDay, let end = b.timeOfDay {
      var delta = Int64(end) - Int64(start)
      if delta < -43_200_000 { delta += 86_400_000 }
      return delta
    }
    return nil
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
/// - Authorization: ``requestAuthorization(client:credentials:)`` asks the injected policy once
///   per client; nothing is delivered to a client that is not authorized.
/// - Tracking is reference-counted: the backend starts when the first client starts updating and
///   stops when the last one stops (or disconnects).
/// - ``currentLocation`` is the newest fix with a position, ``initialLocation`` the first since
///   tracking started; both are `nil` ("no fix") until there is one and are cleared when tracking
///   stops. No coordinate is ever invented.
/// - Each client has a ``LocationFilter``; each subscription has its own stream, and a slow
///   subscriber is coalesced to the newest fix, never delaying the backend or anyone else.
public actor LocationManager {
  private final class ClientRecord {
    var authorization = AuthorizationStatus.notDetermined
    var isTracking = false
    var filter = LocationFilter()
    var lastDelivered: SharedLocation?
    var subscriptions: [UInt64: EventMailbox] = [:]
  }

  private let backend: any LocationBackend
  private let policy: AuthorizationPolicy
  private var clients: [ClientID: ClientRecord] = [:]
  private var trackingClients: [ClientRecord] = []
  private var observers: [UInt64: EventMailbox] = [:]
  private var nextSubscriptionID: UInt64 = 0
  private var backendActive = false
  private var lifecycleBusy = false
  private var lifecycleWaiters: [CheckedContinuation<Void, Never>] = []
  private var consumer: Task<Void, Never>?
  private var isShutDown = false
  private var pendingWakes: [EventMailbox] = []

  private var current: SharedLocation?
  private var initial: SharedLocation?

  /// The newest fix with a position since tracking started; `nil` means no fix.
  public var currentLocation: Location? { current?.value }
  /// The first fix with a position since tracking started, kept until tracking stops; `nil`
  /// means no fix yet.
  public var initialLocation: Location? { initial?.value }
  /// The backend's last reported status.
  public private(set) var backendStatus = BackendStatus.stopped
  /// The detail that came with ``backendStatus``.
  public private(set) var backendStatusDetail: String?
  /// Counters.
  public private(set) var statistics = LocationManagerStatistics()

  /// Creates a manager over `backend`; `policy` decides authorization requests.
  public init(backend: any LocationBackend, policy: @escaping AuthorizationPolicy) {
    self.backend = backend
    self.policy = policy
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

  /// Asks the policy for `client`'s authorization, once: a decided status (authorized or denied)
  /// is kept for the client's lifetime; `notDetermined` may be asked again.
  public func requestAuthorization(client: ClientID, credentials: ClientCredentials)
    -> AuthorizationStatus
  {
    let record = self.record(for: client)
    if record.authorization == .notDetermined {
      record.authorization = policy(credentials)
    }
    return record.authorization
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
    let mailbox = EventMailbox(coalesces: coalescing)
    nextSubscriptionID += 1
    let id = nextSubscriptionID
    if isShutDown {
      mailbox.finish()
    } else {
      record(for: client).subscriptions[id] = mailbox
    }
    return ManagerEventStream(
      handle: SubscriptionHandle(mailbox: mailbox) { [weak self] in
        guard let self else { return }
        Task { await self.removeSubscription(id, client: client) }
      })
  }

  /// A new stream of every backend event, unfiltered and without authorization (for the
  /// daemon's own use, such as the map state): all locations (with or without a position),
  /// status changes and errors. With `coalescing` (the default) a slow reader gets only the
  /// newest location; without it every event is kept, and while ``losslessBacklog`` of them wait
  /// unread the manager stops reading the backend (which then waits too, for a replay).
  public func observe(coalescing: Bool = true) -> ManagerEventStream {
    let mailbox = EventMailbox(coalesces: coalescing)
    nextSubscriptionID += 1
    let id = nextSubscriptionID
    if isShutDown {
      mailbox.finish()
    } else {
      observers[id] = mailbox
    }
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

  // MARK: Backend

  private func ensureConsumer() {
    guard consumer == nil, !isShutDown else { return }
    let events = backend.events
    consumer = Task { await self.consume(events) }
  }

  /// The one delivery path from the backend: whatever its queue holds, up to 256 events at a
  /// time, handled as a batch (one wake-up per reader per batch).
  private func consume(_ events: BackendEvents) async {
    while let batch = await events.nextBatch(upTo: 256) {
      if Task.isCancelled { return }
      handle(batch: batch)
      flushWakes()
      await waitForLosslessReaders()
    }
  }

  /// Most events queued for an observer that gets every event before the manager stops taking
  /// events from the backend.
  public static let losslessBacklog = 1024

  /// Back-pressure for observers that keep every event (`observe(coalescing: false)`, such as
  /// the daemon's hub): while one holds ``losslessBacklog`` unread events, stop reading the
  /// backend, whose own bounded queue then makes it wait. A replay at speed 0 then runs at the
  /// pace of that observer instead of filling memory. (Client subscriptions without coalescing
  /// are not waited for: they are for recording and may be read only at the end.)
  private func waitForLosslessReaders() async {
    for mailbox in observers.values where !mailbox.coalesces {
      await mailbox.waitForSpace()
    }
  }

  /// Handles a batch of events. Clients whose filter accepts every fix and whose subscriptions all
  /// coalesce get only the newest location of each run of locations, with the others counted as
  /// missed: exactly what coalescing would leave them, for one push per run instead of one per fix.
  private func handle(batch: [BackendEvent]) {
    let coalescedOnly = trackingClients.map { record in
      record.authorization == .authorized && record.filter.acceptsEverything
        && record.subscriptions.values.allSatisfy(\.coalesces)
    }
    var pending: SharedLocation?
    var skipped = 0
    for event in batch {
      guard case .location(let location) = event else {
        deliverNewest(pending, skipped: skipped, to: coalescedOnly)
        pending = nil
        skipped = 0
        handle(event)
        continue
      }
      statistics.locationsReceived += 1
      let shared = SharedLocation(location)
      for mailbox in observers.values { post(.location(shared, missed: 0), to: mailbox) }
      guard backendActive, location.hasPosition else { continue }
      statistics.fixesWithPosition += 1
      current = shared
      if initial == nil { initial = shared }
      for (index, record) in trackingClients.enumerated() where !coalescedOnly[index] {
        deliver(shared, to: record)
      }
      if pending != nil { skipped += 1 }
      pending = shared
    }
    deliverNewest(pending, skipped: skipped, to: coalescedOnly)
  }

  /// Delivers `location` to the tracking clients flagged in `selected`, `skipped` fixes having
  /// been coalesced away before it.
  private func deliverNewest(_ location: SharedLocation?, skipped: Int, to selected: [Bool]) {
    guard let location else { return }
    for (index, record) in trackingClients.enumerated() where selected[index] && record.isTracking {
      record.lastDelivered = location
      statistics.deliveries += skipped + 1
      for mailbox in record.subscriptions.values {
        post(.location(location, missed: skipped), to: mailbox)
      }
    }
  }

  /// Brings the backend in line with the tracking clients: started while any client tracks,
  /// stopped otherwise. Serialized so that overlapping calls never start or stop it twice.
  private func applyDesiredState() async throws(LocationManagerError) {
    while lifecycleBusy {
      await withCheckedContinuation { lifecycleWaiters.append($0) }
    }
    lifecycleBusy = true
    defer {
      lifecycleBusy = false
      if !lifecycleWaiters.isEmpty { lifecycleWaiters.removeFirst().resume() }
    }
    let wanted = !trackingClients.isEmpty
    if wanted && !backendActive {
      ensureConsumer()
      current = nil
      initial = nil
      backendActive = true
      do {
        try await backend.start()
      } catch {
        backendActive = false
        for record in trackingClients { record.isTracking = false }
        trackingClients = []
        let message = String(describing: error)
        backendStatus = .stopped
        backendStatusDetail = message
        throw .backendFailed(message)
      }
    } else if !wanted && backendActive {
      backendActive = false
      current = nil
      initial = nil
      await backend.stop()
      current = nil
      initial = nil
    }
  }

  private func handle(_ event: BackendEvent) {
    switch event {
    case .location(let location):
      statistics.locationsReceived += 1
      let shared = SharedLocation(location)
      for mailbox in observers.values { post(.location(shared, missed: 0), to: mailbox) }
      guard backendActive, location.hasPosition else { return }
      statistics.fixesWithPosition += 1
      current = shared
      if initial == nil { initial = shared }
      for record in trackingClients { deliver(shared, to: record) }
    case .status(let status, let detail):
      backendStatus = status
      backendStatusDetail = detail
      for mailbox in observers.values { post(.other(event.managerEvent), to: mailbox) }
      for record in clients.values where record.authorization == .authorized {
        for mailbox in record.subscriptions.values {
          post(.other(.status(status, detail: detail)), to: mailbox)
        }
      }
    case .error(let message):
      for mailbox in observers.values { post(.other(.error(message)), to: mailbox) }
    }
  }

  /// Queues `event` in `mailbox`; a waiting reader is woken by ``flushWakes()`` (after the
  /// current event or batch), so a burst of fixes costs one wake-up per reader, not one per fix.
  private func post(_ event: MailboxEntry, to mailbox: EventMailbox) {
    if mailbox.postWithoutWake(event) { pendingWakes.append(mailbox) }
  }

  private func flushWakes() {
    for mailbox in pendingWakes { mailbox.wake() }
    pendingWakes.removeAll(keepingCapacity: true)
  }

  private func deliver(_ location: SharedLocation, to record: ClientRecord) {
    guard record.authorization == .authorized, record.isTracking,
      record.filter.accepts(location, after: record.lastDelivered)
    else { return }
    record.lastDelivered = location
    statistics.deliveries += 1
    for mailbox in record.subscriptions.values { post(.location(location, missed: 0), to: mailbox) }
  }
}

extension BackendEvent {
  var managerEvent: ManagerEvent {
    switch self {
    case .location(let location): return .location(location, missed: 0)
    case .status(let status, let detail): return .status(status, detail: detail)
    case .error(let message): return .error(message)
    }
  }
}
