import LocationModel

/// What a backend reports.
public enum BackendEvent: Sendable, Hashable {
  /// A new location (one per epoch).
  case location(Location)
  /// A change of ``BackendStatus``, with a human-readable detail.
  case status(BackendStatus, detail: String?)
  /// A non-fatal error (a bad line in a log, a refused connection), as a message.
  case error(String)
}

/// A source of locations: gpsd, an NMEA log replay, a simulated GPS.
///
/// `start()` begins producing ``BackendEvent``s on ``events``; `stop()` ends production (the
/// stream stays open, so the backend can be started again). Implementations are thread-safe.
public protocol LocationBackend: AnyObject, Sendable {
  /// The backend's URI, e.g. `simulate`, `replay:/var/log/drive.nmea?speed=10`, `gpsd://localhost:2947`.
  var uri: String { get }
  /// Every event the backend produces, for its whole life; one consumer.
  var events: AsyncStream<BackendEvent> { get }
  /// Starts producing events. Throws when the backend cannot start (missing file, bad route).
  func start() async throws
  /// Stops producing events; idempotent.
  func stop() async
}
