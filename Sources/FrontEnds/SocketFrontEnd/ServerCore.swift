import CLinux
import Glibc
import LocationModel
import LocationProtocol
import Queues
import ServiceCore
import Synchronization
import SystemIO

// The server behind ``SocketServer``: its registry of clients, lifecycle and fan-out. The
// epoll loop is in ServerCore+EventLoop.swift, the request tasks in ServerCore+Requests.swift.

/// The server state shared by every thread, under one lock.
struct Registry {
  var clients: [UInt64: ClientConnection] = [:]
  var maxClients: Int
  /// Connections refused with `tooManyClients` since start (their log line is throttled).
  var refusedFull = 0
  /// Clients to close, with the reason (set by threads other than the I/O thread).
  var closing: [(UInt64, String)] = []
  var started = false
  var stopping = false
  var stopped = false
  var waiters: [CheckedContinuation<Void, Never>] = []
}

/// epoll tokens of the two descriptors that are not clients (client ids start at 1).
let listenToken: UInt64 = 0
let wakeToken = UInt64.max

final class ServerCore: Sendable {
  let socket: ListeningSocket
  let handler: any RequestHandler
  let options: ServerOptions
  let registry: Mutex<Registry>
  let epollFD: Int32
  /// An eventfd: a write makes the I/O thread look at `Registry.closing` and `stopping`.
  let wakeFD: Int32
  /// Why `epoll_create1` and `eventfd` failed in `init`, reported by `start()` (`errno` read
  /// later would describe some other call).
  let epollErrno: Int32
  let wakeErrno: Int32

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

  /// Starts the I/O thread. Does nothing when already started, or once stopped (the listening
  /// socket is closed then). A failure leaves it not started, so that ``stop()`` closes the socket
  /// and ends at once.
  func start() throws(ListenError) {
    let proceed = registry.withLock { registry -> Bool in
      guard !registry.started, !registry.stopping else { return false }
      registry.started = true
      return true
    }
    guard proceed else { return }
    do throws(ListenError) {
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
    } catch {
      registry.withLock { $0.started = false }
      throw error
    }
    Log.event(
      "listening", ["path": socket.path, "activated": socket.isActivated ? "true" : "false"])
  }

  func stop() {
    let (wasStarted, first) = registry.withLock { registry -> (Bool, Bool) in
      let first = !registry.stopping
      registry.stopping = true
      if !registry.started {
        registry.stopped = true
        return (false, first)
      }
      return (true, first)
    }
    if wasStarted {
      wake()
    } else {
      // Never started (a front-end after it failed to start): the I/O thread that would close
      // the listening socket does not exist, so it is closed (and its file removed) here, once.
      if first { socket.close() }
      finishStopped()
    }
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

  func finishStopped() {
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

  func wake() {
    var one: UInt64 = 1
    _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
  }

  /// Has the I/O thread close `id` (from any thread).
  func scheduleClose(_ id: UInt64, reason: String) {
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
}
