import LocationProtocol

/// Every failure of ``LocationClient`` and ``DaemonConnection``: an `ERROR` reply of locationd
/// (its stable ``ErrorCode``), or a failure to reach or hear from it.
///
/// ``code`` is what programs test (`error.code == .notAuthorized`); ``message`` is for people
/// and, for connection failures, says what to do (the advice `locationctl` prints).
public struct LocationClientError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What went wrong. The daemon's codes (docs/PROTOCOL.md, "Errors") and the client's own.
  public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The code's name: a daemon code's wire name (`notAuthorized`) or one of the client's.
    public let rawValue: String
    /// Creates a code from its name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The name.
    public var description: String { rawValue }

    /// The code of a daemon `ERROR` reply.
    public init(_ code: ErrorCode) { rawValue = code.rawValue }

    /// Daemon: the request is not authorized (``LocationClient/requestAuthorization()`` first;
    /// root or the daemon's group only), or the authorization was withdrawn by a reload.
    public static let notAuthorized = Code(.notAuthorized)
    /// Daemon: the backend or service cannot do this now (gpsd unreachable, a replay control
    /// while nothing tracks).
    public static let unavailable = Code(.unavailable)
    /// Daemon: the map's annotation limits (count or text bytes) would be exceeded.
    public static let limitExceeded = Code(.limitExceeded)
    /// Daemon: a member is missing, of the wrong type or out of range.
    public static let invalidArgument = Code(.invalidArgument)
    /// Daemon: no current location (e.g. centring on it before the first fix).
    public static let noFix = Code(.noFix)
    /// Daemon: a replay control while the backend is not a replay.
    public static let notReplay = Code(.notReplay)
    /// Daemon: no annotation or region with this identifier.
    public static let notFound = Code(.notFound)
    /// Daemon: the change is in effect but could not be saved.
    public static let notSaved = Code(.notSaved)
    /// A request line longer than the protocol's 64 KiB (`Request.maximumLineLength`): the
    /// daemon would discard it; the client refuses it before sending (nothing is sent).
    public static let lineTooLong = Code(.lineTooLong)
    /// Daemon: it already serves its maximum number of clients.
    public static let tooManyClients = Code(.tooManyClients)
    /// Daemon: a bug in locationd.
    public static let `internal` = Code(.internal)

    /// Client: nothing listens at the socket path (no such file, or connection refused).
    public static let noDaemon = Code(rawValue: "noDaemon")
    /// Client: the socket exists but this process may not connect to it.
    public static let permissionDenied = Code(rawValue: "permissionDenied")
    /// Client: the daemon did not accept the connection or answer within the time allowed, or
    /// no fix came within ``LocationClient/requestLocation(timeout:)``'s timeout.
    public static let timedOut = Code(rawValue: "timedOut")
    /// Client: the daemon closed the connection before answering.
    public static let connectionClosed = Code(rawValue: "connectionClosed")
    /// Client: the daemon sent something that is not the protocol (not JSON, a missing member).
    public static let badReply = Code(rawValue: "badReply")
    /// Client: any other system failure (socket, read, write), with the system's message.
    public static let systemError = Code(rawValue: "systemError")
  }

  /// What went wrong.
  public var code: Code
  /// What went wrong and what to do, for people.
  public var message: String
  /// The `ERROR` reply as received, when the daemon sent one.
  public var reply: JSONValue?

  /// Creates an error.
  public init(_ code: Code, _ message: String, reply: JSONValue? = nil) {
    self.code = code
    self.message = message
    self.reply = reply
  }

  /// The error an `ERROR` reply (or event) of the daemon stands for: its `code` (``Code/internal``
  /// when missing or unknown) and `message`.
  public init(errorReply reply: JSONValue) {
    let name = reply["code"]?.stringValue ?? ErrorCode.internal.rawValue
    code = ErrorCode(rawValue: name).map(Code.init) ?? .internal
    message = reply["message"]?.stringValue ?? "unknown error"
    self.reply = reply
  }

  /// The daemon's code, when the daemon sent the error.
  public var daemonCode: ErrorCode? { reply == nil ? nil : ErrorCode(rawValue: code.rawValue) }

  /// `code: message`.
  public var description: String { "\(code): \(message)" }
}
