import SystemIO
import Glibc
import NMEA
import Synchronization
import LocationModel

/// Why the simulated GPS hardware could not start.
public enum SimulatedReceiverError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The rate is outside 1...10 Hz.
  case invalidRate(Double)
  /// The pseudo-terminal could not be created (`/dev/ptmx`); `errno` and its text.
  case openPTYFailed(errno: Int32, message: String)
  /// The link path exists and is not a symbolic link (a regular file, a directory, a device):
  /// it is never overwritten.
  case pathIsNotASymlink(path: String)
  /// Creating or replacing the symbolic link failed; `errno` and its text.
  case linkFailed(path: String, errno: Int32, message: String)
  /// `start` was called twice.
  case alreadyStarted

  /// A one-line explanation.
  public var description: String {
    switch self {
    case .invalidRate(let rate): return "rate \(rate) Hz is outside 1...10 Hz"
    case .openPTYFailed(let code, let message):
      return "cannot create a pseudo-terminal: \(message) (errno \(code))"
    case .pathIsNotASymlink(let path):
      return "\(path) exists and is not a symbolic link; refusing to replace it"
    case .linkFailed(let path, let code, let message):
      return "cannot link \(path): \(message) (errno \(code))"
    case .alreadyStarted: return "the simulated receiver is already running"
    }
  }
}

/// Simulated GPS hardware: a pseudo-terminal that behaves like a serial NMEA 0183 receiver.
///
/// It opens a pty (raw mode, like a serial line), makes `linkPath` a symbolic link to the slave
/// side (`/dev/pts/N`), and writes one epoch of sentences (``NMEAEncoder``: RMC, VTG, GGA, GSA,
/// GSV, optionally ZDA; checksums and CRLF) at the given rate, in real time, into the master side.
/// gpsd started on the link (`gpsd -N -n PATH`) decodes it like a real receiver.
///
/// Fixes come from a closure `(elapsed seconds) -> Fix?` called once per epoch (``start(rate:fix:)``)
/// or from an `AsyncSequence` of ``Fix`` pulled once per epoch (``start(rate:fixes:)``). A `nil`
/// from the closure is an outage: nothing is written for that epoch, as a receiver that lost
/// power or signal sends nothing.
///
/// Readers may come and go, as on a serial line: while no process has the device open nothing is
/// written (those epochs are lost, as a UART with no listener loses them), and what a reader left
/// unread when it closed the device is discarded, so the next reader (a restarted gpsd) starts
/// with fresh epochs, never a burst of stale ones. A write that finds the buffer full (`EAGAIN`:
/// a reader that does not read) drops that epoch and counts it in ``statistics``. Whatever the reader writes to the device (receiver
/// configuration commands) is read and discarded. All I/O runs on one dedicated thread; the master
/// descriptor is non-blocking.
public final class SimulatedReceiver: Sendable {
  /// Counters of what was written.
  public struct Statistics: Sendable, Hashable {
    /// Epochs whose sentences were written completely.
    public var epochsWritten = 0
    /// Epochs skipped because the closure returned `nil` (outage).
    public var epochsSilent = 0
    /// Epochs dropped (entirely or partly) because the pty buffer was full or the write failed.
    public var epochsDropped = 0
    /// Bytes written to the master side.
    public var bytesWritten = 0
    /// Epochs not written because no reader had the device open.
    public var epochsWithoutReader = 0
    /// Bytes written but left unread by a reader that closed the device, discarded.
    public var bytesUnread = 0
    /// Bytes the reader sent to the device, read and discarded.
    public var bytesDiscarded = 0
  }

  /// One written epoch, for latency measurements and tests.
  public struct WrittenEpoch: Sendable, Hashable {
    /// The fix that was encoded.
    public var fix: Fix
    /// The sentences written, in order, each with CRLF.
    public var sentences: [String]
    /// `CLOCK_MONOTONIC` time just before the first byte was written, nanoseconds.
    public var startedAt: UInt64
    /// `CLOCK_MONOTONIC` time just after the last byte was written, nanoseconds.
    public var finishedAt: UInt64
  }

