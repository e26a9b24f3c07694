import Glibc
import Synchronization

/// Answers requests. The daemon implements it with its `LocationManager` and `MapStateService`.
///
/// The server calls ``handle(_:from:)`` for one client's requests one at a time, in order, and
/// writes each reply as one line; different clients are served concurrently. The server answers
/// ``Command/requestAuthorization`` itself and refuses every command except `status` and
/// `request` with `notAuthorized` until the client is authorized, so the handler sees
/// `requestAuthorization` never and unauthorized clients only with `status`.
public protocol RequestHandler: Sendable {
  /// Produces the reply to `request` from `client`. Must not throw: failures are error replies
  /// (``Reply/error(_:message:)``).
  func handle(_ request: Request, from client: ClientContext) async -> Reply

  /// Called once when `client` has gone (closed, dropped as too slow, or server shutdown), after
  /// its last request was handled. Stop pushing events to it. The default does nothing.
  func clientDisconnected(_ client: ClientContext) async
}

extension RequestHandler {
  /// Does nothing.
  public func clientDisconnected(_ client: ClientContext) async {}
}

/// Who sent a request, as the handler sees it.
public struct ClientContext: Sendable {
  /// The connection: push events with ``ClientConnection/send(_:)``.
  public let connection: ClientConnection
  /// The peer process's credentials (`SO_PEERCRED`).
  public let peer: PeerCredentials
  /// The client's authorization at the time of the request.
  public let authorization: AuthorizationStatus

  /// The server-unique client number (also in the log as `client=N`).
  public var id: UInt64 { connection.id }
}

/// Limits of the socket server.
public struct ServerOptions: Sendable, Hashable {
  /// Maximum connected clients; one more gets a `tooManyClients` error line and is closed.
  public var maxClients: Int = 64
  /// Maximum request line length, bytes (64 KiB).
  public var maxLineLength: Int = Request.maximumLineLength
  /// A client whose queue of replies and non-coalescible events exceeds this many bytes is
  /// disconnected (1 MiB).
  public var maxBacklogBytes: Int = 1 << 20
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
public final class ClientConnection: Sendable, Hashable {
  /// The server-unique client number.
  public let id: UInt64
  private let core: ServerCore

  init(id: UInt64, core: ServerCore) {
    self.id = id
    self.core = core
  }

  /// Queues `event` for this client.
  ///
  /// - Returns: `false` when the client has gone (stop sending), `true` otherwise. The event
  ///   may be coalesced (``Event/coalescingKey``); a client whose backlog exceeds the bounds of
  ///   ``ServerOptions`` is disconnected (and this returns `false`).
  @discardableResult public func send(_ event: Event) -> Bool {
    core.enqueue(event.body.encoded, to: id, coalescingKey: event.coalescingKey)
  }

  /// Whether the client is still connected.
  public var isConnected: Bool { core.isConnected(id) }

  /// Disconnects the client (after nothing: queued data is discarded).
  public func close() { core.requestClose(id, reason: "closedByServer") }

  /// Compares by ``id``.
  public static func == (lhs: ClientConnection, rhs: ClientConnection) -> Bool { lhs.id == rhs.id }
  /// Hashes ``id``.
  public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// A Unix stream socket server speaking one JSON object per line.
///
/// All socket I/O runs on one dedicated thread with `poll(2)` (never on Swift's cooperative
/// pool); requests are handed to the ``RequestHandler`` in a task per client. Each client has a
/// bounded outgoing queue: replies and plain events are never dropped, coalescible events are
/// replaced by newer ones, and a client whose backlog exceeds the bounds is disconnected
/// without affecting others.
public final class SocketServer: Sendable {
  private let core: ServerCore

