import FoundationEssentials
import Glibc
import SystemIO
import LocationCore
import MapState
import LocationProtocol
import ServiceCore
import GeoClueFrontEnd
import SocketTransport
import WebFrontEnd
import LocationModel
import MQTTTransport
import NMEAFeed
import Regions
import TrackStore

/// The `locationd` process: configuration, wiring and lifecycle, run by the executable's `main`.
///
/// Start-up: parse flags and the config file; create the backend, the manager, the map state
/// (restored from the state directory) and the socket (or take systemd's); serve; send `READY=1`.
/// SIGHUP re-reads the config file (group and client cap apply at once, the group to connected
/// clients too: see ``LocationService/reloadAuthorization(_:)``; a changed backend,
/// socket or state directory needs a restart and is logged as such). SIGTERM/SIGINT: `STOPPING=1`,
/// watchers are told, tracking stops, the socket is closed and removed; the map state is already
/// on disk (it is saved atomically on every change).
public enum Daemon {
  /// Runs the daemon with `arguments` (without the program name); returns the exit status:
  /// 0 after a clean shutdown, otherwise one of ``ExitCode`` (64 only for a malformed command
  /// line, with the usage text).
  public static func main(arguments: [String], environment: [String: String]) async -> Int32 {
    Log.setProgramName("locationd")
    SignalSequence.ignoreSIGPIPE()
    let signals = SignalSequence.stream([SIGTERM, SIGINT, SIGHUP])
    let started = ContinuousClock.now

    var configuration: Configuration
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
    if mkdir(configuration.stateDirectory, 0o750) != 0 && errno != EEXIST {
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
        "locationd: --state-dir \(configuration.stateDirectory) cannot be used (\(reason))"
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
      writeStandardError("locationd: --state-dir \(configuration.stateDirectory) cannot be used: \(error)\n")
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
        "locationd: --socket \(configuration.socketPath) cannot be used: \(ancestor) is \(reason)\n")
      return ExitCode.configuration.rawValue
    }
    let socket: ListeningSocket
    do {
      socket = try ListeningSocket.open(
        path: configuration.socketPath, group: configuration.group, environment: environment)
    } catch {
      writeStandardError("locationd: \(error)\n")
      return error.exitCode.rawValue
    }
    let server = SocketServer(
      socket: socket, handler: service, options: ServerOptions(maxClients: configuration.maxClients))
    await service.attach(server)
    // The NMEA feed (--nmea-socket): a second front-end on the same service and authority.
    var nmeaFeed: NMEAFeed?
    if let path = configuration.nmeaSocketPath {
      do {
        let feed = try NMEAFeed(path: path, group: configuration.group, handler: service)
        await service.attach(feed)
        nmeaFeed = feed
      } catch {
        writeStandardError("locationd: \(error)\n")
        socket.close()
        return nmeaExitCode(error).rawValue
      }
    }
    await service.start()
    let track = await TrackRecording.start(configuration, manager: manager)

    // The GeoClue2 D-Bus front-end, when asked for: the same service, another transport.
    var geoClue: GeoClueFrontEnd?
    if let name = configuration.dbus, let kind = GeoClueBusKind(rawValue: name) {
      let frontEnd = GeoClueFrontEnd(
        kind: kind, service: service, authority: authority)
      do {
        try await frontEnd.start()
      } catch {
        writeStandardError("locationd: \(error)\n")
        server.stop()
        nmeaFeed?.stop()
        await server.waitUntilStopped()
        await nmeaFeed?.waitUntilStopped()
        return ExitCode.unavailable.rawValue
      }
      await service.attach(frontEnd)
      geoClue = frontEnd
    }
    // The HTTP front-end (--http): the live map page, after the socket so that a failure here
    // is reported like any other start-up failure.
    var web: WebFrontEnd?
    if let http = configuration.http {
      do {
        let options = WebOptions(
          address: http.address, port: http.port, tiles: configuration.httpTiles,
          stateDirectory: configuration.stateDirectory)
        let frontEnd = try WebFrontEnd(options: options, service: service)
        await service.attach(frontEnd)
        web = frontEnd
        Log.event("httpReady", ["url": frontEnd.url, "tokenFile": frontEnd.tokenFile])
      } catch {
        writeStandardError("locationd: --http \(http.address):\(http.port): \(error.description)\n")
        await geoClue?.stop()
        server.stop()
        nmeaFeed?.stop()
        await server.waitUntilStopped()
        await nmeaFeed?.waitUntilStopped()
        return (error.libraryMissing ? ExitCode.unavailable : ExitCode.osError).rawValue
      }
    }
    // The MQTT front-end (docs/mqtt.md): a client of the service like the socket's.
    var mqtt: OwnTracksFrontEnd?
    var mqttQueue: FallbackOutbox?
    if let settings = configuration.mqtt {
      do {
        let started = try await startMQTT(
          settings, store: track?.store, stateDirectory: configuration.stateDirectory, service: service)
        mqtt = started.0
        mqttQueue = started.1
      } catch {
        writeStandardError("locationd: \(error)\n")
        await service.shutdown(reason: "startFailed")
        await geoClue?.stop()
        web?.stop()
        nmeaFeed?.stop()
        await nmeaFeed?.waitUntilStopped()
        await track?.stop()
        server.stop()
        await server.waitUntilStopped()
        return ExitCode.configuration.rawValue
      }
    }

