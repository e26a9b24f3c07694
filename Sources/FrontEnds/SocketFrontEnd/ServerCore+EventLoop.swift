import CLinux
import Glibc
import LocationModel
import LocationProtocol
import Queues
import ServiceCore
import Synchronization
import SystemIO

extension ServerCore {
  // MARK: I/O thread

  /// The event loop: accepts, reads requests, writes what could not be written at once, and
  /// closes clients. Only this thread closes client sockets, so that no other thread can write
  /// to a descriptor number that has been reused.
  func loop() {
    var clients: [UInt64: (connection: ClientConnection, reader: LineReader)] = [:]
    var chunk = [UInt8](repeating: 0, count: 65_536)
    var events = [epoll_event](repeating: epoll_event(), count: 256)
    // After EMFILE/ENFILE, stop watching the listening socket for a moment instead of spinning.
    var acceptPausedUntil: ContinuousClock.Instant?
    // One descriptor held in reserve: when none is left, it is freed to take each waiting client
    // off the queue with an error reply instead of leaving it hanging (the accept4(2) advice).
    var spareFD = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
    var shortage = AcceptShortage()
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
          if !acceptClients(&clients, chunk: &chunk, spareFD: &spareFD, shortage: &shortage) {
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

  /// Tells a client accepted on `fd` that no descriptor is left for it (`unavailable`) and
  /// closes it, so that it does not wait unanswered.
  private func refuseForShortage(_ fd: Int32) {
    var bytes = Reply.error(
      .unavailable, message: "locationd has no file descriptor left for a new client: retry later"
    ).json(id: nil).encoded
    bytes.append(UInt8(ascii: "\n"))
    try? SystemIO.sendAll(fd, bytes, flags: Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
    Glibc.close(fd)
  }

  private func setListening(_ on: Bool) {
    var event = epoll_event()
    event.events = on ? EPOLLIN.rawValue : 0
    event.data.u64 = listenToken
    _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, socket.fd, &event)
  }

  /// Accepts the pending connections, at most ``acceptBatch`` of them: the listening socket
  /// stays readable for the rest, which the next round of the loop accepts after it has read
  /// the clients already connected (a connect storm cannot starve their requests). `false`
  /// when out of descriptors (pause accepting).
  ///
  /// A client accepted while fewer than ``DescriptorReserve/count`` descriptors are free is
  /// told `unavailable` and closed, so that it does not hang. Out of descriptors all the same
  /// (the limit lowered from outside), each waiting client is accepted on the reserved `spareFD`
  /// and refused alike. `shortage` logs each shortage's start and end (throttled).
  private func acceptClients(
    _ clients: inout [UInt64: (connection: ClientConnection, reader: LineReader)],
    chunk: inout [UInt8], spareFD: inout Int32, shortage: inout AcceptShortage
  ) -> Bool {
    for _ in 0..<Self.acceptBatch {
      let fd = accept(socket.fd, nil, nil)
      if fd < 0 {
        let code = errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK { return true }
        shortage.begin(error: String(cString: strerror(code)))
        if code == EMFILE || code == ENFILE, spareFD >= 0 {
          Glibc.close(spareFD)
          let refused = accept(socket.fd, nil, nil)
          if refused >= 0 { refuseForShortage(refused) }
          spareFD = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
          if refused >= 0 { continue }
        }
        return !(code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM)
      }
      // The descriptors the daemon needs for its own work stay free (see DescriptorReserve).
      guard DescriptorReserve.isKept() else {
        shortage.begin(
          error: String(cString: strerror(EMFILE)),
          detail: "keeping \(DescriptorReserve.count) descriptors free below the limit of "
            + "\(DescriptorReserve.softLimit().map(String.init) ?? "?")")
        refuseForShortage(fd)
        continue
      }
      shortage.end()
      ListeningSocket.setNonBlockingCloseOnExec(fd)
      let peer =
        PeerCredentials.read(socket: fd)
        ?? PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max)
      let admit = { [self] () -> ClientConnection? in
        registry.withLock { registry -> ClientConnection? in
          guard registry.clients.count < registry.maxClients else { return nil }
          let id = ConnectionNumber.next()
          let slot = ClientSlot(id: id, fd: fd, peer: peer, epollFD: epollFD, options: options)
          let connection = ClientConnection(slot: slot, core: self)
          registry.clients[id] = connection
          return connection
        }
      }
      var admitted = admit()
      // Clients that have gone (connected and closed, often before they were even accepted)
      // still hold places until their hang-up is read: read it now rather than refuse someone.
      if admitted == nil, closeHungUp(&clients, chunk: &chunk) > 0 { admitted = admit() }
      guard let connection = admitted else {
        let (max, refusals) = registry.withLock { registry -> (Int, Int) in
          registry.refusedFull += 1
          return (registry.maxClients, registry.refusedFull)
        }
        let reply = Reply.error(
          .tooManyClients,
          message:
            "locationd already serves \(max) clients (--max-clients): close another client and retry"
        )
        var bytes = reply.json(id: nil).encoded
        bytes.append(UInt8(ascii: "\n"))
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        Glibc.close(fd)
        // A connect loop against a full server costs a few lines, not one per attempt.
        if LogThrottle.powersOfTwo.logs(refusals) {
          Log.event(
            "tooManyClients",
            ["pid": String(peer.pid), "uid": String(peer.uid), "max": String(max), "refusals": String(refusals)])
        }
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
    return true
  }

  /// Most connections accepted in one round of the event loop.
  static var acceptBatch: Int { 32 }

  /// Reads the hang-up of every client whose peer has closed its socket (`POLLHUP`, which poll
  /// reports unasked: both directions shut; a client that only shut down its sending side still
  /// waits for replies and stays), as its `EPOLLHUP` would: what it sent is still answered, and it
  /// is closed. Returns how many were closed.
  private func closeHungUp(
    _ clients: inout [UInt64: (connection: ClientConnection, reader: LineReader)], chunk: inout [UInt8]
  ) -> Int {
    let ids = Array(clients.keys)
    var polled = ids.compactMap { id in
      clients[id].map { pollfd(fd: $0.connection.slot.fd, events: 0, revents: 0) }
    }
    guard polled.count == ids.count, poll(&polled, nfds_t(polled.count), 0) > 0 else { return 0 }
    var closed = 0
    for (id, entry) in zip(ids, polled) where entry.revents & Int16(POLLHUP | POLLERR) != 0 {
      readClient(id, chunk: &chunk, clients: &clients, hangUp: true)
      if clients[id] == nil { closed += 1 }
    }
    return closed
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
}

/// The accept loop's shortages of descriptors, for the log: `acceptFailed` when one begins and
/// `acceptRecovered` when it ends, for the 1st, 2nd, 4th, 8th... shortage only (with the count),
/// so that clients coming and going at the limit cannot flood the log.
struct AcceptShortage {
  /// A shortage is going on.
  private(set) var isOn = false
  private var count = 0
  private var logged = false

  /// A connection could not be served for want of descriptors: `error` and `detail` say why.
  mutating func begin(error: String, detail: String? = nil) {
    guard !isOn else { return }
    isOn = true
    count += 1
    logged = LogThrottle.powersOfTwo.logs(count)
    guard logged else { return }
    if let detail {
      Log.event("acceptFailed", ["error": error, "detail": detail, "shortages": String(count)])
    } else {
      Log.event("acceptFailed", ["error": error, "shortages": String(count)])
    }
  }

  /// A connection was served again.
  mutating func end() {
    guard isOn else { return }
    isOn = false
    if logged { Log.event("acceptRecovered", ["shortages": String(count)]) }
  }
}