  /// The path of the symbolic link to the pty slave.
  public let linkPath: String
  /// The slave device the link points to, e.g. `/dev/pts/3`.
  public let slavePath: String
  /// The encoder used for every epoch.
  public let encoder: NMEAEncoder

  private let master: Int32
  private let wakeRead: Int32
  private let wakeWrite: Int32
  private let state = Mutex(State())
  private let onWrite: (@Sendable (WrittenEpoch) -> Void)?

  private struct State {
    var statistics = Statistics()
    var started = false
    var stopped = false
    var finished = false
    var closed = false
    var pending: [Fix?] = []
    var waiters: [CheckedContinuation<Void, Never>] = []
    var task: Task<Void, Never>?
    var readerPresent = false
  }

  /// Opens the pseudo-terminal and links `linkPath` to it; nothing is written until `start`.
  ///
  /// - Parameters:
  ///   - linkPath: where to create the symbolic link; an existing symbolic link is replaced, any
  ///     other existing file is left alone and ``SimulatedReceiverError/pathIsNotASymlink(path:)``
  ///     is thrown.
  ///   - encoder: the sentences and talker to write; GP talker with RMC, VTG, GGA, GSA, GSV by default.
  ///   - deviceMode: permission bits for the pty slave (e.g. `0o666`), or `nil` to keep the
  ///     system's (owner read/write, group write). gpsd started without `-n` drops privileges
  ///     before it opens the device, so it needs read access as its own user.
  ///   - onWrite: called on the writer thread after each epoch is written (keep it short).
  /// - Throws: ``SimulatedReceiverError``.
  public init(
    linkPath: String, encoder: NMEAEncoder = NMEAEncoder(), deviceMode: mode_t? = nil,
    onWrite: (@Sendable (WrittenEpoch) -> Void)? = nil
  ) throws(SimulatedReceiverError) {
    // Like openpty(3), but every descriptor is close-on-exec from the start: a process spawned by
    // another thread at the wrong moment must not inherit the pty (it would hold the device open
    // and hide that no reader is there). Linux: /dev/ptmx, TIOCSPTLCK, TIOCGPTN.
    let masterFD = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)
    guard masterFD >= 0 else {
      let code = errno
      throw .openPTYFailed(errno: code, message: Self.errorText(code))
    }
    var unlock: Int32 = 0
    var number: UInt32 = 0
    guard ioctl(masterFD, Self.unlockPTY, &unlock) == 0,
      ioctl(masterFD, Self.ptyNumber, &number) == 0
    else {
      let code = errno
      close(masterFD)
      throw .openPTYFailed(errno: code, message: Self.errorText(code))
    }
    let slaveName = "/dev/pts/\(number)"
    let slaveFD = open(slaveName, O_RDWR | O_NOCTTY | O_CLOEXEC)
    guard slaveFD >= 0 else {
      let code = errno
      close(masterFD)
      throw .openPTYFailed(errno: code, message: "\(slaveName): " + Self.errorText(code))
    }
    // Raw mode: no echo, no CR/LF translation, no line editing, 8 bits; what a serial port gives.
    var attributes = termios()
    if tcgetattr(slaveFD, &attributes) == 0 {
      cfmakeraw(&attributes)
      _ = cfsetispeed(&attributes, speed_t(B9600))
      _ = cfsetospeed(&attributes, speed_t(B9600))
      _ = tcsetattr(slaveFD, TCSANOW, &attributes)
    }
    if let deviceMode { _ = fchmod(slaveFD, deviceMode) }
    // The simulator keeps no descriptor on the slave side (the settings above stay with the pty):
    // the master then reports a hang-up whenever no reader has the device open.
    close(slaveFD)
    do {
      try Self.link(linkPath, to: slaveName)
    } catch {
      close(masterFD)
      throw error
    }
    var pipeFDs: [Int32] = [-1, -1]
    guard pipe(&pipeFDs) == 0 else {
      let code = errno
      close(masterFD)
      unlink(linkPath)
      throw .openPTYFailed(errno: code, message: "pipe: " + Self.errorText(code))
    }
    for fd in pipeFDs {
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    self.linkPath = linkPath
    self.slavePath = slaveName
    self.encoder = encoder
    self.onWrite = onWrite
    self.master = masterFD
    self.wakeRead = pipeFDs[0]
    self.wakeWrite = pipeFDs[1]
  }

