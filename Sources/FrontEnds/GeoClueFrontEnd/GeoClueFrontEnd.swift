import CLinux
import CSDBus
import Glibc
import LocationModel
import LocationProtocol
import ServiceCore
import Synchronization
import SystemIO

/// Which message bus the GeoClue2 front-end serves on (`locationd --dbus`).
public enum GeoClueBusKind: String, Sendable, CaseIterable {
  /// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`): where
  /// GeoClue lives and applications look for it.
  case system
  /// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`).
  case session
}

/// Bounds of the GeoClue2 front-end.
public struct GeoClueLimits: Sendable, Hashable {
  /// Clients (`CreateClient`/`GetClient` objects) one bus connection may hold at once, `1...`.
  public let clientsPerConnection: Int
  /// Clients of all connections of one user (uid) together, `1...`, for users the service does
  /// not authorize.
  public let clientsPerUser: Int
  /// Clients of all connections together, `1...`. When they are all taken, a caller the
  /// service authorizes still gets a client: the oldest client of a user it does not authorize
  /// is deleted to make room.
  public let clients: Int
  /// How long a replaced Location object stays on the bus, seconds, `0...3600` (GeoClue: 5).
  public let previousLocationLifetime: Double

  /// Creates limits; the defaults are 32 clients per connection, 64 per user and 1024 in all.
  /// Counts below 1 become 1; a lifetime outside `0...3600` is clamped to it, and one that is not
  /// a number (NaN, infinite) becomes GeoClue's 5 s.
  public init(
    clientsPerConnection: Int = 32, clientsPerUser: Int = 64, clients: Int = 1024,
    previousLocationLifetime: Double = 5
  ) {
    self.clientsPerConnection = max(1, clientsPerConnection)
    self.clientsPerUser = max(1, clientsPerUser)
    self.clients = max(1, clients)
    self.previousLocationLifetime =
      previousLocationLifetime.isFinite ? min(max(0, previousLocationLifetime), 3600) : 5
  }
}

/// Why the GeoClue2 front-end could not start.
public enum GeoClueError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The bus could not be reached (no bus daemon, wrong address).
  case busUnavailable(GeoClueBusKind, reason: String)
  /// Another connection owns `org.freedesktop.GeoClue2` (a running GeoClue, or another
  /// locationd): `owner` is that connection's process as the bus driver reports it, when it does.
  case nameTaken(GeoClueBusKind, owner: BusNameOwner?)
  /// The bus refused the name (its policy) or another step failed.
  case failed(GeoClueBusKind, reason: String)

  /// What happened and what to do.
  public var description: String {
    switch self {
    case .busUnavailable(let kind, let reason):
      return "cannot connect to the D-Bus \(kind.rawValue) bus (\(reason)): start its bus daemon, "
        + "check \(kind == .system ? "DBUS_SYSTEM_BUS_ADDRESS" : "DBUS_SESSION_BUS_ADDRESS"), or use --dbus none"
    case .nameTaken(let kind, let owner?):
      return
        "org.freedesktop.GeoClue2 is already owned on the \(kind.rawValue) bus by process \(owner.pid) "
        + "(\(owner.commandLine ?? "its command line cannot be read")): stop that process (GeoClue: "
        + "systemctl stop geoclue; another locationd: systemctl stop locationd or kill \(owner.pid)) "
        + "or use --dbus none"
    case .nameTaken(let kind, nil):
      return
        "org.freedesktop.GeoClue2 is already owned on the \(kind.rawValue) bus (the bus does not say "
        + "by which process): stop its owner (GeoClue: systemctl stop geoclue) or use --dbus none"
    case .failed(let kind, let reason):
      return "cannot serve org.freedesktop.GeoClue2 on the \(kind.rawValue) bus: \(reason)"
    }
  }
}

/// The process behind a bus connection: its ID from the bus driver
/// (`GetConnectionUnixProcessID`) and its command line from `/proc/PID/cmdline`.
public struct BusNameOwner: Sendable, Hashable {
  /// The process ID.
  public var pid: Int32
  /// The arguments joined by spaces, control characters written as `?`, at most 200 characters
  /// (then `...`); `nil` when `/proc` does not show it (the process ended, or is hidden).
  public var commandLine: String?

