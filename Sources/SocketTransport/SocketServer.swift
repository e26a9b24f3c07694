import Queues
import CLinux
import Glibc
import SystemIO
import LocationModel
import LocationProtocol
import ServiceCore
import Synchronization
import LocationModel

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

// MARK: - Implementation

/// One queued write.
private enum OutEntry {
  /// Bytes to write (newline included); `counted` when part of the backlog bound.
  case bytes([UInt8], counted: Bool)
  /// The pending coalescible event with this key (its bytes are in `ClientState.coalesced`).
  case coalesced(String)
}

/// A coalescible event waiting in a slow client's queue, with how many it replaced.
private struct PendingEvent {
  var key: String
  var body: [UInt8]
  var missed: Int
}

/// What became of a line given to a client.
private enum Delivery {
  /// Written to the socket, or queued behind earlier data.
  case accepted
  /// The client has gone or is being dropped; nothing was queued.
  case gone
  /// This line made the client exceed its backlog bound or hit a write error: drop it.
  case drop(String)
}

/// Everything about one client that more than one thread touches, under the client's own lock.
private struct ClientState {
  /// The I/O thread has not closed the socket yet.
  var open = true
  // Outgoing: written directly by whichever thread produces a line while nothing is queued;
  // queued (and written by the I/O thread when the socket is writable) otherwise.
  var queue = FIFO<OutEntry>()
  /// Bytes of the first queue entry already written.
  var headOffset = 0
  var backlogBytes = 0
  var backlogMessages = 0
  var coalesced: [PendingEvent] = []
  // Incoming.
  /// Requests read, not yet answered.
  var requests = FIFO<LineReader.Item>()
  /// A task is answering `requests`; at most one per client, so replies keep request order.
  var serving = false
  /// Answering paused because data is queued (the client reads slowly); the I/O thread resumes
  /// it when the queue has drained.
  var waitingForDrain = false
  /// The peer closed its sending side: close once its requests are answered and sent.
  var readClosed = false
  /// Set by any thread; the I/O thread then closes the socket.
  var dropReason: String?
  var disconnectNotified = false
  /// The epoll events registered for the socket.
  var interest = EPOLLIN.rawValue
}

/// One connected client's socket and state, under the client's own lock.
///
/// Lock order: the server's registry lock is never taken while a client's lock is held.
final class ClientSlot: Sendable {
  let id: UInt64
  let fd: Int32
  let peer: PeerCredentials
  fileprivate let state: Mutex<ClientState>
  private let epollFD: Int32
  private let options: ServerOptions

  fileprivate init(id: UInt64, fd: Int32, peer: PeerCredentials, epollFD: Int32, options: ServerOptions) {
    self.id = id
    self.fd = fd
    self.peer = peer
    self.epollFD = epollFD
    self.options = options
    state = Mutex(ClientState())
  }

  /// Gives a line (`body` plus newline) to the client: written at once when nothing is queued
  /// and the socket takes it, queued otherwise.
  fileprivate func deliver(body: [UInt8], line: [UInt8], coalescingKey: String?) -> Delivery {
    state.withLock { state in
      let delivery = deliverLocked(body: body, line: line, key: coalescingKey, &state)
      updateInterest(&state)
      return delivery
    }
  }

  private func deliverLocked(body: [UInt8], line: [UInt8], key: String?, _ state: inout ClientState)
    -> Delivery
  {
    guard state.open, state.dropReason == nil else { return .gone }
    if state.queue.isEmpty {
      var offset = 0
      while offset < line.count {
        let written = line.withUnsafeBytes { buffer in
          send(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset, Int32(MSG_NOSIGNAL))
        }
        if written >= 0 {
          offset += written
          continue
        }
        if errno == EINTR { continue }
        if errno == EAGAIN || errno == EWOULDBLOCK { break }
        return dropLocked("writeError", &state)
      }
      if offset == line.count { return .accepted }
      if let key, offset == 0 {
        state.coalesced.append(PendingEvent(key: key, body: body, missed: 0))
        state.queue.append(.coalesced(key))
        return .accepted
      }
      // Partly written: the rest goes first, whatever its kind.
      state.headOffset = offset
      state.queue.append(.bytes(line, counted: key == nil))
      if key != nil { return .accepted }
      return countLocked(line.count, &state)
    }
    if let key {
      if let index = state.coalesced.firstIndex(where: { $0.key == key }) {
        state.coalesced[index].body = body
        state.coalesced[index].missed += 1
        state.queue.removeLast {
          if case .coalesced(let other) = $0 { return other == key }
          return false
        }
      } else {
        state.coalesced.append(PendingEvent(key: key, body: body, missed: 0))
      }
      state.queue.append(.coalesced(key))
      return .accepted
    }
    state.queue.append(.bytes(line, counted: true))
    return countLocked(line.count, &state)
  }

