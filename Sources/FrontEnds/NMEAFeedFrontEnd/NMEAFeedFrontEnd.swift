import Glibc
import LocationModel
import LocationProtocol
import NMEA
import ServiceCore
import Synchronization
import SystemIO

/// Bounds of the NMEA feed.
public struct NMEAFeedOptions: Sendable, Hashable {
  /// Most readers connected at once, `1...256`; a reader beyond it is closed at once (logged
  /// `nmeaReaderRefused reason=full`).
  public var maxReaders: Int
  /// Most bytes queued for one reader that does not read fast enough, `256...1 MiB`. A reader
  /// whose queue would grow beyond it is disconnected (logged `nmeaReaderDropped reason=slow`):
  /// it is then at least this many bytes (16 KiB: about 100 epochs of GGA and RMC) behind, and a
  /// location consumer is better served by reconnecting than by positions that old.
  public var bufferLimit: Int

  /// Creates options: 16 readers and 16 KiB per reader by default.
  public init(maxReaders: Int = 16, bufferLimit: Int = 16 * 1024) {
    self.maxReaders = min(max(maxReaders, 1), 256)
    self.bufferLimit = min(max(bufferLimit, 256), 1 << 20)
  }
}

/// A front-end that serves each fix as NMEA 0183 sentences on a listening Unix stream socket, for
/// readers such as GeoClue 2.6's network NMEA source (`[network-nmea]` with `nmea-socket=PATH`
/// in `geoclue.conf`).
///
/// Each fix becomes one RMC and one GGA sentence (``NMEAEncoder`` with talker `GP`, the talker
/// every GeoClue release matches), CRLF-terminated with their checksums, encoded once and written
/// to every reader. Readers send nothing; what they send is read and discarded.
///
/// Authorization, the same as every front-end's: when a reader connects its peer credentials
/// (`SO_PEERCRED`, `SO_PEERGROUPS`) go to the service as `request` and then `watch`; a reader the
/// ``AuthorizationAuthority`` does not authorize is closed (logged `nmeaReaderDenied`). The socket
/// file carries the same mode and group as the main socket (0600 root only, or 0660 and the
/// configured group: ``ListeningSocket/create(path:group:)``), so the kernel's gate and the
/// authority agree. A reader a reload revokes is disconnected (the service tells its channel
/// with ``ClientChannel/authorizationChanged(_:)``). The watch is connection-scoped tracking: the
/// backend runs while at least one authorized reader is connected, and `status` counts the
/// readers among its `clients`.
///
/// Fixes come from the service's hub like every front-end's: each reader is a watcher, and the
/// hub's TPV event carries the typed fix (``EncodedEvent/location``), which the reader's channel
/// writes as sentences (encoded once per fix for all readers).
///
/// Threads: one POSIX thread polls the listening socket, the readers and a wake pipe; it alone
/// accepts and closes descriptors. The hub's task writes to each reader without blocking; what a
/// reader's socket does not take is queued (``NMEAFeedOptions/bufferLimit``) and written by the
/// thread when the socket becomes writable, so a slow reader never holds up fixes for the others.
public final class NMEAFeedFrontEnd: FrontEnd, Sendable {
  /// The listening socket.
  public let socket: ListeningSocket
  /// The bounds in force.
  public let options: NMEAFeedOptions
  let handler: any RequestHandler
  /// RMC then GGA, talker `GP`: older GeoClue releases match only `$GPGGA`, and 2.6 takes any
  /// talker but needs RMC status `A` and GGA quality above 0 (a fix without a position is still
  /// written, as a receiver writes it, and GeoClue skips it).
  static let encoder = NMEAEncoder(talker: .gps, sentences: [.rmc, .gga])

