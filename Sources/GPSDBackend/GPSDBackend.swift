import SystemIO
import CGPS
import Glibc
import LocationCore
import NMEA
import Synchronization
import LocationModel

/// Why a `gpsd://` URI was rejected.
public enum GPSDURIError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The URI does not start with `gpsd://`.
  case notGPSD(String)
  /// The host part is empty.
  case missingHost(String)
  /// The host is neither a name or IPv4 address (letters, digits, `-`, `.`, `_`) nor an IPv6
  /// address in brackets (hexadecimal digits, `:`, `.`, and a `%` zone of letters and digits).
  case invalidHost(String)
  /// The port is not a number in `1...65535`.
  case invalidPort(String)
  /// The device part is not an absolute path (`gpsd://host:port/dev/ttyACM0`).
  case invalidDevice(String)
  /// A query parameter other than `rollover-floor=YYYY-MM-DD|none`.
  case invalidParameter(String)
  /// A query parameter given more than once.
  case repeatedParameter(String)

  /// A one-line explanation with the expected form.
  public var description: String {
    let form = "expected gpsd://HOST[:PORT][/DEVICE], e.g. gpsd://localhost:2947/dev/ttyACM0"
    switch self {
    case .notGPSD(let uri): return "\"\(uri)\" is not a gpsd URI; \(form)"
    case .missingHost(let uri): return "\"\(uri)\" has no host; \(form)"
    case .invalidHost(let host):
      return "host \"\(host)\" is not a host name, an IPv4 address or an IPv6 address in brackets; \(form)"
    case .invalidPort(let port): return "port \"\(port)\" is not a number in 1...65535; \(form)"
    case .invalidDevice(let device): return "device \"\(device)\" is not an absolute path; \(form)"
    case .invalidParameter(let parameter):
      return "parameter \"\(parameter)\" is not rollover-floor=YYYY-MM-DD (1980 to 2079) or rollover-floor=none; \(form)"
    case .repeatedParameter(let name):
      return "parameter \"\(name)\" is given more than once: give it once; \(form)"
    }
  }
}

/// Where gpsd listens and, optionally, the one device to watch.
public struct GPSDEndpoint: Sendable, Hashable {
  /// Host name or address (`localhost`, `192.0.2.7`, `[::1]` is written without brackets here).
  public var host: String
  /// TCP port, 2947 by default.
  public var port: UInt16
  /// Device path to watch (`/dev/ttyACM0`); `nil` watches every device gpsd serves.
  public var device: String?

  /// gpsd's IANA port.
  public static let defaultPort: UInt16 = 2947

  /// Parses `gpsd://HOST[:PORT][/DEVICE]`; `gpsd://` alone and `gpsd` mean `localhost:2947`.
  ///
  /// IPv6 hosts go in brackets: `gpsd://[::1]:2947`. The device is everything after the first
  /// `/` following the authority, kept absolute (`gpsd://localhost/dev/ttyUSB0` -> `/dev/ttyUSB0`).
  ///
  /// - Throws: ``GPSDURIError``.
  public init(uri fullURI: String) throws(GPSDURIError) {
    var uri = fullURI
    var floor: Int?? = nil
    if let question = fullURI.firstIndex(of: "?") {
      uri = String(fullURI[..<question])
      for parameter in fullURI[fullURI.index(after: question)...].split(separator: "&") {
        let pair = parameter.split(separator: "=", maxSplits: 1).map(String.init)
        guard pair.count == 2, pair[0] == "rollover-floor" else { throw .invalidParameter(String(parameter)) }
        guard floor == nil else { throw .repeatedParameter(pair[0]) }
        if pair[1] == "none" {
          floor = .some(nil)
        } else if let day = CivilDate.days(iso: pair[1]) {
          floor = .some(day)
        } else {
          throw .invalidParameter(String(parameter))
        }
      }
    }
    try self.init(baseURI: uri)
    if let floor { rolloverFloor = floor }
  }