  /// Adds a queued line to the backlog; drops the client beyond the bounds.
  private func countLocked(_ bytes: Int, _ state: inout ClientState) -> Delivery {
    state.backlogBytes += bytes
    state.backlogMessages += 1
    guard
      state.backlogBytes > options.maxBacklogBytes
        || state.backlogMessages > options.maxBacklogMessages
    else { return .accepted }
    Log.event(
      "slowClient",
      [
        "client": String(id), "backlogBytes": String(state.backlogBytes),
        "backlogMessages": String(state.backlogMessages),
      ])
    return dropLocked("slowClient", &state)
  }

  private func dropLocked(_ reason: String, _ state: inout ClientState) -> Delivery {
    state.dropReason = reason
    state.queue.removeAll()
    state.coalesced = []
    return .drop(reason)
  }

  /// Marks the client for closing; `true` when this call did (the caller tells the I/O thread).
  fileprivate func markForClosing(_ reason: String) -> Bool {
    state.withLock { state in
      guard state.open, state.dropReason == nil else { return false }
      _ = dropLocked(reason, &state)
      updateInterest(&state)
      return true
    }
  }

  /// Writes queued data until the socket would block; `false` on a write error.
  fileprivate func flushLocked(_ state: inout ClientState) -> Bool {
    guard state.open, state.dropReason == nil else { return true }
    while let head = state.queue.first {
      var bytes: [UInt8]
      var counted = false
      switch head {
      case .bytes(let data, let isCounted):
        bytes = data
        counted = isCounted
      case .coalesced(let key):
        guard let index = state.coalesced.firstIndex(where: { $0.key == key }) else {
          _ = state.queue.popFirst()
          continue
        }
        let pending = state.coalesced.remove(at: index)
        bytes =
          pending.missed > 0
          ? JSONValue.appending(
            [JSONMember("missed", .int(Int64(pending.missed)))], toEncodedObject: pending.body)
          : pending.body
        bytes.append(UInt8(ascii: "\n"))
        state.queue.replaceFirst(.bytes(bytes, counted: false))
      }
      let offset = state.headOffset
      let written = bytes.withUnsafeBytes { buffer in
        send(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset, Int32(MSG_NOSIGNAL))
      }
      if written < 0 {
        if errno == EINTR { continue }
        if errno == EAGAIN || errno == EWOULDBLOCK { return true }
        _ = dropLocked("writeError", &state)
        return false
      }
      state.headOffset += written
      if state.headOffset < bytes.count { return true }
      state.headOffset = 0
      _ = state.queue.popFirst()
      if counted {
        state.backlogBytes -= bytes.count
        state.backlogMessages -= 1
      }
    }
    return true
  }

  /// Registers the epoll events the state calls for: readable while requests may be read,
  /// writable while data is queued.
  fileprivate func updateInterest(_ state: inout ClientState) {
    guard state.open else { return }
    var wanted: UInt32 = 0
    if !state.readClosed && state.dropReason == nil
      && state.requests.count < options.maxPendingRequests
    {
      wanted |= EPOLLIN.rawValue
    }
    if !state.queue.isEmpty { wanted |= EPOLLOUT.rawValue }
    guard wanted != state.interest else { return }
    var event = epoll_event()
    event.events = wanted
    event.data.u64 = id
    if epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event) == 0 { state.interest = wanted }
  }

  /// The peer sent all it will and everything is answered and written.
  fileprivate static func isFinished(_ state: ClientState) -> Bool {
    state.readClosed && !state.serving && state.requests.isEmpty && state.queue.isEmpty
  }
}

private struct Registry {
  var clients: [UInt64: ClientConnection] = [:]
  var maxClients: Int
  /// Clients to close, with the reason (set by threads other than the I/O thread).
  var closing: [(UInt64, String)] = []
  var started = false
  var stopping = false
  var stopped = false
  var waiters: [CheckedContinuation<Void, Never>] = []
}

