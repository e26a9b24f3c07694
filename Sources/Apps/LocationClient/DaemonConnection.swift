import Glibc
import LocationProtocol
import SystemIO

/// One line received from locationd: the parsed object and its bytes as sent.
public struct Message: Sendable {
  /// The parsed object.
  public let value: JSONValue
  /// The line without its newline, members in the order the server wrote them.
  public let raw: [UInt8]
  /// The request id this line answers (set by ``DaemonConnection/call(_:_:)``), `nil` for events.
  public var replyTo: Int?

  /// The member named `key`.
  public subscript(key: String) -> JSONValue? { value[key] }

  /// The line without the reply's `"id"` member, which the server writes right after `"class"`.
  public var rawWithoutID: [UInt8] {
    guard let id = replyTo, let classValue = value["class"] else { return raw }
    let prefix = Array("{\"class\":".utf8) + classValue.encoded
    let member = Array(",\"id\":\(id)".utf8)
    guard raw.starts(with: prefix), raw.dropFirst(prefix.count).starts(with: member) else {
      return raw
    }
    return prefix + raw.dropFirst(prefix.count + member.count)
  }
}

/// Connecting to locationd's Unix socket, with the advice a person needs when it fails: the one
/// place where clients open the socket (``DaemonConnection`` and ``UnixSocketTransport``).
enum DaemonSocket {
  /// A stream socket connected to `path`, waiting at most `timeout` seconds (`nil`: no limit) for
  /// the daemon to accept (a daemon that is stopped or stuck leaves its listen queue full). The
  /// same limit then bounds each blocking send.
  ///
  /// - Throws: ``LocationClientError`` ``LocationClientError/Code/noDaemon`` (no socket file,
  ///   nothing listening), ``LocationClientError/Code/permissionDenied`` (with the group to
  ///   join), ``LocationClientError/Code/timedOut`` or ``LocationClientError/Code/systemError``;
  ///   each message says what to do.
  static func connect(path: String, timeout: Double?) throws(LocationClientError) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else {
      throw LocationClientError(
        .systemError, "cannot create a socket: \(String(cString: strerror(errno)))")
    }
    if let timeout {
      // Bounds a blocking connect (and send) on a Unix socket: Linux waits for room in the
      // listener's queue only as long as SO_SNDTIMEO.
      var limit = timeval(
        tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
      _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard !bytes.isEmpty, bytes.count < capacity else {
      close(fd)
      throw LocationClientError(
        .systemError, "socket path \(path) is empty or longer than \(capacity - 1) bytes")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard result != 0 else { return fd }
    let code = errno
    close(fd)
    switch code {
    case ENOENT:
      throw LocationClientError(
        .noDaemon,
        "socket \(path) does not exist: is locationd running? (systemctl start locationd; or give the path of its --socket)"
      )
    case ECONNREFUSED:
      if let kind = notASocket(path) {
        throw LocationClientError(
          .noDaemon,
          "\(path) is \(kind), not a socket: give locationd's socket (its --socket PATH, \(LocationClient.defaultSocketPath) unless told)"
        )
      }
      throw LocationClientError(
        .noDaemon, "nothing listens at \(path): is locationd running? (systemctl status locationd)")
    case ENOTDIR:
      throw LocationClientError(
        .noDaemon,
        "socket \(path) cannot exist: a part of the path before it is not a directory (give the path of locationd's --socket)"
      )
    case EACCES, EPERM:
      throw LocationClientError(
        .permissionDenied, "permission denied on \(path): \(permissionHint(path))")
    case EAGAIN, EINPROGRESS:
      throw LocationClientError(
        .timedOut,
        "locationd did not accept the connection at \(path) within \(seconds(timeout)): is it stopped or overloaded? (--timeout S waits longer, 0 for ever)"
      )
    default:
      throw LocationClientError(
        .systemError, "cannot connect to \(path): \(String(cString: strerror(code)))")
    }
  }

  /// What is at `path` when it is there but not a socket ("a regular file", "a directory"...);
  /// `nil` for a socket or when it cannot be examined.
  static func notASocket(_ path: String) -> String? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    switch info.st_mode & S_IFMT {
    case S_IFSOCK: return nil
    case S_IFREG: return "a regular file"
    case S_IFDIR: return "a directory"
    case S_IFIFO: return "a named pipe"
    case S_IFCHR, S_IFBLK: return "a device"
    default: return "not a socket"
    }
  }

  /// Who may connect to the socket at `path`, from its owner group and mode (the daemon's
  /// `--group` sets the group), or from its directory's when the socket cannot be examined.
  static func permissionHint(_ path: String) -> String {
    var info = stat()
    var examined = path
    if stat(path, &info) != 0 {
      let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
      examined = directory.isEmpty ? "/" : directory
      guard stat(examined, &info) == 0 else {
        return "run as root or as a member of the group of locationd's socket (see --group)"
      }
    }
    let groupMayUse = info.st_mode & (examined == path ? 0o020 : 0o010) != 0
    guard groupMayUse, info.st_gid != 0 else {
      return "run as root (only root may use \(examined))"
    }
    let group = GroupDatabase.groupName(id: info.st_gid) ?? "with gid \(info.st_gid)"
    return
      "run as root or as a member of group \(group) (usermod -aG \(group) USER, then log in again)"
  }

  /// `seconds` as text for messages: "30 s", "0.5 s".
  static func seconds(_ seconds: Double?) -> String {
    guard let seconds else { return "the time allowed" }
    return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
  }

  /// `{"cmd":COMMAND,"id":ID,MEMBERS...}` and its newline: one request line.
  /// The error for a request line (with its newline) that the daemon would discard as longer
  /// than the protocol allows (``LocationClientError/Code/lineTooLong``); `nil` when it fits.
  static func tooLong(_ line: [UInt8], _ command: String) -> LocationClientError? {
    guard line.count - 1 > Request.maximumLineLength else { return nil }
    return LocationClientError(
      .lineTooLong,
      "\(command): the request is \(line.count - 1) bytes, more than the protocol's \(Request.maximumLineLength) per line (shorten identifiers and titles); nothing was sent"
    )
  }

  static func requestLine(_ command: String, id: Int, _ members: [JSONMember]) -> [UInt8] {
    var request: [JSONMember] = [
      JSONMember("cmd", .string(command)), JSONMember("id", .int(Int64(id))),
    ]
    request.append(contentsOf: members)
    var line = JSONValue.object(request).encoded
    line.append(UInt8(ascii: "\n"))
    return line
  }
}

/// Bytes received from the daemon, cut into lines and parsed: the one line framing of clients.
struct LineBuffer {
  private var buffer: [UInt8] = []

