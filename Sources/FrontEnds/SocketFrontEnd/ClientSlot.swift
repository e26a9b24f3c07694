import CLinux
import Glibc
import LocationModel
import LocationProtocol
import Queues
import ServiceCore
import Synchronization
import SystemIO

// One client's socket, its outgoing queue (with coalescing and the backlog bound) and its
// incoming requests, shared by the I/O thread, request tasks and broadcasting threads.

/// What became of a line given to a client.
enum Delivery {
  /// Written to the socket, or queued behind earlier data.
  case accepted
  /// The client has gone or is being dropped; nothing was queued.
  case gone
  /// This line made the client exceed its backlog bound or hit a write error: drop it.
  case drop(String)
}

/// Everything about one client that more than one thread touches, under the client's own lock.
struct ClientState {
  /// The I/O thread has not closed the socket yet.
  var open = true
  // Outgoing: written directly by whichever thread produces a line while nothing is queued;
  // queued (and written by the I/O thread when the socket is writable) otherwise. Coalescing,
  // the backlog bounds and bursts are the shared ``OutboundQueue``'s.
  var queue: OutboundQueue
  // Incoming.
  /// Requests read, not yet answered.
  var requests = FIFO<LineReader.Item>()
  /// A task is answering `requests`; at most one per client, so replies keep request order.
  var serving = false
  /// A request was taken from `requests` and its reply is not written or queued yet.
  var answering = false
  /// Events to write right after that reply (``ClientSlot/deliverAfterReply(body:line:)``).
  var afterReply: [(body: [UInt8], line: [UInt8])] = []
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

  init(limits: OutboundLimits) {
    queue = OutboundQueue(limits: limits, terminator: [UInt8(ascii: "\n")])
  }
}

/// One connected client's socket and state, under the client's own lock.
///
/// Lock order: the server's registry lock is never taken while a client's lock is held.
final class ClientSlot: Sendable {
  let id: UInt64
  let fd: Int32
  let peer: PeerCredentials
  let state: Mutex<ClientState>
  /// Lines refused as malformed JSON or requests (`badRequest`) and as too long (`lineTooLong`),
  /// and replies replaced for their size (`replyTooLarge`), so far: their log lines are
  /// throttled per connection (``LogThrottle/powersOfTwo``).
  let badRequests = Atomic<Int>(0)
  let tooLongLines = Atomic<Int>(0)
  let tooLargeReplies = Atomic<Int>(0)
  private let epollFD: Int32
  private let options: ServerOptions

  init(id: UInt64, fd: Int32, peer: PeerCredentials, epollFD: Int32, options: ServerOptions) {
    self.id = id
    self.fd = fd
    self.peer = peer
    self.epollFD = epollFD
    self.options = options
    state = Mutex(
      ClientState(
        limits: OutboundLimits(
          maxBytes: options.maxBacklogBytes, maxMessages: options.maxBacklogMessages)))
  }

  /// Gives a line (`body` plus newline) to the client: written at once when nothing is queued
  /// and the socket takes it, queued otherwise.
  /// While events are held for after the reply being answered, a later event waits behind them,
  /// so that events keep their order.
  func deliver(body: [UInt8], line: [UInt8], coalescingKey: String?) -> Delivery {
    state.withLock { state in
      if !state.afterReply.isEmpty {
        guard state.open, state.dropReason == nil else { return .gone }
        state.afterReply.append((body, line))
        return .accepted
      }
      let delivery = deliverLocked(body: body, line: line, key: coalescingKey, &state)
      updateInterest(&state)
      return delivery
    }
  }

