import Glibc
import Synchronization

/// A POSIX thread that blocks in `poll(2)` on the descriptors its body gives, and can be woken
/// and stopped from any thread: the machinery under every reader of a live source (a serial
/// device, a TCP or UDP socket) that must neither spin nor hold a thread of Swift's pool.
///
/// The body runs once, on the thread; it loops on ``wait(for:timeoutNanoseconds:)`` and returns
/// when ``isStopping`` is true. ``requestStop()`` sets the flag and wakes the wait (one byte on a
/// pipe), so a stop is seen at once, whatever the timeout. ``waitUntilFinished()``
/// returns after the body has returned.
public final class WorkerThread: Sendable {
  /// What ``wait(for:timeoutNanoseconds:)`` found on one descriptor.
  public struct Readiness: Sendable, Hashable {
    /// `poll`'s `revents`: `POLLIN`, `POLLOUT`, `POLLHUP`, `POLLERR`, `POLLNVAL` bits.
    public var events: Int16
    /// Data (or an end of file) can be read.
    public var isReadable: Bool { events & Int16(POLLIN) != 0 }
    /// The descriptor can be written (a non-blocking `connect` finished, well or not).
    public var isWritable: Bool { events & Int16(POLLOUT) != 0 }
    /// The other side is gone (`POLLHUP`) or the descriptor failed (`POLLERR`, `POLLNVAL`).
    public var isHangUp: Bool { events & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 }
    /// Anything at all happened.
    public var any: Bool { events != 0 }
  }

  /// What to wait for on one descriptor.
  public struct Interest: Sendable, Hashable {
    /// The descriptor.
    public var fd: Int32
    /// Whether to wait for it to become writable instead of readable.
    public var writable: Bool
    /// Waits for `fd` to become readable, or writable when `writable` is true.
    public init(_ fd: Int32, writable: Bool = false) {
      self.fd = fd
      self.writable = writable
    }
  }

  /// The wake pipe: the thread polls `wakeFD`; ``requestStop()`` writes `wakeWriteFD` once.
  private let wakeFD: Int32
  private let wakeWriteFD: Int32
  private let stopping = Atomic<Bool>(false)
  private let finished = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>(
    (false, []))
  private let cpuClock = Mutex<clockid_t?>(nil)

  /// Starts `body` on a new thread; it gets this object to wait and to check for a stop.
  ///
  /// - Throws: ``SystemError`` when the wake pipe or the thread cannot be created; `body` then
  ///   never runs.
  public init(_ body: @escaping @Sendable (WorkerThread) -> Void) throws(SystemError) {
    var pair: [Int32] = [-1, -1]
    guard pipe(&pair) == 0 else { throw SystemError(errno) }
    for fd in pair {
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    wakeFD = pair[0]
    wakeWriteFD = pair[1]
    // Every stored property is set: should the thread not start, the throw runs deinit, which
    // closes the pipe (closing it here too would close numbers another thread may have reused).
    try SystemIO.startThread { [self] in
      var clock = clockid_t()
      if pthread_getcpuclockid(pthread_self(), &clock) == 0 { cpuClock.withLock { $0 = clock } }
      body(self)
      cpuClock.withLock { $0 = nil }
      let waiters = finished.withLock { state -> [CheckedContinuation<Void, Never>] in
        state.done = true
        defer { state.waiters = [] }
        return state.waiters
      }
      for waiter in waiters { waiter.resume() }
    }
  }

  deinit {
    close(wakeFD)
    close(wakeWriteFD)
  }

  /// Whether ``requestStop()`` was called.
  public var isStopping: Bool { stopping.load(ordering: .sequentiallyConsistent) }

  /// Asks the body to return: sets ``isStopping`` and wakes a wait in progress. Idempotent.
  public func requestStop() {
    guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
    // The pipe is closed only in deinit, so this write never reaches a reused descriptor.
    _ = try? SystemIO.writeAll(wakeWriteFD, [1])
  }

  /// Returns once the body has returned.
  public func waitUntilFinished() async {
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let done = finished.withLock { state -> Bool in
        if state.done { return true }
        state.waiters.append(waiter)
        return false
      }
      if done { waiter.resume() }
    }
  }

  /// CPU time of the thread so far (user + system), `nil` once it has finished.
  public var cpuTime: Duration? {
    cpuClock.withLock { clock -> Duration? in
      guard let clock else { return nil }
      var time = timespec()
      guard clock_gettime(clock, &time) == 0 else { return nil }
      return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }
  }

  /// Waits, on the thread, until one of `interests` is ready, a stop is requested, or
  /// `timeoutNanoseconds` pass (`nil`: no timeout; a wait longer than a minute is cut to one
  /// minute, after which the caller simply waits again). Uses no CPU while waiting.
  ///
  /// - Returns: one ``Readiness`` per interest, in order (all empty after a timeout or a stop).
  public func wait(for interests: [Interest], timeoutNanoseconds: UInt64?) -> [Readiness] {
    var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
    for interest in interests {
      fds.append(
        pollfd(fd: interest.fd, events: Int16(interest.writable ? POLLOUT : POLLIN), revents: 0))
    }
    let milliseconds: Int32 =
      timeoutNanoseconds.map { Int32(min(($0 + 999_999) / 1_000_000, 60_000)) } ?? 60_000
    var ready: Int32
    repeat {
      ready = poll(&fds, nfds_t(fds.count), milliseconds)
    } while ready < 0 && errno == EINTR
    var result = [Readiness](repeating: Readiness(events: 0), count: interests.count)
    guard ready > 0, !isStopping else { return result }
    for index in result.indices where index + 1 < fds.count {
      result[index] = Readiness(events: fds[index + 1].revents)
    }
    return result
  }

  /// Sleeps on the thread for `nanoseconds`, or until a stop is requested.
  public func sleep(nanoseconds: UInt64) {
    _ = wait(for: [], timeoutNanoseconds: nanoseconds)
  }
}
