import LocationModel
import LocationTestKit
import NMEA
import Synchronization
import Testing

@testable import LocationCore

/// A multi-GNSS epoch `index` seconds after 2026-03-14T12:00:00Z, moving east.
private func epoch(_ index: Int) -> Fix {
  SampleFixes.multiGNSS(
    time: 1_773_489_600_000 + Int64(index) * 1000,
    coordinate: Coordinate(latitude: 48.137_154, longitude: 11.575_382 + Double(index) * 1e-4))
}

@Suite struct FaultScheduleTests {
  @Test func parsesEveryTermOfTheDocumentedExample() throws {
    let schedule = try NMEAFaultSchedule.parse(
      "checksum:0.01,bitflip:0.001,drop:0.01,truncate:0.01,garbage:0.005,stuck@120-180,unplug@300-310,seed=42"
    )
    #expect(schedule.checksum == 0.01 && schedule.bitflip == 0.001 && schedule.drop == 0.01)
    #expect(schedule.truncate == 0.01 && schedule.garbage == 0.005 && schedule.seed == 42)
    #expect(schedule.stuck == [120..<180] && schedule.unplug == [300..<310])
    #expect(
      schedule.isStuck(at: 120) && !schedule.isStuck(at: 180) && schedule.isUnplugged(at: 309.9))
  }

  @Test(arguments: [
    ("noise:0.1", NMEAFaultScheduleError.unknownKind(term: "noise:0.1")),
    ("drop:1.5", .invalidProbability(term: "drop:1.5")),
    ("drop:x", .invalidProbability(term: "drop:x")),
    ("stuck@30-10", .invalidWindow(term: "stuck@30-10")),
    ("unplug@5", .invalidWindow(term: "unplug@5")),
    ("seed=-1", .invalidSeed(term: "seed=-1")),
    ("", .empty),
    (",,,", .empty),
    ("checksum:0.1,,drop:0.1", .emptyTerm(schedule: "checksum:0.1,,drop:0.1")),
    ("checksum:0.1,checksum:0.2", .repeatedKind(term: "checksum:0.2")),
    ("seed=1,seed=2", .repeatedKind(term: "seed=2")),
    ("unplug@1-3,unplug@2-4", .overlappingWindow(term: "unplug@2-4")),
    ("stuck@1-1e300", .invalidWindow(term: "stuck@1-1e300")),
    ("unplug@1-1e300", .invalidWindow(term: "unplug@1-1e300")),
  ])
  func rejectsBadTermsByName(_ text: String, _ error: NMEAFaultScheduleError) {
    #expect(throws: error) { try NMEAFaultSchedule.parse(text) }
  }

  /// The exit summary names every kind with its count.
  @Test func faultSummaryNamesEachKindWithItsCount() {
    var counts = NMEAFaultStatistics()
    counts.checksum = 3
    counts.drop = 2
    counts.stuckEpochs = 60
    counts.unplugs = 1
    #expect(
      counts.summary
        == "faults injected: checksum 3, bitflip 0, drop 2, truncate 0, garbage 0, stuck epochs 60, unplugs 1")
  }

  /// Adjacent windows and windows of different kinds may share time; every kind once is fine.
  @Test func acceptsAdjacentWindowsAndEachKindOnce() throws {
    let schedule = try NMEAFaultSchedule.parse("unplug@1-3,unplug@3-4,stuck@2-5,checksum:0.1,drop:0.1")
    #expect(schedule.unplug == [1..<3, 3..<4] && schedule.stuck == [2..<5])
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?faults=checksum:0.1,checksum:0.2") }
  }

  /// 4800 baud at 10 Hz leaves 48 bytes an epoch: every sentence would be cut, nothing sent.
  /// Such a pair is refused, naming the budget, the lowest baud for the rate and the highest
  /// rate for the baud; pairs that carry an RMC pass.
  @Test func refusesBaudAndRateThatCannotCarryAnRMC() throws {
    let problem = try #require(SerialLinePacer.epochBudgetProblem(baud: 4800, rate: 10))
    #expect(problem.contains("48 bytes per epoch"))
    #expect(problem.contains("at least 9600 baud at 10 Hz"))
    #expect(problem.contains("at most 5 Hz at 4800 baud"))
    #expect(SerialLinePacer.epochBudgetProblem(baud: 4800, rate: 6) != nil)
    #expect(SerialLinePacer.epochBudgetProblem(baud: 4800, rate: 5) == nil)
    #expect(SerialLinePacer.epochBudgetProblem(baud: 9600, rate: 10) == nil)
    #expect(throws: BackendURIError.self) { try SimulatedBackend.Options.parse("simulate?rate=10&baud=4800") }
    #expect(try SimulatedBackend.Options.parse("simulate?rate=5&baud=4800").baud == 4800)
  }

  /// Every injected fault is detected by the decoder as exactly one rejection of the matching
  /// reason; dropped sentences are the ones the decoder never read; and no position comes out
  /// that was not simulated.
  @Test(arguments: NMEAVersion.allCases)
  func decoderDetectsExactlyWhatWasInjected(_ version: NMEAVersion) throws {
    var schedule = try NMEAFaultSchedule.parse(
      "checksum:0.02,bitflip:0.03,drop:0.02,truncate:0.02,garbage:0.02")
    schedule.seed = 7
    var injector = NMEAFaultInjector(schedule: schedule)
    let encoder = NMEAEncoder(version: version)
    let fixes = (0..<600).map(epoch)
    var bytes: [UInt8] = []
    for fix in fixes {
      for sentence in encoder.encode(fix) { bytes += injector.apply(Array(sentence.utf8)) }
    }
    let injected = injector.statistics
    #expect(injected.checksum > 20 && injected.bitflip > 20 && injected.drop > 20)
    #expect(injected.truncate > 20 && injected.garbage > 20)
    var decoder = NMEADecoder()
    var decoded: [Fix] = []
    decoder.feed(bytes) { decoded.append($0.fix) }
    decoder.finish { decoded.append($0.fix) }
    let seen = decoder.statistics
    #expect(seen.rejected[.checksumMismatch, default: 0] == injected.expectedChecksumMismatches)
    #expect(seen.rejected[.truncated, default: 0] == injected.truncate)
    #expect(seen.rejected[.invalidCharacter, default: 0] == injected.garbage)
    #expect(
      seen.rejectedTotal == injected.checksum + injected.bitflip + injected.truncate
        + injected.garbage)
    #expect(seen.read == injected.sentences - injected.drop)
    // Every position reported is one that was simulated, at the time it was simulated for.
    let simulated = Dictionary(uniqueKeysWithValues: fixes.map { ($0.time ?? 0, $0.coordinate) })
    var positions = 0
    for fix in decoded {
      guard let coordinate = fix.coordinate else { continue }
      positions += 1
      let time = try #require(fix.time)
      let truth = try #require(simulated[time] ?? nil, "a position at a time never simulated")
      #expect(
        abs(truth.latitude - coordinate.latitude) < 2e-8
          && abs(truth.longitude - coordinate.longitude) < 2e-8)
    }
    #expect(positions > 500)
  }

  @Test func sameSeedSameFaults() throws {
    let schedule = try NMEAFaultSchedule.parse("bitflip:0.2,garbage:0.2,seed=3")
    let lines = NMEAEncoder(version: .v4_11).encode(epoch(0)).map { Array($0.utf8) }
    var a = NMEAFaultInjector(schedule: schedule)
    var b = NMEAFaultInjector(schedule: schedule)
    #expect(lines.map { a.apply($0) } == lines.map { b.apply($0) })
    #expect(a.statistics == b.statistics)
  }
}

