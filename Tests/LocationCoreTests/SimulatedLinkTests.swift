import LocationCore
import LocationModel
import NMEA
import Testing

/// The `simulate` backend's in-process serial link: `nmea=`, `baud=`, `faults=`.
extension SimulatedBackendTests {
  /// 2025-04-16T12:00:00Z as the URI's `time=` gives it, milliseconds since 1970.
  static let linkStart: Int64 = 1_744_804_800_000

  /// The generator's fixes by time, for the same parameters: what was simulated.
  static func simulated(_ options: SimulatedBackend.Options, epochs: Int) throws -> [Int64: Fix] {
    var generator = SimulatedFixGenerator(parameters: try options.parameters(), startTime: linkStart)
    var fixes: [Int64: Fix] = [:]
    for _ in 0..<epochs {
      guard let epoch = generator.next(), let time = epoch.fix.time else { continue }
      fixes[time] = epoch.fix
    }
    return fixes
  }

  @Test(arguments: ["2.3", "4.10", "4.11"])
  func aFaultyLinkYieldsOnlySimulatedPositionsAndItsDecoderCountsEveryFault(version: String) async throws {
    let uri =
      "simulate?time=2025-04-16T12:00:00Z&seed=3&nmea=\(version)"
      + "&faults=checksum:0.03,bitflip:0.03,drop:0.02,truncate:0.03,garbage:0.03,stuck@10-14,unplug@30-35,seed=9"
    let options = try SimulatedBackend.Options.parse(uri)
    #expect(options.link?.version.rawValue == version && options.link?.output.faults.stuck == [10..<14])
    let backend = try SimulatedBackend(options: options, clock: VirtualClock(autoAdvance: true))
    let (locations, statuses) = try await collect(backend, locations: 80)
    let simulated = try Self.simulated(options, epochs: 400)
    var positions = 0
    for location in locations {
      let time = try #require(location.fix.time, "a decoded fix without time")
      let truth = try #require(simulated[time], "a fix for a time never simulated: \(time)")
      // The unplugged window sends nothing: no fix of 30-35 s reaches the manager.
      #expect(!(Self.linkStart + 30_000..<Self.linkStart + 35_000).contains(time))
      #expect(location.provenance.isSimulated && location.provenance.line != nil)
      guard let coordinate = location.fix.coordinate else { continue }
      let expected = try #require(truth.coordinate)
      #expect(abs(coordinate.latitude - expected.latitude) < 1e-7)
      #expect(abs(coordinate.longitude - expected.longitude) < 1e-7)
      positions += 1
    }
    #expect(positions >= 60)
    #expect(statuses.contains { $0.0 == .noFix && $0.1 == "device unplugged" })
    let injected = backend.outputStatistics.faults
    let decoded = backend.decoderStatistics
    #expect(injected.checksum > 0 && injected.bitflip > 0 && injected.truncate > 0 && injected.garbage > 0)
    #expect(injected.unplugs == 1 && injected.stuckEpochs == 4 && backend.outputStatistics.epochsUnplugged == 5)
    #expect(decoded.rejected[.checksumMismatch, default: 0] == injected.checksum + injected.bitflip)
    #expect(decoded.rejected[.invalidCharacter, default: 0] == injected.garbage)
    // A truncated sentence is counted when the next one begins: one cut at the very end of the
    // last epoch sent may still be waiting for it.
    let truncated = decoded.rejected[.truncated, default: 0]
    #expect(truncated == injected.truncate || truncated == injected.truncate - 1)
  }

  @Test func aPacedLinkCutsWhatTheBaudRateCannotCarry() async throws {
    // A multi-GNSS 4.11 epoch is 1-2 KB; 4800 baud carries 480 bytes a second.
    let options = try SimulatedBackend.Options.parse("simulate?time=2025-04-16T12:00:00Z&baud=4800")
    #expect(options.link?.version == .v4_11 && options.link?.output.baud == 4800)
    let backend = try SimulatedBackend(options: options, clock: VirtualClock(autoAdvance: true))
    let (locations, _) = try await collect(backend, locations: 10)
    let simulated = try Self.simulated(options, epochs: 100)
    for location in locations {
      let time = try #require(location.fix.time)
      let truth = try #require(simulated[time])
      #expect(location.fix.coordinate.map { abs($0.latitude - (truth.coordinate?.latitude ?? 0)) < 1e-7 } == true)
      // Through NMEA, eph is gpsd's model: HDOP x 19 m.
      #expect(location.fix.eph == location.fix.hdop.map { $0 * 19 })
    }
    let output = backend.outputStatistics
    #expect(output.epochsCut > 0 && output.sentencesCut > 0 && output.bytesCut > 0)
    #expect(backend.decoderStatistics.rejectedTotal == 0)
  }

  @Test func linkSettingsAreValidated() throws {
    #expect(try SimulatedBackend.Options.parse("simulate?seed=2").link == nil)
    #expect(try SimulatedBackend.Options.parse("simulate?faults=seed=4").link?.output.faults.seed == 4)
    #expect(
      throws: BackendURIError.invalidValue(key: "nmea", value: "3.0", expected: "2.3, 4.10 or 4.11")
    ) { try SimulatedBackend.Options.parse("simulate?nmea=3.0") }
    #expect(
      throws: BackendURIError.invalidValue(key: "baud", value: "57600", expected: "4800, 9600, 38400 or 115200")
    ) { try SimulatedBackend.Options.parse("simulate?baud=57600") }
    #expect(
      throws: BackendURIError.invalidValue(
        key: "faults", value: "checksum:2", expected: NMEAFaultScheduleError.invalidProbability(term: "checksum:2").description)
    ) { try SimulatedBackend.Options.parse("simulate?faults=checksum:2") }
    #expect(
      throws: BackendURIError.invalidValue(
        key: "faults", value: "smoke:0.1", expected: NMEAFaultScheduleError.unknownKind(term: "smoke:0.1").description)
    ) { try SimulatedBackend.Options.parse("simulate?faults=smoke:0.1") }
    #expect(throws: BackendURIError.repeatedParameter("baud")) {
      try SimulatedBackend.Options.parse("simulate?baud=9600&baud=4800")
    }
  }
}
