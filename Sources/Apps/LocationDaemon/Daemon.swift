import Dispatch
import FoundationEssentials
import Glibc
import SystemIO
import LocationCore
import MapState
import LocationProtocol
import ServiceCore
import GeoClueFrontEnd
import SocketFrontEnd
import WebFrontEnd
import LocationModel
import MQTTFrontEnd
import NMEAFeedFrontEnd
import Regions
import TrackStore
import Synchronization

/// The `locationd` process: configuration, wiring and lifecycle, run by the executable's `main`.
///
/// Start-up: parse flags and the config file; create the backend, the manager, the map state
/// (restored from the state directory) and the socket (or take systemd's); then start the parts
/// as one ``ServiceGroup`` (``DaemonServices``: socket server, NMEA feed, web, track recorder,
/// service core, GeoClue, MQTT, accepting, readiness with `READY=1`), stopped in reverse order,
/// also when one of them fails to start (each failure keeps its ``ExitCode``).
/// SIGHUP re-reads the config file through the group (group and client cap apply at once, the
/// group to connected clients too: see ``LocationService/reloadAuthorization(_:)``; a change that
/// needs a restart is logged as such: ``Configuration/needsRestart(comparedWith:)``).
/// SIGTERM/SIGINT: `STOPPING=1`, then the group stops: watchers are told, tracking stops, the
/// socket is closed and removed; the map state is already on disk (saved atomically on every
/// change).
public enum Daemon {
  /// Runs the daemon with `arguments` (without the program name); returns the exit status:
  /// 0 after a clean shutdown, otherwise one of ``ExitCode`` (64 only for a malformed command
  /// line, with the usage text).
  public static func main(arguments: [String], environment: [String: String]) async -> Int32 {
    Log.setProgramName("locationd")
    SignalSequence.ignoreSIGPIPE()
    let signals = SignalSequence.stream([SIGTERM, SIGINT, SIGHUP])
    let started = ContinuousClock.now

    let configuration: Configuration
    do {
      configuration = try Configuration.parse(arguments: arguments)
    } catch {
      if error.exitCode == .usage {
        writeStandardError("locationd: \(error)\n\(Configuration.usage)")
      } else {
        writeStandardError("locationd: \(error)\n")
      }
      return error.exitCode.rawValue
    }
    if configuration.showHelp {
      print(Configuration.usage, terminator: "")
      return 0
    }

    // An MQTT credentials file that is missing, that the daemon may not read, or that is a
    // directory is missing input (66), as a --config file is, found before anything is opened;
    // its owner, mode and form are checked when the MQTT front-end starts (78).
    // The CA certificates of an mqtts broker likewise: without them it could never connect.
    let inputFiles = [
      ("mqtt-credentials", configuration.mqtt?.credentialsFile),
      ("mqtt-ca-file", configuration.mqtt?.broker.tls == true ? configuration.mqtt?.caFile : nil),
    ]
    for case let (key, path?) in inputFiles {
      var info = stat()
      let problem: String? =
        access(path, R_OK) != 0
        ? "cannot read it: \(String(cString: strerror(errno)))"
        : stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR ? "a directory: give the file" : nil
      if let problem {
        writeStandardError(
          "locationd: " + configuration.prefix(for: key) + "invalid \(key) \"\(TextRules.quoted(path))\": \(problem)\n")
        return ExitCode.noInput.rawValue
      }
    }

    // A group that does not exist is a configuration error (78) found before anything is
    // created: the socket, which it would own, is opened after the state directory.
    if let message = configuration.missingGroupMessage() {
      writeStandardError("locationd: " + message + "\n")
      return ExitCode.configuration.rawValue
    }

    // Its own files, sockets and threads take about as many descriptors as it keeps in reserve:
    // without both free, a state file could not be read and the map would start empty.
    if let shortage = DescriptorReserve.shortage(needing: 2 * DescriptorReserve.count) {
      writeStandardError("locationd: \(shortage)\n")
      return ExitCode.osError.rawValue
    }
    let backend: any LocationBackend
    do {
      backend = try BackendFactory.make(uri: configuration.backendURI)
    } catch {
      writeStandardError("locationd: \(error)\n")
      return error.exitCode.rawValue
    }
    // The one authority for authorization: the service decides with it and tells the manager,
    // which has no rule of its own; a reload replaces the rule there and nowhere else.
    let authority = AuthorizationAuthority(Authorizer(groupName: configuration.group))
    let manager = LocationManager(backend: backend)
    // The map state (annotations, viewport) lives here: a path that cannot be a directory would
    // lose every change at the next restart while clients were told it succeeded, so refuse it.
    // Created when missing, one level only (its parent must exist), like the socket's directory.
    // Each problem comes with what to do about it.
    let createHint = "give a directory whose parent exists, which locationd may create or write"
    var stateProblem: (reason: String, code: ExitCode, hint: String?)?
    var info = stat()
    var root = stat()
    // Whether this start made the directory: a start refused later (a busy socket) removes it.
    var createdStateDirectory = false
    // Its parents first: a directory that is refused is not created either.
    if stat(configuration.stateDirectory, &info) == 0, stat("/", &root) == 0,
      info.st_dev == root.st_dev, info.st_ino == root.st_ino
    {
      // Its files would land in / among the system's.
      stateProblem = ("it is the root directory", .configuration, "give a directory of its own, such as /var/lib/locationd")
    } else if let (ancestor, reason) = SecurePath.unsafeAncestor(of: configuration.stateDirectory) {
      let named = ancestor.hasSuffix("/") ? String(ancestor.dropLast()) : ancestor
      let given = String(configuration.stateDirectory.reversed().drop { $0 == "/" }.reversed())
      stateProblem = (named == given ? "\(ancestor) is \(reason)" : "\(ancestor), above it, is \(reason)", .configuration, nil)
    } else if !Self.makeDirectory(configuration.stateDirectory, created: &createdStateDirectory) {
      stateProblem = (String(cString: strerror(errno)), .cannotCreate, createHint)
    } else if stat(configuration.stateDirectory, &info) != 0 {
      stateProblem = (String(cString: strerror(errno)), .cannotCreate, createHint)
    } else if (info.st_mode & S_IFMT) != S_IFDIR {
      stateProblem = ("not a directory", .configuration, "give a directory, or a path locationd may create")
    } else {
      // Another user who can write there could plant links or FIFOs for the daemon to follow.
      do { try MapStateStore.checkDirectory(configuration.stateDirectory) } catch {
        switch error {
        case .unsafeDirectory:
          // The reason names the owner or mode to change (chown, chmod go-w).
          stateProblem = (error.description, .configuration, nil)
        default:
          // Not readable or searchable (permission): as for a directory that cannot be created.
          stateProblem = (error.description, .cannotCreate, "give a directory locationd may read and write")
        }
      }
    }
    if let (reason, code, hint) = stateProblem {
      writeStandardError(
        "locationd: \(configuration.named("state-dir")) \(TextRules.quoted(configuration.stateDirectory)) cannot be used (\(reason))"
          + (hint.map { ": " + $0 } ?? "") + "\n")
      return code.rawValue
    }
    // One daemon per state directory: a second would mix its fixes into the track store and
    // overwrite the first one's map and region files. Held until the process ends (the kernel
    // releases it after a crash too); taken before any state file is read.
    let stateLock: DirectoryLock
    do {
      stateLock = try DirectoryLock(directory: configuration.stateDirectory)
    } catch {
      writeStandardError(
        "locationd: \(configuration.named("state-dir")) \(TextRules.quoted(configuration.stateDirectory)) cannot be used: \(error)\n")
      return ExitCode.cannotCreate.rawValue
    }
    // Saves run on their own threads: a reply waits at most 50 ms for its change's save, so a
    // stalled disk never holds up fixes or requests (docs/map-state.md, "Saving").
    let map = MapStateService(
      store: MapStateStore(directory: configuration.stateDirectory) { Log.event("mapState", ["message": $0]) },
      replyWait: .milliseconds(50))
    // Regions and their states live beside the map state, in regions.json (docs/regions.md).
    let regions = RegionService(
      store: RegionStore(directory: configuration.stateDirectory) { Log.event("regions", ["message": $0]) },
      configuration: configuration.regionMonitorConfiguration, replyWait: .milliseconds(50))
    let service = LocationService(
      manager: manager, map: map, backend: backend, authority: authority, regions: regions)

    // The socket's directory may be any the admin chose (/tmp included), but no directory above
    // it may let another user swap it and the socket with it.
    if let slash = configuration.socketPath.lastIndex(of: "/"), slash != configuration.socketPath.startIndex,
      let (ancestor, reason) = SecurePath.unsafeAncestor(of: String(configuration.socketPath[..<slash]))
    {
      writeStandardError(
        "locationd: \(configuration.named("socket")) \(TextRules.quoted(configuration.socketPath)) cannot be used: "
          + "\(TextRules.quoted(ancestor)) is \(reason)\n")
      if createdStateDirectory { Self.removeCreatedStateDirectory(configuration.stateDirectory, lock: stateLock) }
      return ExitCode.configuration.rawValue
    }
    let socket: ListeningSocket
    do {
      socket = try ListeningSocket.open(
        path: configuration.socketPath, group: configuration.group, environment: environment)
    } catch {
      // At the config file line of the setting it is about, when the file gave it.
      let key: String
      if case .noSuchGroup = error { key = "group" } else { key = "socket" }
      writeStandardError(
        "locationd: " + configuration.placed(error, for: key) + "\n")
      if createdStateDirectory { Self.removeCreatedStateDirectory(configuration.stateDirectory, lock: stateLock) }
      return error.exitCode.rawValue
    }
    let server = SocketServer(
      socket: socket, handler: service, options: ServerOptions(maxClients: configuration.maxClients))
    await service.attach(server)

    // From here on every part is a service of one group: started in this order, stopped in
    // reverse; a part that fails to start stops exactly those before it (docs/ARCHITECTURE.md,
    // "Lifecycle").
    let state = DaemonState(configuration)
    let notifier = SystemdNotifier(environment: environment)
    let nmeaFeed = Shared<NMEAFeedFrontEnd?>(nil)
    let track = Shared<TrackRecording?>(nil)
    let queue = Shared<FallbackOutbox?>(nil)
    let trackEnabled = configuration.trackEnabled
    let lastQueueReport = Shared<JSONValue?>(nil)
    await service.setStorageReport {
      Self.storageReport(
        track: trackEnabled ? track.value : nil, queue: queue.value, last: lastQueueReport)
    }
    var services: [any Service] = [
      DaemonServices.socketServer(server, socket: socket, state: state)
    ]
    if let path = configuration.nmeaSocketPath {
      services.append(
        DaemonServices.nmeaFeed(
          path: path, place: configuration.place(of: "nmea-socket"), service: service, state: state, feed: nmeaFeed))
    }
    if let http = configuration.http {
      services.append(DaemonServices.web(http, configuration: configuration, service: service))
    }
    if configuration.trackEnabled {
      services.append(DaemonServices.trackRecorder(configuration, service: service, track: track))
    }
    services.append(DaemonServices.core(service, state: state))
    if let name = configuration.dbus, let kind = GeoClueBusKind(rawValue: name) {
      services.append(
        DaemonServices.geoClue(kind, service: service))
    }
    if let settings = configuration.mqtt {
      services.append(
        DaemonServices.mqtt(settings, configuration: configuration, service: service, track: track, queue: queue))
    }
    services.append(DaemonServices.accepting(server, nmeaFeed))
    let backendURI = backend.uri
    services.append(
      DaemonServices.readiness(notifier: notifier, state: state) {
        let elapsed = ContinuousClock.now - started
        let microseconds =
          elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        Log.event(
          "ready",
          [
            "socket": socket.path, "activated": String(socket.isActivated), "backend": backendURI,
            "stateDir": configuration.stateDirectory, "startupMs": String(Double(microseconds / 100) / 10),
            "nmeaSocket": nmeaFeed.value?.socket.path ?? "",
          ])
        notifier.ready(status: "serving on \(socket.path), backend \(backendURI)")
      })

    // The service whose stop is running, for the stopSlow line below.
    let stoppingService = Mutex<String?>(nil)
    let group = ServiceGroup { event, name in
      if event == "stopping" { stoppingService.withLock { $0 = name } }
      if event == "stopped" { stoppingService.withLock { $0 = nil } }
    }
    do {
      try await group.start(services)
    } catch {
      // The group has stopped every part that started; the failure is written once.
      writeStandardError("locationd: \(error.error)\n")
      withExtendedLifetime(stateLock) {}
      return (error.error as? DaemonStartError)?.exitCode.rawValue ?? ExitCode.osError.rawValue
    }

    // What runs until a restart: a reload changes only the group and client limit, so the backend,
    // socket and state directory it reads are compared with these, not with the last reload's.
    let running = configuration
    let ended = await group.run(signals: signals) {
      notifier.reloading()
      do {
        let reloaded = try state.configuration.reloaded()
        // Refused as at start: a group that does not exist would shut every member out.
        if let message = reloaded.missingGroupMessage() { throw ReloadError(message: message) }
        state.configuration = reloaded
        // Each part applies what it can at once: the service core decides every client again
        // under the new group (one that lost it loses its watch and tracking and is told), the
        // socket files follow the group, the socket server the client cap.
        await group.reload()
        let review = state.review ?? (0, 0, 0)
        Log.event(
          "reloaded",
          [
            "group": reloaded.group ?? "", "maxClients": String(reloaded.maxClients),
            "granted": String(review.granted), "revoked": String(review.revoked),
            "trackingStopped": String(review.usersStopped),
            "needsRestart": reloaded.needsRestart(comparedWith: running).joined(separator: ","),
          ])
      } catch {
        Log.event("reloadFailed", ["reason": "\(error)"])
      }
      notifier.ready(status: "serving on \(socket.path), backend \(backendURI)")
    }
    let reason = ended.map(SignalSequence.name) ?? "signal"
    state.shutdownReason = reason
    Log.event("stopping", ["reason": reason])
    notifier.stopping()
    // A stop that takes longer than 10 s names the service it waits for (once every 10 s), so
    // that a shutdown systemd has to kill says where it stood. Off the concurrency pool: it
    // must run even if every task is waiting.
    let slowStopCheck = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "locationd.stop-check"))
    slowStopCheck.schedule(deadline: .now() + 10, repeating: 10)
    let stopStarted = ContinuousClock.now
    slowStopCheck.setEventHandler {
      guard let service = stoppingService.withLock({ $0 }) else { return }
      let seconds = (ContinuousClock.now - stopStarted).components.seconds
      Log.event("stopSlow", ["service": service, "seconds": String(seconds)])
    }
    slowStopCheck.resume()
    await group.stop()
    slowStopCheck.cancel()
    Log.event("stopped", [:])
    withExtendedLifetime(stateLock) {}
    return 0
  }

  /// Reads the MQTT credentials file (checked like an ssh key), attaches the front-end and
  /// starts it. The queue is `mqtt-outbox.sqlite` in the state directory, a store of its own
  /// (bounded by `mqtt-queue-limit` and `mqtt-queue-size`, apart from the history's
  /// `track-max-size`); messages an earlier version queued in `track.sqlite` (`store`, the
  /// recording's, or the file opened for the move alone) are moved there first. A store that fails
  /// while running, or cannot be opened at start, falls back to memory and is tried again with
  /// backoff (``FallbackOutbox``); without libsqlite3 the queue is kept in memory for the run. The
  /// log says which.
  static func startMQTT(
    _ settings: MQTTSettings, store recording: TrackStore?, stateDirectory: String, service: LocationService
  ) async throws(MQTTSettingError) -> (OwnTracksFrontEnd, FallbackOutbox) {
    let credentials = try settings.credentialsFile.map { path throws(MQTTSettingError) in try MQTTCredentials.read(path: path) }
    if let warning = settings.anonymousRetainWarning(hasCredentials: credentials != nil) {
      Log.event("mqttWarning", ["detail": warning])
    }
    var storeConfiguration = TrackStoreConfiguration()
    storeConfiguration.outboxLimit = settings.queueLimit
    storeConfiguration.outboxMaxBytes = settings.queueMaxBytes
    // Its own file: no fix is ever stored there, so no retention runs in it.
    storeConfiguration.maxAge = 0
    storeConfiguration.maxBytes = 0
    let configuration = storeConfiguration
    let path = stateDirectory + "/" + TrackStore.outboxFileName
    // Opened now, and again with backoff while it cannot be (a full or read-only disk at start).
    let queue = FallbackOutbox(
      opening: { () throws(TrackStoreError) -> TrackStore in
        let store = try TrackStore(path: path, configuration: configuration, onRejected: TrackRecording.logRejection)
        moveEarlierOutbox(to: store, recording: recording, stateDirectory: stateDirectory)
        return store
      }, qos: settings.qos, memoryLimit: settings.queueLimit, memoryMaxBytes: settings.queueMaxBytes,
      log: { event, detail in Log.event(event, ["detail": detail]) })
    let outbox: any MQTTOutbox = queue
    let frontEnd = OwnTracksFrontEnd(
      settings: settings, credentials: credentials, outbox: outbox, handler: service)
    await service.attach(frontEnd)
    try await frontEnd.start()
    return (frontEnd, queue)
  }

  /// `status`'s `storage`: `{"track":{..}|null,"queue":{..}|null}` (``TrackRecording/report``;
  /// the queue's `{"state":"disk"|"memory","waiting":N,"inMemory":N,"dropped":N,"detail":TEXT|null}`,
  /// `detail` the `mqttQueueInMemory` reason while in memory); `null` for what does not run
  /// (`track off`, no `--mqtt`), the whole member left out when neither does.
  static func storageReport(
    track: TrackRecording?, queue: FallbackOutbox?, last: Shared<JSONValue?>
  ) -> JSONValue? {
    guard track != nil || queue != nil else { return nil }
    var queueReport = JSONValue.null
    if let queue {
      if let status = queue.statusIfAvailable {
        queueReport = .object([
          JSONMember("state", .string(status.inMemory ? "memory" : "disk")),
          JSONMember("waiting", .int(Int64(status.waiting))),
          JSONMember("inMemory", .int(Int64(status.memoryCount))),
          JSONMember("dropped", .int(Int64(status.dropped))),
          JSONMember("detail", .string(status.reason)),
        ])
        last.value = queueReport
      } else {
        // A write the disk has not finished holds the queue: its last report, marked busy,
        // never a wait.
        var members: [JSONMember] = [JSONMember("state", .string("disk"))]
        if case .object(let previous)? = last.value { members = previous }
        queueReport = .object(
          members.filter { $0.key != "busy" } + [JSONMember("busy", .bool(true))])
      }
    }
    return .object([JSONMember("track", track?.report ?? .null), JSONMember("queue", queueReport)])
  }

  /// At shutdown, after the MQTT session stopped: one last try of a failing queue store, then
  /// what could not be written (`mqttQueueLost`: messages only in memory) and what will be sent
  /// twice (`mqttQueueDuplicates`: delivered while the store could not remove them); then the
  /// store is closed (out of WAL mode).
  static func closeQueue(_ queue: FallbackOutbox) {
    queue.retryNow()
    let inMemory = queue.memoryCount
    if inMemory > 0 {
      Log.event("mqttQueueLost", ["messages": String(inMemory), "reason": "the queue's store still fails; they were only in memory"])
    }
    let duplicates = queue.unrecordedDeliveries
    if duplicates > 0 {
      Log.event(
        "mqttQueueDuplicates",
        ["messages": String(duplicates), "reason": "delivered while the store could not remove them; published again at the next start"])
    }
    queue.close()
  }

  /// Moves the messages an earlier version queued in `track.sqlite`'s outbox to `store`, once;
  /// logs `mqttQueueMoved` with the count, or `mqttQueueNotMoved` with the reason (they stay
  /// where they were, for the next start).
  /// Creates `path` (mode 0750, one level) unless it exists. `created` tells which; `false` with
  /// `errno` set when it could not be created.
  static func makeDirectory(_ path: String, created: inout Bool) -> Bool {
    if mkdir(path, 0o750) == 0 {
      created = true
      return true
    }
    return errno == EEXIST
  }

  /// Removes a state directory this start created, with its lock file, when the start is
  /// refused before any state was written there (a busy socket): a refused start leaves nothing
  /// behind. A directory that holds anything else is left (`rmdir` fails).
  static func removeCreatedStateDirectory(_ path: String, lock: DirectoryLock) {
    unlink(lock.path)
    rmdir(path)
  }

  static func moveEarlierOutbox(to store: TrackStore, recording: TrackStore?, stateDirectory: String) {
    let path = stateDirectory + "/" + TrackStore.fileName
    var info = stat()
    guard recording != nil || stat(path, &info) == 0 else { return }
    do throws(TrackStoreError) {
      let earlier: TrackStore
      if let recording { earlier = recording } else { earlier = try TrackStore(path: path, onRejected: TrackRecording.logRejection) }
      defer { if recording == nil { earlier.close() } }
      let moved = try earlier.moveOutgoing(to: store)
      if moved > 0 { Log.event("mqttQueueMoved", ["from": path, "to": store.path, "messages": String(moved)]) }
    } catch {
      Log.event("mqttQueueNotMoved", ["from": path, "reason": error.description])
    }
  }

  /// Gives the socket file a reloaded `group` (mode 0660; 0600 when the group is empty: root
  /// only), so that the group's members can connect; a socket passed by systemd keeps systemd's
  /// owner, group and mode, which is logged.
  static func applySocketGroup(_ socket: ListeningSocket, _ group: String?) {
    do throws(ListenError) {
      if try socket.applyOwnership(group: group) {
        Log.event(
          "socketGroupApplied",
          ["path": socket.path, "group": group ?? "", "mode": (group ?? "").isEmpty ? "0600" : "0660"])
      } else {
        Log.event(
          "socketOwnedBySystemd",
          [
            "path": socket.path,
            "reason":
              "socket-activated: its group and mode are systemd's "
              + "(SocketGroup=, SocketMode= in locationd.socket)",
          ])
      }
    } catch {
      Log.event("socketGroupFailed", ["path": socket.path, "reason": error.description])
    }
  }

  /// The exit code for an NMEA socket that could not be set up: as for the main socket.
  static func nmeaExitCode(_ error: NMEAFeedFrontEnd.Failure) -> ExitCode {
    switch error {
    case .listen(let listen): return listen.exitCode
    case .unsafeDirectory: return .configuration
    case .system: return .osError
    }
  }

  /// Writes `text` to standard error (the journal under systemd). A start failure is written
  /// once, as one line saying what failed and what to do, and nowhere else.
  static func writeStandardError(_ text: String) {
    try? SystemIO.writeAll(2, text)
  }
}

/// The process environment as a dictionary (without Foundation's ProcessInfo).
public enum ProcessInfoEnvironment {
  /// Every `NAME=value` of the process environment.
  public static func current() -> [String: String] {
    var result: [String: String] = [:]
    var pointer = environ
    while let entry = pointer.pointee {
      let text = String(cString: entry)
      if let equals = text.firstIndex(of: "=") {
        result[String(text[..<equals])] = String(text[text.index(after: equals)...])
      }
      pointer += 1
    }
    return result
  }
}

/// Why a reload is refused, said as in the log's `reloadFailed` line.
struct ReloadError: Error, CustomStringConvertible {
  var message: String
  var description: String { message }
}