  /// Creates a server on `socket`. Call ``start()`` or ``run()``.
  ///
  /// - Parameters:
  ///   - socket: the listening socket (see ``ListeningSocket/open(path:group:environment:)``).
  ///   - handler: answers requests.
  ///   - authorizer: decides `request`; replace it on reload with ``setAuthorizer(_:)``.
  ///   - options: limits.
  public init(
    socket: ListeningSocket, handler: any RequestHandler, authorizer: Authorizer,
    options: ServerOptions = ServerOptions()
  ) {
    core = ServerCore(socket: socket, handler: handler, authorizer: authorizer, options: options)
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

  /// Replaces the authorizer (on reload); decisions already made stay.
  public func setAuthorizer(_ authorizer: Authorizer) { core.setAuthorizer(authorizer) }

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
    let bytes = event.body.encoded
    let ids = clients?.map(\.id) ?? core.connections().map(\.id)
    return core.enqueue(bytes, to: ids, coalescingKey: event.coalescingKey)
  }
}

// MARK: - Implementation

private enum OutEntry {
  /// Bytes to write (newline included); `counted` when part of the backlog bound.
  case bytes([UInt8], counted: Bool)
  /// The pending coalescible event with this key (its bytes live in `coalesced`).
  case coalesced(String)
}

private struct Client {
  let fd: Int32
  let peer: PeerCredentials
  let connection: ClientConnection
  var authorization: AuthorizationStatus = .notDetermined
  var queue: [OutEntry] = []
  var headOffset = 0
  var backlogBytes = 0
  var backlogMessages = 0
  var coalesced: [String: (bytes: [UInt8], missed: Int)] = [:]
  var pendingRequests = 0
  var lines: AsyncStream<LineReader.Item>.Continuation
  /// The peer closed its write side: close once its requests are answered and the queue is sent.
  var readClosed = false
  var requestsFinished = false
  /// Set by other threads; the I/O thread closes the descriptor.
  var dropReason: String?
}

private struct State {
  var clients: [UInt64: Client] = [:]
  var nextID: UInt64 = 1
  var authorizer: Authorizer
  var maxClients: Int
  var started = false
  var stopping = false
  var stopped = false
  var waiters: [CheckedContinuation<Void, Never>] = []
}

final class ServerCore: Sendable {
  private let socket: ListeningSocket
  private let handler: any RequestHandler
  private let options: ServerOptions
  private let state: Mutex<State>
  /// Write end of the wake-up pipe (a byte makes the I/O thread re-read the state).
  private let wakeFD = Atomic<Int32>(-1)
  private let wakeReadFD = Atomic<Int32>(-1)

  init(
    socket: ListeningSocket, handler: any RequestHandler, authorizer: Authorizer,
    options: ServerOptions
  ) {
    self.socket = socket
    self.handler = handler
    self.options = options
    state = Mutex(State(authorizer: authorizer, maxClients: options.maxClients))
  }

  deinit {
    for fd in [wakeFD.load(ordering: .acquiring), wakeReadFD.load(ordering: .acquiring)]
    where fd >= 0 {
      Glibc.close(fd)
    }
  }

  func start() throws(ListenError) {
    let alreadyStarted = state.withLock { state in
      defer { state.started = true }
      return state.started
    }
    if alreadyStarted { return }
    var pipeFDs: [Int32] = [-1, -1]
    guard pipe(&pipeFDs) == 0 else { throw .systemCall("pipe", path: socket.path, errno: errno) }
    for fd in pipeFDs { ListeningSocket.setNonBlockingCloseOnExec(fd) }
    wakeReadFD.store(pipeFDs[0], ordering: .releasing)
    wakeFD.store(pipeFDs[1], ordering: .releasing)
    let started = startThread { [self] in self.loop() }
    guard started else {
      for fd in pipeFDs { Glibc.close(fd) }
      throw .systemCall("pthread_create", path: socket.path, errno: errno)
    }
    Log.event(
      "listening", ["path": socket.path, "activated": socket.isActivated ? "true" : "false"])
  }

  func stop() {
    let wasStarted = state.withLock { state -> Bool in
      state.stopping = true
      if !state.started {
        state.stopped = true
        return false
      }
      return true
    }
    if wasStarted { wake() } else { finishStopped() }
  }

  func waitUntilStopped() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = state.withLock { state -> Bool in
        if state.stopped { return true }
        state.waiters.append(continuation)
        return false
      }
      if done { continuation.resume() }
    }
  }

