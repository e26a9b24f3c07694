import LocationModel
import LocationProtocol
import ServiceCore
import Synchronization

// The public face of the Unix-socket front-end. The rest of it: ClientSlot.swift (one client's
// socket and queues), ServerCore.swift (registry, lifecycle, fan-out), ServerCore+EventLoop.swift
// (the epoll thread: accept, read, write, close) and ServerCore+Requests.swift (the request
// tasks that pass each line to the service).

/// Limits of the socket server.
public struct ServerOptions: Sendable, Hashable {
  /// Maximum connected clients; one more gets a `tooManyClients` error line and is closed.
  public var maxClients: Int = 64
  /// Maximum request line length, bytes (64 KiB).
  public var maxLineLength: Int = Request.maximumLineLength
  /// A client whose queue of replies and non-coalescible events exceeds this many bytes is
  /// disconnected (1 MiB). Replies alone never get there: the server answers a client's next
  /// request only when nothing is queued for it (its socket took everything so far), and stops
  /// reading its requests meanwhile, so a client that pipelines requests and reads slowly gets
  /// every reply. A reply larger than this bound is replaced by a `limitExceeded` error.
  public var maxBacklogBytes: Int = Reply.maximumBytes
  /// ... or this many messages.
  public var maxBacklogMessages: Int = 4096
  /// Requests read but not yet answered per client before the server stops reading from it.
  public var maxPendingRequests: Int = 32

  /// Creates options with the defaults above.
  public init(maxClients: Int = 64) {
    self.maxClients = maxClients
  }
}

/// A connected client, for pushing events. Safe to use from any thread; after the client has
/// gone every call does nothing.
public final class ClientConnection: ClientChannel, Hashable {
  let slot: ClientSlot
  private let core: ServerCore

  init(slot: ClientSlot, core: ServerCore) {
    self.slot = slot
    self.core = core
  }

  /// The server-unique client number.
  public var id: UInt64 { slot.id }

  /// Gives `event` to this client: written at once when nothing is queued for it and its socket
  /// takes it, queued otherwise.
  ///
  /// - Returns: `false` when the client has gone (stop sending), `true` otherwise. The event
  ///   may be coalesced (``Event/coalescingKey``); a client whose backlog exceeds the bounds of
  ///   ``ServerOptions`` is disconnected (and this returns `false`).
  @discardableResult public func send(_ event: Event) -> Bool {
    deliver(EncodedEvent(event))
  }

  /// Gives `event` to this client right after the reply to the request being answered for it
  /// now (held under the client's lock and written in the same critical section as that reply),
  /// or at once when no request is being answered. The event is never coalesced.
  ///
  /// - Returns: as ``send(_:)``.
  @discardableResult public func sendAfterReply(_ event: Event) -> Bool {
    let encoded = EncodedEvent(event)
    switch slot.deliverAfterReply(body: encoded.body, line: encoded.line) {
    case .accepted: return true
    case .gone: return false
    case .drop(let reason):
      core.scheduleClose(id, reason: reason)
      return false
    }
  }

  /// Gives an event encoded once for many clients to this client (see ``send(_:)``).
  @discardableResult public func deliver(_ event: EncodedEvent) -> Bool {
    switch slot.deliver(body: event.body, line: event.line, coalescingKey: event.coalescingKey) {
    case .accepted: return true
    case .gone: return false
    case .drop(let reason):
      core.scheduleClose(id, reason: reason)
      return false
    }
  }

  /// Gives events produced together (the `REGION` events of one fix) in order; the backlog
  /// bounds of ``ServerOptions`` are applied before the burst, not to it (see
  /// ``ClientChannel/deliverBurst(_:)``).
  @discardableResult public func deliverBurst(_ events: [EncodedEvent]) -> Bool {
    switch slot.deliverBurst(events.map { ($0.body, $0.line) }) {
    case .accepted: return true
    case .gone: return false
    case .drop(let reason):
      core.scheduleClose(id, reason: reason)
      return false
    }
  }

  /// Whether the client is still connected.
  public var isConnected: Bool { slot.state.withLock { $0.open && $0.dropReason == nil } }

  /// Disconnects the client (after nothing: queued data is discarded).
  public func close() { core.requestClose(slot, reason: "closedByServer") }

  /// Compares by ``id``.
  public static func == (lhs: ClientConnection, rhs: ClientConnection) -> Bool { lhs.id == rhs.id }
  /// Hashes ``id``.
  public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// A Unix stream socket server speaking one JSON object per line.
///
/// One dedicated thread (never Swift's cooperative pool) accepts, reads and closes with
/// `epoll(7)`; complete request lines go to the ``RequestHandler`` in a task that runs while the
/// client has requests waiting. Outgoing lines are written by the thread that produces them
/// (a reply's task, a broadcast's caller) when nothing is queued for the client and its socket
/// takes them, so a fix reaches a thousand clients without a hop through the I/O thread; what
/// does not fit waits in the client's bounded queue, which the I/O thread writes when the socket
/// becomes writable. Replies and plain events are never dropped, coalescible events are replaced
/// by newer ones, and a client whose backlog exceeds the bounds is disconnected without
/// affecting others.
public final class SocketServer: FrontEnd {
  private let core: ServerCore

  /// Creates a server on `socket`. Call ``start()`` or ``run()``.
  ///
  /// - Parameters:
  ///   - socket: the listening socket (see ``ListeningSocket/open(path:group:environment:)``).
  ///   - handler: answers every request, `request` included, and decides who is authorized
  ///     (the server passes each request with the peer's `SO_PEERCRED` credentials).
  ///   - options: limits.
  public init(
    socket: ListeningSocket, handler: any RequestHandler, options: ServerOptions = ServerOptions()
  ) {
    core = ServerCore(socket: socket, handler: handler, options: options)
  }

  /// Starts the I/O thread; returns at once. Idempotent.
  ///
  /// - Throws: ``ListenError/systemCall(_:path:errno:)`` when the wake-up descriptor or the
  ///   thread cannot be created.
  public func start() throws(ListenError) { try core.start() }

  /// Starts the server and returns when it has stopped (after ``stop()``); cancelling the
  /// calling task stops the server.
  ///
  /// - Throws: as ``start()``.
  public func run() async throws(ListenError) {
    try core.start()
    await withTaskCancellationHandler {
      await core.waitUntilStopped()
    } onCancel: {
      core.stop()
    }
  }

  /// Stops accepting, disconnects every client, closes (and, unless socket-activated, removes)
  /// the listening socket. Returns at once; ``waitUntilStopped()`` waits for the end.
  public func stop() { core.stop() }

  /// Returns when the I/O thread has finished (immediately when it never started).
  public func waitUntilStopped() async { await core.waitUntilStopped() }

  /// Replaces the client cap (on reload); connected clients above the new cap stay.
  public func setMaxClients(_ maxClients: Int) { core.setMaxClients(maxClients) }

  /// The number of connected clients.
  public var clientCount: Int { core.clientCount }

  /// The connected clients.
  public var clients: [ClientConnection] { core.connections() }

  /// Sends `event` to every client in `clients` (default: all), encoding it once.
  ///
  /// - Returns: the number of clients it was queued for.
  @discardableResult public func broadcast(_ event: Event, to clients: [ClientConnection]? = nil)
    -> Int
  {
    core.deliver(
      event.body.encoded, to: clients ?? core.connections(), coalescingKey: event.coalescingKey)
  }
}