  /// The bytes the feed writes for `fix`: an RMC and a GGA sentence (NMEA 0183, ``NMEAEncoder``),
  /// each `$GP...*HH` with its checksum and CRLF; latitude `ddmm.mmmmmm`, longitude
  /// `dddmm.mmmmmm`, so the position survives within 2e-8 degrees, unless a sentence would pass
  /// NMEA 0183's 82 characters (then fewer decimals: ``NMEAEncoder/fitted(_:)``).
  public static func sentences(for fix: Fix) -> [UInt8] {
    var bytes: [UInt8] = []
    encoder.encode(fix, into: &bytes)
    return bytes
  }

  /// The last fix encoded for the readers and its sentences: the hub gives one fix to every
  /// reader in turn, and it is encoded once.
  private let lastEncoded = Mutex<(fix: Fix, bytes: [UInt8])?>(nil)

  /// ``sentences(for:)``, encoded once for all the readers of one fix.
  func encodedSentences(for fix: Fix) -> [UInt8] {
    if let cached = lastEncoded.withLock({ $0 }), cached.fix == fix { return cached.bytes }
    let bytes = Self.sentences(for: fix)
    lastEncoded.withLock { $0 = (fix, bytes) }
    return bytes
  }
  private let readers = Mutex<[UInt64: NMEAReader]>([:])
  /// Readers refused because the feed was full, since start (for throttling their log line).
  private let refusals = Mutex(0)
  private let control = Mutex(Control())
  private let wakeRead: Int32
  private let wakeWrite: Int32

  struct Control {
    var started = false
    var stopping = false
    var stopped = false
  }

  /// Why the feed could not start.
  public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The socket's directory is owned by another user or writable by group or others: someone
    /// else could replace the socket file with their own.
    case unsafeDirectory(path: String, reason: String)
    /// The listening socket could not be created (the reason says what to do).
    case listen(ListenError)
    /// A system call failed (`pipe`, `pthread_create`).
    case system(String, errno: Int32)