  /// Creates an owner description.
  public init(pid: Int32, commandLine: String?) {
    self.pid = pid
    self.commandLine = commandLine
  }

  /// The owner of `pid` with its command line read from `/proc`.
  static func process(_ pid: Int32) -> BusNameOwner {
    BusNameOwner(pid: pid, commandLine: readCommandLine(pid))
  }

  /// `/proc/PID/cmdline` (arguments separated by NUL) as one line.
  static func readCommandLine(_ pid: Int32) -> String? {
    let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    // The first 4 KiB are plenty for the 200 characters shown.
    var buffer = [UInt8](repeating: 0, count: 4096)
    guard let count = try? SystemIO.read(fd, into: &buffer), count > 0 else { return nil }
    var arguments = buffer.prefix(count).split(separator: 0, omittingEmptySubsequences: false).map {
      String(decoding: $0, as: UTF8.self)
    }
    if arguments.last == "" { arguments.removeLast() }
    var line = String(
      String.UnicodeScalarView(
        arguments.joined(separator: " ").unicodeScalars.map {
          $0.properties.generalCategory == .control || $0.properties.generalCategory == .format ? "?" : $0
        }))
    if line.count > 200 { line = String(line.prefix(200)) + "..." }
    return line
  }
}

/// The GeoClue2 D-Bus front-end: serves `org.freedesktop.GeoClue2` (Manager, Client and Location
/// objects, GeoClue 2.6's interfaces) over sd-bus, and translates each client into the same
/// calls the socket front-end makes on ``LocationService``.
///
/// A D-Bus client's `Start` is `request` (the ``AuthorizationAuthority`` decides, from the
/// caller's uid and groups as the bus reports them) followed by a `watch` of its own: the
/// tracking is connection-scoped, ends with `Stop`, `DeleteClient` or the caller leaving the bus,
/// and shows in every socket client's `status` as `backendActive`. Fixes come from the service's
/// hub through the watching clients' channels (``received(_:)``, newest first when the bus
/// thread is behind) and are turned into Location objects per client as GeoClue does
/// (thresholds, a new object per update, the previous kept five seconds).
///
/// Threads: sd-bus is used on one dedicated thread (``SystemIO/startThread(_:)``) that polls the
/// bus socket and an eventfd; other threads hand it work through a locked job queue. Calls into
/// the service run on one task, in order.
public final class GeoClueFrontEnd: FrontEnd {
  /// The bus served.
  public let kind: GeoClueBusKind
  /// The bounds applied.
  public let limits: GeoClueLimits
  /// The bus's address when it is not the one ``kind`` names by default (see ``init(kind:service:limits:address:)``).
  public let address: String?
  let service: any RequestHandler
  let wakeFD: Int32
  let jobs = Mutex<[@Sendable (BusState) -> Void]>([])
  /// The newest fix not yet taken by the bus thread: one slot, overwritten by each new fix, so
  /// fixes never queue however fast they come (the bus thread takes the newest when it is free,
  /// as the socket front-end coalesces TPVs for a slow client). `entered` is when it reached the
  /// front-end (CLOCK_MONOTONIC microseconds); `missed` counts fixes replaced unseen.
  let newestFix = Mutex<PendingFix>(PendingFix())
  /// The last fix the hub gave through any client's channel (``received(_:)``).
  private let lastHubFix = Mutex<Location?>(nil)
  let clients = Atomic<Int>(0)
  let objects = Atomic<Int>(0)
  let commands: AsyncStream<ServiceCommand>.Continuation
  private let commandStream: AsyncStream<ServiceCommand>
  private let tasks = Mutex<[Task<Void, Never>]>([])
  private let threadDone = Mutex<(done: Bool, waiter: CheckedContinuation<Void, Never>?)>(
    (false, nil))