  deinit {
    let closeNow = state.withLock { state -> Bool in
      defer { state.closed = true }
      return !state.closed
    }
    if closeNow { closeDescriptors() }
  }

  /// What has been written so far.
  public var statistics: Statistics { state.withLock { $0.statistics } }

  /// Starts writing one epoch every `1 / rate` seconds, asking `fix` for each epoch.
  ///
  /// - Parameters:
  ///   - rate: epochs per second, `1...10` Hz.
  ///   - fix: called on the writer thread with the elapsed time of the epoch in seconds
  ///     (`0, 1/rate, 2/rate, ...`, exact, not measured); `nil` means write nothing this epoch.
  /// - Throws: ``SimulatedReceiverError/invalidRate(_:)`` or ``SimulatedReceiverError/alreadyStarted``.
  public func start(rate: Double, fix: @escaping @Sendable (Double) -> Fix?)
    throws(SimulatedReceiverError)
  {
    try begin(rate: rate)
    startThread(rate: rate, source: .closure(fix))
  }

  /// Starts writing the fixes of `fixes`, one per epoch at `rate`: each tick takes the next
  /// element (waiting for it if the sequence is slower). The receiver stops writing when the
  /// sequence ends or throws.
  ///
  /// - Throws: ``SimulatedReceiverError/invalidRate(_:)`` or ``SimulatedReceiverError/alreadyStarted``.
  public func start<S: AsyncSequence & Sendable>(rate: Double, fixes: S)
    throws(SimulatedReceiverError)
  where S.Element == Fix {
    try begin(rate: rate)
    let task = Task { [weak self] in
      do {
        for try await fix in fixes {
          guard let self else { return }
          guard await self.enqueue(fix) else { return }
        }
      } catch {}
      self?.enqueueEnd()
    }
    state.withLock { $0.task = task }
    startThread(rate: rate, source: .queue)
  }