    /// A message that says what to do.
    public var description: String {
      switch self {
      case .unsafeDirectory(let path, let reason):
        return
          "NMEA socket directory \(path) is not safe: \(reason); use a directory only root or locationd can write, such as /run/locationd"
      case .listen(let error):
        return "NMEA socket: \(error.description)"
      case .system(let call, let code):
        return "NMEA socket: \(call) failed: \(String(cString: strerror(code)))"
      }
    }
  }

  /// Creates the listening socket at `path` (mode 0600, or 0660 and `group`) and prepares the
  /// feed; ``start()`` begins accepting.
  ///
  /// The path is never one someone else can plant: its directory, when it exists, must belong
  /// to this process's user or root and not be writable by group or others
  /// (``checkDirectory(of:)``); when missing it is created (one level, mode 0755). A stale socket
  /// file is removed only when nothing listens on it, and anything else at the path is refused.
  ///
  /// - Parameters:
  ///   - path: absolute socket path of at most 107 bytes, e.g. `/run/locationd/nmea.sock`.
  ///   - group: the group whose members may connect, `nil` or empty for root only.
  ///   - handler: the service (``LocationService``).
  /// - Throws: ``Failure``.
  public init(
    path: String, group: String?, handler: any RequestHandler,
    options: NMEAFeedOptions = NMEAFeedOptions()
  ) throws(Failure) {
    try Self.checkDirectory(of: path)
    let socket: ListeningSocket
    do { socket = try ListeningSocket.create(path: path, group: group) } catch {
      throw .listen(error)
    }
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else {
      let code = errno
      socket.close()
      throw .system("pipe", errno: code)
    }
    for end in ends { Self.setNonBlockingCloseOnExec(end) }
    self.socket = socket
    self.handler = handler
    self.options = options
    wakeRead = ends[0]
    wakeWrite = ends[1]
  }

  deinit {
    _ = Glibc.close(wakeRead)
    _ = Glibc.close(wakeWrite)
  }

  /// Checks the directory that will hold the socket at `path`: when it exists it must be owned by
  /// this process's effective user or by root and must not be writable by group or others
  /// (mode `& 0o022 == 0`), like the state directory, and no directory above it may let another
  /// user swap it (``SecurePath/unsafeAncestor(of:)``). A missing directory passes (it is then
  /// created 0755 by this process) when its ancestors do.
  ///
  /// - Throws: ``Failure/unsafeDirectory(path:reason:)``.
  public static func checkDirectory(of path: String) throws(Failure) {
    guard let slash = path.lastIndex(of: "/") else { return }
    let directory = slash == path.startIndex ? "/" : String(path[..<slash])
    do throws(TrustedDirectory.Failure) {
      try TrustedDirectory.check(directory, missingIsAllowed: true)
    } catch {
      switch error {
      case .untrusted(let path, let reason): throw .unsafeDirectory(path: path, reason: reason)
      // Not examinable (no permission): the socket's own creation reports it.
      case .system: return
      }
    }
  }

  /// The number of readers connected now (authorized or still being decided).
  public var clientCount: Int { readers.withLock { $0.count } }

  /// Starts the I/O thread (accepting readers). Does nothing when already started, or once
  /// stopped (the socket is closed then).
  ///
  /// - Throws: ``Failure/system(_:errno:)`` when the thread cannot be created; it is then not
  ///   started, and ``stop()`` closes the socket.
  public func start() throws(Failure) {
    let first = control.withLock { state -> Bool in
      guard !state.started, !state.stopping else { return false }
      state.started = true
      return true
    }
    guard first else { return }
    do {
      try SystemIO.startThread { [self] in loop() }
    } catch {
      control.withLock { $0.started = false }
      throw .system("pthread_create", errno: error.code)
    }
  }

  /// Writes `fix` as RMC and GGA to every authorized reader at once, outside the hub (a
  /// benchmark or a test of the readers' queues); returns the bytes written per reader.
  ///
  /// Never blocks: a reader whose socket is full gets the sentences queued, and one whose queue
  /// would exceed ``NMEAFeedOptions/bufferLimit`` is disconnected by the I/O thread.
  @discardableResult
  public func publish(_ fix: Fix) -> [UInt8] {
    let bytes = Self.sentences(for: fix)
    let current = readers.withLock { Array($0.values) }
    var wake = false
    for reader in current where reader.write(bytes) {
      wake = true
    }
    if wake { self.wake() }
    return bytes
  }

  /// Stops accepting, disconnects every reader and removes the socket file. Idempotent.
  public func stop() {
    let action = control.withLock { state -> Int in
      if state.stopping { return 0 }
      state.stopping = true
      if state.started { return 1 }
      state.stopped = true
      return 2
    }
    if action == 1 { wake() }  // the I/O thread closes the readers and the socket
    if action == 2 { socket.close() }  // never started: nothing else holds the socket
  }

  /// Waits until the I/O thread has closed every reader and the socket (after ``stop()``).
  public func waitUntilStopped() async {
    while !control.withLock({ $0.stopped }) {
      try? await Task.sleep(for: .milliseconds(5))
    }
  }

  func wake() {
    var byte: UInt8 = 1
    _ = Glibc.write(wakeWrite, &byte, 1)
  }

  // MARK: - I/O thread

  private func loop() {
    // Out of descriptors, accept(2) fails while the listening socket stays readable: it is left
    // out of the poll for 100 ms at a time instead of spinning.
    var acceptPausedUntil: ContinuousClock.Instant?
    while true {
      if let until = acceptPausedUntil, ContinuousClock.now >= until { acceptPausedUntil = nil }
      let current = readers.withLock { $0.values.sorted { $0.id < $1.id } }
      var descriptors = [
        pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        pollfd(fd: socket.fd, events: acceptPausedUntil == nil ? Int16(POLLIN) : 0, revents: 0),
      ]
      for reader in current {
        let events = Int16(POLLIN) | (reader.hasQueued ? Int16(POLLOUT) : 0)
        descriptors.append(pollfd(fd: reader.fd, events: events, revents: 0))
      }
      let ready = descriptors.withUnsafeMutableBufferPointer { buffer -> Int32 in
        guard let base = buffer.baseAddress else { return 0 }
        return poll(base, nfds_t(buffer.count), acceptPausedUntil == nil ? -1 : 100)
      }
      if ready < 0 && errno != EINTR { break }
      if control.withLock({ $0.stopping }) { break }
      if descriptors[0].revents != 0 { drainWakePipe() }
      if descriptors[1].revents & Int16(POLLIN) != 0, !acceptReaders() {
        acceptPausedUntil = ContinuousClock.now + .milliseconds(100)
      }
      for (index, reader) in current.enumerated() {
        // Closed while accepting (its descriptor number may now be a new reader's).
        guard !reader.isClosed else { continue }
        let revents = descriptors[index + 2].revents
        if revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0,
          !discardInput(reader)
        {
          reader.requestClose(reason: "closed")
        }
        if revents & Int16(POLLOUT) != 0 { reader.flush() }
      }
      for reader in current {
        if let reason = reader.closeReason { closeReader(reader, reason: reason) }
      }
    }
    let remaining = readers.withLock { $0.values.sorted { $0.id < $1.id } }
    for reader in remaining { closeReader(reader, reason: "shutdown") }
    socket.close()
    control.withLock { $0.stopped = true }
  }

  static func setNonBlockingCloseOnExec(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFL)
    if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    let fdFlags = fcntl(fd, F_GETFD)
    if fdFlags >= 0 { _ = fcntl(fd, F_SETFD, fdFlags | FD_CLOEXEC) }
  }

  private func drainWakePipe() {
    var buffer = [UInt8](repeating: 0, count: 64)
    while Glibc.read(wakeRead, &buffer, buffer.count) > 0 {}
  }

  /// Reads and drops what a reader sent; `false` at end of file or on an error.
  private func discardInput(_ reader: NMEAReader) -> Bool {
    var buffer = [UInt8](repeating: 0, count: 512)
    while true {
      let count = Glibc.read(reader.fd, &buffer, buffer.count)
      if count > 0 { continue }
      if count == 0 { return false }
      if errno == EINTR { continue }
      return errno == EAGAIN || errno == EWOULDBLOCK
    }
  }

  /// Closes the readers whose peer has hung up (or that were asked to close) before the poll
  /// loop reached them, so that they do not hold the slots a new reader needs. I/O thread only.
  private func reapHungUpReaders() {
    let current = readers.withLock { $0.values.sorted { $0.id < $1.id } }
    for reader in current where !reader.isClosed {
      if let reason = reader.closeReason {
        closeReader(reader, reason: reason)
        continue
      }
      var descriptor = pollfd(fd: reader.fd, events: Int16(POLLIN), revents: 0)
      guard poll(&descriptor, 1, 0) > 0 else { continue }
      if descriptor.revents & (Int16(POLLHUP) | Int16(POLLERR)) != 0 || !discardInput(reader) {
        closeReader(reader, reason: "closed")
      }
    }
  }

  /// Counts a refused reader; logged at the 1st, 2nd, 4th, 8th... refusal, so that a connect
  /// loop cannot flood the log. `reason`: `full` (`maxReaders` reached) or `descriptors` (the
  /// daemon's descriptor reserve reached).
  private func logRefusal(uid: UInt32, reason: String) {
    let refused = refusals.withLock { count -> Int in
      count += 1
      return count
    }
    if LogThrottle.powersOfTwo.logs(refused) {
      Log.event(
        "nmeaReaderRefused", ["uid": String(uid), "reason": reason, "refusals": String(refused)])
    }
  }

  /// Accepts every waiting reader; `false` when out of descriptors or memory (logged at the 1st,
  /// 2nd, 4th... such failure): the loop then stops accepting for a moment.
  private func acceptReaders() -> Bool {
    while true {
      let fd = accept(socket.fd, nil, nil)
      if fd < 0 {
        let code = errno
        if code == EINTR { continue }
        guard code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM else { return true }
        let failures = refusals.withLock { count -> Int in
          count += 1
          return count
        }
        if LogThrottle.powersOfTwo.logs(failures) {
          Log.event("nmeaReaderRefused", ["reason": String(cString: strerror(code)), "refusals": String(failures)])
        }
        return false
      }
      Self.setNonBlockingCloseOnExec(fd)
      guard let peer = PeerCredentials.read(socket: fd) else {
        _ = Glibc.close(fd)
        continue
      }
      // The descriptors the daemon needs for its own work stay free (see DescriptorReserve).
      guard DescriptorReserve.isKept() else {
        logRefusal(uid: peer.uid, reason: "descriptors")
        _ = Glibc.close(fd)
        continue
      }
      let reader = NMEAReader(
        id: ConnectionNumber.next(), fd: fd, peer: peer, bufferLimit: options.bufferLimit,
        encode: { [weak self] fix in self?.encodedSentences(for: fix) ?? Self.sentences(for: fix) }
      ) { [weak self] in
        self?.wake()
      }
      let admit = { [options] in
        self.readers.withLock { table -> Bool in
          guard table.count < options.maxReaders else { return false }
          table[reader.id] = reader
          return true
        }
      }
      // Readers that hung up since the last poll still hold their slots: free those first.
      var admitted = admit()
      if !admitted {
        reapHungUpReaders()
        admitted = admit()
      }
      guard admitted else {
        logRefusal(uid: peer.uid, reason: "full")
        _ = Glibc.close(fd)
        continue
      }
      Log.event(
        "nmeaReaderConnected",
        ["client": String(reader.id), "uid": String(peer.uid), "pid": String(peer.pid)])
      let handler = self.handler
      reader.setUp = Task {
        let session: ClientSession
        do throws(SessionRefusal) {
          session = try await handler.open(peer: peer, channel: reader)
        } catch {
          Log.event("nmeaReaderDenied", ["client": String(reader.id), "uid": String(peer.uid)])
          reader.requestClose(reason: "denied")
          return
        }
        // Streaming before tracking starts, so the first fix of the backend reaches it.
        reader.startStreaming()
        do throws(SessionRefusal) {
          try await session.watch(coalescing: true)
        } catch {
          Log.event("nmeaReaderDenied", ["client": String(reader.id), "reason": error.message])
          reader.requestClose(reason: "denied")
        }
      }
    }
  }

  private func closeReader(_ reader: NMEAReader, reason: String) {
    readers.withLock { $0[reader.id] = nil }
    let dropped = reader.markClosed()
    _ = Glibc.close(reader.fd)
    Log.event(
      "nmeaReaderDisconnected",
      ["client": String(reader.id), "reason": reason, "queuedBytes": String(dropped)])
    let handler = self.handler
    let setUp = reader.setUp
    let context = ClientContext(connection: reader, peer: reader.peer)
    Task {
      await setUp?.value
      await handler.clientDisconnected(context)
    }
  }
}

