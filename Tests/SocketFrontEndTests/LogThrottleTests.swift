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
}
