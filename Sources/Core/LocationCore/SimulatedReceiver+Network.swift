import Glibc
import LocationModel
import NMEA
import Synchronization
import SystemIO

/// Where a network simulated receiver sends its NMEA 0183 stream.
public enum SimulatedTransport: Sendable, Hashable, CustomStringConvertible {
  /// A TCP server on `host:port` (IPv4; port 0 picks a free one): every connected client gets
  /// the stream, as from a serial-to-TCP bridge. gpsd reads it as the source `tcp://host:port`.
  case tcp(host: String, port: UInt16)
  /// UDP datagrams to `host:port`, one sentence per datagram (a sentence is never split across
  /// datagrams, whatever the baud pacing). gpsd reads it as the source `udp://host:port`: gpsd
  /// binds that address and reads each datagram into its input buffer.
  case udp(host: String, port: UInt16)

  /// Parses `tcp://HOST:PORT` or `udp://HOST:PORT` (HOST an IPv4 address or `localhost`);
  /// `nil` for anything else (``problem(with:)`` says why).
  public init?(uri: String) {
    guard case .success(let transport) = Self.parse(uri) else { return nil }
    self = transport
  }

  /// Why `uri` is not a transport, in words for a person: the scheme, the port (a number from 0
  /// to 65535; above 0 for UDP, whose datagrams sent to port 0 reach no reader) or the host (an
  /// IPv4 address or `localhost`); `nil` when it is one.
  public static func problem(with uri: String) -> String? {
    guard case .failure(let problem) = parse(uri) else { return nil }
    return problem.text
  }

  /// Why a transport URI was refused (``problem(with:)``).
  struct Problem: Error {
    var text: String
  }

  static func parse(_ uri: String) -> Result<SimulatedTransport, Problem> {
    let isTCP = uri.hasPrefix("tcp://")
    guard isTCP || uri.hasPrefix("udp://") else {
      return .failure(Problem(text: "use tcp://HOST:PORT or udp://HOST:PORT (IPv4)"))
    }
    let rest = uri.dropFirst(6)
    guard let colon = rest.lastIndex(of: ":") else {
      return .failure(Problem(text: "give a port: \(uri.prefix(6))HOST:PORT"))
    }
    let portText = rest[rest.index(after: colon)...]
    guard let port = UInt16(portText) else {
      return .failure(Problem(text: "the port must be a number from 0 to 65535, got \"\(portText)\""))
    }
    let host = String(rest[..<colon])
    guard SimulatedTransport.ipv4(host) != nil else {
      return .failure(Problem(text: "the host must be an IPv4 address or localhost, got \"\(host)\""))
    }
    // UDP sends to the port: 0 reaches no reader (TCP port 0 listens on a free port instead).
    guard isTCP || port != 0 else {
      return .failure(
        Problem(text: "udp:// needs a port above 0: datagrams sent to port 0 reach no reader (tcp://HOST:0 listens on a free port)"))
    }
    return .success(isTCP ? .tcp(host: host, port: port) : .udp(host: host, port: port))
  }

  /// `tcp://HOST:PORT` or `udp://HOST:PORT`.
  public var description: String {
    switch self {
    case .tcp(let host, let port): return "tcp://\(host):\(port)"
    case .udp(let host, let port): return "udp://\(host):\(port)"
    }
  }

  /// The IPv4 address of `host` in network byte order (`localhost` is 127.0.0.1), or `nil`.
  static func ipv4(_ host: String) -> in_addr? {
    var address = in_addr()
    let text = host == "localhost" ? "127.0.0.1" : host
    return inet_pton(AF_INET, text, &address) == 1 ? address : nil
  }
}

/// A simulated receiver that sends its NMEA 0183 stream over the network (``SimulatedTransport``)
/// instead of a pty: same encoder, same baud pacing, faults and `stuck` windows (the output
/// stage of ``SimulatedReceiver``), and `unplug` windows that close every TCP connection and the
/// listening socket, which reopens on the same port when the window ends (UDP sends nothing
/// meanwhile).
///
/// Time comes from a ``LocationClock``: on a ``VirtualClock`` a run takes no wall time, which
/// is how the tests and the benchmark drive it. Sockets are non-blocking: a TCP client that does
/// not read loses what its socket buffer does not take, as a serial line's listener would.
public final class SimulatedNetworkReceiver: Sendable {
  /// Counters of what was sent.
  public struct Statistics: Sendable, Hashable {
    /// Epochs sent (to zero or more clients).
    public var epochsSent = 0
    /// Epochs not sent because the device was unplugged.
    public var epochsUnplugged = 0
    /// Bytes sent, summed over TCP clients or datagrams.
    public var bytesSent = 0
    /// UDP datagrams sent.
    public var datagramsSent = 0
    /// TCP connections accepted.
    public var connectionsAccepted = 0
    /// TCP connections closed (by an unplug, a send error or the client).
    public var connectionsClosed = 0
    /// TCP connections refused at once because they would leave fewer than
    /// ``DescriptorReserve/count`` descriptors free.
    public var connectionsRefused = 0
  }

