import GPSDBackend
import LocationCore

/// Creates the backend a `--backend` URI names.
///
/// - `simulate[:ROUTE.gpx][?rate=HZ&speed=M_S&noise=M&seed=N&outage=S-E&...]`: ``SimulatedBackend``
///   (the built-in loop around 3.1386 N 101.6044 E when no route is given).
/// - `replay:PATH[?speed=F&loop=BOOL&timestamps=original|shifted&paused=BOOL&rollover-floor=DATE|none]`:
///   ``ReplayBackend`` (speed 0 = as fast as possible, 1 = real time; no rollover floor by default).
/// - `gpsd://HOST:PORT[/DEVICE][?rollover-floor=DATE|none]` or `gpsd`: ``GPSDBackend`` through
///   libgps (rollover floor 2019-04-07 by default).
/// - `serial:PATH[?baud=auto|4800|...|921600]` or `/dev/...`, `tcp://HOST:PORT`, `udp://ADDR:PORT`:
///   ``NMEAStreamBackend``, a receiver read directly (docs/receivers.md).
///
/// Simulation, replay and the direct receivers come from ``LocalBackendFactory``, which `locationctl simulate` uses too.
public enum BackendFactory {
  /// Parses `uri` and creates the backend on `clock`; nothing starts until the backend's `start()`.
  ///
  /// - Throws: ``BackendCreationError`` naming the bad part (unknown scheme, bad option, GPX route
  ///   or replay log that cannot be read), with its ``BackendCreationError/Kind``.
  public static func make(uri: String, clock: any LocationClock = SystemClock())
    throws(BackendCreationError)
    -> any LocationBackend
  {
    if LocalBackendFactory.names(uri) {
      return try LocalBackendFactory.make(uri: uri, clock: clock)
    }
    if uri == "gpsd" || uri.hasPrefix("gpsd://") {
      do {
        return try GPSDBackend(uri: uri == "gpsd" ? "gpsd://localhost:2947" : uri)
      } catch {
        throw BackendCreationError(uri: uri, reason: "\(error)")
      }
    }
    throw BackendCreationError(
      uri: uri,
      reason:
        "unknown backend: use serial:PATH[?baud=RATE], tcp://HOST:PORT, udp://ADDR:PORT, simulate[:ROUTE.gpx], replay:PATH[?speed=S&loop=true] or gpsd://HOST:PORT[/DEVICE]"
    )
  }
}
