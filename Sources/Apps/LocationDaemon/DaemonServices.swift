import GeoClueFrontEnd
import Glibc
import LocationCore
import MQTTFrontEnd
import NMEAFeedFrontEnd
import ServiceCore
import SocketFrontEnd
import Synchronization
import SystemIO
import WebFrontEnd

/// Why a part of the daemon could not start: the line written to standard error (after
/// `locationd: `) and the exit status it gets (``ExitCode``, listed in `--help`).
struct DaemonStartError: Error, CustomStringConvertible {
  /// What failed and what to do about it.
  var message: String
  /// The process's exit status.
  var exitCode: ExitCode

  var description: String { message }
}

/// A value the daemon's services share (one writes it at start, others read it later).
final class Shared<Value: Sendable>: Sendable {
  private let storage: Mutex<Value>

  init(_ value: Value) { storage = Mutex(value) }

  /// The value now.
  var value: Value {
    get { storage.withLock { $0 } }
    set { storage.withLock { $0 = newValue } }
  }
}

/// What the daemon's services share while it runs: the configuration in force (replaced by a
/// reload), the last reload's review, and the reason given to clients at shutdown.
final class DaemonState: Sendable {
  private struct Values {
    var configuration: Configuration
    var review: (granted: Int, revoked: Int, usersStopped: Int)?
    var shutdownReason = "startFailed"
  }

  private let values: Mutex<Values>

  init(_ configuration: Configuration) { values = Mutex(Values(configuration: configuration)) }

  /// The configuration in force: the one started with, then each successful reload's.
  var configuration: Configuration {
    get { values.withLock { $0.configuration } }
    set { values.withLock { $0.configuration = newValue } }
  }
  /// What the last reload decided again (counts for the `reloaded` log line).
  var review: (granted: Int, revoked: Int, usersStopped: Int)? {
    get { values.withLock { $0.review } }
    set { values.withLock { $0.review = newValue } }
  }
  /// The `SHUTDOWN` event's reason: `startFailed` until the daemon is ready, then the signal.
  var shutdownReason: String {
    get { values.withLock { $0.shutdownReason } }
    set { values.withLock { $0.shutdownReason = newValue } }
  }
}

/// The parts of the daemon as ``Service``s, in the order ``Daemon`` starts them (each is stopped
/// in reverse): socket server, NMEA feed and its publisher, web, track recorder, service core,
/// GeoClue, MQTT, accepting, readiness.
enum DaemonServices {
  /// The Unix socket server on `socket` (bound, not yet accepting: see ``accepting(_:_:)``).
  /// Reload: the socket file's group and the client cap. Stop: every client disconnected, the
  /// socket closed and its file removed (unless systemd passed it).
  static func socketServer(_ server: SocketServer, socket: ListeningSocket, state: DaemonState)
    -> any Service
  {
    ServiceClosures(
      "socket",
      stop: {
        server.stop()
        await server.waitUntilStopped()
      },
      reload: {
        let configuration = state.configuration
        Daemon.applySocketGroup(socket, configuration.group)
        server.setMaxClients(configuration.maxClients)
      })
  }

  /// The NMEA feed's socket (`--nmea-socket`), bound and attached to `service`; `feed` receives
  /// the front-end for the services after it. Reload: the socket file's group.
  static func nmeaFeed(
    path: String, place: String?, service: LocationService, state: DaemonState, feed: Shared<NMEAFeedFrontEnd?>
  )
    -> any Service
  {
    ServiceClosures(
      "nmea-feed",
      start: {
        let created: NMEAFeedFrontEnd
        do throws(NMEAFeedFrontEnd.Failure) {
          created = try NMEAFeedFrontEnd(path: path, group: state.configuration.group, handler: service)
        } catch {
          throw DaemonStartError(
            message: (place.map { "\($0): " } ?? "") + "\(error)", exitCode: Daemon.nmeaExitCode(error))
        }
        await service.attach(created)
        feed.value = created
      },
      stop: {
        guard let created = feed.value else { return }
        created.stop()
        await created.waitUntilStopped()
      },
      reload: {
        if let created = feed.value {
          Daemon.applySocketGroup(created.socket, state.configuration.group)
        }
      })
  }

  /// The HTTP front-end (`--http`): bound at start; its failure exits 71 (69 without
  /// libmicrohttpd). Stop: the HTTP server closed.
  static func web(
    _ http: (address: String, port: UInt16), configuration: Configuration, service: LocationService
  ) -> any Service {
    let frontEnd = Shared<WebFrontEnd?>(nil)
    return ServiceClosures(
      "web",
      start: {
        let options = WebOptions(
          address: http.address, port: http.port, tiles: configuration.httpTiles,
          stateDirectory: configuration.stateDirectory)
        let created: WebFrontEnd
        do throws(WebStartError) {
          created = try WebFrontEnd(options: options, service: service)
        } catch {
          throw DaemonStartError(
            message: "\(configuration.named("http")) \(http.address.contains(":") ? "[\(http.address)]" : http.address):\(http.port): \(error.description)",
            exitCode: error.libraryMissing ? .unavailable : .osError)
        }
        await service.attach(created)
        frontEnd.value = created
        Log.event("httpReady", ["url": created.url, "tokenFile": created.tokenFile])
      },
      stop: { frontEnd.value?.stop() })
  }

