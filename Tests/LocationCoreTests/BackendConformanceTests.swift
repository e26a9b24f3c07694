import LocationCore
import LocationTestKit
import Testing
import LocationModel

@Suite(.timeLimit(.minutes(3)))
struct BackendConformanceTests {
  @Test func replayConforms() async {
    let backend = ReplayBackend(
      source: DecodedFixesSource(name: "track", fixes: TestFixes.track(count: 10)),
      options: .init(path: "track", speed: 0, loop: true), clock: VirtualClock(),
      uri: "replay:track")
    let failures = await backendConformance(backend)
    #expect(failures == [])
  }

  @Test func simulationConforms() async {
    let backend = SimulatedBackend(
      parameters: SimulationParameters(rate: 10), clock: VirtualClock(autoAdvance: true),
      uri: "simulate?rate=10")
    let failures = await backendConformance(backend)
    #expect(failures == [])
  }

  @Test func fakeBackendConformsWithAScript() async {
    let fixes = TestFixes.track(count: 3)
    let script = fixes.map {
      BackendEvent.location(
        Location(fix: $0.fix, provenance: Provenance(backend: "fake", isSimulated: true)))
    }
    let failures = await backendConformance(FakeBackend(script: script))
    #expect(failures == [])
  }

  @Test func aBackendWithTheWrongProvenanceIsReported() async {
    let script = [
      BackendEvent.location(
        Location(
          fix: TestFixes.track(count: 1)[0].fix,
          provenance: Provenance(backend: "other", isSimulated: true)))
    ]
    let failures = await backendConformance(FakeBackend(script: script), locations: 1)
    #expect(failures.count == 2)
    #expect(failures.first?.contains("is not the URI 'fake'") == true)
  }
}
