import Glibc
import Synchronization

/// One part of the daemon that is started once and stopped once: a front-end (socket server,
/// NMEA feed, GeoClue D-Bus, web, MQTT), the service core's hub, the track recorder, the
/// watchdog. A ``ServiceGroup`` starts its services in order and stops them in reverse.
///
/// A service whose ``start()`` throws has cleaned up what it had begun itself (a bound socket
/// closed, a thread ended): the group never calls ``stop()`` on it, only on the services that
/// started before it.
public protocol Service: Sendable {
  /// A short name for logs and errors (`socket`, `nmea-feed`, `geoclue`, `web`, `mqtt`).
  var name: String { get }
  /// Starts the service; returns when it runs (a thread started, a name owned, a socket bound).
  ///
  /// - Throws: what stopped it from starting, after undoing its own partial start.
  func start() async throws
  /// Stops the service and returns when it has stopped (threads ended, sockets closed, files
  /// removed, names released). Called at most once, and only after ``start()`` returned.
  func stop() async
  /// Applies a reloaded configuration (SIGHUP) that the service reads where its owner keeps it.
  /// Called only on a started service, in start order. The default does nothing.
  func reload() async
}

extension Service {
  /// Does nothing.
  public func reload() async {}
}

/// A ``Service`` made of closures: for wiring a part that has no type of its own.
public struct ServiceClosures: Service {
  /// The service's name.
  public let name: String
  private let startBody: @Sendable () async throws -> Void
  private let stopBody: @Sendable () async -> Void
  private let reloadBody: @Sendable () async -> Void

  /// Creates a service from its start, stop and (optional) reload.
  ///
  /// - Parameters:
  ///   - name: a short name for logs and errors.
  ///   - start: undoes its own partial start before it throws.
  ///   - stop: called at most once, after `start` returned.
  ///   - reload: called on SIGHUP while started.
  public init(
    _ name: String, start: @escaping @Sendable () async throws -> Void = {},
    stop: @escaping @Sendable () async -> Void = {},
    reload: @escaping @Sendable () async -> Void = {}
  ) {
    self.name = name
    startBody = start
    stopBody = stop
    reloadBody = reload
  }

  /// Runs the start closure.
  public func start() async throws { try await startBody() }
  /// Runs the stop closure.
  public func stop() async { await stopBody() }
  /// Runs the reload closure.
  public func reload() async { await reloadBody() }
}

/// A service that failed to start, as ``ServiceGroup/start(_:)`` reports it after stopping the
/// services started before it.
public struct ServiceStartFailure: Error, CustomStringConvertible {
  /// The ``Service/name`` of the service whose start threw.
  public let service: String
  /// What its start threw.
  public let error: any Error

  /// `SERVICE: ERROR`.
  public var description: String { "\(service): \(error)" }
}

/// The daemon's lifecycle: services started in order, stopped in reverse, each exactly once.
///
/// - ``start(_:)`` starts one service after those already started; when its start throws, every
///   service started before it is stopped (newest first) and the failure is rethrown, so a
///   failed start-up leaves nothing running and nothing else is touched.
/// - ``stop()`` stops every started service, newest first; a second call (or a call after a
///   failed start) does nothing.
/// - ``reload()`` calls ``Service/reload()`` on every started service in start order.
/// - ``run(signals:reload:)`` waits for signals: SIGHUP reloads, any other ends the wait.
///
/// Safe to use from any task; calls are meant to come from one (the daemon's main task).
public final class ServiceGroup: Sendable {
  private struct State {
    var started: [any Service] = []
    var stopped = false
  }

  private let state = Mutex(State())
  private let onEvent: @Sendable (_ event: String, _ service: String) -> Void

  /// Creates an empty group.
  ///
  /// - Parameter onEvent: told `started`, `startFailed`, `stopping` and `stopped` with each
  ///   service's name, in the order they happen (tests record it; the daemon passes nothing).
  public init(
    onEvent: @escaping @Sendable (_ event: String, _ service: String) -> Void = { _, _ in }
  ) {
    self.onEvent = onEvent
  }

  /// The names of the services running now, in start order.
  public var running: [String] { state.withLock { $0.started.map(\.name) } }

  /// Starts `service` after the ones already started.
  ///
  /// - Throws: ``ServiceStartFailure`` when its start throws (every service started before it
  ///   has then been stopped), or when the group was already stopped (nothing is started then).
  public func start(_ service: any Service) async throws(ServiceStartFailure) {
    if state.withLock({ $0.stopped }) {
      throw ServiceStartFailure(service: service.name, error: StoppedGroup())
    }
    do {
      try await service.start()
    } catch {
      onEvent("startFailed", service.name)
      await stop()
      throw ServiceStartFailure(service: service.name, error: error)
    }
    onEvent("started", service.name)
    state.withLock { $0.started.append(service) }
  }

  /// Starts each of `services` in order, as ``start(_:)`` does.
  ///
  /// - Throws: ``ServiceStartFailure`` for the first that fails; those before it are stopped.
  public func start(_ services: [any Service]) async throws(ServiceStartFailure) {
    for service in services { try await start(service) }
  }

  /// Stops every started service, newest first, each once; returns when all have stopped.
  public func stop() async {
    let services = state.withLock { state -> [any Service] in
      state.stopped = true
      defer { state.started = [] }
      return state.started
    }
    for service in services.reversed() {
      onEvent("stopping", service.name)
      await service.stop()
      onEvent("stopped", service.name)
    }
  }

  /// Calls ``Service/reload()`` on every started service, in start order.
  public func reload() async {
    let services = state.withLock { $0.started }
    for service in services { await service.reload() }
  }

  /// Waits for signals: each SIGHUP runs `reload` (which reads the configuration again and
  /// calls ``reload()``); any other signal ends the wait.
  ///
  /// - Returns: the signal that ended the wait, or `nil` when `signals` ended.
  public func run(signals: AsyncStream<Int32>, reload: () async -> Void) async -> Int32? {
    for await number in signals {
      if number == SIGHUP {
        await reload()
        continue
      }
      return number
    }
    return nil
  }

  /// The error of a start after the group was stopped.
  struct StoppedGroup: Error, CustomStringConvertible {
    var description: String { "the service group was stopped" }
  }
}