  /// Creates the front-end; nothing touches the bus before ``start()``. Whether a user is
  /// authorized (for the quotas of ``GeoClueLimits``) is the service's decision
  /// (``RequestHandler/wouldAuthorize(_:)``).
  ///
  /// `address` (a D-Bus address such as `unix:path=/run/bus`) serves the bus there instead of
  /// ``kind``'s usual one (`DBUS_SYSTEM_BUS_ADDRESS` or `/run/dbus/system_bus_socket`;
  /// `DBUS_SESSION_BUS_ADDRESS`); ``kind`` still names it in log lines and errors. `nil` (the
  /// default) or an empty string: the usual bus.
  public init(
    kind: GeoClueBusKind, service: any RequestHandler, limits: GeoClueLimits = GeoClueLimits(),
    address: String? = nil
  ) {
    self.kind = kind
    self.limits = limits
    self.address = address?.isEmpty == false ? address : nil
    self.service = service
    wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    (commandStream, commands) = AsyncStream.makeStream(of: ServiceCommand.self)
  }

  deinit {
    if wakeFD >= 0 { close(wakeFD) }
  }

  /// The number of GeoClue clients (Client objects) now.
  public var clientCount: Int { clients.load(ordering: .relaxed) }

  /// The number of objects this front-end has on the bus now: the Manager, every Client and
  /// every Location (current, previous and those waiting out their lifetime).
  public var objectCount: Int { objects.load(ordering: .relaxed) }

  /// Connects to the bus, owns `org.freedesktop.GeoClue2`, exports the Manager at
  /// `/org/freedesktop/GeoClue2/Manager` and starts serving.
  ///
  /// - Throws: ``GeoClueError`` (no bus, name owned by another process, refused by policy).
  public func start() async throws(GeoClueError) {
    guard wakeFD >= 0 else {
      throw .failed(kind, reason: "eventfd: \(String(cString: strerror(errno)))")
    }
    let result: Result<Void, GeoClueError> = await withCheckedContinuation { continuation in
      let reported = Mutex(false)
      let report: @Sendable (Result<Void, GeoClueError>) -> Void = { result in
        let first = reported.withLock { done in
          defer { done = true }
          return !done
        }
        if first { continuation.resume(returning: result) }
      }
      do {
        try SystemIO.startThread { [self] in
          self.runBusThread(report: report)
          let waiter = self.threadDone.withLock { state in
            state.done = true
            return state.waiter
          }
          waiter?.resume()
        }
      } catch {
        report(.failure(.failed(kind, reason: "cannot start the D-Bus thread: \(error)")))
      }
    }
    try result.get()
    let commands = commandStream
    let service = self.service
    tasks.withLock { tasks in
      tasks.append(
        Task {
          for await command in commands { await command.run(on: service, frontEnd: self) }
        })
    }
  }

  /// A fix from the service's hub, given through a watching client's channel
  /// (``EncodedEvent/location``). The hub gives the same fix to every D-Bus client's channel in
  /// turn; the front-end turns it into Location values and offers it once (the bus thread sends
  /// it to each active client).
  func received(_ location: Location) {
    let fresh = lastHubFix.withLock { last -> Bool in
      if last == location { return false }
      last = location
      return true
    }
    guard fresh else { return }
    guard let values = GeoClueLocationValues(location, receivedAt: WallClock.milliseconds()) else { return }
    offer(values)
  }

