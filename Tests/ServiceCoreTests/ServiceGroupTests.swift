import Glibc
import Synchronization
import Testing

@testable import ServiceCore

/// What the fake services and the group did, in order.
private final class Journal: Sendable {
  private let lines = Mutex<[String]>([])
  func add(_ line: String) { lines.withLock { $0.append(line) } }
  var all: [String] { lines.withLock { $0 } }
}

private struct StartRefused: Error, CustomStringConvertible {
  var description: String { "address in use" }
}

/// A service that records its calls; `fails` makes its start throw.
private struct FakeService: Service {
  let name: String
  let journal: Journal
  var fails = false

  func start() async throws {
    journal.add("start \(name)")
    if fails { throw StartRefused() }
  }
  func stop() async { journal.add("stop \(name)") }
  func reload() async { journal.add("reload \(name)") }
}

@Suite("Service group")
struct ServiceGroupTests {
  @Test("starts in order, stops in reverse, each once")
  func orderAndReverse() async throws {
    let journal = Journal()
    let group = ServiceGroup()
    try await group.start(["a", "b", "c"].map { FakeService(name: $0, journal: journal) })
    #expect(group.running == ["a", "b", "c"])
    await group.stop()
    await group.stop()
    #expect(journal.all == ["start a", "start b", "start c", "stop c", "stop b", "stop a"])
    #expect(group.running.isEmpty)
  }

  @Test("a failed start stops exactly what started before it, newest first", arguments: 0..<4)
  func partialStart(failing: Int) async {
    let journal = Journal()
    let group = ServiceGroup()
    let services = (0..<4).map {
      FakeService(name: "s\($0)", journal: journal, fails: $0 == failing)
    }
    do {
      try await group.start(services)
      Issue.record("the start of s\(failing) did not fail")
    } catch {
      #expect(error.service == "s\(failing)")
      #expect(error.description == "s\(failing): address in use")
    }
    let started = (0...failing).map { "start s\($0)" }
    let stopped = (0..<failing).reversed().map { "stop s\($0)" }
    #expect(journal.all == started + stopped)
    // Stopped once: a later stop (the daemon's shutdown path) touches nothing.
    await group.stop()
    #expect(journal.all == started + stopped)
    #expect(group.running.isEmpty)
  }

  @Test("nothing starts after a stop")
  func noStartAfterStop() async {
    let journal = Journal()
    let group = ServiceGroup()
    await group.stop()
    await #expect(throws: ServiceStartFailure.self) {
      try await group.start(FakeService(name: "late", journal: journal))
    }
    #expect(journal.all.isEmpty)
  }

  @Test("the group's events name each service as it starts, fails and stops")
  func events() async {
    let journal = Journal()
    let group = ServiceGroup { event, name in journal.add("\(event) \(name)") }
    try? await group.start([
      ServiceClosures("one"), ServiceClosures("two", start: { throw StartRefused() }),
      ServiceClosures("three"),
    ])
    #expect(journal.all == ["started one", "startFailed two", "stopping one", "stopped one"])
  }

  @Test("SIGHUP reloads the started services in start order; another signal ends the run")
  func signals() async throws {
    let journal = Journal()
    let group = ServiceGroup()
    try await group.start(["a", "b"].map { FakeService(name: $0, journal: journal) })
    let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
    continuation.yield(SIGHUP)
    continuation.yield(SIGHUP)
    continuation.yield(SIGTERM)
    continuation.yield(SIGHUP)
    let ended = await group.run(signals: stream) {
      journal.add("reread")
      await group.reload()
    }
    #expect(ended == SIGTERM)
    #expect(
      journal.all == [
        "start a", "start b", "reread", "reload a", "reload b", "reread", "reload a", "reload b",
      ])
    continuation.finish()
    // A finished stream ends the run without a signal.
    #expect(await group.run(signals: AsyncStream { $0.finish() }) {} == nil)
  }
}
