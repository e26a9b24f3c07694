import Foundation
import Glibc
import JSON
import LocationProtocol
import LocationTestKit
import ServiceCore
import Testing

@testable import WebFrontEnd

/// A browser's `/events` stream over a real TCP connection to the front-end (non-blocking
/// reads, which discard what they read, and waits with `Task.sleep`).
private final class StreamClient {
  let fd: Int32
  private(set) var closedByPeer = false
  /// The last bytes received, enough to see the end of a chunked body.
  private var tail: [UInt8] = []

  /// The front-end ended the stream: the last chunk of its chunked body arrived (the
  /// connection itself may stay open for a next request, HTTP/1.1 keep-alive), or it closed.
  var ended: Bool { closedByPeer || tail.elementsEqual(Array("\r\n0\r\n\r\n".utf8)) }

  init(port: UInt16, token: String) throws {
    fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw StreamClientError() }
    // A small receive window, set before connecting (it fixes the window the connection
    // offers): a client that stops reading then holds a few kilobytes in the kernel, not the
    // megabytes loopback's autotuning would allow, so "falls behind" does not depend on the
    // machine's TCP settings.
    var window: Int32 = 4096
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    // No close before a throw: every stored property is set, so deinit runs and closes `fd`.
    guard connected == 0 else { throw StreamClientError() }
    let request = Array(
      "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8)
    guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count
    else { throw StreamClientError() }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
  }

  deinit { if fd >= 0 { Glibc.close(fd) } }

  /// Reads what is there now; `false` once the front-end has closed the connection.
  @discardableResult func pump() -> Bool {
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while !closedByPeer {
      let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count > 0 {
        tail = Array((tail + chunk[0..<count]).suffix(7))
        continue
      }
      if count == 0 || (errno != EAGAIN && errno != EINTR) { closedByPeer = true }
      break
    }
    return !closedByPeer
  }

  /// Reads until the stream ends (at most `timeout`, a guard against a hang).
  func readUntilEnded(timeout: Duration = .seconds(30)) async {
    let deadline = ContinuousClock.now + timeout
    while pump() && !ended && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
  }
}

private struct StreamClientError: Error {}

@Suite("Web front-end: streams over TCP", .serialized, .timeLimit(.minutes(2)))
struct WebStreamDepartureTests {
  @Test("bound to every address, the page's URL names loopback, which a browser here can open")
  func wildcardAddressGivesALoopbackURL() async throws {
    let parts = try ServiceParts(group: nil)
    for (address, prefix) in [("0.0.0.0", "http://127.0.0.1:"), ("127.0.0.1", "http://127.0.0.1:")] {
      let options = WebOptions(address: address, port: 0, tiles: "none", stateDirectory: parts.directory.path)
      let web = try WebFrontEnd(options: options, service: parts.service)
      #expect(web.url.hasPrefix(prefix) && !web.url.hasSuffix(":0/"), "\(address): \(web.url)")
      web.stop()
    }
  }

  @Test(
    "every way a browser's stream ends (it closes, the service closes it, it is dropped as slow, the front-end stops) reaches the service exactly once"
  )
  func everyStreamEndReportedOnce() async throws {
    let parts = try ServiceParts(group: nil)
    await parts.service.start()
    let log = DepartureLog(parts.service)
    var options = WebOptions(
      address: "127.0.0.1", port: 0, tiles: "none", stateDirectory: parts.directory.path)
    options.reconnectGraceSeconds = 0
    // A stream waiting for events learns that its browser left at the next write: the keep-alive.
    options.keepAliveSeconds = 1
    options.streamLimits = EventStreamLimits(maxBacklogBytes: 16 * 1024, maxBacklogMessages: 64)
    let web = try WebFrontEnd(options: options, service: log)
    let port = try #require(UInt16(web.url.split(separator: ":").last?.filter(\.isNumber) ?? ""))
    let token = try #require(
      try? String(contentsOfFile: web.tokenFile, encoding: .utf8).split(separator: "\n").first.map(String.init))
    var clients = try (0..<5).map { _ in try StreamClient(port: port, token: token) }
    #expect(await eventually { log.openedIDs.count == 5 })
    let ids = log.openedIDs
    #expect(Set(ids).count == 5)
    @Sendable func gone() -> [UInt64] { log.goneIDs }

    // It closes.
    clients.removeFirst()
    #expect(await eventually { gone().count == 1 })
    // The service closes one (a revoked authorization), twice.
    let revoked = log.opened.withLock { $0.first { !gone().contains($0.id) } }
    revoked?.close()
    revoked?.close()
    #expect(await eventually { gone().count == 2 })
    let deadline = ContinuousClock.now + .seconds(30)
    while !clients.contains(where: \.ended) && ContinuousClock.now < deadline {
      for client in clients { client.pump() }
      try? await Task.sleep(for: .milliseconds(2))
    }
    #expect(clients.filter(\.ended).count == 1)
    clients.removeAll { $0.ended }
    // One falls behind: never-coalesced events given faster than its connection takes them
    // pass the backlog bound and its stream is ended.
    let behind = try #require(log.opened.withLock { $0.first { !gone().contains($0.id) } })
    // The kernel still holds up to the sender's socket buffer (net.ipv4.tcp_wmem's maximum,
    // 4 MiB by default) before the front-end's backlog grows: 16 MiB of events is far beyond it.
    let padding = String(repeating: "x", count: 1000)
    let limit = 16 * 1024
    var sent = 0
    while sent < limit {
      let event = EncodedEvent(Event(body: ["class": "NOTE", "seq": .int(Int64(sent)), "pad": .string(padding)]))
      sent += 1
      if !behind.deliver(event) { break }
    }
    #expect(sent < limit, "the stream was not ended after \(sent) events")
    let until = ContinuousClock.now + .seconds(30)
    while !clients.contains(where: \.ended) && ContinuousClock.now < until {
      for client in clients { client.pump() }
      try? await Task.sleep(for: .milliseconds(2))
    }
    #expect(clients.filter(\.ended).count == 1)
    #expect(await eventually { gone().count == 3 })
    clients.removeAll { $0.ended }
    // The last two are open when the front-end stops.
    web.stop()
    for client in clients { await client.readUntilEnded() }
    #expect(clients.filter(\.ended).count == 2)
    #expect(await eventually { gone().count == 5 })
    for _ in 0..<100 { await Task.yield() }
    #expect(gone().sorted() == ids.sorted(), "\(gone()) for \(ids)")
    await parts.service.shutdown(reason: "test")
    parts.directory.remove()
  }
}