  /// Stops serving: every client's tracking ends, the objects and the name are released and the
  /// bus connection closed. Returns when the bus thread has ended.
  public func stop() async {
    post { $0.running = false }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = threadDone.withLock { state in
        if !state.done { state.waiter = continuation }
        return state.done
      }
      if done { continuation.resume() }
    }
    commands.finish()
    let running = tasks.withLock { tasks in
      defer { tasks.removeAll() }
      return tasks
    }
    running.last?.cancel()
    if let first = running.first { await first.value }
  }

  /// Runs `job` on the bus thread (soon; in order of posting).
  func post(_ job: @escaping @Sendable (BusState) -> Void) {
    jobs.withLock { $0.append(job) }
    try? SystemIO.writeAll(wakeFD, [1, 0, 0, 0, 0, 0, 0, 0])
  }

  /// Hands a fix to the bus thread through ``newestFix``; wakes the thread only when the slot
  /// was empty (a full slot means the thread has a wake-up coming).
  func offer(_ values: GeoClueLocationValues) {
    let entered = MonotonicClock.microseconds()
    let wake = newestFix.withLock { slot in
      let wasEmpty = slot.values == nil
      if !wasEmpty { slot.missed += 1 }
      slot.values = values
      slot.entered = entered
      return wasEmpty
    }
    if wake { try? SystemIO.writeAll(wakeFD, [1, 0, 0, 0, 0, 0, 0, 0]) }
  }

  /// Takes the fix waiting in ``newestFix``, if any, emptying the slot.
  func takeFix() -> (values: GeoClueLocationValues, entered: UInt64)? {
    newestFix.withLock { slot in
      guard let values = slot.values else { return nil }
      slot.values = nil
      return (values, slot.entered)
    }
  }

  private func runBusThread(report: @escaping @Sendable (Result<Void, GeoClueError>) -> Void) {
    if let failure = csdbus_load() {
      report(.failure(.failed(kind, reason: String(cString: failure))))
      return
    }
    var bus: OpaquePointer?
    var r = address.map { csdbus_open_address($0, &bus) } ?? csdbus_open(kind == .system ? 0 : 1, &bus)
    guard r >= 0, let bus else {
      report(.failure(.busUnavailable(kind, reason: Self.errorText(r))))
      return
    }
    let state = BusState(bus: bus, frontEnd: self)
    let context = Unmanaged.passRetained(state)
    csdbus_set_handlers(context.toOpaque(), busMethod, busGet, busSet, busNameOwnerChanged)
    defer {
      state.teardown()
      csdbus_set_handlers(nil, nil, nil, nil, nil)
      context.release()
      csdbus_close(bus)
    }
    r = csdbus_add_object(bus, &state.managerSlot, BusState.managerPath, Int32(CSDBUS_MANAGER), 0)
    if r >= 0 { r = csdbus_match_name_owner_changed(bus, &state.matchSlot) }
    guard r >= 0 else {
      report(.failure(.failed(kind, reason: Self.errorText(r))))
      return
    }
    objects.store(1, ordering: .relaxed)
    r = csdbus_request_name(bus, "org.freedesktop.GeoClue2")
    guard r >= 0 else {
      guard r == -EEXIST || r == -EALREADY else {
        report(.failure(.failed(kind, reason: Self.errorText(r))))
        return
      }
      // Name the owner: "GeoClue runs" is a guess that is wrong when another locationd holds it.
      var pid: Int32 = 0
      let owner = csdbus_name_owner_pid(bus, "org.freedesktop.GeoClue2", &pid) >= 0 ? BusNameOwner.process(pid) : nil
      report(.failure(.nameTaken(kind, owner: owner)))
      return
    }
    report(.success(()))
    Log.event("dbusReady", ["bus": kind.rawValue, "name": "org.freedesktop.GeoClue2"])
    while state.running {
      let more = csdbus_process(bus)
      if more < 0 {
        Log.event("dbusDisconnected", ["bus": kind.rawValue, "reason": Self.errorText(more)])
        break
      }
      let pending = jobs.withLock { jobs in
        defer { jobs.removeAll(keepingCapacity: true) }
        return jobs
      }
      state.noteJobs(pending.count)
      for job in pending { job(state) }
      guard state.running else { break }
      // One fix per round, and only when sd-bus has written out what the last one sent: a bus
      // daemon slower than the fixes leaves them in the slot (replaced by newer ones) instead of
      // in sd-bus's write queue; calls and NameOwnerChanged are served every round.
      if csdbus_output_pending(bus) == 0, let fix = takeFix() {
        state.deliver(fix.values, entered: fix.entered)
      }
      let timeout = state.sweepLocations()
      r = csdbus_wait(bus, wakeFD, more > 0 ? 0 : timeout)
      if r < 0 {
        Log.event("dbusDisconnected", ["bus": kind.rawValue, "reason": Self.errorText(r)])
        break
      }
    }
  }

  static func errorText(_ code: Int32) -> String {
    String(cString: strerror(code < 0 ? -code : code))
  }
}