  private init(baseURI uri: String) throws(GPSDURIError) {
    if uri == "gpsd" || uri == "gpsd://" {
      self.init(host: "localhost", port: Self.defaultPort, device: nil)
      return
    }
    guard uri.hasPrefix("gpsd://") else { throw .notGPSD(uri) }
    let rest = uri.dropFirst("gpsd://".count)
    let authority: Substring
    let device: String?
    if let slash = rest.firstIndex(of: "/") {
      authority = rest[..<slash]
      let path = String(rest[slash...])
      device = path == "/" ? nil : path
    } else {
      authority = rest
      device = nil
    }
    var host: Substring
    var portText: Substring?
    if authority.hasPrefix("[") {
      guard let close = authority.firstIndex(of: "]") else { throw .missingHost(uri) }
      host = authority[authority.index(after: authority.startIndex)..<close]
      guard Self.isIPv6Literal(host) else { throw .invalidHost(String(host)) }
      let after = authority[authority.index(after: close)...]
      if after.hasPrefix(":") {
        portText = after.dropFirst()
      } else if !after.isEmpty {
        throw .invalidPort(String(after))
      }
    } else if let colon = authority.lastIndex(of: ":") {
      host = authority[..<colon]
      portText = authority[authority.index(after: colon)...]
    } else {
      host = authority
    }
    // A DNS name is at most 253 characters (RFC 1035 section 2.3.4).
    if host.utf8.count > 253 || (!authority.hasPrefix("[") && !Self.isHostName(host)) {
      throw .invalidHost(String(host.prefix(64)))
    }
    if host.isEmpty { host = "localhost" }
    var port = Self.defaultPort
    if let portText {
      guard let value = Int(portText), (1...65535).contains(value) else {
        throw .invalidPort(String(portText))
      }
      port = UInt16(value)
    }
    // A device is matched against the paths gpsd reports; control characters or ".." segments
    // never name one and would only reach logs and gpsd's command line.
    if let device,
      device.count < 2 || device.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        || device.split(separator: "/").contains("..")
    {
      throw .invalidDevice(device)
    }
    self.init(host: String(host), port: port, device: device)
  }

  /// RFC 3986 reg-name or IPv4address as gpsd hosts use them: letters, digits, `-`, `.`, `_`
  /// (empty means localhost).
  static func isHostName(_ host: Substring) -> Bool {
    host.utf8.allSatisfy { b in
      (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) || b == 0x2D || b == 0x2E || b == 0x5F
    }
  }

  /// An IPv6 address as written in brackets (RFC 3986 IP-literal, RFC 6874 zone): hexadecimal
  /// digits, `:` and `.` (an embedded IPv4 address), at least one `:`, then an optional `%` and a
  /// zone of letters, digits, `-`, `.`, `_`. Empty means localhost.
  static func isIPv6Literal(_ host: Substring) -> Bool {
    if host.isEmpty { return true }
    let address: Substring
    if let percent = host.firstIndex(of: "%") {
      let zone = host[host.index(after: percent)...]
      guard !zone.isEmpty, isHostName(zone) else { return false }
      address = host[..<percent]
    } else {
      address = host
    }
    return address.contains(":")
      && address.utf8.allSatisfy { b in
        (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x66) || b == 0x3A || b == 0x2E
      }
  }

  /// Creates an endpoint from its parts.
  public init(host: String, port: UInt16 = GPSDEndpoint.defaultPort, device: String? = nil) {
    self.host = host
    self.port = port
    self.device = device
  }

  /// GPS week-rollover floor for fixes from this gpsd, days since 1970-01-01: a fix dated before
  /// it moves forward in 1024-week steps until it is not, and its provenance says so
  /// (`rolloverWeeks`). URI parameter `rollover-floor=YYYY-MM-DD`, or `none` to keep gpsd's
  /// dates. Default ``liveRolloverFloor``.
  public var rolloverFloor: Int? = GPSDEndpoint.liveRolloverFloor

  /// The default floor of live sources: 2019-04-07, the last GPS week rollover. A live receiver
  /// reports the present, so a date before the last rollover can only come from firmware whose
  /// week counter wrapped (gpsd 3.22 itself moves dates before 2017 forward once, by its build's
  /// leap-second count, which this floor extends to any earlier era).
  public static let liveRolloverFloor: Int? = CivilDate.days(year: 2019, month: 4, day: 7)

  /// The canonical URI, `gpsd://host:port[/device]`.
  public var uri: String {
    let shownHost = host.contains(":") ? "[\(host)]" : host
    return "gpsd://\(shownHost):\(port)" + (device ?? "")
  }
}

