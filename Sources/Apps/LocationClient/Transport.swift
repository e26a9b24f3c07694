import Glibc
import LocationProtocol
import Synchronization
import SystemIO

/// What a ``LocationTransport`` delivers: one line from the daemon, or the end of the connection.
public enum TransportInput: Sendable {
  /// One JSON object the daemon sent (a reply, which carries the request's `id`, or an event).
  case message(JSONValue)
  /// The connection ended (the daemon closed it, a read failed, or ``LocationTransport/close()``
  /// was called); the last input of a connection.
  case closed(LocationClientError)
}

/// One connection to locationd carrying protocol lines (docs/PROTOCOL.md): the seam between
/// ``LocationClient`` and the socket. ``UnixSocketTransport`` is the real one; tests give the
/// client a transport that plays a scripted daemon.
public protocol LocationTransport: AnyObject, Sendable {
  /// Opens the connection. From then on everything the daemon sends goes to `receive`, in order,
  /// one call at a time, ending with exactly one ``TransportInput/closed(_:)``.
  ///
  /// - Throws: ``LocationClientError`` when the daemon cannot be reached (`receive` is then
  ///   never called).
  func open(_ receive: @escaping @Sendable (TransportInput) -> Void)
    async throws(LocationClientError)

  /// Sends one request line (a JSON object and its `\n`).
  ///
  /// - Throws: ``LocationClientError`` when the connection is closed or the send fails.
  func send(_ line: [UInt8]) throws(LocationClientError)

  /// Closes the connection; the daemon ends what this connection started (its `watch` and the
  /// tracking that came with it). Idempotent.
  func close()
}

/// A connection to locationd's Unix socket: connects and reads on a thread of its own (never on
/// a task's), so neither a slow `connect` nor waiting for lines holds one of Swift's
/// cooperative threads; sends happen on the caller's thread, bounded by the connect timeout.
public final class UnixSocketTransport: LocationTransport {
  private struct State {
    var fd: Int32 = -1
    var closed = false
  }

  /// The socket path.
  public let path: String
  /// Seconds allowed for the daemon to accept the connection and for each send; `nil`: no limit.
  public let connectTimeout: Double?
  private let state = Mutex(State())

  /// A transport to the socket at `path` (not yet connected).
  ///
  /// - Parameter connectTimeout: seconds, `> 0`, or `nil` for no limit.
  public init(path: String, connectTimeout: Double? = 30) {
    self.path = path
    self.connectTimeout = connectTimeout
  }

  deinit { close() }

  /// Connects on a new thread, which then reads lines until the connection ends.
  ///
  /// - Throws: ``LocationClientError`` from connecting (``LocationClientError/Code/noDaemon``,
  ///   ``LocationClientError/Code/permissionDenied`` with the group to join, ...), or
  ///   ``LocationClientError/Code/systemError`` when no thread can be started.
  public func open(_ receive: @escaping @Sendable (TransportInput) -> Void)
    async throws(LocationClientError)
  {
    let result: Result<Void, LocationClientError> = await withCheckedContinuation { continuation in
      do throws(SystemError) {
        try SystemIO.startThread { [self] in
          let fd: Int32
          do throws(LocationClientError) {
            fd = try DaemonSocket.connect(path: path, timeout: connectTimeout)
          } catch {
            continuation.resume(returning: .failure(error))
            return
          }
          let accepted = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.fd = fd
            return true
          }
          guard accepted else {
            Glibc.close(fd)
            continuation.resume(
              returning: .failure(
                LocationClientError(.connectionClosed, "the connection was closed")))
            return
          }
          continuation.resume(returning: .success(()))
          receive(.closed(readLoop(fd, receive)))
          state.withLock { state in
            state.closed = true
            state.fd = -1
          }
          Glibc.close(fd)
        }
      } catch {
        continuation.resume(
          returning: .failure(
            LocationClientError(.systemError, "cannot start the client's reader thread: \(error)")))
      }
    }
    try result.get()
  }

  /// Reads lines and hands them to `receive` until the connection ends; returns why it ended.
  private func readLoop(_ fd: Int32, _ receive: @Sendable (TransportInput) -> Void)
    -> LocationClientError
  {
    var lines = LineBuffer()
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
      do throws(LocationClientError) {
        while let message = try lines.next() { receive(.message(message.value)) }
      } catch {
        return error
      }
      let count: Int
      do throws(SystemError) {
        count = try SystemIO.read(fd, into: &chunk)
      } catch {
        if error.code == ECONNRESET {
          return LocationClientError(.connectionClosed, "locationd closed the connection")
        }
        return LocationClientError(.systemError, "cannot read from locationd: \(error)")
      }
      if count == 0 {
        let closedHere = state.withLock { $0.closed }
        return LocationClientError(
          .connectionClosed,
          closedHere ? "the connection was closed" : "locationd closed the connection")
      }
      lines.append(chunk[0..<count])
    }
  }

  /// Sends `line` whole.
  ///
  /// - Throws: ``LocationClientError/Code/connectionClosed`` when not connected or the daemon
  ///   went away, ``LocationClientError/Code/timedOut`` when the daemon takes nothing within
  ///   the connect timeout.
  public func send(_ line: [UInt8]) throws(LocationClientError) {
    let result: SystemError? = state.withLock { state in
      guard !state.closed, state.fd >= 0 else { return SystemError(EPIPE) }
      do throws(SystemError) {
        try SystemIO.sendAll(state.fd, line, flags: Int32(MSG_NOSIGNAL))
        return nil
      } catch {
        return error
      }
    }
    guard let result else { return }
    switch result.code {
    case EPIPE, ECONNRESET, ENOTCONN:
      throw LocationClientError(.connectionClosed, "locationd closed the connection")
    case EAGAIN:
      throw LocationClientError(
        .timedOut,
        "locationd took no request within \(DaemonSocket.seconds(connectTimeout)): is it stopped or overloaded?"
      )
    default:
      throw LocationClientError(.systemError, "cannot send to locationd: \(result)")
    }
  }

  /// Shuts the socket down: the reader thread sees the end, reports
  /// ``TransportInput/closed(_:)`` and closes the descriptor.
  public func close() {
    state.withLock { state in
      state.closed = true
      if state.fd >= 0 { shutdown(state.fd, Int32(SHUT_RDWR)) }
    }
  }
}
