import LocationModel
/// A ``LocationBackend`` that can hand its events over in batches.
///
/// An `AsyncStream` costs about a microsecond per element between two tasks, which caps a replay
/// at speed 0 well below a million fixes per second. A backend conforming to this protocol sends
/// events produced back to back as one array instead. ``LocationManager`` uses it when available.
///
/// Contract: once ``makeEventBatches()`` has been called, every event goes to the returned stream
/// (in order, each exactly once) and none to ``LocationBackend/events``. Call it at most once,
/// before `start()`.
public protocol BatchingLocationBackend: LocationBackend {
  /// Switches the backend to batch delivery and returns the stream of batches (never empty
  /// arrays), for the backend's whole life; one consumer.
  func makeEventBatches() -> AsyncStream<[BackendEvent]>
}