  /// The track recorder (`--track`), taking the service's fixes before the service core starts,
  /// so that its stop (after the core's, which ends the fixes once the last is dispatched)
  /// records the last fixes.
  static func trackRecorder(
    _ configuration: Configuration, service: LocationService, track: Shared<TrackRecording?>
  )
    -> any Service
  {
    ServiceClosures(
      "track",
      start: {
        let recording = await TrackRecording.start(configuration, service: service)
        track.value = recording
      },
      stop: { await track.value?.stop() })
  }

  /// The service core's hub (fixes to the map, the regions and the watchers). Reload: the
  /// authorization rule, every decided client decided again. Stop: watchers told (`SHUTDOWN`
  /// with ``DaemonState/shutdownReason``), tracking stopped, the map and regions saved.
  static func core(_ service: LocationService, state: DaemonState) -> any Service {
    ServiceClosures(
      "core",
      start: { await service.start() },
      stop: { await service.shutdown(reason: state.shutdownReason) },
      reload: {
        state.review = await service.reloadAuthorization(
          Authorizer(groupName: state.configuration.group))
      })
  }

  /// The GeoClue2 D-Bus front-end (`--dbus`): owns `org.freedesktop.GeoClue2` on the bus; a bus
  /// that cannot be reached, or a name owned by another, exits 69. Stop: the name released.
  static func geoClue(
    _ kind: GeoClueBusKind, service: LocationService
  ) -> any Service {
    let frontEnd = GeoClueFrontEnd(kind: kind, service: service)
    return ServiceClosures(
      "geoclue",
      start: {
        do { try await frontEnd.start() } catch {
          throw DaemonStartError(message: "\(error)", exitCode: .unavailable)
        }
        await service.attach(frontEnd)
      },
      stop: { await frontEnd.stop() })
  }

  /// The MQTT front-end (`--mqtt`, docs/mqtt.md): credentials read, queue opened, session
  /// started; a failure exits 78. Stop: the session disconnected cleanly, then the queue's last
  /// report (``Daemon/closeQueue(_:)``).
  static func mqtt(
    _ settings: MQTTSettings, configuration: Configuration, service: LocationService,
    track: Shared<TrackRecording?>, queue: Shared<FallbackOutbox?>
  ) -> any Service {
    let started = Shared<(OwnTracksFrontEnd, FallbackOutbox?)?>(nil)
    return ServiceClosures(
      "mqtt",
      start: {
        do {
          let pair = try await Daemon.startMQTT(
            settings, store: track.value?.existingStore, stateDirectory: configuration.stateDirectory,
            service: service)
          started.value = pair
          queue.value = pair.1
        } catch {
          // At the config file line of the setting it is about, when the file gave it.
          throw DaemonStartError(
            message: ((error as? MQTTSettingError).map { configuration.prefix(for: $0.key) } ?? "")
              + "\(error)",
            exitCode: .configuration)
        }
      },
      stop: {
        guard let (frontEnd, queue) = started.value else { return }
        await frontEnd.stop()
        if let queue { Daemon.closeQueue(queue) }
      })
  }

  /// The sockets answer only now, once every front-end is up: a client that connects earlier
  /// (the socket is bound, or passed by systemd, before the front-ends start) waits in the
  /// listen backlog, so its first `status` already names the HTTP page and the MQTT broker,
  /// and `locationctl web` right after a start never hears that the page is not served.
  /// A failure exits 71; stopping is the socket server's and the NMEA feed's own.
  static func accepting(_ server: SocketServer, _ feed: Shared<NMEAFeedFrontEnd?>) -> any Service {
    ServiceClosures(
      "accepting",
      start: {
        // Every other part has taken its descriptors: the reserve must be left for clients to
        // be admitted at all.
        if let shortage = DescriptorReserve.shortage(needing: 2 * DescriptorReserve.count) {
          throw DaemonStartError(message: shortage, exitCode: .osError)
        }
        do {
          try server.start()
          try feed.value?.start()
        } catch {
          throw DaemonStartError(message: "\(error)", exitCode: .osError)
        }
      })
  }

  /// The last step: the `ready` log line and `READY=1` once everything above runs, then the
  /// systemd watchdog. Stop: the watchdog ends.
  static func readiness(
    notifier: SystemdNotifier, state: DaemonState, ready: @escaping @Sendable () -> Void
  ) -> any Service {
    let watchdog = Shared<Task<Void, Never>?>(nil)
    return ServiceClosures(
      "readiness",
      start: {
        ready()
        state.shutdownReason = "signal"
        watchdog.value = Task { await notifier.runWatchdog() }
      },
      stop: { watchdog.value?.cancel() })
  }
}
