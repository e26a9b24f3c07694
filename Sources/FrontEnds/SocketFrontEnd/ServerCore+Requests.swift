import CLinux
import Glibc
import LocationModel
import LocationProtocol
import Queues
import ServiceCore
import Synchronization
import SystemIO

extension ServerCore {
  // MARK: Request tasks

  /// What a request task does next.
  private enum Next {
    case answer(LineReader.Item)
    /// Data is queued for the client: stop until the I/O thread resumes it.
    case paused
    /// Nothing left: `notify` when the client has gone (tell the handler), `finished` when it
    /// half-closed and everything is sent (close it).
    case done(notify: Bool, finished: Bool)
  }

  /// Answers the client's requests in order until none is left, then ends: no task waits for
  /// an idle client (each would keep its task allocator's memory).
  func serve(_ connection: ClientConnection) async {
    let slot = connection.slot
    while true {
      let next = slot.state.withLock { state -> Next in
        if !state.requests.isEmpty && !state.queue.isEmpty && state.open
          && state.dropReason == nil
        {
          // The socket did not take everything: wait until it has (the I/O thread resumes this
          // client when its queue has drained) instead of piling up replies. Requests stay
          // unread meanwhile (see updateInterest).
          state.serving = false
          state.waitingForDrain = true
          return .paused
        }
        if let item = state.requests.popFirst() {
          state.answering = true
          slot.updateInterest(&state)
          return .answer(item)
        }
        state.serving = false
        let notify = !state.open && !state.disconnectNotified
        if notify { state.disconnectNotified = true }
        return .done(notify: notify, finished: state.open && ClientSlot.isFinished(state))
      }
      switch next {
      case .answer(let item):
        let json = await answer(item, connection: connection)
        var body = json.encoded
        if body.count >= options.maxBacklogBytes {
          // A client could never receive it (its backlog bound): say so instead.
          let count = connection.slot.tooLargeReplies.add(1, ordering: .relaxed).newValue
          if LogThrottle.powersOfTwo.logs(count) {
            Log.event(
              "replyTooLarge",
              ["client": String(connection.id), "bytes": String(body.count), "count": String(count)])
          }
          body = Reply.error(
            .limitExceeded,
            message:
              "the reply would be \(body.count) bytes, more than the \(options.maxBacklogBytes) bytes a client may have pending: ask for less (fewer annotations or regions, a page of the region list with \"after\" and \"limit\")"
          ).json(id: json["id"].flatMap { RequestID(json: $0) }).encoded
        }
        var line = body
        line.append(UInt8(ascii: "\n"))
        // Replies are never coalesced or dropped; they count towards the backlog bound. Events
        // held for after this reply (an authorization change) follow it at once.
        if case .drop(let reason) = slot.deliverReply(body: body, line: line) {
          scheduleClose(connection.id, reason: reason)
        }
      case .paused:
        return
      case .done(let notify, let finished):
        if finished { scheduleClose(connection.id, reason: "closedByPeer") }
        if notify {
          await handler.clientDisconnected(
            ClientContext(connection: connection, peer: slot.peer))
        }
        return
      }
    }
  }

  private func answer(_ item: LineReader.Item, connection: ClientConnection) async -> JSONValue {
    let peer = connection.slot.peer
    let request: Request
    switch item {
    case .tooLong:
      // A client that sends nothing but bad lines costs a few log lines, not one per line; the
      // count says how many there were.
      let count = connection.slot.tooLongLines.add(1, ordering: .relaxed).newValue
      if LogThrottle.powersOfTwo.logs(count) {
        Log.event(
          "lineTooLong",
          ["client": String(connection.id), "max": String(options.maxLineLength), "count": String(count)])
      }
      return Reply.error(
        .lineTooLong,
        message:
          "request line longer than \(options.maxLineLength) bytes was discarded: send shorter requests"
      ).json(id: nil)
    case .line(let bytes):
      do {
        request = try Request.parse(bytes)
      } catch {
        let count = connection.slot.badRequests.add(1, ordering: .relaxed).newValue
        if LogThrottle.powersOfTwo.logs(count) {
          Log.event("badRequest", ["client": String(connection.id), "code": error.code.rawValue, "count": String(count)])
        }
        return Reply.error(error.code, message: error.message).json(id: error.id)
      }
    }
    // Authorization, `request` included, is the handler's decision: the transport passes the
    // peer's credentials with every request.
    let context = ClientContext(connection: connection, peer: peer)
    let reply = await handler.handle(request, from: context)
    return reply.json(id: request.id)
  }
}