/// Location backend over gpsd, through libgps (gpsd JSON protocol, `?WATCH` streaming).
///
/// Behaviour:
/// - **Connection.** A dedicated thread (never the Swift concurrency pool) connects with
///   `gps_open`, sends `?WATCH={"enable":true,"json":true}` (with `"device"` for a
///   `gpsd://host:port/dev/...` URI) and waits on the socket with `poll`; while waiting it uses no
///   CPU.
/// - **Mapping.** TPV becomes a ``Fix`` (mode, time, latitude/longitude, altMSL, geoid separation,
///   speed, track, climb, magnetic variation, status as quality, DGPS age and station); the latest
///   SKY adds HDOP/VDOP/PDOP, satellites used and the sky view; GST of the same epoch adds
///   ``ErrorEstimates``. Whatever gpsd leaves out stays `nil`, never 0.
/// - **One fix per epoch.** gpsd may report an epoch more than once (2D after RMC, 3D after GGA).
///   A 3D fix is emitted at once; a lesser one is held until the next epoch's report or
///   ``Options/epochSettleDelay``, and replaced if a better one of the same epoch arrives. Later
///   reports of an epoch already emitted are dropped.
/// - **Status.** `connecting` at start, `connected` once watching, `disconnected` (with the libgps
///   message) when gpsd is absent, stops or restarts, `noFix` when gpsd reports mode 0/1 or no
///   fix arrived for ``Options/noFixTimeout``; `connected` again when fixes return; `stopped` after
///   ``stop()``.
/// - **Recovery.** Reconnects on its own with capped exponential backoff: the first retry after
///   ``Options/reconnectInitialDelay`` (250 ms), doubling up to ``Options/reconnectMaximumDelay`` (5 s).
/// - **Power.** ``stop()`` sends `?WATCH={"enable":false}` and closes the socket before it returns,
///   so gpsd can close the device and power the receiver down once no other client watches.
///
/// Locations carry `Provenance(backend: uri, source: device, isSimulated: false)`.
public final class GPSDBackend: LocationBackend {
  /// Tuning of timeouts and retries.
  public struct Options: Sendable, Hashable {
    /// Delay before the first reconnection attempt; default 250 ms.
    public var reconnectInitialDelay: Duration = .milliseconds(250)
    /// Longest delay between reconnection attempts; default 5 s.
    public var reconnectMaximumDelay: Duration = .seconds(5)
    /// Report ``BackendStatus/noFix`` when connected but no position fix arrived for this long;
    /// default 5 s.
    public var noFixTimeout: Duration = .seconds(5)
    /// How long a 2D (or lesser) report waits for a better report of the same epoch before it is
    /// emitted; default 150 ms. 3D fixes never wait.
    public var epochSettleDelay: Duration = .milliseconds(150)
    /// Most locations kept for a consumer that is not reading (a live source cannot wait);
    /// beyond it the oldest locations are dropped. Status changes are never dropped. Default 256.
    public var bufferedLocations = 256

    /// Creates the default options.
    public init() {}
  }

  /// The backend URI as given (`gpsd://localhost:2947`).
  public let uri: String
  /// The parsed endpoint.
  public let endpoint: GPSDEndpoint
  /// Timeouts and retries.
  public let options: Options
  /// Every event, for the backend's whole life; one consumer. Status changes are never dropped;
  /// a consumer that falls more than ``Options/bufferedLocations`` locations behind loses the
  /// oldest ones.
  public let events: AsyncStream<BackendEvent>

  private let buffer: LiveEventBuffer
  private let running = Mutex<GPSDWorker?>(nil)

  /// Creates a backend for `uri` (`gpsd://HOST[:PORT][/DEVICE]`, default port 2947); nothing
  /// connects until ``start()``.
  ///
  /// - Throws: ``GPSDURIError`` when the URI is malformed.
  public init(uri: String, options: Options = Options()) throws(GPSDURIError) {
    self.endpoint = try GPSDEndpoint(uri: uri)
    self.uri = uri
    self.options = options
    buffer = LiveEventBuffer(locationCapacity: options.bufferedLocations)
    events = buffer.stream
  }

  deinit {
    running.withLock { $0?.requestStop() }
    buffer.finish()
  }

  /// Starts the connection thread; returns at once (connection and retries happen in the
  /// background and are reported as status events). Idempotent while running.
  ///
  /// - Throws: ``GPSDBackendError/libraryUnavailable(_:)`` when libgps cannot be loaded (it is
  ///   loaded on the first start), ``GPSDBackendError/threadCreationFailed(errno:)`` when no
  ///   thread can be created.
  public func start() async throws {
    if let reason = locationd_gps_load() {
      throw GPSDBackendError.libraryUnavailable(String(cString: reason))
    }
    try running.withLock { current throws(GPSDBackendError) in
      guard current == nil else { return }
      let worker = GPSDWorker(
        endpoint: endpoint, uri: uri, options: options, buffer: buffer)
      try worker.launch()
      current = worker
    }
  }

