import Glibc
import JSON
import LocationProtocol
import Synchronization
import Testing

@testable import ServiceCore
@testable import SocketFrontEnd
@testable import WebFrontEnd

/// One front-end's per-client queue under test: the in-memory reference channel, a socket
/// client's slot (on a socket pair whose kernel buffer the test fills, so the slot must queue),
/// a browser's event stream. The same bounds for all: 4096 bytes or 8 counted events.
private protocol QueueUnderTest: AnyObject {
  func deliver(_ event: EncodedEvent) -> Bool
  func deliverBurst(_ events: [EncodedEvent]) -> Bool
  /// Everything the client can read now, in order, one JSON object per event.
  func read() throws -> [JSONValue]
  var isConnected: Bool { get }
}

enum FrontEndQueue: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case memory, socket, web

  var testDescription: String { rawValue }

  static let maxBytes = 4096
  static let maxMessages = 8

  fileprivate func make() throws -> any QueueUnderTest {
    switch self {
    case .memory: return MemoryQueue()
    case .socket: return try SocketQueue()
    case .web: return WebQueue()
    }
  }
}

private final class MemoryQueue: QueueUnderTest {
  let channel = InMemoryChannel(
    limits: OutboundLimits(maxBytes: FrontEndQueue.maxBytes, maxMessages: FrontEndQueue.maxMessages)
  )
  func deliver(_ event: EncodedEvent) -> Bool { channel.deliver(event) }
  func deliverBurst(_ events: [EncodedEvent]) -> Bool { channel.deliverBurst(events) }
  func read() throws -> [JSONValue] { try channel.read().map { try JSONValue.parse($0) } }
  var isConnected: Bool { channel.isConnected }
}

private final class WebQueue: QueueUnderTest {
  let channel = EventStreamChannel(
    id: ConnectionNumber.next(), run: "R", firstID: 1,
    limits: EventStreamLimits(
      maxBacklogBytes: FrontEndQueue.maxBytes, maxBacklogMessages: FrontEndQueue.maxMessages),
    wake: {})
  func deliver(_ event: EncodedEvent) -> Bool { channel.deliver(event) }
  func deliverBurst(_ events: [EncodedEvent]) -> Bool { channel.deliverBurst(events) }
  func read() throws -> [JSONValue] {
    guard let chunk = channel.nextChunk(maximum: Int.max) else { return [] }
    // `id: R-N`, `data: JSON`, blank line.
    return try String(decoding: chunk, as: UTF8.self).split(separator: "\n")
      .filter { $0.hasPrefix("data: ") }
      .map { try JSONValue.parse(Array($0.dropFirst(6).utf8)) }
  }
  var isConnected: Bool { channel.isConnected }
}

private struct SocketPairError: Error {}

private final class SocketQueue: QueueUnderTest {
  let slot: ClientSlot
  let reader: Int32
  /// Bytes written straight into the kernel's buffer to make the slot queue.
  private var filler = 0
  private var unread: [UInt8] = []