  private func finishStopped() {
    let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.stopped = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  func setAuthorizer(_ authorizer: Authorizer) { state.withLock { $0.authorizer = authorizer } }
  func setMaxClients(_ maxClients: Int) { state.withLock { $0.maxClients = max(1, maxClients) } }
  var clientCount: Int { state.withLock { $0.clients.count } }
  func connections() -> [ClientConnection] {
    state.withLock { $0.clients.values.filter { $0.dropReason == nil }.map(\.connection) }
      .sorted { $0.id < $1.id }
  }
  func isConnected(_ id: UInt64) -> Bool {
    state.withLock { $0.clients[id].map { $0.dropReason == nil } ?? false }
  }

  private func wake() {
    let fd = wakeFD.load(ordering: .acquiring)
    guard fd >= 0 else { return }
    var one: UInt8 = 1
    _ = write(fd, &one, 1)
  }

  func requestClose(_ id: UInt64, reason: String) {
    let changed = state.withLock { state -> Bool in
      guard state.clients[id] != nil, state.clients[id]?.dropReason == nil else { return false }
      state.clients[id]?.dropReason = reason
      return true
    }
    if changed { wake() }
  }

  /// Queues encoded JSON (no newline) for a client. See ``ClientConnection/send(_:)``.
  func enqueue(_ body: [UInt8], to id: UInt64, coalescingKey: String?) -> Bool {
    enqueue(body, to: [id], coalescingKey: coalescingKey) == 1
  }

  /// Queues the same encoded JSON (no newline) for every client in `ids` under one lock, so that
  /// a broadcast to many clients takes the lock once instead of contending with the I/O thread
  /// for each client; the line with its newline is built once and shared. Returns how many
  /// clients it was queued for.
  func enqueue(_ body: [UInt8], to ids: [UInt64], coalescingKey: String?) -> Int {
    var line = body
    line.append(UInt8(ascii: "\n"))
    let result = state.withLock { state -> (count: Int, wake: Bool) in
      var count = 0
      var wake = false
      for id in ids {
        let one = enqueueLocked(body, line: line, to: id, coalescingKey: coalescingKey, in: &state)
        if one.ok { count += 1 }
        if one.wake { wake = true }
      }
      return (count, wake)
    }
    if result.wake { wake() }
    return result.count
  }

  /// Queues `body` (or `line`, the same with its newline) for one client; the caller holds the lock.
  private func enqueueLocked(
    _ body: [UInt8], line: [UInt8], to id: UInt64, coalescingKey: String?, in state: inout State
  ) -> (ok: Bool, wake: Bool) {
    // Taken out of the dictionary (and put back below) so that the queue and the coalesced
    // events are uniquely referenced: appending then mutates in place instead of copying them
    // for every client and every fix.
    guard var client = state.clients.removeValue(forKey: id) else { return (false, false) }
    defer { state.clients[id] = client }
    guard client.dropReason == nil else { return (false, false) }
    let wasIdle = client.queue.isEmpty
    if let key = coalescingKey {
      if let pending = client.coalesced[key] {
        client.coalesced[key] = (body, pending.missed + 1)
        if let index = client.queue.lastIndex(where: {
          if case .coalesced(let other) = $0 { return other == key }
          return false
        }) {
          client.queue.remove(at: index)
        }
      } else {
        client.coalesced[key] = (body, 0)
      }
      client.queue.append(.coalesced(key))
      return (true, wasIdle)
    }
    client.backlogBytes += line.count
    client.backlogMessages += 1
    if client.backlogBytes > options.maxBacklogBytes
      || client.backlogMessages > options.maxBacklogMessages
    {
      client.dropReason = "slowClient"
      Log.event(
        "slowClient",
        [
          "client": String(id), "backlogBytes": String(client.backlogBytes),
          "backlogMessages": String(client.backlogMessages),
        ])
      client.queue = []
      client.coalesced = [:]
      return (false, true)
    }
    client.queue.append(.bytes(line, counted: true))
    return (true, wasIdle)
  }

  // MARK: I/O thread

  private func loop() {
    var readers: [UInt64: LineReader] = [:]
    var chunk = [UInt8](repeating: 0, count: 65_536)
    let wakeDescriptor = wakeReadFD.load(ordering: .acquiring)
    // After EMFILE/ENFILE, stop polling the listening socket for a moment instead of spinning.
    var acceptPausedUntil: ContinuousClock.Instant?
    while true {
      if let until = acceptPausedUntil, ContinuousClock.now >= until { acceptPausedUntil = nil }
      // Build the poll set from the current state.
      var descriptors: [pollfd] = [
        pollfd(fd: socket.fd, events: acceptPausedUntil == nil ? Int16(POLLIN) : 0, revents: 0),
        pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0),
      ]
      var ids: [UInt64] = []
      var toDrop: [(UInt64, String)] = []
      let stopping = state.withLock { state -> Bool in
        for (id, client) in state.clients {
          if let reason = client.dropReason {
            toDrop.append((id, reason))
            continue
          }
          if client.readClosed && client.requestsFinished && client.queue.isEmpty {
            toDrop.append((id, "closedByPeer"))
            continue
          }
          var events: Int32 = 0
          if !client.readClosed && client.pendingRequests < options.maxPendingRequests {
            events |= Int32(POLLIN)
          }
          if !client.queue.isEmpty { events |= Int32(POLLOUT) }
          descriptors.append(pollfd(fd: client.fd, events: Int16(events), revents: 0))
          ids.append(id)
        }
        return state.stopping
      }
      for (id, reason) in toDrop {
        removeClient(id, reason: reason)
        readers[id] = nil
      }
      if stopping { break }
      if !toDrop.isEmpty { continue }

      let ready = poll(
        &descriptors, nfds_t(descriptors.count), acceptPausedUntil == nil ? 1000 : 100)
      if ready < 0 {
        if errno == EINTR { continue }
        Log.event("pollFailed", ["error": String(cString: strerror(errno))])
        break
      }
      if descriptors[1].revents != 0 {
        var drain = [UInt8](repeating: 0, count: 256)
        while drain.withUnsafeMutableBytes({ read(wakeDescriptor, $0.baseAddress, $0.count) }) > 0 {
        }
      }
      if descriptors[0].revents & Int16(POLLIN) != 0, !acceptClients(&readers) {
        acceptPausedUntil = ContinuousClock.now + .milliseconds(100)
      }
      for (offset, id) in ids.enumerated() {
        let entry = descriptors[offset + 2]
        let revents = Int32(entry.revents)
        if revents == 0 { continue }
        if revents & Int32(POLLOUT) != 0 {
          flush(id)
        }
        if revents & (Int32(POLLIN) | Int32(POLLHUP) | Int32(POLLERR)) != 0 {
          readClient(
            id, fd: entry.fd, chunk: &chunk, readers: &readers,
            hangUp: revents & Int32(POLLHUP) != 0)
        }
      }
    }
    // Shutdown: send what is queued (e.g. the SHUTDOWN event) as far as each socket takes it
    // without waiting, then close every client and the listening socket.
    let remaining = state.withLock { Array($0.clients.keys) }
    for id in remaining { flush(id) }
    for id in remaining { removeClient(id, reason: "serverStopping") }
    socket.close()
    // The wake-up pipe stays open until deinit: a late wake() must never write to a reused fd.
    Log.event("stopped", ["path": socket.path])
    finishStopped()
  }

