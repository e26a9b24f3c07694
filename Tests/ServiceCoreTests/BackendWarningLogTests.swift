import LocationCore
import LocationModel
import LocationTestKit
import MapState
import Regions
import Synchronization
import Testing

@testable import LocationProtocol
@testable import ServiceCore

/// The backend's warnings (a log's rejected sentences, a stream without NMEA) reach the journal
/// as well as the watchers, a few lines per run.
@Suite("Backend warnings in the journal")
struct BackendWarningLogTests {
  @Test("each warning goes to watchers; the journal gets the first ten, then every hundredth, and a new run starts counting again")
  func warningsAreLogged() async throws {
    let backend = FakeBackend()
    let manager = LocationManager(backend: backend)
    let service = LocationService(
      manager: manager, map: MapStateService(), backend: backend,
      authority: AuthorizationAuthority(Authorizer(groupName: nil)),
      regions: RegionService(clock: VirtualClock()))
    let channel = EventChannel()
    let context = ClientContext(connection: channel, peer: PeerCredentials(pid: 1, uid: 0, gid: 0))
    await service.start()
    _ = await service.handle(Request(command: .requestAuthorization), from: context)
    _ = await service.handle(Request(command: .watch(enable: true)), from: context)
    // This test's lines only: other tests log warnings of their own.
    let token = "warning-\(UInt64.random(in: 0...UInt64.max))"
    let lines = Mutex<[String]>([])
    let observer = Log.addObserver { line in
      if line.contains(" backendWarning ") && line.contains(token) { lines.withLock { $0.append(line) } }
    }
    defer { Log.removeObserver(observer) }

    func send(_ count: Int) async throws {
      let before = channel.events("WARNING").count
      for index in 0..<count { backend.send(.error("\(token) \(index): 3 sentences rejected and skipped")) }
      #expect(await eventually { channel.events("WARNING").count >= before + count })
    }
    try await send(250)
    #expect(channel.events("WARNING").count == 250)
    #expect(channel.events("WARNING").first?["message"]?.stringValue == "\(token) 0: 3 sentences rejected and skipped")
    let counts = { lines.withLock { $0 }.compactMap { line in
      line.split(separator: " ").first { $0.hasPrefix("count=") }.flatMap { Int($0.dropFirst(6)) }
    } }
    #expect(counts() == Array(1...10) + [100, 200], "\(lines.withLock { $0 })")
    #expect(lines.withLock { $0.first }?.contains("backend=\(backend.uri) ") == true)
    #expect(lines.withLock { $0.first }?.contains("message=\"\(token) 0: 3 sentences rejected and skipped\"") == true)

    // The run ends; the next one's first warning is logged again.
    backend.send(.status(.stopped, detail: nil))
    try await send(1)
    #expect(counts() == Array(1...10) + [100, 200, 1], "\(lines.withLock { $0 })")
    await service.shutdown(reason: "test")
  }
}