  /// Stops writing, removes the link (if it still points to this pty) and closes the pty; the
  /// reader sees a hang-up. Idempotent. Once started, the writer thread does the closing within
  /// a few milliseconds; ``waitUntilFinished()`` waits for it.
  public func stop() {
    let task = state.withLock { state in
      state.stopped = true
      return state.task
    }
    task?.cancel()
    wake()
    // The writer thread closes the descriptors (and removes the link) when it sees `stopped`,
    // then wakes the waiters; if it never ran, do both here. Waking them earlier let a caller of
    // waitUntilFinished() exit before the link was removed.
    let (closeNow, waiters) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
      if state.started { return (false, []) }
      defer {
        state.closed = true
        state.waiters = []
      }
      return (!state.closed, state.waiters)
    }
    if closeNow { closeDescriptors() }
    for waiter in waiters { waiter.resume() }
  }

  /// Waits until the writer has finished (stopped, or the sequence ended) and the pty is closed.
  public func waitUntilFinished() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = state.withLock { state -> Bool in
        if state.closed || (!state.started && state.stopped) { return true }
        state.waiters.append(continuation)
        return false
      }
      if done { continuation.resume() }
    }
  }

  // MARK: Writer thread

  private enum Source: Sendable {
    case closure(@Sendable (Double) -> Fix?)
    case queue
  }

  private func begin(rate: Double) throws(SimulatedReceiverError) {
    guard rate >= 1, rate <= 10 else { throw .invalidRate(rate) }
    let alreadyStarted = state.withLock { state -> Bool in
      if state.started || state.stopped { return true }
      state.started = true
      return false
    }
    if alreadyStarted { throw .alreadyStarted }
  }

  private func startThread(rate: Double, source: Source) {
    let period = UInt64(1_000_000_000 / rate)
    do {
      try SystemIO.startThread { [self] in self.run(period: period, source: source) }
    } catch {
      finish()
    }
  }

  private func run(period: UInt64, source: Source) {
    let origin = Self.monotonicNanoseconds()
    var epoch: UInt64 = 0
    while true {
      let deadline = origin + epoch * period
      // Sleep until the epoch's deadline, discarding what the reader writes meanwhile.
      while true {
        if state.withLock({ $0.stopped }) { return finish() }
        let now = Self.monotonicNanoseconds()
        if now >= deadline { break }
        waitForInput(timeoutNanoseconds: deadline - now)
      }
      switch source {
      case .closure(let make):
        if let fix = make(Double(epoch) * Double(period) / 1e9) {
          write(fix)
        } else {
          state.withLock { $0.statistics.epochsSilent += 1 }
        }
      case .queue:
        // Take the next fix from the sequence, waiting for it if needed.
        var next: Fix?? = nil
        while next == nil {
          if state.withLock({ $0.stopped }) { return finish() }
          let (item, ended) = state.withLock { state -> (Fix??, Bool) in
            if !state.pending.isEmpty { return (state.pending.removeFirst(), false) }
            return (nil, state.finished)
          }
          if ended { return finish() }
          if let item { next = item } else { waitForInput(timeoutNanoseconds: 500_000_000) }
        }
        if let fix = next ?? nil { write(fix) }
      }
      epoch += 1
    }
  }

  private func write(_ fix: Fix) {
    let sentences = encoder.encode(fix)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(sentences.count * 80)
    for sentence in sentences { bytes.append(contentsOf: sentence.utf8) }
    guard hasReader() else {
      // Nobody has the device open: a serial line with no listener loses the data.
      state.withLock { $0.statistics.epochsWithoutReader += 1 }
      return
    }
    drainInput()
    let startedAt = Self.monotonicNanoseconds()
    var offset = 0
    var dropped = false
    while offset < bytes.count {
      let written = bytes.withUnsafeBytes { buffer in
        Glibc.write(master, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
      }
      if written > 0 {
        offset += written
      } else if written < 0 && errno == EINTR {
        continue
      } else {
        // EAGAIN (buffer full: nobody reading) or EIO: drop the rest of this epoch.
        dropped = true
        break
      }
    }
    let finishedAt = Self.monotonicNanoseconds()
    state.withLock { state in
      state.statistics.bytesWritten += offset
      if dropped {
        state.statistics.epochsDropped += 1
      } else {
        state.statistics.epochsWritten += 1
      }
    }
    if !dropped {
      onWrite?(
        WrittenEpoch(fix: fix, sentences: sentences, startedAt: startedAt, finishedAt: finishedAt))
    }
  }

  /// Whether some process has the slave side open. The master reports `POLLHUP` while no
  /// descriptor of the slave is open (the simulator keeps none). When the last reader has just
  /// left, what it did not read is flushed, so the next reader starts with fresh epochs.
  private func hasReader() -> Bool {
    var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
    _ = poll(&descriptor, 1, 0)
    let hungUp = descriptor.revents & Int16(POLLHUP) != 0
    let flush = state.withLock { state -> Bool in
      defer { state.readerPresent = !hungUp }
      return hungUp && state.readerPresent
    }
    if flush { flushUnread() }
    return !hungUp
  }

  /// Discards what was written but not read: opens the slave briefly and flushes its input queue.
  private func flushUnread() {
    let fd = open(slavePath, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { return }
    var queued: Int32 = 0
    if ioctl(fd, UInt(FIONREAD), &queued) == 0, queued > 0 {
      state.withLock { $0.statistics.bytesUnread += Int(queued) }
    }
    tcflush(fd, TCIFLUSH)
    close(fd)
  }

  /// Waits for the timeout, or until the reader writes to the device or ``stop()`` wakes the
  /// thread. While nobody has the device open the master reports a hang-up at once, so only the
  /// wake pipe is watched then: the wait costs no CPU either way.
  private func waitForInput(timeoutNanoseconds: UInt64) {
    var check = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
    _ = poll(&check, 1, 0)
    let readerPresent = check.revents & Int16(POLLHUP) == 0
    var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
    if readerPresent { fds.append(pollfd(fd: master, events: Int16(POLLIN), revents: 0)) }
    // Without a reader, look again at least every 100 ms for one that opens the device.
    let cap: UInt64 = readerPresent ? 1_000_000_000 : 100_000_000
    let milliseconds = Int32((min(timeoutNanoseconds, cap) + 999_999) / 1_000_000)
    let ready = poll(&fds, nfds_t(fds.count), milliseconds)
    guard ready > 0 else { return }
    if fds[0].revents != 0 {
      var scratch = [UInt8](repeating: 0, count: 64)
      while read(wakeRead, &scratch, scratch.count) > 0 {}
    }
    if fds.count > 1 {
      if fds[1].revents & Int16(POLLIN) != 0 {
        drainInput()
      } else if fds[1].revents != 0 {
        // The reader left during the wait (POLLHUP): pause briefly rather than poll again at once.
        var request = timespec(tv_sec: 0, tv_nsec: Int(min(timeoutNanoseconds, 10_000_000)))
        nanosleep(&request, nil)
      }
    }
  }

  private func drainInput() {
    var scratch = [UInt8](repeating: 0, count: 1024)
    var total = 0
    while true {
      let count = read(master, &scratch, scratch.count)
      if count > 0 { total += count } else { break }
    }
    if total > 0 { state.withLock { $0.statistics.bytesDiscarded += total } }
  }

  private func wake() {
    var byte: UInt8 = 1
    _ = Glibc.write(wakeWrite, &byte, 1)
  }

  /// Queues a fix from the async sequence; waits while one is already queued. Returns false once stopped.
  private func enqueue(_ fix: Fix) async -> Bool {
    while true {
      let accepted = state.withLock { state -> Bool? in
        if state.stopped { return nil }
        if state.pending.count < 2 {
          state.pending.append(fix)
          return true
        }
        return false
      }
      switch accepted {
      case nil: return false
      case true?:
        wake()
        return true
      case false?:
        try? await Task.sleep(for: .milliseconds(20))
      }
    }
  }

  private func enqueueEnd() {
    state.withLock { $0.finished = true }
    wake()
  }

  private func finish() {
    let (waiters, closeNow) = state.withLock {
      state -> ([CheckedContinuation<Void, Never>], Bool) in
      let closeNow = !state.closed
      state.closed = true
      state.stopped = true
      defer { state.waiters = [] }
      return (state.waiters, closeNow)
    }
    if closeNow { closeDescriptors() }
    for waiter in waiters { waiter.resume() }
  }

  private func closeDescriptors() {
    // Remove the link only if it still points to our slave (someone may have replaced it).
    var buffer = [CChar](repeating: 0, count: 256)
    let length = readlink(linkPath, &buffer, buffer.count - 1)
    if length > 0 {
      let target = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
      if target == slavePath { unlink(linkPath) }
    }
    close(master)
    close(wakeRead)
    close(wakeWrite)
  }

  // MARK: Helpers

  private static func link(_ path: String, to target: String) throws(SimulatedReceiverError) {
    var info = stat()
    if lstat(path, &info) == 0 {
      guard info.st_mode & S_IFMT == S_IFLNK else { throw .pathIsNotASymlink(path: path) }
    }
    // Create under a temporary name, then rename over the old link: atomic for readers.
    let temporary = path + ".tmp-\(getpid())"
    unlink(temporary)
    guard symlink(target, temporary) == 0 else {
      let code = errno
      throw .linkFailed(path: path, errno: code, message: errorText(code))
    }
    guard rename(temporary, path) == 0 else {
      let code = errno
      unlink(temporary)
      throw .linkFailed(path: path, errno: code, message: errorText(code))
    }
  }

  static func errorText(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "error \(code)" }
    return String(cString: text)
  }

  /// `TIOCSPTLCK` (`_IOW('T', 0x31, int)`): lock or unlock the slave of a pty master.
  private static let unlockPTY = UInt(0x4004_5431)
  /// `TIOCGPTN` (`_IOR('T', 0x30, unsigned int)`): the pty's number N in `/dev/pts/N`.
  private static let ptyNumber = UInt(0x8004_5430)

  /// `CLOCK_MONOTONIC` now, in nanoseconds.
  public static func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
  }
}