  /// Accepts every pending connection; `false` when out of descriptors (pause accepting).
  private func acceptClients(_ readers: inout [UInt64: LineReader]) -> Bool {
    while true {
      let fd = accept(socket.fd, nil, nil)
      if fd < 0 {
        let code = errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK { return true }
        Log.event("acceptFailed", ["error": String(cString: strerror(code))])
        return !(code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM)
      }
      ListeningSocket.setNonBlockingCloseOnExec(fd)
      let peer =
        PeerCredentials.read(socket: fd)
        ?? PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max)
      var stream: AsyncStream<LineReader.Item>?
      let admitted = state.withLock { state -> ClientConnection? in
        guard state.clients.count < state.maxClients else { return nil }
        let id = state.nextID
        state.nextID += 1
        let (lines, continuation) = AsyncStream.makeStream(of: LineReader.Item.self)
        stream = lines
        let connection = ClientConnection(id: id, core: self)
        state.clients[id] = Client(fd: fd, peer: peer, connection: connection, lines: continuation)
        return connection
      }
      guard let connection = admitted, let stream else {
        let max = state.withLock { $0.maxClients }
        let reply = Reply.error(
          .tooManyClients,
          message:
            "locationd already serves \(max) clients (--max-clients): close another client and retry"
        )
        var bytes = reply.json(id: nil).encoded
        bytes.append(UInt8(ascii: "\n"))
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        Glibc.close(fd)
        Log.event(
          "tooManyClients", ["pid": String(peer.pid), "uid": String(peer.uid), "max": String(max)])
        continue
      }
      readers[connection.id] = LineReader(maximumLength: options.maxLineLength)
      Log.event(
        "clientConnected",
        [
          "client": String(connection.id), "pid": String(peer.pid), "uid": String(peer.uid),
          "gid": String(peer.gid),
        ])
      let context = (connection: connection, peer: peer)
      Task { [self] in
        await self.serve(stream, connection: context.connection, peer: context.peer)
      }
    }
  }

  private func readClient(
    _ id: UInt64, fd: Int32, chunk: inout [UInt8], readers: inout [UInt64: LineReader], hangUp: Bool
  ) {
    var total = 0
    while total < 4 * chunk.count {
      let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if count > 0 {
        total += count
        guard var reader = readers[id] else { return }
        let items = reader.feed(chunk[0..<count])
        readers[id] = reader
        if !items.isEmpty {
          state.withLock { state in
            state.clients[id]?.pendingRequests += items.count
            for item in items { state.clients[id]?.lines.yield(item) }
          }
        }
        continue
      }
      if count < 0 && errno == EINTR { continue }
      if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
        if hangUp { requestCloseLocal(id, reason: "closedByPeer") }
        return
      }
      if count == 0 && !hangUp {
        // Half-close: answer what was asked, then close.
        state.withLock { state in
          state.clients[id]?.readClosed = true
          state.clients[id]?.lines.finish()
        }
        return
      }
      requestCloseLocal(id, reason: count == 0 ? "closedByPeer" : "readError")
      return
    }
  }

  private func requestCloseLocal(_ id: UInt64, reason: String) {
    state.withLock { state in
      if state.clients[id]?.dropReason == nil { state.clients[id]?.dropReason = reason }
    }
  }

  private func flush(_ id: UInt64) {
    state.withLock { state in
      // Taken out and put back, as in `enqueue`: the queue is then mutated in place.
      guard var client = state.clients.removeValue(forKey: id) else { return }
      defer { state.clients[id] = client }
      guard client.dropReason == nil else { return }
      while let head = client.queue.first {
        var bytes: [UInt8]
        var counted = false
        switch head {
        case .bytes(let data, let isCounted):
          bytes = data
          counted = isCounted
        case .coalesced(let key):
          guard let pending = client.coalesced.removeValue(forKey: key) else {
            client.queue.removeFirst()
            continue
          }
          bytes =
            pending.missed > 0
            ? JSONValue.appending(
              [JSONMember("missed", .int(Int64(pending.missed)))], toEncodedObject: pending.bytes)
            : pending.bytes
          bytes.append(UInt8(ascii: "\n"))
          client.queue[0] = .bytes(bytes, counted: false)
        }
        let offset = client.headOffset
        let written = bytes.withUnsafeBytes { buffer in
          send(
            client.fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset,
            Int32(MSG_NOSIGNAL))
        }
        if written < 0 {
          if errno == EINTR { continue }
          if errno == EAGAIN || errno == EWOULDBLOCK { return }
          client.dropReason = "writeError"
          return
        }
        client.headOffset += written
        if client.headOffset < bytes.count { return }
        client.headOffset = 0
        client.queue.removeFirst()
        if counted {
          client.backlogBytes -= bytes.count
          client.backlogMessages -= 1
        }
      }
    }
  }

  private func removeClient(_ id: UInt64, reason: String) {
    guard let client = state.withLock({ $0.clients.removeValue(forKey: id) }) else { return }
    client.lines.finish()
    Glibc.close(client.fd)
    Log.event("clientDisconnected", ["client": String(id), "reason": reason])
  }

  // MARK: Per-client request task

  private func serve(
    _ lines: AsyncStream<LineReader.Item>, connection: ClientConnection, peer: PeerCredentials
  ) async {
    for await item in lines {
      let json = await answer(item, connection: connection, peer: peer)
      var line = json.encoded
      line.append(UInt8(ascii: "\n"))
      let wakeNeeded = state.withLock { state -> Bool in
        guard var client = state.clients[connection.id] else { return false }
        client.pendingRequests -= 1
        var wake = client.pendingRequests == options.maxPendingRequests - 1
        if client.dropReason == nil {
          // Replies are never dropped; they count towards the backlog bound.
          wake = wake || client.queue.isEmpty
          client.queue.append(.bytes(line, counted: true))
          client.backlogBytes += line.count
          client.backlogMessages += 1
          if client.backlogBytes > options.maxBacklogBytes
            || client.backlogMessages > options.maxBacklogMessages
          {
            client.dropReason = "slowClient"
            wake = true
          }
        }
        state.clients[connection.id] = client
        return wake
      }
      if wakeNeeded { wake() }
    }
    let context = state.withLock { state -> ClientContext in
      state.clients[connection.id]?.requestsFinished = true
      return ClientContext(
        connection: connection, peer: peer,
        authorization: state.clients[connection.id]?.authorization ?? .notDetermined)
    }
    wake()
    await handler.clientDisconnected(context)
  }

  private func answer(_ item: LineReader.Item, connection: ClientConnection, peer: PeerCredentials)
    async
    -> JSONValue
  {
    let request: Request
    switch item {
    case .tooLong:
      Log.event(
        "lineTooLong", ["client": String(connection.id), "max": String(options.maxLineLength)])
      return Reply.error(
        .lineTooLong,
        message:
          "request line longer than \(options.maxLineLength) bytes was discarded: send shorter requests"
      ).json(id: nil)
    case .line(let bytes):
      do {
        request = try Request.parse(bytes)
      } catch {
        Log.event("badRequest", ["client": String(connection.id), "code": error.code.rawValue])
        return Reply.error(error.code, message: error.message).json(id: error.id)
      }
    }
    if request.command == .requestAuthorization {
      let (status, reason) = state.withLock { state -> (AuthorizationStatus, String) in
        let decision = state.authorizer.decide(for: peer)
        state.clients[connection.id]?.authorization = decision.status
        return decision
      }
      Log.event(
        "authorization",
        [
          "client": String(connection.id), "uid": String(peer.uid), "status": status.rawValue,
          "reason": reason,
        ])
      if status == .authorized {
        return Reply.authorization(.authorized).json(id: request.id)
      }
      let group = state.withLock { $0.authorizer.groupName }
      let hint =
        group.map {
          "run as root or as a member of group \($0) (usermod -aG \($0) USER, then log in again)"
        }
        ?? "run as root"
      return Reply.error(.notAuthorized, message: "uid \(peer.uid) is not authorized: \(hint)")
        .json(id: request.id)
    }
    let authorization = state.withLock {
      $0.clients[connection.id]?.authorization ?? .notDetermined
    }
    if authorization != .authorized && !request.command.isAllowedUnauthorized {
      let message =
        authorization == .denied
        ? "this client was denied authorization: run as root or as a member of the configured group"
        : "send {\"cmd\":\"request\"} first to ask for authorization"
      return Reply.error(.notAuthorized, message: message).json(id: request.id)
    }
    let context = ClientContext(connection: connection, peer: peer, authorization: authorization)
    let reply = await handler.handle(request, from: context)
    return reply.json(id: request.id)
  }
}

// MARK: - Threads

private final class ThreadBody {
  let body: () -> Void
  init(_ body: @escaping () -> Void) { self.body = body }
}

/// Runs `body` on a new detached POSIX thread; `false` when the thread could not be created.
func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
  let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
  var thread = pthread_t()
  let result = pthread_create(
    &thread, nil,
    { argument in
      guard let argument else { return nil }
      let box = Unmanaged<ThreadBody>.fromOpaque(argument).takeRetainedValue()
      box.body()
      return nil
    }, box)
  if result != 0 {
    Unmanaged<ThreadBody>.fromOpaque(box).release()
    return false
  }
  pthread_detach(thread)
  return true
}
