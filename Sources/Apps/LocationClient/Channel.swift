import LocationProtocol
import Synchronization

/// One open connection of a ``LocationClient``: matches replies to requests by `id`, bounds each
/// wait by the client's timeout, and hands everything without an `id` (events) to its owner.
final class Channel: Sendable {
  private struct Pending {
    var continuation: CheckedContinuation<JSONValue, any Error>
    var timer: Task<Void, Never>?
  }

  private struct State {
    var nextID = 1
    var pending: [Int: Pending] = [:]
    var closed: LocationClientError?
    /// The last line, when it was an `ERROR` without an `id` (about the connection): if the
    /// connection ends right after it, it says why (`tooManyClients` is sent just before the
    /// daemon closes a connection it cannot serve, often before any request waits for it).
    var lastConnectionError: LocationClientError?
    /// Requests whose send found the connection closed: they did nothing, and wait for the end
    /// of the connection (and the reason the daemon gave, if any) to fail as such.
    var unsent: Set<Int> = []
  }

  let transport: any LocationTransport
  private let state = Mutex(State())
  private let timeout: Duration
  private let sleep: @Sendable (Duration) async throws -> Void
  private let onInput: @Sendable (TransportInput) -> Void

  /// A channel over `transport` (not yet open); `onInput` receives events and the close.
  init(
    transport: any LocationTransport, timeout: Duration,
    sleep: @escaping @Sendable (Duration) async throws -> Void,
    onInput: @escaping @Sendable (TransportInput) -> Void
  ) {
    self.transport = transport
    self.timeout = timeout
    self.sleep = sleep
    self.onInput = onInput
  }

  deinit { transport.close() }

  /// Opens the transport.
  ///
  /// - Throws: ``LocationClientError`` when the daemon cannot be reached.
  func open() async throws(LocationClientError) {
    try await transport.open { [weak self] input in self?.receive(input) }
  }

  /// Whether the connection has ended.
  var isClosed: Bool { state.withLock { $0.closed != nil } }

  /// Closes the connection (the daemon ends this connection's watch and tracking).
  func close() { transport.close() }

  private func receive(_ input: TransportInput) {
    switch input {
    case .message(let value):
      let connectionError =
        value["id"] == nil && value["class"] == "ERROR"
        ? LocationClientError(errorReply: value) : nil
      state.withLock { $0.lastConnectionError = connectionError }
      if let id = value["id"]?.intValue {
        let pending = state.withLock { $0.pending.removeValue(forKey: id) }
        if let pending {
          pending.timer?.cancel()
          pending.continuation.resume(returning: value)
          return
        }
      } else if value["class"] == "ERROR" {
        // An error about the connection itself (tooManyClients, no descriptor left): it answers
        // whatever waits.
        let waiting = state.withLock { state in
          defer { state.pending = [:] }
          return Array(state.pending.values)
        }
        for pending in waiting {
          pending.timer?.cancel()
          pending.continuation.resume(throwing: LocationClientError(errorReply: value))
        }
      }
      onInput(input)
    case .closed(let closeError):
      let (waiting, error) = state.withLock { state in
        let error = state.lastConnectionError ?? closeError
        state.closed = error
        let unsent = state.unsent
        defer {
          state.pending = [:]
          state.unsent = []
        }
        return (state.pending.map { ($0.value, unsent.contains($0.key)) }, error)
      }
      for (pending, unsent) in waiting {
        pending.timer?.cancel()
        pending.continuation.resume(throwing: unsent ? ClosedBeforeSending(error: error) : error)
      }
      onInput(.closed(error))
    }
  }

  private func fail(_ id: Int, _ error: any Error) {
    guard
      let pending = state.withLock({ state in
        state.unsent.remove(id)
        return state.pending.removeValue(forKey: id)
      })
    else { return }
    pending.timer?.cancel()
    pending.continuation.resume(throwing: error)
  }

  /// Sends `command` with `members` and returns the reply (whatever its class, `ERROR`
  /// included), or throws when it does not come.
  ///
  /// - Throws: ``LocationClientError`` ``LocationClientError/Code/connectionClosed`` (closed
  ///   before the reply; ``ClosedBeforeSending`` when the request was never sent),
  ///   ``LocationClientError/Code/timedOut`` (no reply within the timeout), a connection error
  ///   the daemon sent; `CancellationError` when the task is cancelled.
  func exchange(_ command: String, _ members: [JSONMember] = []) async throws -> JSONValue {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    let line = DaemonSocket.requestLine(command, id: id, members)
    // The daemon would discard it with an ERROR without id, which fails every request waiting
    // on the connection: refused here, it fails only its own.
    if let tooLong = DaemonSocket.tooLong(line, command) { throw tooLong }
    let timeout = timeout
    let sleep = sleep
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<JSONValue, any Error>) in
        let closed = state.withLock { state -> LocationClientError? in
          if let closed = state.closed { return closed }
          state.pending[id] = Pending(continuation: continuation, timer: nil)
          return nil
        }
        if let closed {
          continuation.resume(throwing: ClosedBeforeSending(error: closed))
          return
        }
        if Task.isCancelled {
          fail(id, CancellationError())
          return
        }
        let timer = Task { [weak self] in
          do { try await sleep(timeout) } catch { return }
          self?.fail(
            id,
            LocationClientError(
              .timedOut,
              "locationd did not answer \(command) within \(timeout): is it stopped or overloaded?")
          )
        }
        let registered = state.withLock { state -> Bool in
          guard state.pending[id] != nil else { return false }
          state.pending[id]?.timer = timer
          return true
        }
        if !registered { timer.cancel() }
        do throws(LocationClientError) {
          try transport.send(line)
        } catch {
          // A send that failed on a closed connection delivered nothing: it may be sent again.
          // It fails when the end of the connection is read, with the reason the daemon sent
          // before closing (tooManyClients...) when it sent one.
          guard error.code == .connectionClosed else {
            fail(id, error)
            return
          }
          let closed = state.withLock { state -> LocationClientError? in
            if let closed = state.closed { return closed }
            if state.pending[id] != nil { state.unsent.insert(id) }
            return nil
          }
          if let closed { fail(id, ClosedBeforeSending(error: closed)) }
        }
      }
    } onCancel: {
      fail(id, CancellationError())
    }
  }

  /// ``exchange(_:_:)`` that throws an `ERROR` reply as a ``LocationClientError``.
  func call(_ command: String, _ members: [JSONMember] = []) async throws -> JSONValue {
    let reply = try await exchange(command, members)
    if reply["class"] == "ERROR" { throw LocationClientError(errorReply: reply) }
    return reply
  }
}

/// The connection had ended before a request could be sent: the request did nothing, so it may
/// be sent again on a new connection.
struct ClosedBeforeSending: Error {
  var error: LocationClientError
}