  /// Whether a complete line is buffered.
  var hasLine: Bool { buffer.contains(UInt8(ascii: "\n")) }

  /// Adds received bytes.
  mutating func append(_ bytes: ArraySlice<UInt8>) { buffer.append(contentsOf: bytes) }

  /// The next complete non-empty line, parsed; `nil` when none is buffered.
  ///
  /// - Throws: ``LocationClientError`` ``LocationClientError/Code/badReply`` for a line that is
  ///   not JSON (it is consumed).
  mutating func next() throws(LocationClientError) -> Message? {
    while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
      let line = Array(buffer[..<newline])
      buffer.removeSubrange(...newline)
      if line.isEmpty { continue }
      do {
        return Message(value: try JSONValue.parse(line), raw: line)
      } catch {
        throw LocationClientError(
          .badReply,
          "locationd sent a line that is not JSON: \(String(decoding: line.prefix(200), as: UTF8.self))"
        )
      }
    }
    return nil
  }
}

/// A blocking connection to locationd's socket, one JSON object per line: for command-line
/// programs (`locationctl`) that send a request and wait. Not thread-safe: one thread uses it.
/// Programs with a run loop use ``LocationClient``, which never blocks a task.
public final class DaemonConnection {
  private let fd: Int32
  private var lines = LineBuffer()
  private var nextID = 1
  /// The last `ERROR` without an `id` (about the connection, e.g. tooManyClients before the
  /// daemon closes it).
  private var connectionError: Message?
  /// Events received while waiting for a reply, in order.
  public private(set) var pendingEvents: [Message] = []
  /// The socket path, e.g. `/run/locationd/locationd.sock`.
  public let path: String
  /// Seconds to wait for the connection to be accepted and for each reply; `nil`: no limit.
  public let timeout: Double?