  /// CPU time used so far by the connection thread (user + system), or `nil` when it is not
  /// running. For diagnostics and tests: while gpsd is away or silent it stays flat.
  package var connectionThreadCPUTime: Duration? {
    running.withLock { $0?.cpuTime }
  }

  /// Stops: closes the watch (`?WATCH={"enable":false}`) and the connection, then reports
  /// ``BackendStatus/stopped``. Returns once the connection thread has finished. Idempotent.
  public func stop() async {
    guard
      let worker = running.withLock({ current -> GPSDWorker? in
        defer { current = nil }
        return current
      })
    else { return }
    worker.requestStop()
    await worker.waitUntilFinished()
  }
}

/// Errors of ``GPSDBackend`` that are not about the URI.
public enum GPSDBackendError: Error, Sendable, Hashable, CustomStringConvertible {
  /// `pthread_create` or `pipe` failed.
  case threadCreationFailed(errno: Int32)
  /// libgps could not be loaded; the text says what to install.
  case libraryUnavailable(String)

  /// A one-line explanation.
  public var description: String {
    switch self {
    case .threadCreationFailed(let code): return "cannot start the gpsd thread (errno \(code))"
    case .libraryUnavailable(let reason): return reason
    }
  }
}

/// Keeps one fix per epoch: emits a 3D fix at once, holds lesser ones until the epoch is over.
///
/// Pure and synchronous; times are `CLOCK_MONOTONIC` nanoseconds supplied by the caller.
public struct EpochDeduplicator: Sendable {
  /// How long a lesser fix waits for a better one of the same epoch, nanoseconds.
  public var settleNanoseconds: UInt64
  private var pending: Fix?
  private var pendingSince: UInt64 = 0
  private var lastEmittedTime: Int64?

  /// Creates a deduplicator with the given settle delay.
  public init(settleNanoseconds: UInt64) { self.settleNanoseconds = settleNanoseconds }

  /// When ``flush(now:)`` should next be called, or `nil` when nothing is held.
  public var deadline: UInt64? { pending == nil ? nil : pendingSince + settleNanoseconds }

  /// Adds a report; returns the fixes to emit now, in order (0, 1 or 2).
  public mutating func add(_ fix: Fix, now: UInt64) -> [Fix] {
    guard let time = fix.time else {
      // No epoch time: nothing to merge with; emit as is.
      return flushAll() + [fix]
    }
    if time == lastEmittedTime { return [] }
    var out: [Fix] = []
    if let held = pending, held.time == time {
      // Same epoch again: keep the better report (higher mode; on a tie the later one).
      if fix.mode >= held.mode { pending = fix }
    } else {
      out = flushAll()
      pending = fix
      pendingSince = now
    }
    if let held = pending, held.mode == .fix3D {
      out.append(held)
      lastEmittedTime = held.time
      pending = nil
    }
    return out
  }

  /// Emits the held fix if its settle delay has passed.
  public mutating func flush(now: UInt64) -> [Fix] {
    guard let deadline, now >= deadline else { return [] }
    return flushAll()
  }

  /// Emits the held fix, if any, regardless of time.
  public mutating func flushAll() -> [Fix] {
    guard let held = pending else { return [] }
    pending = nil
    lastEmittedTime = held.time
    return [held]
  }
}

/// Maps gpsd reports into the domain model.
public enum GPSDMapping {
  /// `fix` with its time moved forward in 1024-week steps (7168 days) until it is not before
  /// `floor` (days since 1970-01-01), and the number of weeks added (0 when none, or without a
  /// floor or a time).
  public static func applyingRolloverFloor(_ floor: Int?, to fix: Fix) -> (fix: Fix, weeks: Int) {
    guard let floor, var time = fix.time else { return (fix, 0) }
    var fix = fix
    var weeks = 0
    let floorTime = Int64(floor) * 86_400_000
    while time < floorTime {
      time += Int64(FixAssembler.rolloverDays) * 86_400_000
      weeks += 1024
    }
    fix.time = time
    return (fix, weeks)
  }

