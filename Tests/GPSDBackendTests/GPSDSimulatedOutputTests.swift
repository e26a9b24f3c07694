import Foundation
import GPSDBackend
import Glibc
import LocationCore
import LocationModel
import LocationTestKit
import NMEA
import Testing

/// Epoch `index` of the test route with a multi-GNSS sky: GPS 6 in view (4 used), GLONASS 4 (3),
/// Galileo 3 (2), BeiDou 3 (2).
func multiGNSSRouteFix(_ index: Int) -> Fix {
  var fix = routeFix(index)
  fix.satellites =
    [2, 7, 13, 19, 24, 30].enumerated().map {
      Satellite(
        constellation: .gps, prn: $1, elevation: Double(15 + 10 * $0), azimuth: Double(50 * $0),
        snr: 40, used: $0 < 4)
    }
    + [66, 71, 80, 88].enumerated().map {
      Satellite(
        constellation: .glonass, prn: $1, elevation: Double(20 + 12 * $0), azimuth: Double(80 * $0),
        snr: 35, used: $0 < 3)
    }
    + [4, 12, 26].enumerated().map {
      Satellite(
        constellation: .galileo, prn: $1, elevation: Double(25 + 15 * $0),
        azimuth: Double(100 + 60 * $0), snr: 38, used: $0 < 2)
    }
    + [8, 21, 33].enumerated().map {
      Satellite(
        constellation: .beidou, prn: $1, elevation: Double(30 + 11 * $0),
        azimuth: Double(150 + 70 * $0), snr: 33, used: $0 < 2)
    }
  fix.satellitesUsed = fix.satellites.filter(\.used).count
  return fix
}

/// The simulated receiver's NMEA versions and faults through a real gpsd 3.22.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GPSDSimulatedOutputTests {
  private func run(
    _ name: String, version: NMEAVersion, output: SimulatedOutput = SimulatedOutput(),
    fixes wanted: Int
  ) async throws -> (locations: [Location], log: WriteLog, receiver: SimulatedReceiver) {
    let log = WriteLog()
    let receiver = try SimulatedReceiver(
      linkPath: temporaryLinkPath(name), encoder: NMEAEncoder(version: version), output: output,
      onWrite: { log.record($0) })
    try receiver.start(rate: 10) { elapsed in multiGNSSRouteFix(Int((elapsed * 10).rounded())) }
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    _ = await collector.wait(timeout: 20) { _ in collector.locations.count >= wanted }
    await backend.stop()
    return (collector.locations.map(\.location), log, receiver)
  }

  /// gpsd reads every version: the fix as written, the satellites per constellation it can
  /// name, and the used flags.
  @Test(arguments: NMEAVersion.allCases)
  func gpsdReportsTheFixAndTheSkyOfEveryVersion(_ version: NMEAVersion) async throws {
    let (locations, log, _) = try await run(
      "version-\(version.rawValue)", version: version, fixes: 20)
    try #require(locations.count >= 20)
    for location in locations.suffix(10) {
      let fix = location.fix
      let time = try #require(fix.time)
      let written = try #require(await log.epoch(time), "fix time \(time) was written")
      let expected = try #require(written.fix.coordinate)
      let coordinate = try #require(fix.coordinate)
      #expect(abs(coordinate.latitude - expected.latitude) < 1e-6)
      #expect(abs(coordinate.longitude - expected.longitude) < 1e-6)
      #expect(fix.mode == .fix3D)
    }
    let last = try #require(locations.last?.fix)
    let inView = Dictionary(grouping: last.satellites, by: \.constellation).mapValues(\.count)
    let used = Dictionary(grouping: last.satellites.filter(\.used), by: \.constellation).mapValues(
      \.count)
    if version == .v2_3 {
      #expect(inView == [.gps: 6, .glonass: 4], "2.3 names GPS and GLONASS only")
    } else {
      #expect(inView == [.gps: 6, .glonass: 4, .galileo: 3, .beidou: 3])
    }
    // gpsd 3.22 matches GNGSA numbers by range, not by field 18 (processGSA reads it as a signal
    // ID): GPS and GLONASS used flags are right in every version; Galileo and BeiDou numbers
    // 1-36 in a GNGSA are taken for GPS ones (docs/simulator.md).
    #expect(used[.gps] == 4 && used[.glonass] == 3, "\(used)")
  }

  /// A faulty stream at 10 Hz: gpsd never reports a position that was not simulated for the
  /// time it gives.
  @Test func faultsNeverMakeGPSDReportAnUnsimulatedPosition() async throws {
    let faults = try NMEAFaultSchedule.parse(
      "checksum:0.05,bitflip:0.05,drop:0.05,truncate:0.05,garbage:0.05,seed=11")
    let (locations, log, receiver) = try await run(
      "faults", version: .v4_11, output: try SimulatedOutput(faults: faults), fixes: 40)
    try #require(locations.count >= 20)
    let injected = receiver.outputStatistics.faults
    #expect(
      injected.checksum + injected.bitflip + injected.drop + injected.truncate + injected.garbage
        > 20)
    for location in locations {
      guard let coordinate = location.fix.coordinate else { continue }
      let time = try #require(location.fix.time)
      let written = try #require(
        await log.epoch(time), "gpsd reported time \(time), never simulated")
      let expected = try #require(written.fix.coordinate)
      #expect(abs(coordinate.latitude - expected.latitude) < 1e-6)
      #expect(abs(coordinate.longitude - expected.longitude) < 1e-6)
    }
  }
}

