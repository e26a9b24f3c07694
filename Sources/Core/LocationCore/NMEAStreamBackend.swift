import LocationModel
import NMEA
import Synchronization
import SystemIO

/// A live NMEA 0183 receiver read directly, without gpsd: a serial device, a TCP stream or UDP
/// datagrams (``NMEAStreamEndpoint``).
///
/// Behaviour:
/// - **One decoder.** Every byte goes through ``NMEADecoder`` (the framing, parser and fix
///   assembly of `replay:` and `locationctl decode`), so the locations are what
///   `locationctl decode` prints for the same bytes. Bad sentences are counted and skipped, and
///   reported at most every 10 s as warnings; a stream that carries no NMEA at all (a wrong
///   rate, a binary protocol) is reported with what was seen.
/// - **Serial.** Raw 8N1 through termios, exclusive (`TIOCEXCL`). With `baud=auto` (the
///   default) the standard rates are tried in turn until sentences with valid checksums arrive,
///   and the status says which rate was found.
/// - **Hot-plug.** A device that goes (a read error, `ENODEV`, a hang-up, its node removed)
///   gives ``BackendStatus/deviceRemoved``; its directory is watched with inotify, and when the
///   path returns the device is opened again and ``BackendStatus/connected`` reported.
/// - **Reconnection.** A TCP source that drops, refuses, or sends nothing for
///   ``Options/idleTimeout`` is reconnected with a capped exponential backoff
///   (``Options/reconnectInitialDelay`` doubling up to ``Options/reconnectMaximumDelay``).
/// - **Only while tracking.** ``start()`` opens the source on a thread of its own, ``stop()``
///   closes it and returns once the thread has finished.
///
/// Locations carry `Provenance(backend: uri, source: device or address, isSimulated: false)`.
public final class NMEAStreamBackend: LocationBackend {
  /// Timeouts, retries and bounds.
  public struct Options: Sendable, Hashable {
    /// Report ``BackendStatus/noFix`` when no location with a position arrived for this long;
    /// default 5 s.
    public var noFixTimeout: Duration = .seconds(5)
    /// Delay before the first reconnection of a TCP source; default 250 ms.
    public var reconnectInitialDelay: Duration = .milliseconds(250)
    /// Longest delay between reconnections; default 5 s.
    public var reconnectMaximumDelay: Duration = .seconds(5)
    /// A TCP connection that carries nothing for this long is taken as half-open and
    /// reconnected; default 10 s.
    public var idleTimeout: Duration = .seconds(10)
    /// A source that sends no further sentence this long after sentences of an epoch ends that
    /// epoch (line ends, noise or a sentence's start do not count): the last epoch before a
    /// receiver stops or pauses is reported then, not when the next one begins (a receiver's
    /// burst of sentences has no gap this long); default 1.5 s. A connection that breaks ends
    /// its epoch at once.
    public var epochSilence: Duration = .milliseconds(1500)
    /// How long `baud=auto` listens at each rate; default 1.5 s (a 1 Hz receiver sends at least
    /// one sentence in that time).
    public var baudProbeWindow: Duration = .milliseconds(1500)
    /// Bytes after which a stream with no valid sentence is reported as carrying no NMEA;
    /// default 4096.
    public var noNMEAByteCount = 4096
    /// Most locations kept for a consumer that is not reading; beyond it the oldest are dropped.
    /// Default 256.
    public var bufferedLocations = 256
    /// Most datagrams read in one round before the timers run; default 256.
    public var datagramsPerRound = 256

    /// Creates the default options.
    public init() {}
  }

  /// The backend URI as given (`serial:/dev/ttyUSB0?baud=9600`, `tcp://host:port`).
  public let uri: String
  /// The parsed source.
  public let endpoint: NMEAStreamEndpoint
  /// Timeouts, retries and bounds.
  public let options: Options
  /// Every event, for the backend's whole life; one consumer. Status changes are never dropped.
  public var events: BackendEvents { thread.events }
  private let thread: BackendThread
  private let counters = NMEAStreamCounterBox()

  /// Creates a backend for `uri`; nothing opens until ``start()``.
  ///
  /// - Throws: ``BackendURIError`` when the URI is malformed.
  public init(uri: String, options: Options = Options()) throws(BackendURIError) {
    self.endpoint = try NMEAStreamEndpoint(uri: uri)
    self.uri = uri
    self.options = options
    thread = BackendThread(bufferedLocations: options.bufferedLocations)
  }

  /// Starts the reading thread; returns at once (opening, rate detection and reconnection are
  /// reported as status events). Idempotent while running.
  ///
  /// - Throws: ``SystemError`` when the thread cannot be created.
  public func start() async throws {
    try thread.start {
      let reader = NMEAStreamReader(
        endpoint: endpoint, uri: uri, options: options, queue: thread.queue, counters: counters)
      return { thread in reader.run(thread) }
    }
  }

  /// Closes the source, then reports ``BackendStatus/stopped``; returns once the reading thread
  /// has finished. Idempotent.
  public func stop() async { await thread.stop() }

  /// What the reader has seen so far, over every connection.
  public var statistics: NMEAStreamCounters { counters.value.withLock { $0 } }

  /// Locations dropped because the consumer fell more than ``Options/bufferedLocations`` behind.
  package var droppedLocations: Int { thread.droppedLocations }
}

/// Counters of an ``NMEAStreamBackend``, over its whole life.
public struct NMEAStreamCounters: Sendable, Hashable {
  /// Times the source was opened or connected.
  public var opens = 0
  /// Times the device was found gone or the connection lost.
  public var losses = 0
  /// Bytes read.
  public var bytes = 0
  /// Datagrams received (UDP).
  public var datagrams = 0
  /// Datagrams longer than the receive buffer (their tail was lost).
  public var truncatedDatagrams = 0
  /// The decoder's counters, summed over the connections.
  public var sentences = NMEAStatistics()
  /// Locations emitted.
  public var locations = 0
  /// The rate `baud=auto` found last, or the fixed rate; `nil` for network sources.
  public var baud: Int?
  /// Creates zeroed counters.
  public init() {}
}

/// The counters shared by the backend and its reading thread.
final class NMEAStreamCounterBox: Sendable {
  let value = Mutex(NMEAStreamCounters())
}