  /// A TPV as a ``Fix``, with the sky view and DOPs of `sky` and the estimates of `gst` (when its
  /// time matches). Fields gpsd did not send stay `nil`; a position is set only in mode 2 or 3.
  public static func fix(from tpv: GPSDTPV, sky: GPSDSky?, gst: GPSDGST?) -> Fix {
    var fix = Fix(mode: FixMode(rawValue: max(0, min(3, tpv.mode))) ?? .unknown)
    fix.time = tpv.time
    if let time = tpv.time {
      fix.timeOfDay = Int32(((time % 86_400_000) + 86_400_000) % 86_400_000)
    }
    if fix.mode.hasPosition, let latitude = tpv.latitude, let longitude = tpv.longitude {
      let coordinate = Coordinate(latitude: latitude, longitude: longitude)
      if coordinate.isValid { fix.coordinate = coordinate }
    }
    if fix.coordinate == nil && fix.mode.hasPosition { fix.mode = .noFix }
    fix.quality = quality(status: tpv.status, mode: fix.mode)
    if fix.mode == .fix3D {
      fix.geoidSeparation = tpv.geoidSeparation
      if let msl = tpv.altitudeMSL {
        fix.altitudeMSL = msl
      } else if let hae = tpv.altitudeHAE, let separation = tpv.geoidSeparation {
        fix.altitudeMSL = hae - separation
      }
      fix.climb = tpv.climb
    } else {
      fix.geoidSeparation = tpv.geoidSeparation
    }
    if fix.mode.hasPosition {
      fix.speedOverGround = tpv.speed
      fix.courseOverGround = tpv.track
    }
    fix.magneticVariation = tpv.magneticVariation
    fix.dgpsAge = tpv.dgpsAge
    fix.dgpsStation = tpv.dgpsStation
    if let sky {
      fix.hdop = sky.hdop
      fix.vdop = sky.vdop
      fix.pdop = sky.pdop
      fix.satellites = sky.satellites.map { satellite in
        Satellite(
          constellation: Constellation(rawValue: satellite.gnssID) ?? .gps, prn: satellite.prn,
          elevation: satellite.elevation, azimuth: satellite.azimuth, snr: satellite.snr,
          used: satellite.used)
      }
      let used = sky.satellites.filter(\.used).count
      fix.satellitesUsed = sky.satellitesUsed ?? (sky.satellites.isEmpty ? nil : used)
    }
    if let gst, gst.time == tpv.time { fix.errorEstimates = gst.estimates }
    return fix
  }

  /// gpsd `status` as a GGA-style quality; `nil` when unknown.
  public static func quality(status: Int?, mode: FixMode) -> FixQuality? {
    guard mode.hasPosition else { return status == nil ? nil : .invalid }
    switch status {
    case nil: return nil
    case 0?, 1?: return .gps
    case 2?: return .dgps
    case 3?: return .rtkFixed
    case 4?: return .rtkFloat
    case 5?, 6?: return .deadReckoning
    case 7?: return .manual
    case 8?: return .simulator
    case 9?: return .pps
    default: return nil
    }
  }
}

/// The connection thread of one ``GPSDBackend`` run.
final class GPSDWorker: @unchecked Sendable {
  // @unchecked: `stopRequested` is atomic; the wake pipe descriptors are immutable after init;
  // everything else is touched only by the worker thread.
  private let endpoint: GPSDEndpoint
  private let uri: String
  private let options: Options
  private let buffer: LiveEventBuffer
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
    buffer: LiveEventBuffer
  ) {
    self.endpoint = endpoint
    self.uri = uri
    self.options = options
    self.buffer = buffer
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
      if lastStatus != .noFix {
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
        if fix.mode == .noFix, lastStatus != .noFix { self.report(.noFix, "gpsd reports no fix") }
        return
      }
      for ready in deduplicator.add(fix, now: Self.now()) { emit(ready) }
    case .sky(let report):
      sky = report
    case .gst(let report):
      gst = report
    case .device(let path, let activated):
      if !activated, path == device || endpoint.device == path {
        self.report(.noFix, "gpsd closed device \(path)")
      }
    case .error(let message):
      buffer.push(.error("gpsd: \(message)"))
    case .other:
      break
    }
  }

  private func emit(_ fix: Fix) {
    noFixDeadline = Self.now() + Self.nanoseconds(options.noFixTimeout)
    if lastStatus != .connected { report(.connected, "receiving fixes") }
    let (fix, weeks) = GPSDMapping.applyingRolloverFloor(endpoint.rolloverFloor, to: fix)
    let provenance = Provenance(
      backend: uri, source: device ?? endpoint.device, isSimulated: false, rolloverWeeks: weeks == 0 ? nil : weeks)
    buffer.push(.location(Location(fix: fix, provenance: provenance)))
  }

  private func report(_ status: BackendStatus, _ detail: String?) {
    // Repeated disconnections while retrying are reported once.
    if status == lastStatus && status == .disconnected { return }
    lastStatus = status
    buffer.push(.status(status, detail: detail))
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
