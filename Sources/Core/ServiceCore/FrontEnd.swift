import Synchronization
import LocationModel
import LocationProtocol

/// The one API every front-end (the Unix socket today; D-Bus, HTTP and MQTT next) calls the
/// service through. ``LocationService`` implements it.
///
/// A front-end calls ``handle(_:from:)`` for one client's requests one at a time, in order;
/// different clients may be served concurrently. It passes every request, `request` and the
/// commands that need authorization included: the handler decides who is authorized, so that
/// every front-end gets the same answer for the same peer. It calls ``clientDisconnected(_:)`` once when a
/// client has gone, after its last request was handled.
public protocol RequestHandler: Sendable {
  /// Produces the reply to `request` from `client`. Must not throw: failures are error replies
  /// (``Reply/error(_:message:)``).
  func handle(_ request: Request, from client: ClientContext) async -> Reply

  /// Called once when `client` has gone (closed, dropped as too slow, or server shutdown), after
  /// its last request was handled. Stop pushing events to it. The default does nothing.
  func clientDisconnected(_ client: ClientContext) async

  /// Whether a `request` from `peer` would be authorized now, without deciding for any client
  /// (nothing recorded, nothing logged): for a front-end's quotas that let authorized users hold
  /// more (GeoClue's clients per user) and pick whom to displace. The default is `false`.
  func wouldAuthorize(_ peer: PeerCredentials) async -> Bool
}

/// A ``RequestHandler`` that also takes many annotations at once, as one map change (one `MAP`
/// event, one save of the state file): for a front-end whose annotations arrive many per second
/// (the MQTT fleet view). ``LocationService`` implements it.
public protocol AnnotationBatchHandler: RequestHandler {
  /// Adds or replaces every annotation of `batch`, as `annotate` requests from `client` would.
  ///
  /// - Returns: `nil` when `client` is not authorized (nothing changes), otherwise the
  ///   annotations refused with the reason (the map's limits, validation); the rest are in effect.
  func annotate(_ batch: [Annotation], from client: ClientContext) async -> [(id: String, reason: String)]?

  /// Removes every annotation of `ids` that exists, as `remove` requests from `client` would,
  /// as one map change.
  ///
  /// - Returns: `nil` when `client` is not authorized (nothing changes), otherwise how many
  ///   were removed (absent identifiers and `"location"` are skipped).
  func removeAnnotations(_ ids: [String], from client: ClientContext) async -> Int?
}

extension ClientChannel {
  /// Sends at once (``send(_:)``): right for a channel whose replies never wait behind the
  /// service (it writes each reply before it takes the next event).
  @discardableResult public func sendAfterReply(_ event: Event) -> Bool { send(event) }

  /// Delivers each event with ``deliver(_:)`` in order, stopping when one is refused.
  @discardableResult public func deliverBurst(_ events: [EncodedEvent]) -> Bool {
    for event in events where !deliver(event) { return false }
    return true
  }
}

extension RequestHandler {
  /// Does nothing.
  public func clientDisconnected(_ client: ClientContext) async {}

  /// `false`: a handler without an authority authorizes nobody beyond a quota.
  public func wouldAuthorize(_ peer: PeerCredentials) async -> Bool { false }
}