  /// Connects to `path`, waiting at most `timeout` seconds for the daemon to accept (a daemon
  /// that is stopped or stuck leaves its listen queue full).
  ///
  /// - Throws: ``LocationClientError`` (``LocationClientError/Code/noDaemon``,
  ///   ``LocationClientError/Code/permissionDenied``, ``LocationClientError/Code/timedOut``...)
  ///   with a message that says what to do.
  public init(path: String, timeout: Double?) throws(LocationClientError) {
    self.path = path
    self.timeout = timeout
    fd = try DaemonSocket.connect(path: path, timeout: timeout)
  }

  deinit { close(fd) }

  /// Who may connect to the socket at `path` (the group to join, or root only), for messages.
  public static func permissionHint(_ path: String) -> String { DaemonSocket.permissionHint(path) }

  /// `seconds` as text for messages: "30 s", "0.5 s"; "the time allowed" for `nil`.
  public static func seconds(_ seconds: Double?) -> String { DaemonSocket.seconds(seconds) }

  /// Sends `command` (members after `cmd`) and waits for the reply with its id; events that
  /// arrive meanwhile are kept in ``pendingEvents``.
  ///
  /// - Returns: the reply object (success or `ERROR`).
  /// - Throws: ``LocationClientError`` when the connection fails or closes, or the reply does not
  ///   come within ``timeout``.
  public func call(_ command: String, _ members: [JSONMember] = []) throws(LocationClientError)
    -> Message
  {
    let id = nextID
    nextID += 1
    let line = DaemonSocket.requestLine(command, id: id, members)
    if let tooLong = DaemonSocket.tooLong(line, command) { throw tooLong }
    try send(line)
    let deadline = timeout.map {
      ContinuousClock.now + .milliseconds(Int64(($0 * 1000).rounded(.up)))
    }
    while true {
      guard let message = try readMessage(until: deadline, answering: command) else {
        throw LocationClientError(
          .connectionClosed, "locationd closed the connection before answering \(command)")
      }
      if message["id"]?.intValue == id {
        var reply = message
        reply.replyTo = id
        return reply
      }
      if message["id"] == nil && message["class"] == "ERROR" {
        // An error about the connection itself (e.g. tooManyClients): kept, so that a later
        // request that finds the connection closed says why.
        connectionError = message
        return message
      }
      pendingEvents.append(message)
    }
  }

  /// Like ``call(_:_:)`` but throws an error reply as a ``LocationClientError`` (its code, the
  /// message `COMMAND: CODE: MESSAGE`, and the reply).
  public func require(_ command: String, _ members: [JSONMember] = []) throws(LocationClientError)
    -> Message
  {
    let reply = try call(command, members)
    if reply["class"] == "ERROR" {
      var error = LocationClientError(errorReply: reply.value)
      error.message = "\(command): \(error.code): \(error.message)"
      throw error
    }
    return reply
  }

  /// Asks for authorization; throws the refusal (``LocationClientError/Code/notAuthorized``).
  public func authorize() throws(LocationClientError) {
    _ = try require("request")
  }

  /// The next message: a pending event first, then from the socket; `nil` at end of stream.
  ///
  /// - Throws: ``LocationClientError`` on a read error or an unparsable line.
  public func nextEvent() throws(LocationClientError) -> Message? {
    if !pendingEvents.isEmpty { return pendingEvents.removeFirst() }
    return try readMessage(until: nil, answering: nil)
  }