/// gpsd reading the network transports: `tcp://` (gpsd connects to the simulator) and `udp://`
/// (gpsd binds the port, the simulator sends datagrams to it).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GPSDNetworkSourceTests {
  @Test(arguments: ["tcp", "udp"])
  func gpsdReadsTheNetworkReceiver(_ scheme: String) async throws {
    let port = try PrivateGPSD.freePort()
    let transport = try #require(SimulatedTransport(uri: "\(scheme)://127.0.0.1:\(port)"))
    let receiver = try SimulatedNetworkReceiver(transport: transport)
    defer { receiver.stop() }
    let sender = Task {
      let fixes = AsyncStream<Fix> { continuation in
        for index in 0..<1200 { continuation.yield(multiGNSSRouteFix(index)) }
        continuation.finish()
      }
      await receiver.run(rate: 10, fixes: fixes)
    }
    defer { sender.cancel() }
    let gpsd = try PrivateGPSD(device: transport.description)
    try await gpsd.start()
    defer { gpsd.stop() }
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    // A hang guard, not a speed check: on a loaded machine gpsd may take long to open the
    // source (the simulator writes 120 s of fixes at 10 Hz, so some are left to read).
    _ = await collector.wait(timeout: 60) { _ in collector.locations.count >= 10 }
    await backend.stop()
    let locations = collector.locations.map(\.location)
    try #require(locations.count >= 10, "gpsd gave \(locations.count) fixes from \(transport)")
    let written = Dictionary(
      uniqueKeysWithValues: (0..<1200).map {
        (multiGNSSRouteFix($0).time ?? 0, multiGNSSRouteFix($0))
      })
    for location in locations {
      let time = try #require(location.fix.time)
      let expected = try #require(written[time]?.coordinate)
      let coordinate = try #require(location.fix.coordinate)
      #expect(abs(coordinate.latitude - expected.latitude) < 1e-6)
      #expect(abs(coordinate.longitude - expected.longitude) < 1e-6)
    }
    let last = try #require(locations.last?.fix)
    let inView = Dictionary(grouping: last.satellites, by: \.constellation).mapValues(\.count)
    #expect(inView == [.gps: 6, .glonass: 4, .galileo: 3, .beidou: 3])
  }
}