/// One connected reader of the feed: its socket, its queue of bytes not yet written, and the
/// service's view of it (a ``ClientChannel`` that takes no JSON events: readers get NMEA only).
final class NMEAReader: ClientChannel, @unchecked Sendable {
  // @unchecked: `state` guards everything mutable; `setUp` is written once by the I/O thread
  // before any other thread can see the reader closed.
  let id: UInt64
  let fd: Int32
  let peer: PeerCredentials
  private let wakeFeed: @Sendable () -> Void
  /// The feed's sentences for a fix (RMC and GGA).
  private let encode: @Sendable (Fix) -> [UInt8]
  private let state: Mutex<State>
  private let setUpTask = Mutex<Task<Void, Never>?>(nil)

  struct State {
    var streaming = false
    var closed = false
    var closeReason: String?
    /// Sentences not yet written: all counted, bounded in bytes by the feed's buffer limit.
    var queue: OutboundQueue
  }

  /// Creates a reader whose queue holds at most `bufferLimit` bytes (``NMEAFeedOptions``) and
  /// that writes each fix as `encode` makes it.
  init(
    id: UInt64, fd: Int32, peer: PeerCredentials, bufferLimit: Int,
    encode: @escaping @Sendable (Fix) -> [UInt8], wake: @escaping @Sendable () -> Void
  ) {
    self.encode = encode
    self.id = id
    self.fd = fd
    self.peer = peer
    wakeFeed = wake
    state = Mutex(
      State(
        queue: OutboundQueue(limits: OutboundLimits(maxBytes: bufferLimit, maxMessages: Int.max))))
  }