  /// The next message, waiting until `deadline` at most: `nil` when the deadline passes first.
  ///
  /// - Throws: ``LocationClientError`` when the daemon closes the connection, on a read error or
  ///   an unparsable line.
  public func nextEvent(until deadline: ContinuousClock.Instant) throws(LocationClientError)
    -> Message?
  {
    if !pendingEvents.isEmpty { return pendingEvents.removeFirst() }
    while true {
      if lines.hasLine, let message = try lines.next() { return message }
      let left = ContinuousClock.now.duration(to: deadline)
      guard left > .zero else { return nil }
      let milliseconds =
        left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1
      var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      let ready = poll(&descriptor, 1, Int32(clamping: milliseconds))
      if ready < 0 && errno != EINTR {
        throw LocationClientError(
          .systemError, "cannot wait for locationd: \(String(cString: strerror(errno)))")
      }
      guard ready > 0 else { continue }
      guard let message = try readMessage(until: nil, answering: nil) else {
        throw LocationClientError(.connectionClosed, "locationd closed the connection")
      }
      return message
    }
  }

  /// Sends `bytes`.
  ///
  /// - Throws: ``LocationClientError``: the daemon's `ERROR` without an `id` when it closed the
  ///   connection after one (`tooManyClients` at `--max-clients`),
  ///   ``LocationClientError/Code/connectionClosed`` when it closed it without,
  ///   ``LocationClientError/Code/timedOut`` past ``timeout``, otherwise
  ///   ``LocationClientError/Code/systemError``.
  private func send(_ bytes: [UInt8]) throws(LocationClientError) {
    do throws(SystemError) { try SystemIO.sendAll(fd, bytes, flags: Int32(MSG_NOSIGNAL)) } catch {
      if error.code == EPIPE || error.code == ECONNRESET {
        // The daemon has closed the connection: what it sent before closing says why.
        while connectionError == nil, let message = try? readMessage(until: nil, answering: nil) {
          if message["id"] == nil && message["class"] == "ERROR" {
            throw LocationClientError(errorReply: message.value)
          }
          pendingEvents.append(message)
        }
        if let connectionError { throw LocationClientError(errorReply: connectionError.value) }
        throw LocationClientError(.connectionClosed, "locationd closed the connection")
      }
      throw LocationClientError(
        error.code == EAGAIN ? .timedOut : .systemError, "cannot send to locationd: \(error)")
    }
  }

  /// The next line from the socket, waiting until `deadline` at most (`nil`: no limit).
  ///
  /// - Throws: ``LocationClientError`` when the deadline passes (naming `command`), on a read
  ///   error or an unparsable line.
  private func readMessage(until deadline: ContinuousClock.Instant?, answering command: String?)
    throws(LocationClientError) -> Message?
  {
    while true {
      if let message = try lines.next() { return message }
      if let deadline {
        try waitForInput(until: deadline, answering: command ?? "the request")
      }
      var chunk = [UInt8](repeating: 0, count: 65_536)
      let count: Int
      do throws(SystemError) {
        count = try SystemIO.read(fd, into: &chunk)
      } catch {
        if error.code == ECONNRESET { return nil }
        throw LocationClientError(.systemError, "cannot read from locationd: \(error)")
      }
      if count == 0 { return nil }
      lines.append(chunk[0..<count])
    }
  }

  /// Waits until the socket has something to read (or is closed), or throws at `deadline`.
  private func waitForInput(until deadline: ContinuousClock.Instant, answering command: String)
    throws(LocationClientError)
  {
    while true {
      let left = ContinuousClock.now.duration(to: deadline)
      let milliseconds = max(
        0, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
      var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      let ready = poll(&descriptor, 1, Int32(clamping: milliseconds))
      if ready > 0 { return }
      if ready < 0 && errno == EINTR { continue }
      if ready < 0 {
        throw LocationClientError(
          .systemError, "cannot wait for locationd: \(String(cString: strerror(errno)))")
      }
      if ContinuousClock.now >= deadline {
        throw LocationClientError(
          .timedOut,
          "locationd did not answer \(command) within \(DaemonSocket.seconds(timeout)): is it stopped or overloaded? (--timeout S waits longer, 0 for ever)"
        )
      }
    }
  }
}
