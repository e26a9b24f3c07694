import SystemIO
import Glibc
import NMEA
import Synchronization
import LocationModel


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
  /// The encoder used for every epoch.
  public let encoder: NMEAEncoder

  /// The pty master and its slave's path; both change when an `unplug` fault reopens the pty.
  let pty: Mutex<PTYHandle>
  let wakeRead: Int32
  let wakeWrite: Int32
  let state = Mutex(State())
  let onWrite: (@Sendable (WrittenEpoch) -> Void)?
  /// Baud pacing and injected faults of the output.
  public let output: SimulatedOutput
  let outputStage: SimulatedOutputStage

  struct State {
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
  ///   - output: baud pacing and injected faults (none by default: unpaced, faultless).
  ///   - onWrite: called on the writer thread after each epoch is written (keep it short).
  /// - Throws: ``SimulatedReceiverError``.
  public init(
    linkPath: String, encoder: NMEAEncoder = NMEAEncoder(), deviceMode: mode_t? = nil,
    output: SimulatedOutput = SimulatedOutput(), onWrite: (@Sendable (WrittenEpoch) -> Void)? = nil
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
      // The line's own rate (9600 when unpaced): a reader that keeps it reads the bytes as sent.
      let speed = Self.termiosSpeed(output.baud ?? 9600)
      _ = cfsetispeed(&attributes, speed)
      _ = cfsetospeed(&attributes, speed)
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
    self.encoder = encoder
    self.onWrite = onWrite
    self.output = output
    self.outputStage = SimulatedOutputStage(output)
    self.pty = Mutex(PTYHandle(master: masterFD, slavePath: slaveName, deviceMode: deviceMode))
    self.wakeRead = pipeFDs[0]
    self.wakeWrite = pipeFDs[1]
  }

  deinit {
    let closeNow = state.withLock { state -> Bool in
      defer { state.closed = true }
      return !state.closed
    }
    if closeNow { closeDescriptors() }
    close(wakeRead)
    close(wakeWrite)
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
}