  init() throws {
    var fds: [Int32] = [-1, -1]
    guard
      socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0
    else { throw SocketPairError() }
    reader = fds[1]
    var options = ServerOptions()
    options.maxBacklogBytes = FrontEndQueue.maxBytes
    options.maxBacklogMessages = FrontEndQueue.maxMessages
    slot = ClientSlot(
      id: ConnectionNumber.next(), fd: fds[0], peer: PeerCredentials(pid: 1, uid: 0, gid: 0),
      epollFD: -1, options: options)
    // Fill the kernel's buffer: from now on the slot queues what it is given.
    let block = [UInt8](repeating: 0x20, count: 4096)
    while true {
      let sent = block.withUnsafeBytes {
        send(fds[0], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      guard sent > 0 else { break }
      filler += sent
    }
  }

  deinit {
    close(slot.fd)
    close(reader)
  }

  func deliver(_ event: EncodedEvent) -> Bool {
    if case .accepted = slot.deliver(
      body: event.body, line: event.line, coalescingKey: event.coalescingKey)
    {
      return true
    }
    return false
  }

  func deliverBurst(_ events: [EncodedEvent]) -> Bool {
    if case .accepted = slot.deliverBurst(events.map { ($0.body, $0.line) }) { return true }
    return false
  }

  func read() throws -> [JSONValue] {
    var buffer = [UInt8](repeating: 0, count: 65536)
    // Read what the kernel holds, let the slot write what it queued, until both are empty.
    while true {
      var received = 0
      while true {
        let count = buffer.withUnsafeMutableBytes { recv(reader, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { break }
        unread.append(contentsOf: buffer[0..<count])
        received += count
      }
      let queued = slot.state.withLock { state -> Bool in
        _ = slot.flushLocked(&state)
        return !state.queue.isEmpty
      }
      if received == 0 && (!queued || !isConnected) { break }
    }
    let skip = min(filler, unread.count)
    filler -= skip
    unread.removeFirst(skip)
    var values: [JSONValue] = []
    while let end = unread.firstIndex(of: 0x0A) {
      values.append(try JSONValue.parse(Array(unread[..<end])))
      unread.removeFirst(end + 1)
    }
    return values
  }

  var isConnected: Bool { slot.state.withLock { $0.open && $0.dropReason == nil } }
}

private func event(_ className: String, _ number: Int, key: String? = nil, padding: Int = 0)
  -> EncodedEvent
{
  var members = [JSONMember("class", .string(className)), JSONMember("n", .int(Int64(number)))]
  if padding > 0 {
    members.append(JSONMember("pad", .string(String(repeating: "x", count: padding))))
  }
  return EncodedEvent(Event(body: .object(members), coalescingKey: key))
}

/// What every front-end's queue must do the same: coalescing with `missed`, the backlog bound
/// and its drop rule, bursts. The clients are stalled by construction (nothing is read until
/// `read()`); no clock and no sleep is involved.
@Suite("Front-end conformance: one outbound behaviour for every front-end")
struct FrontEndConformanceTests {
  @Test(
    "a waiting TPV is replaced by the newer one, moves behind other events and carries missed",
    arguments: FrontEndQueue.allCases)
  func coalescing(_ kind: FrontEndQueue) throws {
    let queue = try kind.make()
    for n in 1...5 { #expect(queue.deliver(event("TPV", n, key: "TPV"))) }
    #expect(queue.deliver(event("BACKEND", 1)))
    for n in 6...7 { #expect(queue.deliver(event("TPV", n, key: "TPV"))) }
    #expect(queue.deliver(event("MAP", 1, key: "MAP")))
    let read = try queue.read()
    #expect(read.map { $0["class"]?.stringValue ?? "" } == ["BACKEND", "TPV", "MAP"])
    #expect(read.map { $0["n"]?.intValue ?? 0 } == [1, 7, 1])
    #expect(read.map { $0["missed"]?.intValue } == [nil, 6, nil])
    // Read: nothing waits, so the next fix goes as it is.
    #expect(queue.deliver(event("TPV", 8, key: "TPV")))
    let next = try queue.read()
    #expect(next.count == 1 && next.first?["n"]?.intValue == 8 && next.first?["missed"] == nil)
    #expect(queue.isConnected)
  }

  @Test(
    "coalesced events never count: 1000 fixes and the bound's worth of events keep the client",
    arguments: FrontEndQueue.allCases)
  func coalescedDoNotCount(_ kind: FrontEndQueue) throws {
    let queue = try kind.make()
    for n in 1...1000 { _ = queue.deliver(event("TPV", n, key: "TPV")) }
    for n in 1...FrontEndQueue.maxMessages { #expect(queue.deliver(event("WARNING", n))) }
    #expect(queue.isConnected)
    let read = try queue.read()
    #expect(read.count == FrontEndQueue.maxMessages + 1)
    #expect(read.first?["missed"]?.intValue == 999)
  }

  @Test(
    "one event beyond the count bound drops the client; later events are refused",
    arguments: FrontEndQueue.allCases)
  func countBound(_ kind: FrontEndQueue) throws {
    let queue = try kind.make()
    for n in 1...FrontEndQueue.maxMessages { #expect(queue.deliver(event("WARNING", n))) }
    #expect(queue.isConnected)
    #expect(!queue.deliver(event("WARNING", 99)))
    #expect(!queue.isConnected)
    #expect(!queue.deliver(event("TPV", 1, key: "TPV")))
    #expect(try queue.read().isEmpty, "what was queued is dropped")
  }

  @Test(
    "the byte bound drops the client at the event that passes it", arguments: FrontEndQueue.allCases
  )
  func byteBound(_ kind: FrontEndQueue) throws {
    let queue = try kind.make()
    // Each about 1 KiB: four fit in 4096 bytes, the fifth does not.
    var accepted: [Bool] = []
    for n in 1...5 { accepted.append(queue.deliver(event("WARNING", n, padding: 950))) }
    #expect(accepted == [true, true, true, true, false])
    #expect(!queue.isConnected)
  }

  @Test(
    "a burst is checked once before it: a client within the bound gets it whole, however long",
    arguments: FrontEndQueue.allCases)
  func burstWithinBound(_ kind: FrontEndQueue) throws {
    let queue = try kind.make()
    let burst = (1...20).map { event("REGION", $0) }
    #expect(queue.deliverBurst(burst))
    #expect(queue.isConnected)
    let read = try queue.read()
    #expect(read.map { $0["n"]?.intValue ?? 0 } == Array(1...20))
    // Read: the backlog is empty again.
    #expect(queue.deliver(event("WARNING", 1)))
    #expect(queue.isConnected)
  }

  @Test(
    "a client that does not drain a burst is dropped at the next event or burst",
    arguments: FrontEndQueue.allCases)
  func undrainedBurst(_ kind: FrontEndQueue) throws {
    for next in ["event", "burst"] {
      let queue = try kind.make()
      #expect(queue.deliverBurst((1...20).map { event("REGION", $0) }))
      let kept =
        next == "event"
        ? queue.deliver(event("WARNING", 1)) : queue.deliverBurst([event("REGION", 21)])
      #expect(!kept, "next \(next)")
      #expect(!queue.isConnected, "next \(next)")
    }
  }
}

@Suite("In-memory channel: revocation and disconnection")
struct InMemoryChannelTests {
  @Test("dropped, closed again, written to: the disconnection is reported exactly once")
  func disconnectsOnce() {
    let reasons = Mutex<[String]>([])
    let channel = InMemoryChannel(limits: OutboundLimits(maxBytes: 100, maxMessages: 1)) { reason in
      reasons.withLock { $0.append(reason) }
    }
    #expect(channel.deliver(event("WARNING", 1)))
    #expect(!channel.deliver(event("WARNING", 2)))
    channel.close()
    #expect(!channel.send(Event(body: .object([JSONMember("class", "WARNING")]))))
    #expect(!channel.deliverBurst([event("REGION", 1)]))
    #expect(reasons.withLock { $0 } == ["slowClient"])
    #expect(channel.dropReason == "slowClient")
    let closed = InMemoryChannel { reason in reasons.withLock { $0.append(reason) } }
    closed.close()
    closed.close()
    #expect(reasons.withLock { $0 } == ["slowClient", "closedByService"])
  }

  @Test("the service's reload reaches the channel as typed changes, in order")
  func recordsAuthorizationChanges() {
    let channel = InMemoryChannel()
    channel.authorizationChanged(.denied)
    channel.authorizationChanged(.authorized)
    #expect(channel.authorizationChanges == [.denied, .authorized])
    #expect(channel.isConnected)
  }
}
