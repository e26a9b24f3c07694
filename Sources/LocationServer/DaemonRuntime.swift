import FoundationEssentials
import Glibc

/// The transport side of the daemon's life: listening socket, socket server, sd_notify, the
/// watchdog, and signals (SIGTERM/SIGINT stop, SIGHUP reloads the config file).
///
/// The daemon's `main` parses a ``Configuration``, builds its ``RequestHandler`` and calls
/// ``run(configuration:handler:environment:started:reload:stopping:)``.
public enum DaemonRuntime {
  /// Runs until SIGTERM or SIGINT (or cancellation of the calling task), then shuts down.
  ///
  /// Order: catch signals (so an early SIGTERM is not lost) → open the listening socket (passed
  /// by systemd, or created at ``Configuration/socketPath``) → start the server → `started` →
  /// `READY=1` → serve. On SIGHUP: `RELOADING=1`, re-read the config file (an error is logged and
  /// the old configuration stays), apply the group and client cap to the server, call `reload`,
  /// then `READY=1`. On stop: `STOPPING=1`, close the socket and every client, call `stopping`.
  ///
  /// - Parameters:
  ///   - configuration: the parsed configuration.
  ///   - handler: answers requests.
  ///   - environment: the process environment (`NOTIFY_SOCKET`, `WATCHDOG_USEC`, `LISTEN_FDS`...).
  ///   - started: called with the running server (keep it to ``SocketServer/broadcast(_:to:)``);
  ///     start the backend here. A thrown error stops the daemon and is rethrown.
  ///   - reload: called with the new configuration after SIGHUP; apply what changed (backend,
  ///     state directory). The server has already applied the group and the client cap.
  ///   - stopping: called after the server stopped; stop the backend, save state.
  /// - Throws: ``ListenError`` when the socket cannot be opened, or what `started` throws.
  public static func run(
    configuration: Configuration,
    handler: any RequestHandler,
    environment: [String: String] = ProcessInfo.processInfo.environment,
    started: (SocketServer) async throws -> Void = { _ in },
    reload: (Configuration) async -> Void = { _ in },
    stopping: () async -> Void = {}
  ) async throws {
    SignalSequence.ignoreSIGPIPE()
    let signals = SignalSequence.stream([SIGTERM, SIGINT, SIGHUP])
    let notifier = SystemdNotifier(environment: environment)
    var current = configuration
    let socket = try ListeningSocket.open(
      path: configuration.socketPath, group: configuration.group, environment: environment)
    let server = SocketServer(
      socket: socket, handler: handler, authorizer: Authorizer(groupName: configuration.group),
      options: ServerOptions(maxClients: configuration.maxClients))
    try server.start()
    do {
      try await started(server)
    } catch {
      Log.event("startFailed", ["error": "\(error)"])
      server.stop()
      await server.waitUntilStopped()
      throw error
    }
    let statusLine = "serving \(configuration.backend) on \(socket.path)"
    notifier.ready(status: statusLine)
    Log.event(
      "ready",
      ["backend": configuration.backend.description, "socket": socket.path,
       "watchdog": notifier.watchdogInterval.map { "\($0)" } ?? "off"])
    let watchdog = Task { await notifier.runWatchdog() }

    for await number in signals {
      Log.event("signal", ["signal": SignalSequence.name(number)])
      if number != SIGHUP { break }
      notifier.reloading()
      do {
        let next = try current.reloaded()
        server.setAuthorizer(Authorizer(groupName: next.group))
        server.setMaxClients(next.maxClients)
        if next.socketPath != current.socketPath {
          Log.event("reloadIgnored", ["setting": "socket", "reason": "restart to move the socket"])
        }
        await reload(next)
        current = next
        Log.event("reloaded", ["config": next.configFile ?? "none"])
      } catch {
        Log.event("reloadFailed", ["error": error.description])
      }
      notifier.ready(status: "serving \(current.backend) on \(socket.path)")
    }

    notifier.stopping()
    Log.event("stopping", [:])
    watchdog.cancel()
    server.stop()
    await server.waitUntilStopped()
    await stopping()
    await watchdog.value
  }
}
