import Synchronization
import Testing

@testable import ServiceCore
@testable import SocketFrontEnd

@Suite("Log throttle")
struct LogThrottleTests {
  @Test("powers of two: the 1st, 2nd, 4th, 8th... occurrence; never a count below 1")
  func powersOfTwo() {
    let logged = (-2...1100).filter { LogThrottle.powersOfTwo.logs($0) }
    #expect(logged == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    #expect(LogThrottle.powersOfTwo.logs(1 << 62))
    #expect(!LogThrottle.powersOfTwo.logs(Int.max))
    #expect(!LogThrottle.powersOfTwo.logs(Int.min))
  }

  @Test("the first N, then every Mth; a period below 1 logs the first N only")
  func firstThenEvery() {
    let rule = LogThrottle.firstThenEvery(first: 10, every: 1000)
    #expect((0...3001).filter { rule.logs($0) } == Array(1...10) + [1000, 2000, 3000])
    #expect((0...5).filter { LogThrottle.firstThenEvery(first: 1, every: 0).logs($0) } == [1])
    #expect((0...5).filter { LogThrottle.firstThenEvery(first: 0, every: 2).logs($0) } == [2, 4])
    #expect(!rule.logs(Int.min))
  }

  @Test("a client reconnecting in a loop to a full socket server costs a few log lines, each with the count so far")
  func connectLoopAgainstAFullServer() async throws {
    var options = ServerOptions()
    options.maxClients = 3
    let fixture = try ServerFixture(options: options)
    let lines = Mutex<[String]>([])
    // Lines of this server only: no other test's server has max=3.
    let observer = Log.addObserver { line in
      if line.contains(" tooManyClients ") && line.contains(" max=3 ") {
        lines.withLock { $0.append(line) }
      }
    }
    defer { Log.removeObserver(observer) }
    let held = try (0..<3).map { _ in try fixture.connect() }
    for client in held { #expect(try await client.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS") }
    for _ in 0..<40 {
      let refused = try fixture.connect()
      #expect(await refused.readJSON()?["code"] == "tooManyClients")
      #expect(await refused.waitForClose())
    }
    let counts = lines.withLock { $0 }.compactMap { line in
      line.split(separator: " ").first { $0.hasPrefix("refusals=") }.flatMap { Int($0.dropFirst(9)) }
    }
    #expect(counts == [1, 2, 4, 8, 16, 32], "\(lines.withLock { $0 })")
    withExtendedLifetime(held) {}
    await fixture.stop()
  }

  @Test("a client that sends only bad lines gets every error reply, and the log a few lines per connection with the count so far")
  func badLineFlood() async throws {
    let fixture = try ServerFixture()
    // Each connection's number on the server, from its watch (the handler keeps its channel).
    func connectAndWatch() async throws -> (client: TestClient, id: UInt64) {
      let before = Set(fixture.handler.watchers.withLock { $0.map(\.id) })
      let client = try fixture.connect()
      #expect(try await client.roundTrip(#"{"cmd":"watch"}"#)?["class"] == "WATCH")
      let id = fixture.handler.watchers.withLock { $0.map(\.id) }.first { !before.contains($0) }
      return (client, try #require(id))
    }
    let (flooder, flooderID) = try await connectAndWatch()
    let (other, otherID) = try await connectAndWatch()
    let lines = Mutex<[String]>([])
    let observer = Log.addObserver { line in
      if line.contains(" client=\(flooderID) ") || line.contains(" client=\(otherID) ") {
        lines.withLock { $0.append(line) }
      }
    }
    defer { Log.removeObserver(observer) }
    // 300 lines that are not JSON, then 5 too long (1 MiB over the 64 KiB limit in all).
    try await flooder.send(String(repeating: "x\n", count: 300))
    for _ in 0..<300 { #expect(await flooder.readJSON()?["code"] == "malformedJSON") }
    let long = String(repeating: "y", count: 70_000) + "\n"
    try await flooder.send(String(repeating: long, count: 5))
    for _ in 0..<5 { #expect(await flooder.readJSON()?["code"] == "lineTooLong") }
    // Still served, and another connection's first bad line is logged: the count is per connection.
    #expect(try await flooder.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")
    try await other.send("{\n")
    #expect(await other.readJSON()?["code"] == "malformedJSON")
    func counts(_ event: String, _ client: UInt64) -> [Int] {
      lines.withLock { $0 }.filter { $0.contains(" \(event) ") && $0.contains(" client=\(client) ") }.compactMap { line in
        line.split(separator: " ").first { $0.hasPrefix("count=") }.flatMap { Int($0.dropFirst(6)) }
      }
    }
    #expect(counts("badRequest", flooderID) == [1, 2, 4, 8, 16, 32, 64, 128, 256])
    #expect(counts("lineTooLong", flooderID) == [1, 2, 4])
    #expect(counts("badRequest", otherID) == [1])
    await fixture.stop()
  }
}
