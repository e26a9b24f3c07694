import LocationCore
import LocationTestKit
import NMEA
import Testing
import LocationModel

@Suite(.timeLimit(.minutes(3)))
struct CorpusReplayTests {
  static let logs = NMEACorpus.logPaths

  @Test(.enabled(if: logs.isEmpty, "the NMEA corpus is present"))
  func corpusIsMissing() {
    if NMEACorpus.isRequired {
      Issue.record("../shared/nmea (the NMEA corpus) is missing and CI=true requires it")
    } else {
      print("skipping corpus replay tests: ../shared/nmea not found")
    }
  }

  /// Replaying a log at speed 0 through the manager yields exactly the decoder's fixes (what
  /// `locationctl decode` prints), field by field, with their line numbers.
  @Test(arguments: logs)
  func replayThroughTheManagerYieldsTheDecodersFixes(path: String) async throws {
    let (expected, statistics) = try NMEACorpus.decodeWithStatistics(path: path)
    #expect(!expected.isEmpty, "no fixes decoded from \(path)")
    let backend = ReplayBackend(options: .init(path: path, speed: 0), clock: VirtualClock())
    let manager = LocationManager(backend: backend)
    let client = ClientID(1)
    await manager.setAuthorization(.authorized, for: client)
    let clientStream = await manager.subscribe(client: client, coalescing: false)
    let observer = await manager.observe(coalescing: false)
    try await manager.startUpdating(client: client)

    var observed: [Location] = []
    var reportedRejections = 0
    loop: for await event in observer {
      switch event {
      case .location(let location, _): observed.append(location)
      case .status(.endOfData, _): break loop
      case .error(let message):
        // "PATH lines A-B: N sentence(s) rejected and skipped (reason=n ...)"
        let words = message.split(separator: " ")
        guard message.contains("rejected and skipped"), let count = words.firstIndex(of: "sentences")
          ?? words.firstIndex(of: "sentence"), count > 0, let n = Int(words[count - 1])
        else {
          Issue.record("replay error: \(message)")
          continue
        }
        reportedRejections += n
      default: continue
      }
    }
    // Every sentence the decoder rejects is reported to the clients, none twice.
    #expect(reportedRejections == statistics.rejectedTotal)
    #expect(observed.count == expected.count)
    if let index = zip(observed, expected).map({ $0.fix != $1.fix }).firstIndex(of: true) {
      #expect(
        observed[index].fix == expected[index].fix, "first difference at epoch \(index) of \(path)")
    }
    #expect(observed.map(\.fix) == expected.map(\.fix))
    #expect(observed.map(\.provenance.line) == expected.map(\.line))
    #expect(observed.allSatisfy { $0.provenance.isSimulated && $0.provenance.source == path })

    await manager.stopUpdating(client: client)
    let delivered = locations(await drain(clientStream))
    let withPosition = expected.filter {
      Location(fix: $0.fix, provenance: observed[0].provenance).hasPosition
    }
    #expect(delivered.map(\.fix) == withPosition.map(\.fix))
    #expect(delivered.map(\.provenance.line) == withPosition.map(\.line))
  }

  static func hasDatedOrderedEpochs(_ decoded: [DecodedFix]) -> Bool {
    let times = decoded.compactMap(\.fix.time)
    return times.count == decoded.count && times.count > 2
      && zip(times, times.dropFirst()).allSatisfy { $0 <= $1 }
  }

  @Test(.enabled(if: !logs.isEmpty))
  func severalLogsQualifyForThePacingTest() throws {
    let qualifying = try Self.logs.filter {
      Self.hasDatedOrderedEpochs(Array(try NMEACorpus.decode(path: $0).prefix(200)))
    }
    print("pacing checked on \(qualifying.count) of \(Self.logs.count) corpus logs")
    #expect(qualifying.count >= 3)
  }

  /// At speed 1 (and 10) on the virtual clock, fixes come out when the clock has advanced exactly
  /// as far as the log's timestamps (divided by the speed).
  @Test(arguments: logs, [1.0, 10.0])
  func pacingOfARealLogFollowsItsTimestamps(path: String, speed: Double) async throws {
    let decoded = Array(try NMEACorpus.decode(path: path).prefix(200))
    guard Self.hasDatedOrderedEpochs(decoded) else { return }  // timed below on logs that qualify
    let times = decoded.compactMap(\.fix.time)
    let clock = VirtualClock()
    let backend = ReplayBackend(options: .init(path: path, speed: speed), clock: clock)
    var events = backend.events.makeAsyncIterator()
    try await backend.start()
    for (index, epoch) in decoded.enumerated() {
      let due = Duration.milliseconds(Double(times[index] - times[0]) / speed)
      if due > clock.now {
        await clock.advanceToNextDeadline()
        #expect(clock.now == due, "epoch \(index) of \(path)")
      }
      let location = try #require(await nextLocation(&events))
      #expect(location.provenance.line == epoch.line)
      #expect(location.fix.time == times[index])
    }
    await backend.stop()
  }
}
