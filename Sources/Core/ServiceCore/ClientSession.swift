import LocationModel
import LocationProtocol

/// Why the service would not open a session: its error reply to `request` (`notAuthorized` with
/// the remedy, as a socket client reads it).
public struct SessionRefusal: Error, Sendable, Hashable {
  /// The service's reply, always ``Reply/error(_:message:)``.
  public let reply: Reply

  /// The reply's message, for a front-end's log or its own error (a D-Bus error, an SSE event).
  public var message: String {
    if case .error(_, let message) = reply { return message }
    return ""
  }
}

/// One client's session with the service, opened with ``RequestHandler/open(peer:channel:)``:
/// the service authorized the peer for this channel. Every front-end opens its clients' sessions
/// this way, so that the same peer gets the same decision whatever transport it came through.
public struct ClientSession: Sendable {
  /// Who the session is for: the channel and the peer's credentials.
  public let context: ClientContext
  private let handler: any RequestHandler

  fileprivate init(context: ClientContext, handler: any RequestHandler) {
    self.context = context
    self.handler = handler
  }

  /// The client's number (``ConnectionNumber``).
  public var id: UInt64 { context.id }

  /// Starts the client's watch: fixes (TPV), map and region events reach its channel from now
  /// on, and the backend tracks while any watch is on.
  ///
  /// - Parameter coalescing: whether a fix waiting for the client is replaced by a newer one
  ///   (`"missed":N`); `false` for a client that must see every fix (the OwnTracks publisher).
  /// - Throws: ``SessionRefusal`` with the service's error reply (`notAuthorized` when a reload
  ///   revoked the client meanwhile, `unavailable` when the backend could not start).
  public func watch(coalescing: Bool) async throws(SessionRefusal) {
    let reply = await handler.handle(
      Request(command: .watch(enable: true, coalesce: coalescing)), from: context)
    if case .error = reply { throw SessionRefusal(reply: reply) }
  }

  /// Ends the client's watch (its tracking stops when no other watch needs the backend).
  public func unwatch() async {
    _ = await handler.handle(Request(command: .watch(enable: false)), from: context)
  }

  /// Sends one request as this client, as ``RequestHandler/handle(_:from:)``.
  public func handle(_ request: Request) async -> Reply {
    await handler.handle(request, from: context)
  }

  /// Tells the service the client has gone (``RequestHandler/clientDisconnected(_:)``); call it
  /// once, after the session's last request.
  public func close() async {
    await handler.clientDisconnected(context)
  }
}

extension RequestHandler {
  /// Opens a session for a client of a front-end: asks the service to authorize `peer`
  /// (`request`) for `channel`. The decision is the service's; a front-end never decides.
  ///
  /// - Parameters:
  ///   - peer: the credentials the transport established (`SO_PEERCRED`, the D-Bus sender's).
  ///   - channel: where the service pushes the client's events; its
  ///     ``ClientChannel/authorizationChanged(_:)`` hears of a later change of the decision.
  /// - Throws: ``SessionRefusal`` with the `notAuthorized` reply when the peer is not
  ///   authorized. The service has recorded the decision for the channel: call
  ///   ``clientDisconnected(_:)`` with `ClientContext(connection: channel, peer: peer)` when the
  ///   channel goes, as for an open session.
  public func open(peer: PeerCredentials, channel: any ClientChannel) async throws(SessionRefusal)
    -> ClientSession
  {
    let context = ClientContext(connection: channel, peer: peer)
    let reply = await handle(Request(command: .requestAuthorization), from: context)
    if case .error = reply { throw SessionRefusal(reply: reply) }
    return ClientSession(context: context, handler: self)
  }
}
