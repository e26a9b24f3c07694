import Glibc
import LocationCore
import LocationModel
import SystemIO

/// The connection thread's work for one ``GPSDBackend`` run: the body of a
/// ``SystemIO/WorkerThread`` (``BackendThread``), which owns the thread, its wake-up and its
/// completion.
final class GPSDWorker: @unchecked Sendable {
  // @unchecked: after init, everything is touched only by the worker thread.
  private let endpoint: GPSDEndpoint
  private let uri: String
  private let options: Options
  private let queue: EventQueue<BackendEvent>

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

  // MARK: Thread body

  /// Connects, watches and reconnects until `thread` is asked to stop; then flushes the held
  /// epoch and reports ``BackendStatus/stopped``.
  func run(_ thread: WorkerThread) {
    report(.connecting, "connecting to gpsd at \(endpoint.host):\(endpoint.port)")
    var delay = Self.nanoseconds(options.reconnectInitialDelay)
    let maximumDelay = Self.nanoseconds(options.reconnectMaximumDelay)
    while !thread.isStopping {
      do {
        let session = try GPSDSession(host: endpoint.host, port: endpoint.port)
        defer { session.close() }
        try session.watch(device: endpoint.device)
        delay = Self.nanoseconds(options.reconnectInitialDelay)
        report(
          .connected,
          "watching gpsd at \(endpoint.host):\(endpoint.port)"
            + (endpoint.device.map { " device \($0)" } ?? ""))
        try serve(session, on: thread)
        // Returned normally: stop requested.
        session.unwatch()
      } catch {
        if thread.isStopping { break }
        report(.disconnected, "\(error); retrying in \(delay / 1_000_000) ms")
        thread.sleep(nanoseconds: delay)
        delay = min(delay * 2, maximumDelay)
      }
    }
    for fix in deduplicator.flushAll() { emit(fix) }
    report(.stopped, nil)
  }

  /// Reads reports until stop (returns) or connection loss (throws).
  private func serve(_ session: GPSDSession, on thread: WorkerThread) throws(GPSDSessionError) {
    noFixDeadline = Self.now() + Self.nanoseconds(options.noFixTimeout)
    while !thread.isStopping {
      if !session.hasBufferedInput {
        let now = Self.now()
        // With no timer pending, wake up once a minute anyway (poll's cap); nothing spins.
        let deadline =
          [noFixDeadline, deduplicator.deadline].compactMap { $0 }.min() ?? now + 60_000_000_000
        let ready = thread.wait(
          for: [WorkerThread.Interest(session.fileDescriptor)],
          timeoutNanoseconds: deadline > now ? deadline - now : 0)
        if thread.isStopping { return }
        // POLLHUP/POLLERR count as readable: gps_read then reports the loss.
        let readable = ready.first.map { $0.isReadable || $0.isHangUp } ?? false
        if !readable {
          handleTimers()
          continue
        }
      }
      // Drain everything libgps has buffered before waiting again.
      repeat {
        handle(try session.read())
      } while session.hasBufferedInput && !thread.isStopping
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

  static func now() -> UInt64 { MonotonicClock.nanoseconds() }

  static func nanoseconds(_ duration: Duration) -> UInt64 { MonotonicClock.nanoseconds(of: duration) }
}