  /// The task that asks the service for authorization and the watch.
  var setUp: Task<Void, Never>? {
    get { setUpTask.withLock { $0 } }
    set { setUpTask.withLock { $0 = newValue } }
  }

  var isConnected: Bool { state.withLock { !$0.closed && $0.closeReason == nil } }

  /// Readers get NMEA only: JSON events are not written.
  @discardableResult func send(_ event: Event) -> Bool { isConnected }

  /// A revocation (a reload changed the rule) disconnects the reader, which has no other way to
  /// learn it.
  func authorizationChanged(_ status: AuthorizationStatus) {
    if status != .authorized { requestClose(reason: "denied") }
  }

  /// A fix from the hub (a TPV event, ``EncodedEvent/location``) is written as RMC and GGA; the
  /// reader never sees the JSON, and other events are not for it.
  @discardableResult func deliver(_ event: EncodedEvent) -> Bool {
    guard let location = event.location else { return isConnected }
    if write(encode(location.fix)) { wakeFeed() }
    return isConnected
  }

  func close() { requestClose(reason: "closedByService") }

  var hasQueued: Bool { state.withLock { !$0.queue.isEmpty } }

  var closeReason: String? { state.withLock { $0.closed ? nil : $0.closeReason } }

  /// Whether the I/O thread has closed the reader (its descriptor is no longer its own).
  var isClosed: Bool { state.withLock { $0.closed } }

