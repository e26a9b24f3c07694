import LocationModel
import Synchronization

@testable import LocationProtocol
@testable import ServiceCore

/// A client channel that keeps every event given to it, parsed, for tests of the service.
final class EventChannel: ClientChannel {
  let id = ConnectionNumber.next()
  let received = Mutex<[JSONValue]>([])

  @discardableResult func send(_ event: Event) -> Bool { deliver(EncodedEvent(event)) }
  @discardableResult func deliver(_ event: EncodedEvent) -> Bool {
    if let value = try? JSONValue.parse(event.body) { received.withLock { $0.append(value) } }
    return true
  }
  var isConnected: Bool { true }
  func close() {}

  /// The events of class `REGION`, in order.
  var regionEvents: [JSONValue] { events("REGION") }
  /// Classes of everything received, in order.
  var classes: [String] { received.withLock { $0.compactMap { $0["class"]?.stringValue } } }
  /// The events of class `name`, in order.
  func events(_ name: String) -> [JSONValue] {
    received.withLock { $0.filter { $0["class"]?.stringValue == name } }
  }
}
