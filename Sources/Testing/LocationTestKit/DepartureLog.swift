import LocationProtocol
import ServiceCore
import Synchronization

/// A ``RequestHandler`` in front of another (the service) that records which clients asked for
/// authorization and every ``RequestHandler/clientDisconnected(_:)`` a front-end reported: for
/// tests that each client's departure reaches the service exactly once.
public final class DepartureLog: RequestHandler {
  /// The handler every call is passed on to.
  public let inner: any RequestHandler
  /// The channels of the clients that sent `request`, in the order their first one arrived.
  public let opened = Mutex<[any ClientChannel]>([])
  /// The client numbers of every `clientDisconnected`, in order, repeats included.
  public let gone = Mutex<[UInt64]>([])

  /// Records in front of `inner`.
  public init(_ inner: any RequestHandler) { self.inner = inner }

  /// Passes `request` on; a `request` (authorization) also records the client's channel.
  public func handle(_ request: Request, from client: ClientContext) async -> Reply {
    if request.command == .requestAuthorization {
      opened.withLock { opened in
        if !opened.contains(where: { $0.id == client.id }) { opened.append(client.connection) }
      }
    }
    return await inner.handle(request, from: client)
  }

  /// Records the departure, then passes it on.
  public func clientDisconnected(_ client: ClientContext) async {
    gone.withLock { $0.append(client.id) }
    await inner.clientDisconnected(client)
  }

  /// The client numbers of ``opened``.
  public var openedIDs: [UInt64] { opened.withLock { $0.map(\.id) } }

  /// ``gone`` now.
  public var goneIDs: [UInt64] { gone.withLock { $0 } }
}