  /// Gives events produced together in one go (the `REGION` events of one fix), in order and
  /// never coalesced. The backlog bound is applied once, before the burst: a client whose
  /// backlog is within the bounds (it keeps reading) gets the whole burst even when the burst
  /// alone is larger than the bounds; one already beyond them is dropped as a slow client. Any
  /// later line counts against the bounds again, so a client that does not drain the burst is
  /// dropped at the next one. The burst's size is bounded by its producer (one event per region).
  func deliverBurst(_ lines: [(body: [UInt8], line: [UInt8])]) -> Delivery {
    state.withLock { state in
      guard state.open, state.dropReason == nil else { return .gone }
      guard state.queue.beginBurst() else { return slowLocked(&state) }
      defer { state.queue.endBurst() }
      var delivery = Delivery.accepted
      for item in lines {
        if !state.afterReply.isEmpty {
          state.afterReply.append(item)
          continue
        }
        delivery = deliverLocked(body: item.body, line: item.line, key: nil, &state)
        guard case .accepted = delivery else { break }
      }
      updateInterest(&state)
      return delivery
    }
  }

  /// Gives the reply to the request being answered, then the events held for after it, in one
  /// critical section: nothing can come between them.
  func deliverReply(body: [UInt8], line: [UInt8]) -> Delivery {
    state.withLock { state in
      state.answering = false
      var delivery = deliverLocked(body: body, line: line, key: nil, &state)
      let held = state.afterReply
      state.afterReply = []
      for event in held {
        guard case .accepted = delivery else { break }
        delivery = deliverLocked(body: event.body, line: event.line, key: nil, &state)
      }
      updateInterest(&state)
      return delivery
    }
  }

  /// Gives a line after the reply being answered now (held until ``deliverReply(body:line:)``),
  /// or at once when no request is being answered.
  func deliverAfterReply(body: [UInt8], line: [UInt8]) -> Delivery {
    state.withLock { state in
      guard state.open, state.dropReason == nil else { return .gone }
      if state.answering {
        state.afterReply.append((body, line))
        return .accepted
      }
      let delivery = deliverLocked(body: body, line: line, key: nil, &state)
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
        let sent: Int?
        do {
          sent = try SystemIO.sendSome(fd, line, from: offset, flags: Int32(MSG_NOSIGNAL))
        } catch {
          return dropLocked("writeError", &state)
        }
        guard let sent else { break }
        offset += sent
      }
      if offset == line.count { return .accepted }
      if let key, offset == 0 {
        state.queue.coalesce(key: key, body: body)
        return .accepted
      }
      // Partly written: the rest goes first, whatever its kind.
      if state.queue.append(line, counted: key == nil, written: offset) { return .accepted }
      return slowLocked(&state)
    }
    if let key {
      state.queue.coalesce(key: key, body: body)
      return .accepted
    }
    if state.queue.append(line) { return .accepted }
    return slowLocked(&state)
  }

  /// Drops the client as too slow (its backlog exceeds the bounds).
  private func slowLocked(_ state: inout ClientState) -> Delivery {
    state.queue.logSlowClient(id)
    return dropLocked("slowClient", &state)
  }

  private func dropLocked(_ reason: String, _ state: inout ClientState) -> Delivery {
    state.dropReason = reason
    state.queue.removeAll()
    state.afterReply = []
    return .drop(reason)
  }

  /// Marks the client for closing; `true` when this call did (the caller tells the I/O thread).
  func markForClosing(_ reason: String) -> Bool {
    state.withLock { state in
      guard state.open, state.dropReason == nil else { return false }
      _ = dropLocked(reason, &state)
      updateInterest(&state)
      return true
    }
  }

  /// Writes queued data until the socket would block; `false` on a write error.
  func flushLocked(_ state: inout ClientState) -> Bool {
    guard state.open, state.dropReason == nil else { return true }
    while let head = state.queue.first() {
      let sent: Int?
      do {
        sent = try SystemIO.sendSome(fd, head.bytes, from: head.offset, flags: Int32(MSG_NOSIGNAL))
      } catch {
        _ = dropLocked("writeError", &state)
        return false
      }
      guard let sent else { return true }
      guard state.queue.wrote(sent) else { return true }
    }
    return true
  }

  /// Registers the epoll events the state calls for: readable while requests may be read,
  /// writable while data is queued.
  func updateInterest(_ state: inout ClientState) {
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
  static func isFinished(_ state: ClientState) -> Bool {
    state.readClosed && !state.serving && state.requests.isEmpty && state.queue.isEmpty
  }
}
