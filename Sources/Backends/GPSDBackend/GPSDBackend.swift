import SystemIO
import CGPS
import Glibc
import LocationCore
import NMEA
import Synchronization
import LocationModel

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
  public var events: BackendEvents { thread.events }

  /// The connection thread and the queue it posts to without ever waiting (gpsd cannot be slowed
  /// down): beyond ``Options/bufferedLocations`` unread locations the oldest is dropped
  /// (``droppedLocations``); statuses and errors are always queued.
  private let thread: BackendThread

  /// Creates a backend for `uri` (`gpsd://HOST[:PORT][/DEVICE]`, default port 2947); nothing
  /// connects until ``start()``.
  ///
  /// - Throws: ``GPSDURIError`` when the URI is malformed.
  public init(uri: String, options: Options = Options()) throws(GPSDURIError) {
    self.endpoint = try GPSDEndpoint(uri: uri)
    self.uri = uri
    self.options = options
    thread = BackendThread(bufferedLocations: options.bufferedLocations)
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
    do {
      try thread.start {
        let worker = GPSDWorker(endpoint: endpoint, uri: uri, options: options, queue: thread.queue)
        return { thread in worker.run(thread) }
      }
    } catch {
      throw GPSDBackendError.threadCreationFailed(errno: error.code)
    }
  }

  /// Locations dropped so far because the consumer fell more than ``Options/bufferedLocations``
  /// behind.
  package var droppedLocations: Int { thread.droppedLocations }

  /// CPU time used so far by the connection thread (user + system), or `nil` when it is not
  /// running. For diagnostics and tests: while gpsd is away or silent it stays flat.
  package var connectionThreadCPUTime: Duration? { thread.cpuTime }

  /// Stops: closes the watch (`?WATCH={"enable":false}`) and the connection, then reports
  /// ``BackendStatus/stopped``. Returns once the connection thread has finished. Idempotent.
  public func stop() async { await thread.stop() }
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