/// One connected client of a front-end, as the service pushes events to it. Safe to use from any
/// thread; after the client has gone every call does nothing.
public protocol ClientChannel: AnyObject, Sendable {
  /// The client's number, unique across all front-ends of the process (``ConnectionNumber/next()``).
  var id: UInt64 { get }
  /// Gives `event` to this client. Returns `false` when the client has gone (stop sending).
  @discardableResult func send(_ event: Event) -> Bool
  /// Gives `event` to this client after the reply to the request its front-end is answering for
  /// it now, or at once when none is being answered; events sent meanwhile with ``send(_:)`` or
  /// ``deliver(_:)`` wait behind it, keeping their order. For events that a reply computed
  /// before them must not follow (`AUTHORIZATION` `denied` after a reload: the client must not
  /// read a reply that depends on the old decision after the event that revoked it). Returns
  /// `false` when the client has gone.
  @discardableResult func sendAfterReply(_ event: Event) -> Bool
  /// Gives an event encoded once for many clients (the fan-out path). Returns `false` when the
  /// client has gone or was dropped for exceeding its front-end's bounds.
  @discardableResult func deliver(_ event: EncodedEvent) -> Bool
  /// Gives events produced together in one go (the `REGION` events of one fix), in order. A
  /// front-end with a bound on what may wait for a client applies it to the client's backlog
  /// before the burst, so a client that keeps up gets all of them however many there are; one
  /// already behind is dropped. Returns `false` when the client has gone or was dropped.
  @discardableResult func deliverBurst(_ events: [EncodedEvent]) -> Bool
  /// Whether the client is still connected.
  var isConnected: Bool { get }
  /// Disconnects the client.
  func close()
  /// The service's decision for this client changed (a reload replaced the rule): called once
  /// per change, on the service's task, right after the `AUTHORIZATION` event was given to the
  /// channel. A status other than `authorized` means the client lost its watch and tracking; a
  /// front-end whose clients cannot read the event (NMEA readers, D-Bus clients) acts on it here
  /// instead of reading the event's JSON. Must not block. The default does nothing.
  func authorizationChanged(_ status: AuthorizationStatus)
  /// Whether the client is the daemon itself acting as a client of the service (the MQTT
  /// publisher, which tracks with the daemon's own credentials), not a person's program: such a
  /// watch is not one of a user's watches in `status`. Default `false`.
  var isDaemonClient: Bool { get }
}

extension ClientChannel {
  /// `false`: a client program.
  public var isDaemonClient: Bool { false }

  /// Does nothing: the client reads the `AUTHORIZATION` event.
  public func authorizationChanged(_ status: AuthorizationStatus) {}
}

/// A source of clients: a transport the service is attached to.
public protocol FrontEnd: Sendable {
  /// The number of clients connected through it now.
  var clientCount: Int { get }
  /// Where a network front-end can be reached (`STATUS` reports it); `nil` for the socket.
  var endpoint: FrontEndEndpoint? { get }
}

extension FrontEnd {
  /// `nil`: nothing to report.
  public var endpoint: FrontEndEndpoint? { nil }
}

/// Where a network front-end serves, as `STATUS` reports it in `"http":{"url":..,"tokenFile":..}`.
public struct FrontEndEndpoint: Sendable, Hashable {
  /// The base URL without credentials, e.g. `http://127.0.0.1:8080/`.
  public var url: String
  /// The file holding the token that authorizes requests (readable by the daemon's user only).
  public var tokenFile: String

  /// Creates an endpoint.
  public init(url: String, tokenFile: String) {
    self.url = url
    self.tokenFile = tokenFile
  }
}

/// Who sent a request, as the service sees it.
public struct ClientContext: Sendable {
  /// The client's channel: push events with ``ClientChannel/send(_:)``.
  public let connection: any ClientChannel
  /// The peer process's credentials, as its front-end established them (`SO_PEERCRED` for the
  /// Unix socket).
  public let peer: PeerCredentials

  /// Creates a context. A front-end passes what its transport knows of the peer and nothing
  /// more: whether the client is authorized is the service's decision (``AuthorizationAuthority``).
  public init(connection: any ClientChannel, peer: PeerCredentials) {
    self.connection = connection
    self.peer = peer
  }

  /// The process-unique client number (also in the log as `client=N`).
  public var id: UInt64 { connection.id }
}

/// Process-unique client numbers shared by all front-ends, so that one number names one client
/// in the service and in the log whichever transport it came through.
public enum ConnectionNumber {
  private static let counter = Atomic<UInt64>(1)

  /// The next number: 1, 2, 3... never reused while the process runs.
  public static func next() -> UInt64 {
    counter.wrappingAdd(1, ordering: .relaxed).oldValue
  }
}