  /// The transport, with the port actually bound for TCP.
  public let transport: SimulatedTransport
  /// The encoder used for every epoch.
  public let encoder: NMEAEncoder
  let stage: SimulatedOutputStage
  /// The clock that paces the epochs and the bytes.
  public let clock: any LocationClock
  private let address: sockaddr_in
  private let sockets = Mutex(Sockets())

  private struct Sockets: Sendable {
    var listener: Int32 = -1
    var clients: [Int32] = []
    var datagram: Int32 = -1
    var unplugged = false
    var closed = false
    var statistics = Statistics()
  }

  /// Opens the TCP listening socket or the UDP socket.
  ///
  /// - Parameters:
  ///   - transport: where to send.
  ///   - encoder: the sentences to write.
  ///   - output: baud pacing and faults.
  ///   - clock: the clock that paces the bytes (``SystemClock`` by default).
  /// - Throws: ``SimulatedReceiverError/networkFailed(transport:errno:message:)``.
  public init(
    transport: SimulatedTransport, encoder: NMEAEncoder = NMEAEncoder(version: .v4_11),
    output: SimulatedOutput = SimulatedOutput(), clock: any LocationClock = SystemClock()
  ) throws(SimulatedReceiverError) {
    let host: String
    let port: UInt16
    switch transport {
    case .tcp(let h, let p), .udp(let h, let p): (host, port) = (h, p)
    }
    guard let ip = SimulatedTransport.ipv4(host) else {
      throw .networkFailed(
        transport: transport.description, errno: EINVAL, message: "not an IPv4 address")
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr = ip
    self.encoder = encoder
    self.stage = SimulatedOutputStage(output)
    self.clock = clock
    var state = Sockets()
    switch transport {
    case .tcp:
      let fd = try Self.listen(&address, transport: transport)
      state.listener = fd
      self.transport = .tcp(host: host, port: UInt16(bigEndian: address.sin_port))
    case .udp:
      let fd = socket(
        AF_INET,
        Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0
      )
      guard fd >= 0 else { throw Self.failure(transport) }
      let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
      guard connected == 0 else {
        let error = Self.failure(transport)
        close(fd)
        throw error
      }
      state.datagram = fd
      self.transport = transport
    }
    self.address = address
    sockets.withLock { $0 = state }
  }

  deinit { stop() }

  /// What has been sent so far.
  public var statistics: Statistics { sockets.withLock { $0.statistics } }
  /// Faults injected and sentences cut by the baud rate.
  public var outputStatistics: SimulatedOutputStatistics { stage.statistics }

  /// Sends epoch number `index` (0-based) of a run at `rate` Hz: the fix, or the stuck one, after
  /// faults and the baud cut, paced from the clock's `start + index / rate`. Waits (on the
  /// clock) until the epoch's bytes are out.
  ///
  /// - Throws: `CancellationError` when the task is cancelled while pacing.
  public func send(_ fix: Fix, epoch index: Int, rate: Double, start: Duration = .zero) async throws
  {
    let interval = Duration.seconds(1 / rate)
    let seconds = Double(index) / rate
    let epochStart = start + interval * index
    try await clock.sleep(until: epochStart)
    if stage.output.faults.isUnplugged(at: seconds) {
      unplug()
      sockets.withLock { $0.statistics.epochsUnplugged += 1 }
      return
    }
    replug()
    acceptClients()
    let lines = stage.outgoingLines(
      encoder.encode(stage.outgoingFix(fix, at: seconds)), interval: interval)
    sockets.withLock { $0.statistics.epochsSent += 1 }
    guard let baud = stage.output.baud, let pacer = try? SerialLinePacer(baud: baud) else {
      transmit(lines.flatMap { $0 }, lines: lines)
      return
    }
    // Paced: TCP gets what each tick releases; UDP gets each sentence once its last byte is out.
    let bytes = lines.flatMap { $0 }
    var ends: [Int] = []
    var total = 0
    for line in lines {
      total += line.count
      ends.append(total)
    }
    var nextLine = 0
    for (tick, range) in pacer.schedule(byteCount: bytes.count) {
      try await clock.sleep(until: epochStart + SerialLinePacer.tick * tick)
      var complete: [[UInt8]] = []
      while nextLine < lines.count, ends[nextLine] <= range.upperBound {
        complete.append(lines[nextLine])
        nextLine += 1
      }
      transmit(Array(bytes[range]), lines: complete)
    }
  }

  /// Sends the fixes of `fixes` at `rate` Hz until the sequence ends or the task is cancelled.
  public func run<S: AsyncSequence & Sendable>(rate: Double, fixes: S) async
  where S.Element == Fix {
    let start = clock.now
    var index = 0
    do {
      for try await fix in fixes {
        // A source slower than the rate: the epoch is sent when its fix arrives.
        let late = clock.now - start
        let due = Duration.seconds(1 / rate) * index
        if late > due { index = Int((late / Duration.seconds(1 / rate)).rounded(.up)) }
        try await send(fix, epoch: index, rate: rate, start: start)
        index += 1
      }
    } catch {}
  }

  /// Closes every socket. Idempotent.
  public func stop() {
    let fds = sockets.withLock { state -> [Int32] in
      if state.closed { return [] }
      state.closed = true
      defer {
        state.clients = []
        state.listener = -1
        state.datagram = -1
      }
      return state.clients + [state.listener, state.datagram].filter { $0 >= 0 }
    }
    for fd in fds { close(fd) }
  }

  // MARK: Sockets

  private func transmit(_ bytes: [UInt8], lines: [[UInt8]]) {
    var dead: [Int32] = []
    sockets.withLock { state in
      for fd in state.clients {
        var offset = 0
        while offset < bytes.count {
          // nil (EAGAIN) or an error (EPIPE, ECONNRESET) ends this client's write.
          guard
            let sent = try? SystemIO.sendSome(fd, bytes, from: offset, flags: Int32(MSG_NOSIGNAL)),
            sent > 0
          else { break }
          offset += sent
        }
        state.statistics.bytesSent += offset
        if offset < bytes.count, !Self.isAlive(fd) { dead.append(fd) }
      }
      state.clients.removeAll { dead.contains($0) }
      state.statistics.connectionsClosed += dead.count
      if state.datagram >= 0 {
        for line in lines {
          // ECONNREFUSED (nobody listening yet) loses the datagram, as UDP does.
          if (try? SystemIO.sendSome(state.datagram, line, from: 0, flags: Int32(MSG_NOSIGNAL)))
            != nil
          {
            state.statistics.datagramsSent += 1
            state.statistics.bytesSent += line.count
          }
        }
      }
    }
    for fd in dead { close(fd) }
  }

  private static func isAlive(_ fd: Int32) -> Bool {
    var check = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    _ = poll(&check, 1, 0)
    return check.revents & Int16(POLLERR | POLLHUP) == 0
  }

  private func acceptClients() {
    sockets.withLock { state in
      guard state.listener >= 0 else { return }
      while true {
        let fd = accept(state.listener, nil, nil)
        if fd < 0 { break }
        guard DescriptorReserve.isKept() else {
          close(fd)
          state.statistics.connectionsRefused += 1
          continue
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        state.clients.append(fd)
        state.statistics.connectionsAccepted += 1
      }
      // Discard what clients send and drop those that hung up.
      var scratch = [UInt8](repeating: 0, count: 512)
      var gone: [Int32] = []
      for fd in state.clients {
        while true {
          let n = recv(fd, &scratch, scratch.count, Int32(MSG_DONTWAIT))
          if n > 0 { continue }
          if n == 0 { gone.append(fd) }
          break
        }
      }
      for fd in gone { close(fd) }
      state.clients.removeAll { gone.contains($0) }
      state.statistics.connectionsClosed += gone.count
    }
  }

  /// Pulls the plug: closes every TCP connection and the listening socket (once per window).
  private func unplug() {
    let (first, fds) = sockets.withLock { state -> (Bool, [Int32]) in
      guard !state.unplugged, !state.closed else { return (false, []) }
      state.unplugged = true
      defer {
        state.statistics.connectionsClosed += state.clients.count
        state.clients = []
        state.listener = -1
      }
      return (true, state.clients + (state.listener >= 0 ? [state.listener] : []))
    }
    if first { stage.countUnplug() }
    for fd in fds { close(fd) }
  }

  /// Plugs back in after an unplug window: the listening socket reopens on the same port.
  private func replug() {
    let wasUnplugged = sockets.withLock { state -> Bool in
      defer { state.unplugged = false }
      return state.unplugged && !state.closed
    }
    guard wasUnplugged, case .tcp = transport else { return }
    var address = self.address
    if let fd = try? Self.listen(&address, transport: transport) {
      // stop() may have run while the socket was being opened: then it is closed here.
      let kept = sockets.withLock { state -> Bool in
        guard !state.closed else { return false }
        state.listener = fd
        return true
      }
      if !kept { close(fd) }
    }
  }

  /// Connections the TCP output server's listening socket queues before `accept` (the
  /// kernel's `SOMAXCONN`, 4096 on current Linux): a burst of clients never waits for a
  /// SYN retransmission.
  static let listenBacklog = Int32(SOMAXCONN)

  private static func listen(_ address: inout sockaddr_in, transport: SimulatedTransport)
    throws(SimulatedReceiverError) -> Int32
  {
    let fd = socket(
      AF_INET,
      Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw failure(transport) }
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    let size = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
        var length = size
        return bind(fd, pointer, size) == 0 && Glibc.listen(fd, listenBacklog) == 0
          && getsockname(fd, pointer, &length) == 0
      }
    }
    guard bound else {
      let error = failure(transport)
      close(fd)
      throw error
    }
    return fd
  }

  private static func failure(_ transport: SimulatedTransport) -> SimulatedReceiverError {
    let code = errno
    return .networkFailed(
      transport: transport.description, errno: code, message: SimulatedReceiver.errorText(code))
  }
}