@Suite struct SerialLinePacerTests {
  @Test func rejectsRatesOtherThanTheOffered() {
    #expect(throws: SimulatedReceiverError.invalidBaudRate(1200)) {
      try SerialLinePacer(baud: 1200)
    }
    #expect((try? SerialLinePacer(baud: 4800))?.bytesPerSecond == 480)
    #expect((try? SerialLinePacer(baud: 115_200))?.capacity(of: .milliseconds(100)) == 1152)
  }

  @Test func anEpochTooLongForTheLineLosesItsTrailingSentences() throws {
    let pacer = try SerialLinePacer(baud: 4800)
    let sentences = NMEAEncoder(version: .v4_11).encode(epoch(0)).map { Array($0.utf8) }
    let total = sentences.reduce(0) { $0 + $1.count }
    #expect(total > 480, "the test epoch must overflow 4800 baud")
    let (kept, dropped, droppedBytes) = pacer.fit(sentences, interval: .seconds(1))
    #expect(kept == Array(sentences.prefix(kept.count)))
    #expect(kept.reduce(0) { $0 + $1.count } <= 480)
    #expect(kept.reduce(0) { $0 + $1.count } + sentences[kept.count].count > 480)
    #expect(
      dropped == sentences.count - kept.count
        && droppedBytes == total - kept.reduce(0) { $0 + $1.count })
    let fast = try SerialLinePacer(baud: 38_400)
    #expect(fast.fit(sentences, interval: .seconds(1)).droppedSentences == 0)
  }

  /// Twenty epochs at 4800 baud and 1 Hz on a virtual clock: no window of one second (sliding,
  /// at every write) holds more than 480 bytes.
  @Test(arguments: [(4800, 1), (9600, 1), (4800, 5)])
  func noSecondCarriesMoreThanTheLineRate(_ baud: Int, _ hertz: Int) async throws {
    let pacer = try SerialLinePacer(baud: baud)
    let clock = VirtualClock(autoAdvance: true)
    let interval = Duration.seconds(1) / hertz
    let writes = Mutex<[(Duration, Int)]>([])
    for index in 0..<20 {
      let sentences = NMEAEncoder(version: .v4_11).encode(epoch(index)).map { Array($0.utf8) }
      let (kept, _, _) = pacer.fit(sentences, interval: interval)
      let start = interval * index
      try await clock.sleep(until: start)
      try await pacer.transmit(kept.flatMap { $0 }, startingAt: start, clock: clock) { chunk in
        let now = clock.now
        writes.withLock { $0.append((now, chunk.count)) }
      }
      #expect(clock.now <= start + interval, "an epoch's bytes leave before the next epoch")
    }
    let log = writes.withLock { $0 }
    #expect(log.reduce(0) { $0 + $1.1 } > 20 * pacer.bytesPerSecond / hertz / 2)
    for (start, _) in log {
      let inWindow = log.filter { $0.0 >= start && $0.0 < start + .seconds(1) }.reduce(0) {
        $0 + $1.1
      }
      #expect(inWindow <= pacer.bytesPerSecond, "\(inWindow) bytes in the second from \(start)")
    }
  }
}