/// epoll tokens of the two descriptors that are not clients (client ids start at 1).
private let listenToken: UInt64 = 0
private let wakeToken = UInt64.max

final class ServerCore: Sendable {
  private let socket: ListeningSocket
  private let handler: any RequestHandler
  fileprivate let options: ServerOptions
  private let registry: Mutex<Registry>
  private let epollFD: Int32
  /// An eventfd: a write makes the I/O thread look at `Registry.closing` and `stopping`.
  private let wakeFD: Int32
  /// Why `epoll_create1` and `eventfd` failed in `init`, reported by `start()` (`errno` read
  /// later would describe some other call).
  private let epollErrno: Int32
  private let wakeErrno: Int32

  init(socket: ListeningSocket, handler: any RequestHandler, options: ServerOptions) {
    self.socket = socket
    self.handler = handler
    self.options = options
    registry = Mutex(Registry(maxClients: options.maxClients))
    epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
    epollErrno = epollFD < 0 ? errno : 0
    wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    wakeErrno = wakeFD < 0 ? errno : 0
  }

  deinit {
    // Closed only here: a late wake() must never write to a reused descriptor.
    for fd in [epollFD, wakeFD] where fd >= 0 { Glibc.close(fd) }
  }

  func start() throws(ListenError) {
    let alreadyStarted = registry.withLock { registry in
      defer { registry.started = true }
      return registry.started
    }
    if alreadyStarted { return }
    guard epollFD >= 0 else { throw .systemCall("epoll_create1", path: socket.path, errno: epollErrno) }
    guard wakeFD >= 0 else { throw .systemCall("eventfd", path: socket.path, errno: wakeErrno) }
    for (fd, token) in [(socket.fd, listenToken), (wakeFD, wakeToken)] {
      var event = epoll_event()
      event.events = EPOLLIN.rawValue
      event.data.u64 = token
      guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else {
        throw .systemCall("epoll_ctl", path: socket.path, errno: errno)
      }
    }
    do {
      try SystemIO.startThread { [self] in self.loop() }
    } catch {
      throw .systemCall("pthread_create", path: socket.path, errno: error.code)
    }
    Log.event(
      "listening", ["path": socket.path, "activated": socket.isActivated ? "true" : "false"])
  }

  func stop() {
    let wasStarted = registry.withLock { registry -> Bool in
      registry.stopping = true
      if !registry.started {
        registry.stopped = true
        return false
      }
      return true
    }
    if wasStarted { wake() } else { finishStopped() }
  }

