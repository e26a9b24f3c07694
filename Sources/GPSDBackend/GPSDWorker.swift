import Glibc
import LocationCore
import LocationModel
import Synchronization
import SystemIO

/// The connection thread of one ``GPSDBackend`` run.
final class GPSDWorker: @unchecked Sendable {
  // @unchecked: `stopRequested` is atomic; the wake pipe descriptors are immutable after init;
  // everything else is touched only by the worker thread.
  private let endpoint: GPSDEndpoint
  private let uri: String
  private let options: Options
  private let queue: EventQueue<BackendEvent>
  private let stopRequested = Atomic<Bool>(false)
  private let finished = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>(
    (false, []))
  /// The connection thread's CPU clock while it runs; cleared (under the lock) before it exits.
  private let cpuClock = Mutex<clockid_t?>(nil)
  private var wakeRead: Int32 = -1
  private var wakeWrite: Int32 = -1

  typealias Options = GPSDBackend.Options

  // Worker-thread state.
  private var lastStatus: BackendStatus?
  private var deduplicator: EpochDeduplicator
  private var sky: GPSDSky?
  private var gst: GPSDGST?
  /// When to report "no fix" if no fix arrives; `nil` once reported (until fixes return).
  private var noFixDeadline: UInt64?
  private var device: String?

  init(
    endpoint: GPSDEndpoint, uri: String, options: Options,
    queue: EventQueue<BackendEvent>
  ) {
    self.endpoint = endpoint
    self.uri = uri
    self.options = options
    self.queue = queue
    self.deduplicator = EpochDeduplicator(
      settleNanoseconds: Self.nanoseconds(options.epochSettleDelay))
  }

  func launch() throws(GPSDBackendError) {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { throw .threadCreationFailed(errno: errno) }
    for fd in fds {
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    wakeRead = fds[0]
    wakeWrite = fds[1]
    do {
      try SystemIO.startThread { [self] in self.run() }
    } catch {
      close(wakeRead)
      close(wakeWrite)
      throw .threadCreationFailed(errno: error.code)
    }
  }

  func requestStop() {
    stopRequested.store(true, ordering: .sequentiallyConsistent)
    var byte: UInt8 = 1
    _ = write(wakeWrite, &byte, 1)
  }

  func waitUntilFinished() async {
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let done = finished.withLock { state -> Bool in
        if state.done { return true }
        state.waiters.append(waiter)
        return false
      }
      if done { waiter.resume() }
    }
  }

  /// CPU time of the connection thread, `nil` once it has exited.
  var cpuTime: Duration? {
    cpuClock.withLock { clock -> Duration? in
      guard let clock else { return nil }
      var time = timespec()
      guard clock_gettime(clock, &time) == 0 else { return nil }
      return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }
  }

  private var isStopping: Bool { stopRequested.load(ordering: .sequentiallyConsistent) }

  // MARK: Thread body

