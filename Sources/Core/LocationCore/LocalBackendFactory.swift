import Glibc

/// Why a backend could not be created from its URI.
public struct BackendCreationError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The URI as given.
  public var uri: String
  /// What is wrong and what to do, in one line.
  public var reason: String
  /// What kind of failure it is (it decides the daemon's exit status).
  public var kind: Kind

  /// Kinds of ``BackendCreationError``.
  public enum Kind: Sendable, Hashable {
    /// The URI is malformed or names something unusable (a directory as a log).
    case invalid
    /// A file the URI names (replay log, GPX route) does not exist or cannot be read.
    case missingInput
    /// A library the backend needs (libxml2 for GPX) cannot be loaded.
    case unavailable
  }

  /// Creates an error for `uri`.
  public init(uri: String, reason: String, kind: Kind = .invalid) {
    self.uri = uri
    self.reason = reason
    self.kind = kind
  }

  /// `backend URI: reason`.
  public var description: String { "backend \(uri): \(reason)" }
}

/// Creates the backends that run inside the process, without a receiver or a server: the
/// simulation and the replay of a log. The daemon's factory adds gpsd to these;
/// `locationctl simulate` uses these alone.
///
/// - `simulate[:ROUTE.gpx][?rate=HZ&speed=M_S&noise=M&seed=N&outage=S-E&...]`: ``SimulatedBackend``
///   (the built-in loop around 3.1386 N 101.6044 E when no route is given); `nmea=`, `baud=` or
///   `faults=` sends its fixes through an in-process NMEA serial link (``SimulatedNMEALink``).
/// - `replay:PATH[?speed=F&loop=BOOL&timestamps=original|shifted&paused=BOOL&rollover-floor=DATE|none]`:
///   ``ReplayBackend`` (speed 0 = as fast as possible, 1 = real time; no rollover floor by default).
/// - `serial:PATH[?baud=auto|4800|...|921600]` (or a bare `/dev/...` path), `tcp://HOST:PORT`,
///   `udp://ADDR:PORT`: ``NMEAStreamBackend``, a live receiver read directly (see
///   ``NMEAStreamEndpoint``).
public enum LocalBackendFactory {
  /// Whether `uri` names one of these backends (`simulate`, `simulate:...`, `simulate?...`,
  /// `replay:...`, `serial:...`, `/dev/...`, `tcp://...`, `udp://...`), however malformed the rest.
  public static func names(_ uri: String) -> Bool {
    uri == "simulate" || uri.hasPrefix("simulate:") || uri.hasPrefix("simulate?")
      || uri.hasPrefix("replay:")
      || NMEAStreamEndpoint.names(uri)
  }

  /// Parses `uri` and creates the backend on `clock`; nothing starts until the backend's `start()`.
  ///
  /// - Throws: ``BackendCreationError`` naming the bad part (a scheme other than `simulate` and
  ///   `replay`, a bad option, a GPX route or replay log that cannot be read), with its
  ///   ``BackendCreationError/Kind``.
  public static func make(uri: String, clock: any LocationClock = SystemClock())
    throws(BackendCreationError)
    -> any LocationBackend
  {
    if uri == "simulate" || uri.hasPrefix("simulate:") || uri.hasPrefix("simulate?") {
      let options: SimulatedBackend.Options
      do {
        options = try SimulatedBackend.Options.parse(uri)
      } catch {
        throw BackendCreationError(uri: uri, reason: error.description)
      }
      do {
        return try SimulatedBackend(options: options, clock: clock, uri: uri)
      } catch {
        let kind: BackendCreationError.Kind
        switch error {
        case .unreadable: kind = .missingInput
        case .parserUnavailable: kind = .unavailable
        default: kind = .invalid
        }
        throw BackendCreationError(uri: uri, reason: "\(error)", kind: kind)
      }
    }
    if uri.hasPrefix("replay:") {
      let options: ReplayBackend.Options
      do {
        options = try ReplayBackend.Options.parse(uri)
      } catch {
        throw BackendCreationError(uri: uri, reason: error.description)
      }
      // Check the log now, so that a wrong path stops the daemon at start with a clear message
      // instead of a replay that never produces anything.
      if options.path != "-" {
        var info = stat()
        guard stat(options.path, &info) == 0 else {
          throw BackendCreationError(
            uri: uri, reason: "cannot open \(options.path): \(String(cString: strerror(errno)))",
            kind: .missingInput)
        }
        guard (info.st_mode & S_IFMT) != S_IFDIR else {
          // Unreadable as a log, like a GPX route that is not a regular file: the same status.
          throw BackendCreationError(
            uri: uri, reason: "\(options.path) is a directory: give an NMEA log file",
            kind: .missingInput)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
          throw BackendCreationError(
            uri: uri,
            reason:
              "\(options.path) is not a regular file (a pipe or device has no end to replay): give an NMEA log file, or read a live receiver with serial:\(options.path)"
          )
        }
        // A log the daemon may not read (its user lacks permission) is missing input too.
        guard access(options.path, R_OK) == 0 else {
          throw BackendCreationError(
            uri: uri, reason: "cannot open \(options.path): \(String(cString: strerror(errno)))",
            kind: .missingInput)
        }
      }
      return ReplayBackend(options: options, clock: clock, uri: uri)
    }
    if NMEAStreamEndpoint.names(uri) {
      do {
        return try NMEAStreamBackend(uri: uri)
      } catch {
        throw BackendCreationError(uri: uri, reason: error.description)
      }
    }
    throw BackendCreationError(
      uri: uri,
      reason:
        "unknown backend: use serial:PATH, tcp://HOST:PORT, udp://ADDR:PORT, simulate[:ROUTE.gpx][?rate=HZ...] or replay:PATH[?speed=S&loop=true]"
    )
  }
}