  func startStreaming() { state.withLock { $0.streaming = true } }

  /// Asks the I/O thread to close the reader (the first reason wins).
  func requestClose(reason: String) {
    let first = state.withLock { state -> Bool in
      guard !state.closed, state.closeReason == nil else { return false }
      state.closeReason = reason
      return true
    }
    if first { wakeFeed() }
  }

  /// Marks the reader closed (the I/O thread closes its descriptor next); returns the bytes that
  /// were still queued.
  func markClosed() -> Int {
    state.withLock { state in
      state.closed = true
      state.streaming = false
      let left = state.queue.backlogBytes
      state.queue.removeAll()
      return left
    }
  }

  /// Writes `bytes` now or queues them; returns whether the I/O thread must act (a queue to
  /// watch for writability, or a reader to close).
  func write(_ bytes: [UInt8]) -> Bool {
    state.withLock { state -> Bool in
      guard state.streaming, !state.closed, state.closeReason == nil else { return false }
      var start = 0
      if state.queue.isEmpty {
        do {
          guard let sent = try SystemIO.sendSome(fd, bytes, from: 0, flags: Int32(MSG_NOSIGNAL))
          else { return Self.enqueue(bytes, written: 0, &state) }
          start = sent
          if start == bytes.count { return false }
        } catch {
          state.closeReason = "writeFailed"
          return true
        }
      }
      return Self.enqueue(bytes, written: start, &state)
    }
  }

  /// Queues what was not written; a reader whose queue would exceed the limit is closed.
  private static func enqueue(_ bytes: [UInt8], written: Int, _ state: inout State) -> Bool {
    if !state.queue.append(bytes, written: written) { state.closeReason = "slow" }
    return true
  }

  /// Writes what the socket takes of the queue (I/O thread, on `POLLOUT`).
  func flush() {
    state.withLock { state in
      guard !state.closed, state.closeReason == nil else { return }
      while let head = state.queue.first() {
        do {
          guard
            let sent = try SystemIO.sendSome(
              fd, head.bytes, from: head.offset, flags: Int32(MSG_NOSIGNAL))
          else { return }
          state.queue.wrote(sent)
        } catch {
          state.closeReason = "writeFailed"
          return
        }
      }
    }
  }
}