    // The sockets answer only now, once every front-end is up: a client that connects earlier
    // (the socket is bound, or passed by systemd, before the front-ends start) waits in the
    // listen backlog, so its first `status` already names the HTTP page and the MQTT broker,
    // and `locationctl web` right after a start never hears that the page is not served.
    do {
      try server.start()
      try nmeaFeed?.start()
    } catch {
      writeStandardError("locationd: \(error)\n")
      await service.shutdown(reason: "startFailed")
      await mqtt?.stop()
      await geoClue?.stop()
      web?.stop()
      nmeaFeed?.stop()
      await track?.stop()
      server.stop()
      return ExitCode.osError.rawValue
    }

    let notifier = SystemdNotifier(environment: environment)
    let elapsed = ContinuousClock.now - started
    let microseconds = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
    Log.event(
      "ready",
      [
        "socket": socket.path, "activated": String(socket.isActivated), "backend": backend.uri,
        "stateDir": configuration.stateDirectory, "startupMs": String(Double(microseconds / 100) / 10),
        "nmeaSocket": nmeaFeed?.socket.path ?? "",
      ])
    notifier.ready(status: "serving on \(socket.path), backend \(backend.uri)")
    let watchdog = Task { await notifier.runWatchdog() }

    // What runs until a restart: a reload changes only the group and client limit, so the backend,
    // socket and state directory it reads are compared with these, not with the last reload's.
    let running = configuration
    var reason = "signal"
    for await number in signals {
      if number == SIGHUP {
        notifier.reloading()
        do {
          let reloaded = try configuration.reloaded()
          // Refused as at start: a group that does not exist would shut every member out.
          if let group = reloaded.group, !group.isEmpty, GroupDatabase.groupID(named: group) == nil {
            throw ListenError.noSuchGroup(group)
          }
          // Clients already decided are decided again under the new group: one that lost its
          // authorization loses its watch and tracking and is told (AUTHORIZATION event).
          let review = await service.reloadAuthorization(Authorizer(groupName: reloaded.group))
          // The socket file's group is the coarse outer gate (who may connect at all); it follows
          // the group when locationd created the socket, not when systemd passed it.
          applySocketGroup(socket, reloaded.group)
          if let feed = nmeaFeed { applySocketGroup(feed.socket, reloaded.group) }
          server.setMaxClients(reloaded.maxClients)
          var needsRestart: [String] = []
          if reloaded.backendURI != running.backendURI { needsRestart.append("backend") }
          if reloaded.socketPath != running.socketPath { needsRestart.append("socket") }
          if reloaded.stateDirectory != running.stateDirectory { needsRestart.append("state-dir") }
          if reloaded.dbus != running.dbus { needsRestart.append("dbus") }
          if reloaded.nmeaSocketPath != running.nmeaSocketPath { needsRestart.append("nmea-socket") }
          if reloaded.regionMonitorConfiguration != running.regionMonitorConfiguration {
            needsRestart.append("region-thresholds")
          }
          if reloaded.http?.address != running.http?.address || reloaded.http?.port != running.http?.port
            || reloaded.httpTiles != running.httpTiles
          {
            needsRestart.append("http")
          }
          if reloaded.mqtt != running.mqtt { needsRestart.append("mqtt") }
          if reloaded.trackRecording != running.trackRecording || reloaded.trackMaxAge != running.trackMaxAge
            || reloaded.trackMaxSize != running.trackMaxSize
          {
            needsRestart.append("track")
          }
          Log.event(
            "reloaded",
            [
              "group": reloaded.group ?? "", "maxClients": String(reloaded.maxClients),
              "granted": String(review.granted), "revoked": String(review.revoked),
              "trackingStopped": String(review.usersStopped),
              "needsRestart": needsRestart.joined(separator: ","),
            ])
          configuration = reloaded
        } catch {
          Log.event("reloadFailed", ["reason": "\(error)"])
        }
        notifier.ready(status: "serving on \(socket.path), backend \(backend.uri)")
        continue
      }
      reason = SignalSequence.name(number)
      break
    }
    Log.event("stopping", ["reason": reason])
    notifier.stopping()
    await mqtt?.stop()
    if let mqttQueue { Self.closeQueue(mqttQueue) }
    await geoClue?.stop()
    await service.shutdown(reason: reason)
    web?.stop()
    await track?.stop()
    server.stop()
    nmeaFeed?.stop()
    await server.waitUntilStopped()
    await nmeaFeed?.waitUntilStopped()
    watchdog.cancel()
    Log.event("stopped", [:])
    withExtendedLifetime(stateLock) {}
    return 0
  }

  /// Reads the MQTT credentials file (checked like an ssh key), attaches the front-end and
  /// starts it. The queue is `mqtt-outbox.sqlite` in the state directory, a store of its own
  /// (bounded by `mqtt-queue-limit` and `mqtt-queue-size`, apart from the history's
  /// `track-max-size`); messages an earlier version queued in `track.sqlite` (`store`, the
  /// recording's, or the file opened for the move alone) are moved there first. A store that fails
  /// while running falls back to memory (``FallbackOutbox``). Without libsqlite3, or when the file
  /// cannot be opened, it is kept in memory, and the log says so.
  static func startMQTT(
    _ settings: MQTTSettings, store recording: TrackStore?, stateDirectory: String, service: LocationService
  ) async throws(MQTTSettingError) -> (OwnTracksFrontEnd, FallbackOutbox?) {
    let credentials = try settings.credentialsFile.map { path throws(MQTTSettingError) in try MQTTCredentials.read(path: path) }
    if let warning = settings.anonymousRetainWarning(hasCredentials: credentials != nil) {
      Log.event("mqttWarning", ["detail": warning])
    }
    let outbox: any MQTTOutbox
    var queue: FallbackOutbox?
    var storeConfiguration = TrackStoreConfiguration()
    storeConfiguration.outboxLimit = settings.queueLimit
    storeConfiguration.outboxMaxBytes = settings.queueMaxBytes
    // Its own file: no fix is ever stored there, so no retention runs in it.
    storeConfiguration.maxAge = 0
    storeConfiguration.maxBytes = 0
    do throws(TrackStoreError) {
      let store = try TrackStore(
        path: stateDirectory + "/" + TrackStore.outboxFileName, configuration: storeConfiguration,
        onRejected: TrackRecording.logRejection)
      moveEarlierOutbox(to: store, recording: recording, stateDirectory: stateDirectory)
      let fallback = FallbackOutbox(
        store: store, qos: settings.qos, memoryLimit: settings.queueLimit, memoryMaxBytes: settings.queueMaxBytes,
        log: { event, detail in Log.event(event, ["detail": detail]) })
      queue = fallback
      outbox = fallback
    } catch {
      Log.event("mqttQueueInMemory", ["reason": error.description])
      outbox = MemoryOutbox(limit: settings.queueLimit)
    }
    let frontEnd = OwnTracksFrontEnd(
      settings: settings, credentials: credentials, outbox: outbox, handler: service)
    await service.attach(frontEnd)
    try await frontEnd.start()
    return (frontEnd, queue)
  }

  /// At shutdown, after the MQTT session stopped: one last try of a failing queue store, then
  /// what could not be written (`mqttQueueLost`: messages only in memory) and what will be sent
  /// twice (`mqttQueueDuplicates`: delivered while the store could not remove them).
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
  }

  /// Moves the messages an earlier version queued in `track.sqlite`'s outbox to `store`, once;
  /// logs `mqttQueueMoved` with the count, or `mqttQueueNotMoved` with the reason (they stay
  /// where they were, for the next start).
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
  static func nmeaExitCode(_ error: NMEAFeed.Failure) -> ExitCode {
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