/// The one-fix slot between the fix stream and the bus thread (``GeoClueFrontEnd/newestFix``).
struct PendingFix: Sendable {
  /// The newest fix not yet delivered, nil when the bus thread has taken it.
  var values: GeoClueLocationValues?
  /// When `values` reached the front-end, CLOCK_MONOTONIC microseconds.
  var entered: UInt64 = 0
  /// Fixes replaced before the bus thread took them, since start.
  var missed = 0
}

/// What the bus thread asks of the service, run in order on one task.
enum ServiceCommand: Sendable {
  /// `Start`: authorize, then track for the client; the reply goes back by `token`.
  case start(ClientContext, client: UInt64, token: UInt64)
  /// `CreateClient` beyond a quota: the service's verdict on the caller's user and on the users
  /// of `others` (the clients it could displace); the reply goes back by `token`.
  case admit(PeerCredentials, others: [PeerCredentials], sender: String, token: UInt64)
  /// `Stop`: end the client's tracking.
  case stop(ClientContext)
  /// The client is gone (deleted, its connection left the bus, or shutdown).
  case gone(ClientContext)

  func run(on service: any RequestHandler, frontEnd: GeoClueFrontEnd) async {
    switch self {
    case .start(let context, let client, let token):
      var failure: (name: String, message: String)?
      do throws(SessionRefusal) {
        let session = try await service.open(peer: context.peer, channel: context.connection)
        try await session.watch(coalescing: true)
      } catch {
        var denied = true
        if case .error(let code, _) = error.reply { denied = code == .notAuthorized }
        failure = (
          denied ? "org.freedesktop.DBus.Error.AccessDenied" : "org.freedesktop.DBus.Error.Failed",
          error.message
        )
      }
      let result = failure
      frontEnd.post { $0.finishStart(client: client, token: token, failure: result) }
    case .admit(let peer, let others, let sender, let token):
      var verdicts: [UInt32: Bool] = [:]
      for candidate in [peer] + others where verdicts[candidate.uid] == nil {
        verdicts[candidate.uid] = await service.wouldAuthorize(candidate)
      }
      let decided = verdicts
      frontEnd.post { $0.finishCreate(sender: sender, peer: peer, token: token, verdicts: decided) }
    case .stop(let context):
      _ = await service.handle(Request(command: .watch(enable: false)), from: context)
    case .gone(let context):
      await service.clientDisconnected(context)
    }
  }
}

/// One GeoClue client as the service sees it: a connection of its own (its number from
/// ``ConnectionNumber``), a watcher of the hub. ``deliver(_:)`` hands a fix's typed `Location`
/// to the front-end (``GeoClueFrontEnd/received(_:)``), which offers it once to the bus thread;
/// other events are not for D-Bus clients. A revocation (``authorizationChanged(_:)``) makes the
/// client inactive.
final class DBusClientChannel: ClientChannel {
  let id: UInt64
  private let connected = Atomic<Bool>(true)
  private let revoked: @Sendable () -> Void
  private let fix: @Sendable (Location) -> Void

  init(
    id: UInt64, fix: @escaping @Sendable (Location) -> Void,
    revoked: @escaping @Sendable () -> Void
  ) {
    self.id = id
    self.fix = fix
    self.revoked = revoked
  }

  @discardableResult func send(_ event: Event) -> Bool { isConnected }

  /// A revocation (a reload changed the group) makes the client inactive.
  func authorizationChanged(_ status: AuthorizationStatus) {
    if isConnected, status != .authorized { revoked() }
  }

  @discardableResult func deliver(_ event: EncodedEvent) -> Bool {
    guard isConnected else { return false }
    if let location = event.location { fix(location) }
    return true
  }

  var isConnected: Bool { connected.load(ordering: .relaxed) }

  /// The service ends this client's session (a revocation, shutdown): the client becomes
  /// inactive (its `Active` property turns false), as on ``authorizationChanged(_:)``; it
  /// departs when it is deleted or its connection leaves the bus.
  func close() {
    if connected.exchange(false, ordering: .relaxed) { revoked() }
  }
}