  func waitUntilStopped() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = registry.withLock { registry -> Bool in
        if registry.stopped { return true }
        registry.waiters.append(continuation)
        return false
      }
      if done { continuation.resume() }
    }
  }

  private func finishStopped() {
    let waiters = registry.withLock { registry -> [CheckedContinuation<Void, Never>] in
      registry.stopped = true
      defer { registry.waiters = [] }
      return registry.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  func setMaxClients(_ maxClients: Int) { registry.withLock { $0.maxClients = max(1, maxClients) } }
  var clientCount: Int { registry.withLock { $0.clients.count } }
  func connections() -> [ClientConnection] {
    registry.withLock { Array($0.clients.values) }.filter(\.isConnected).sorted { $0.id < $1.id }
  }

  private func wake() {
    var one: UInt64 = 1
    _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
  }

  /// Has the I/O thread close `id` (from any thread).
  fileprivate func scheduleClose(_ id: UInt64, reason: String) {
    registry.withLock { $0.closing.append((id, reason)) }
    wake()
  }

  func requestClose(_ slot: ClientSlot, reason: String) {
    if slot.markForClosing(reason) { scheduleClose(slot.id, reason: reason) }
  }

  /// Gives the same encoded JSON (no newline) to every client in `connections`; the line with
  /// its newline is built once and shared. Returns how many clients took it.
  func deliver(_ body: [UInt8], to connections: [ClientConnection], coalescingKey: String?) -> Int {
    var line = body
    line.append(UInt8(ascii: "\n"))
    var count = 0
    for connection in connections {
      switch connection.slot.deliver(body: body, line: line, coalescingKey: coalescingKey) {
      case .accepted: count += 1
      case .gone: break
      case .drop(let reason): scheduleClose(connection.id, reason: reason)
      }
    }
    return count
  }

  // MARK: I/O thread

  /// The event loop: accepts, reads requests, writes what could not be written at once, and
  /// closes clients. Only this thread closes client sockets, so that no other thread can write
  /// to a descriptor number that has been reused.
  private func loop() {
    var clients: [UInt64: (connection: ClientConnection, reader: LineReader)] = [:]
    var chunk = [UInt8](repeating: 0, count: 65_536)
    var events = [epoll_event](repeating: epoll_event(), count: 256)
    // After EMFILE/ENFILE, stop watching the listening socket for a moment instead of spinning.
    var acceptPausedUntil: ContinuousClock.Instant?
    // One descriptor held in reserve: when none is left, it is freed to take each waiting client
    // off the queue with an error reply instead of leaving it hanging (the accept4(2) advice).
    var spareFD = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
    var shortage = false
    defer { if spareFD >= 0 { Glibc.close(spareFD) } }
    while true {
      let (closing, stopping) = registry.withLock { registry in
        defer { registry.closing = [] }
        return (registry.closing, registry.stopping)
      }
      for (id, reason) in closing { close(id, reason: reason, &clients) }
      if stopping { break }
      if let until = acceptPausedUntil, ContinuousClock.now >= until {
        acceptPausedUntil = nil
        setListening(true)
      }
      let count = epoll_wait(
        epollFD, &events, Int32(events.count), acceptPausedUntil == nil ? -1 : 100)
      if count < 0 {
        if errno == EINTR { continue }
        Log.event("pollFailed", ["error": String(cString: strerror(errno))])
        break
      }
      for index in 0..<Int(count) {
        let token = events[index].data.u64
        let flags = events[index].events
        switch token {
        case listenToken:
          if !acceptClients(&clients, spareFD: &spareFD, shortage: &shortage) {
            acceptPausedUntil = ContinuousClock.now + .milliseconds(100)
            setListening(false)
          }
        case wakeToken:
          var value: UInt64 = 0
          _ = read(wakeFD, &value, MemoryLayout<UInt64>.size)
        default:
          guard let connection = clients[token]?.connection else { continue }  // already closed
          if flags & EPOLLOUT.rawValue != 0, !flush(connection, &clients) { continue }
          let readable = EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue
          if flags & readable != 0 {
            readClient(
              token, chunk: &chunk, clients: &clients, hangUp: flags & EPOLLHUP.rawValue != 0)
          }
        }
      }
    }
    // Shutdown: write what is queued (e.g. the SHUTDOWN event) as far as each socket takes it
    // without waiting, then close every client and the listening socket.
    for (connection, _) in clients.values {
      connection.slot.state.withLock { _ = connection.slot.flushLocked(&$0) }
    }
    for id in Array(clients.keys) { close(id, reason: "serverStopping", &clients) }
    socket.close()
    Log.event("stopped", ["path": socket.path])
    finishStopped()
  }

  /// Writes the client's queue as far as the socket takes it; closes the client on a write error
  /// or when it half-closed and everything is sent. `false` when it was closed.
  private func flush(
    _ connection: ClientConnection,
    _ clients: inout [UInt64: (connection: ClientConnection, reader: LineReader)]
  ) -> Bool {
    let slot = connection.slot
    let (ok, finished, resume) = slot.state.withLock { state in
      let ok = slot.flushLocked(&state)
      var resume = false
      if ok && state.waitingForDrain && state.queue.isEmpty {
        // The client has read everything: answer its next requests.
        state.waitingForDrain = false
        resume = !state.requests.isEmpty && !state.serving && state.dropReason == nil
        if resume { state.serving = true }
      }
      slot.updateInterest(&state)
      return (ok, ClientSlot.isFinished(state), resume)
    }
    if resume { Task { [self] in await self.serve(connection) } }
    guard ok && !finished else {
      close(connection.id, reason: ok ? "closedByPeer" : "writeError", &clients)
      return false
    }
    return true
  }

  private func setListening(_ on: Bool) {
    var event = epoll_event()
    event.events = on ? EPOLLIN.rawValue : 0
    event.data.u64 = listenToken
    _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, socket.fd, &event)
  }

  /// Accepts every pending connection; `false` when out of descriptors (pause accepting).
  ///
  /// Out of descriptors, each waiting client is accepted on the reserved `spareFD`, told
  /// `unavailable` and closed, so that it does not hang; the shortage is logged once, and its end
  /// once (`shortage` says whether it is going on).
  private func acceptClients(
    _ clients: inout [UInt64: (connection: ClientConnection, reader: LineReader)],
    spareFD: inout Int32, shortage: inout Bool
  ) -> Bool {
    while true {
      let fd = accept(socket.fd, nil, nil)
      if fd < 0 {
        let code = errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK { return true }
        if !shortage {
          Log.event("acceptFailed", ["error": String(cString: strerror(code))])
          shortage = true
        }
        if code == EMFILE || code == ENFILE, spareFD >= 0 {
          Glibc.close(spareFD)
          let refused = accept(socket.fd, nil, nil)
          if refused >= 0 {
            var bytes = Reply.error(
              .unavailable,
              message: "locationd has no file descriptor left for a new client: retry later"
            ).json(id: nil).encoded
            bytes.append(UInt8(ascii: "\n"))
            try? SystemIO.sendAll(refused, bytes, flags: Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            Glibc.close(refused)
          }
          spareFD = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
          if refused >= 0 { continue }
        }
        return !(code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM)
      }
      if shortage {
        shortage = false
        Log.event("acceptRecovered")
      }
      ListeningSocket.setNonBlockingCloseOnExec(fd)
      let peer =
        PeerCredentials.read(socket: fd)
        ?? PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max)
      let admitted = registry.withLock { registry -> ClientConnection? in
        guard registry.clients.count < registry.maxClients else { return nil }
        let id = ConnectionNumber.next()
        let slot = ClientSlot(id: id, fd: fd, peer: peer, epollFD: epollFD, options: options)
        let connection = ClientConnection(slot: slot, core: self)
        registry.clients[id] = connection
        return connection
      }
      guard let connection = admitted else {
        let max = registry.withLock { $0.maxClients }
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
      var event = epoll_event()
      event.events = EPOLLIN.rawValue
      event.data.u64 = connection.id
      guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else {
        Log.event("acceptFailed", ["error": "epoll_ctl: \(String(cString: strerror(errno)))"])
        registry.withLock { $0.clients[connection.id] = nil }
        connection.slot.state.withLock { $0.open = false }
        Glibc.close(fd)
        continue
      }
      clients[connection.id] = (connection, LineReader(maximumLength: options.maxLineLength))
      Log.event(
        "clientConnected",
        [
          "client": String(connection.id), "pid": String(peer.pid), "uid": String(peer.uid),
          "gid": String(peer.gid),
        ])
    }
  }

  /// Reads what the client sent (at most four chunks, fewer once enough requests wait) and
  /// hands complete lines to the client's request task, starting one when none runs.
  private func readClient(
    _ id: UInt64, chunk: inout [UInt8],
    clients: inout [UInt64: (connection: ClientConnection, reader: LineReader)], hangUp: Bool
  ) {
    guard let connection = clients[id]?.connection else { return }
    let slot = connection.slot
    var total = 0
    while total < 4 * chunk.count {
      let count = chunk.withUnsafeMutableBytes { read(slot.fd, $0.baseAddress, $0.count) }
      if count > 0 {
        total += count
        guard let items = clients[id]?.reader.feed(chunk[0..<count]), !items.isEmpty else {
          continue
        }
        let (startTask, paused) = slot.state.withLock { state -> (Bool, Bool) in
          for item in items { state.requests.append(item) }
          let startTask = !state.serving && !state.waitingForDrain
          if startTask { state.serving = true }
          slot.updateInterest(&state)
          return (startTask, state.interest & EPOLLIN.rawValue == 0)
        }
        if startTask { Task { [self] in await self.serve(connection) } }
        if paused && !hangUp { return }
        continue
      }
      if count < 0 && errno == EINTR { continue }
      if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
        if hangUp { close(id, reason: "closedByPeer", &clients) }
        return
      }
      if count == 0 && !hangUp {
        // Half-close: answer what was asked, then close. An unterminated last line is a request
        // when it is complete JSON; a fragment (the client stopped mid-request) is dropped.
        let last = (clients[id]?.reader.finish() ?? []).filter { item in
          guard case .line(let bytes) = item else { return false }
          return (try? JSONValue.parse(bytes)) != nil
        }
        let (finished, startTask) = slot.state.withLock { state -> (Bool, Bool) in
          for item in last { state.requests.append(item) }
          let startTask = !last.isEmpty && !state.serving && !state.waitingForDrain
          if startTask { state.serving = true }
          state.readClosed = true
          slot.updateInterest(&state)
          return (ClientSlot.isFinished(state), startTask)
        }
        if startTask { Task { [self] in await self.serve(connection) } }
        if finished { close(id, reason: "closedByPeer", &clients) }
        return
      }
      close(id, reason: count == 0 ? "closedByPeer" : "readError", &clients)
      return
    }
  }

  /// Closes a client's socket (I/O thread only) and, unless its request task still runs (which
  /// then does it), tells the handler.
  private func close(
    _ id: UInt64, reason: String,
    _ clients: inout [UInt64: (connection: ClientConnection, reader: LineReader)]
  ) {
    guard let connection = clients.removeValue(forKey: id)?.connection else { return }
    let slot = connection.slot
    let (why, notify) = slot.state.withLock { state -> (String, Bool) in
      _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, slot.fd, nil)
      Glibc.close(slot.fd)
      state.open = false
      if state.dropReason == nil { state.dropReason = reason }
      state.queue.removeAll()
      state.coalesced = []
      let notify = !state.serving && !state.disconnectNotified
      if notify { state.disconnectNotified = true }
      return (state.dropReason ?? reason, notify)
    }
    registry.withLock { $0.clients[id] = nil }
    Log.event("clientDisconnected", ["client": String(id), "reason": why])
    if notify {
      let context = ClientContext(connection: connection, peer: slot.peer)
      Task { [handler] in await handler.clientDisconnected(context) }
    }
  }

  // MARK: Request tasks

  /// What a request task does next.
  private enum Next {
    case answer(LineReader.Item)
    /// Data is queued for the client: stop until the I/O thread resumes it.
    case paused
    /// Nothing left: `notify` when the client has gone (tell the handler), `finished` when it
    /// half-closed and everything is sent (close it).
    case done(notify: Bool, finished: Bool)
  }

  /// Answers the client's requests in order until none is left, then ends: no task waits for
  /// an idle client (each would keep its task allocator's memory).
  private func serve(_ connection: ClientConnection) async {
    let slot = connection.slot
    while true {
      let next = slot.state.withLock { state -> Next in
        if !state.requests.isEmpty && !state.queue.isEmpty && state.open
          && state.dropReason == nil
        {
          // The socket did not take everything: wait until it has (the I/O thread resumes this
          // client when its queue has drained) instead of piling up replies. Requests stay
          // unread meanwhile (see updateInterest).
          state.serving = false
          state.waitingForDrain = true
          return .paused
        }
        if let item = state.requests.popFirst() {
          slot.updateInterest(&state)
          return .answer(item)
        }
        state.serving = false
        let notify = !state.open && !state.disconnectNotified
        if notify { state.disconnectNotified = true }
        return .done(notify: notify, finished: state.open && ClientSlot.isFinished(state))
      }
      switch next {
      case .answer(let item):
        let json = await answer(item, connection: connection)
        var body = json.encoded
        if body.count >= options.maxBacklogBytes {
          // A client could never receive it (its backlog bound): say so instead.
          Log.event(
            "replyTooLarge", ["client": String(connection.id), "bytes": String(body.count)])
          body = Reply.error(
            .limitExceeded,
            message:
              "the reply would be \(body.count) bytes, more than the \(options.maxBacklogBytes) bytes a client may have pending: ask for less (e.g. remove annotations)"
          ).json(id: json["id"].flatMap { RequestID(json: $0) }).encoded
        }
        var line = body
        line.append(UInt8(ascii: "\n"))
        // Replies are never coalesced or dropped; they count towards the backlog bound.
        if case .drop(let reason) = slot.deliver(body: body, line: line, coalescingKey: nil) {
          scheduleClose(connection.id, reason: reason)
        }
      case .paused:
        return
      case .done(let notify, let finished):
        if finished { scheduleClose(connection.id, reason: "closedByPeer") }
        if notify {
          await handler.clientDisconnected(
            ClientContext(connection: connection, peer: slot.peer))
        }
        return
      }
    }
  }

  private func answer(_ item: LineReader.Item, connection: ClientConnection) async -> JSONValue {
    let peer = connection.slot.peer
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
    // Authorization, `request` included, is the handler's decision: the transport passes the
    // peer's credentials with every request.
    let context = ClientContext(connection: connection, peer: peer)
    let reply = await handler.handle(request, from: context)
    return reply.json(id: request.id)
  }
}