  private func run() {
    var clock = clockid_t()
    if pthread_getcpuclockid(pthread_self(), &clock) == 0 { cpuClock.withLock { $0 = clock } }
    defer { cpuClock.withLock { $0 = nil } }
    report(.connecting, "connecting to gpsd at \(endpoint.host):\(endpoint.port)")
    var delay = Self.nanoseconds(options.reconnectInitialDelay)
    let maximumDelay = Self.nanoseconds(options.reconnectMaximumDelay)
    while !isStopping {
      do {
        let session = try GPSDSession(host: endpoint.host, port: endpoint.port)
        defer { session.close() }
        try session.watch(device: endpoint.device)
        delay = Self.nanoseconds(options.reconnectInitialDelay)
        report(
          .connected,
          "watching gpsd at \(endpoint.host):\(endpoint.port)"
            + (endpoint.device.map { " device \($0)" } ?? ""))
        try serve(session)
        // Returned normally: stop requested.
        session.unwatch()
      } catch {
        if isStopping { break }
        report(.disconnected, "\(error); retrying in \(delay / 1_000_000) ms")
        _ = waitForWake(fd: nil, timeoutNanoseconds: delay)
        delay = min(delay * 2, maximumDelay)
      }
    }
    for fix in deduplicator.flushAll() { emit(fix) }
    report(.stopped, nil)
    close(wakeRead)
    close(wakeWrite)
    let waiters = finished.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.done = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Reads reports until stop (returns) or connection loss (throws).
  private func serve(_ session: GPSDSession) throws(GPSDSessionError) {
    noFixDeadline = Self.now() + Self.nanoseconds(options.noFixTimeout)
    while !isStopping {
      if !session.hasBufferedInput {
        let now = Self.now()
        // With no timer pending, wake up once a minute anyway (poll's cap); nothing spins.
        let deadline =
          [noFixDeadline, deduplicator.deadline].compactMap { $0 }.min() ?? now + 60_000_000_000
        let readable = waitForWake(
          fd: session.fileDescriptor, timeoutNanoseconds: deadline > now ? deadline - now : 0)
        if isStopping { return }
        if !readable {
          handleTimers()
          continue
        }
      }
      // Drain everything libgps has buffered before waiting again.
      repeat {
        handle(try session.read())
      } while session.hasBufferedInput && !isStopping
      handleTimers()
    }
  }

  private func handleTimers() {
    let now = Self.now()
    for fix in deduplicator.flush(now: now) { emit(fix) }
    if let deadline = noFixDeadline, now >= deadline {
      noFixDeadline = nil
      // A removed device stays reported as removed: its silence is no news.
      if lastStatus != .noFix && lastStatus != .deviceRemoved {
        report(
          .noFix, "no fix from gpsd for \(Self.nanoseconds(options.noFixTimeout) / 1_000_000) ms")
      }
    }
  }

  private func handle(_ report: GPSDReport) {
    switch report {
    case .tpv(let tpv):
      if let path = tpv.device { device = path }
      let fix = GPSDMapping.fix(from: tpv, sky: sky, gst: gst)
      guard fix.mode.hasPosition else {
        if fix.mode == .noFix, lastStatus != .noFix, lastStatus != .deviceRemoved {
          self.report(.noFix, "gpsd reports no fix")
        }
        return
      }
      for ready in deduplicator.add(fix, now: Self.now()) { emit(ready) }
    case .sky(let report):
      sky = report
    case .gst(let report):
      gst = report
    case .device(let path, let activated):
      // gpsd announces a device it closes (unplugged, read error) with `activated` 0 at once,
      // and the same device again, activated, when it reopens it (`gpsdctl add`, a udev rule).
      guard path == device || endpoint.device == path || (device == nil && endpoint.device == nil)
      else { break }
      if !activated {
        device = path
        self.report(.deviceRemoved, "gpsd closed device \(path)")
      } else if lastStatus == .deviceRemoved {
        self.report(.connected, "gpsd reopened device \(path)")
        noFixDeadline = Self.now() + Self.nanoseconds(options.noFixTimeout)
      }
    case .error(let message):
      queue.post(.error("gpsd: \(message)"))
    case .other:
      break
    }
  }

  private func emit(_ fix: Fix) {
    noFixDeadline = Self.now() + Self.nanoseconds(options.noFixTimeout)
    if lastStatus != .connected { report(.connected, "receiving fixes") }
    let (fix, weeks) = GPSDMapping.applyingRolloverFloor(endpoint.rolloverFloor, to: fix)
    let provenance = Provenance(
      backend: uri, source: device ?? endpoint.device, isSimulated: false,
      rolloverWeeks: weeks == 0 ? nil : weeks)
    queue.post(.location(Location(fix: fix, provenance: provenance)))
  }

  private func report(_ status: BackendStatus, _ detail: String?) {
    // Repeated disconnections while retrying are reported once.
    if status == lastStatus && status == .disconnected { return }
    lastStatus = status
    queue.post(.status(status, detail: detail))
  }

  /// Waits until `fd` is readable, the wake pipe is written, or the timeout passes (no CPU).
  /// Returns whether `fd` became readable.
  private func waitForWake(fd: Int32?, timeoutNanoseconds: UInt64) -> Bool {
    var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
    if let fd { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
    let milliseconds = Int32(min((timeoutNanoseconds + 999_999) / 1_000_000, 60_000))
    let ready = poll(&fds, nfds_t(fds.count), milliseconds)
    guard ready > 0 else { return false }
    if fds[0].revents != 0 {
      var scratch = [UInt8](repeating: 0, count: 16)
      while read(wakeRead, &scratch, scratch.count) > 0 {}
    }
    // POLLHUP/POLLERR count as readable: gps_read then reports the loss.
    return fds.count > 1 && fds[1].revents != 0
  }

  static func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
  }

  static func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    guard seconds >= 0 else { return 0 }
    return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
  }
}
