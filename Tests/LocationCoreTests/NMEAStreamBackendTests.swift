import Foundation
import Glibc
import LocationModel
import LocationTestKit
import NMEA
import Synchronization
import SystemIO
import Testing

@testable import LocationCore

/// Collects a backend's events in the background.
private final class StreamEvents: Sendable {
  private final class Store: Sendable {
    let events = Mutex<[(event: BackendEvent, at: UInt64)]>([])
  }
  private let store = Store()
  private let task: Task<Void, Never>

  init(_ backend: NMEAStreamBackend) {
    let store = self.store
    task = Task {
      for await event in backend.events {
        let at = MonotonicClock.nanoseconds()
        store.events.withLock { $0.append((event, at)) }
      }
    }
  }

  deinit { task.cancel() }

  var all: [(event: BackendEvent, at: UInt64)] { store.events.withLock { $0 } }
  var locations: [Location] {
    all.compactMap {
      if case .location(let location) = $0.event { return location } else { return nil }
    }
  }
  var statuses: [(status: BackendStatus, detail: String?)] {
    all.compactMap {
      if case .status(let status, let detail) = $0.event {
        return (status, detail)
      } else {
        return nil
      }
    }
  }
  var errors: [String] {
    all.compactMap { if case .error(let text) = $0.event { return text } else { return nil } }
  }

  /// Polls every 10 ms until `condition` holds; `timeout` only ends a hang.
  func wait(_ timeout: Double = 60, _ condition: (StreamEvents) -> Bool) async -> Bool {
    let deadline = MonotonicClock.nanoseconds() + UInt64(timeout * 1e9)
    while MonotonicClock.nanoseconds() < deadline {
      if condition(self) { return true }
      try? await Task.sleep(for: .milliseconds(10))
    }
    return condition(self)
  }
}

/// A directory of its own, so that the path watch sees only the test's links.
private func privateDirectory() throws -> String {
  let path =
    NSTemporaryDirectory() + "locationd-stream-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
  try #require(mkdir(path, 0o700) == 0)
  return path
}

/// The process's descriptors on pty slaves, inotify instances and pipes (what the serial
/// reader opens), by target.
private func readerDescriptors() -> [String] {
  let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
  return names.compactMap { name in
    var buffer = [CChar](repeating: 0, count: 256)
    let length = readlink("/proc/self/fd/" + name, &buffer, buffer.count - 1)
    guard length > 0 else { return nil }
    let target = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let relevant = target.hasPrefix("/dev/pts/") || target == "anon_inode:inotify"
    return relevant ? target : nil
  }.sorted()
}

/// Sentences of route epoch `index`, as the simulated receiver writes them.
private func epochBytes(_ index: Int, encoder: NMEAEncoder = NMEAEncoder(version: .v4_11))
  -> [UInt8]
{
  Array(encoder.encode(TestRoute.fix(index)).joined().utf8)
}

/// A one-connection TCP server on a free local port, for peers the simulator does not offer
/// (garbage, 1 MB lines, trickle).
private final class TCPPeer: Sendable {
  let listener: Int32
  let port: UInt16

  init() throws {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var on: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    try #require(bound == 0 && listen(fd, 4) == 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    listener = fd
    port = UInt16(bigEndian: address.sin_port)
  }

  deinit { close(listener) }

  /// Accepts one connection (blocking, on the caller's thread).
  func accept() -> Int32 { Glibc.accept(listener, nil, nil) }
}

@Suite(.serialized, .timeLimit(.minutes(3)))
struct NMEAStreamBackendTests {
  @Test func urisParseAsGPSDSpellsItsSources() throws {
    #expect(
      try NMEAStreamEndpoint(uri: "/dev/ttyUSB0").kind == .serial(path: "/dev/ttyUSB0", baud: nil))
    #expect(
      try NMEAStreamEndpoint(uri: "serial:/dev/serial/by-id/usb-u-blox?baud=115200").kind
        == .serial(path: "/dev/serial/by-id/usb-u-blox", baud: 115_200))
    #expect(
      try NMEAStreamEndpoint(uri: "serial:/dev/ttyS0?baud=auto").kind
        == .serial(path: "/dev/ttyS0", baud: nil))
    #expect(
      try NMEAStreamEndpoint(uri: "tcp://boat.local:10110").kind
        == .tcp(host: "boat.local", port: 10110))
    #expect(try NMEAStreamEndpoint(uri: "udp://[::1]:10110").kind == .udp(host: "::1", port: 10110))
    #expect(throws: BackendURIError.self) {
      try NMEAStreamEndpoint(uri: "serial:/dev/ttyS0?baud=1200")
    }
    #expect(throws: BackendURIError.self) { try NMEAStreamEndpoint(uri: "tcp://host") }
    // A serial URI without its device is told to give one (standard input is a replay's only).
    #expect(
      BackendURIError.missingPath(uri: "serial:").description
        == "backend URI 'serial:' names no device: give its path, such as serial:/dev/ttyUSB0")
    #expect(throws: BackendURIError.missingPath(uri: "serial:")) { try NMEAStreamEndpoint(uri: "serial:") }
    #expect(throws: BackendURIError.self) { try NMEAStreamEndpoint(uri: "udp://host:0") }
    // Hosts are checked as gpsd:// checks them, without a lookup: a dotted address with five
    // parts or an octet over 255 is no address, and names take no spaces.
    for uri in [
      "udp://1.2.3.4.5:10", "tcp://10.0.0.256:10110", "tcp://bad host:10110", "udp://[::1:10", "tcp://[boat]:1",
      "tcp://010.0.0.1:1", "tcp://-boat:1", "tcp://boat-.local:1",
    ] {
      #expect(throws: BackendURIError.self, "\(uri)") { try NMEAStreamEndpoint(uri: uri) }
    }
    #expect(try NMEAStreamEndpoint(uri: "udp://0.0.0.0:10110").kind == .udp(host: "0.0.0.0", port: 10110))
    #expect(try NMEAStreamEndpoint(uri: "tcp://::1:10110").kind == .tcp(host: "::1", port: 10110))
    #expect(
      try NMEAStreamEndpoint(uri: "udp://[fe80::1%eth0]:10110").kind == .udp(host: "fe80::1%eth0", port: 10110))
    #expect(throws: BackendURIError.self) { try NMEAStreamEndpoint(uri: "tcp://host:1?baud=9600") }
    #expect(
      LocalBackendFactory.names("serial:/dev/ttyACM0") && LocalBackendFactory.names("/dev/ttyACM0"))
    let backend = try LocalBackendFactory.make(uri: "tcp://127.0.0.1:10110")
    #expect(backend is NMEAStreamBackend)
  }

  /// The simulated receiver on a pty read through `serial:`: the locations are what the
  /// decoder makes of the bytes written, epoch for epoch.
  @Test(arguments: ["?baud=9600", ""])
  func serialLocationsEqualTheDecodeOfTheBytesWritten(_ query: String) async throws {
    let directory = try privateDirectory()
    let link = directory + "/gps0"
    let written = Mutex<[SimulatedReceiver.WrittenEpoch]>([])
    let receiver = try SimulatedReceiver(
      linkPath: link, encoder: NMEAEncoder(version: .v4_11),
      onWrite: { epoch in written.withLock { $0.append(epoch) } })
    defer { receiver.stop() }
    try receiver.start(rate: 10) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
    let backend = try NMEAStreamBackend(uri: "serial:" + link + query)
    let events = StreamEvents(backend)
    try await backend.start()
    #expect(await events.wait { $0.locations.count >= 12 })
    await backend.stop()
    let locations = events.locations
    try #require(locations.count >= 12)
    let connected = try #require(events.statuses.first { $0.status == .connected }?.detail)
    #expect(connected.contains("at 9600 baud"), "\(connected)")
    if query.isEmpty { #expect(connected.contains("found by baud=auto")) }
    // Decode what was written from the epoch of the second location on, with the same decoder.
    let epochs = written.withLock { $0 }
    let start = try #require(epochs.firstIndex { $0.fix.time == locations[1].fix.time })
    var decoder = NMEADecoder(rolloverFloor: CivilDate.days(year: 2019, month: 4, day: 7))
    var decoded: [Fix] = []
    for epoch in epochs[start...] {
      decoder.feed(Array(epoch.sentences.joined().utf8)) { decoded.append($0.fix) }
    }
    let compared = min(decoded.count - 1, locations.count - 2)
    #expect(compared >= 8)
    #expect(Array(locations[2..<(2 + compared)].map(\.fix)) == Array(decoded[1..<(1 + compared)]))
    #expect(locations.allSatisfy { $0.provenance.source == link && !$0.provenance.isSimulated })
    #expect(await events.wait { $0.statuses.last?.status == .stopped })
  }

  /// Once the decoder has learned which sentence ends the receiver's cycle (as gpsd does), the
  /// epoch is available at that sentence, with the value the decoder emits when the next epoch
  /// begins.
  @Test func theEpochIsReadyAtTheEndOfItsCycle() {
    var decoder = NMEADecoder(liveWithRolloverFloor: nil)
    var emitted: [DecodedFix] = []
    var early: [DecodedFix] = []
    for index in 0..<6 {
      decoder.feed(epochBytes(index)) { emitted.append($0) }
      if let ready = decoder.epochAtCycleEnd() { early.append(ready) }
    }
    decoder.finish { emitted.append($0) }
    #expect(emitted.count == 6)
    // The first epochs teach the cycle; from then on every epoch is ready at its last sentence.
    #expect(early.count >= 4, "\(early.count) epochs ready at their end of cycle")
    for ready in early {
      #expect(emitted.contains(ready), "the early value is the one emitted later")
    }
  }

  /// A UART at the wrong rate makes noise of NMEA: no sentence survives; at the right rate
  /// every byte does.
  @Test func aReaderAtAnotherRateGetsNoise() {
    let bytes = epochBytes(3)
    #expect(SerialLinePacer.misread(bytes, sentAt: 9600, readAt: 9600) == bytes)
    for (sent, read) in [
      (4800, 9600), (9600, 4800), (115_200, 9600), (4800, 115_200), (9600, 38400),
    ] {
      var decoder = NMEADecoder()
      decoder.feed(SerialLinePacer.misread(bytes, sentAt: sent, readAt: read)) { _ in }
      #expect(decoder.statistics.accepted == 0, "\(sent) read at \(read)")
    }
  }

  /// `baud=auto` on the simulated receiver paced at 4800, 9600 and 115200 baud (a reader at
  /// another rate gets what a UART would make of the signal): the status names the rate found,
  /// and fixes follow.
  @Test(arguments: [(4800, 5.0), (9600, 10.0), (115_200, 10.0)])
  func baudAutoFindsTheReceiversRate(_ baud: Int, _ rate: Double) async throws {
    let directory = try privateDirectory()
    let link = directory + "/gps0"
    let receiver = try SimulatedReceiver(
      linkPath: link, encoder: NMEAEncoder(version: .v4_11), output: try SimulatedOutput(baud: baud)
    )
    defer { receiver.stop() }
    try receiver.start(rate: rate) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
    let backend = try NMEAStreamBackend(uri: "serial:" + link)
    let events = StreamEvents(backend)
    try await backend.start()
    #expect(await events.wait { $0.locations.count >= 5 })
    await backend.stop()
    let connected = events.statuses.filter { $0.status == .connected }.compactMap(\.detail)
    #expect(
      connected.first == "reading \(link) at \(baud) baud (found by baud=auto)", "\(connected)")
    #expect(backend.statistics.baud == baud)
    #expect(events.locations.prefix(5).allSatisfy { $0.fix.coordinate != nil })
  }

  /// A path that is not a terminal (an NMEA log, a FIFO) is named as such, with the backend that
  /// reads it, not only as the system's "Inappropriate ioctl for device".
  @Test func aPathThatIsNotATerminalIsNamedAsSuch() async throws {
    let directory = try privateDirectory()
    let log = directory + "/drive.nmea"
    try "$GPGGA,,,,,,0,,,,,,,,*66\r\n".write(toFile: log, atomically: true, encoding: .utf8)
    let backend = try NMEAStreamBackend(uri: "serial:" + log + "?baud=4800")
    let events = StreamEvents(backend)
    try await backend.start()
    #expect(await events.wait { $0.statuses.contains { $0.status == .deviceRemoved } })
    await backend.stop()
    let detail = events.statuses.first { $0.status == .deviceRemoved }?.detail
    #expect(
      detail == "\(log): Inappropriate ioctl for device: not a serial device (a terminal); an NMEA "
        + "log file or a FIFO is read with replay:\(log); waiting for a device at this path",
      "\(detail ?? "nil")")
  }

  /// A line read at a fixed rate that is not the receiver's: reported as no NMEA, with what was
  /// seen, not as silence.
  @Test func aWrongFixedRateIsReportedAsNoNMEA() async throws {
    let directory = try privateDirectory()
    let link = directory + "/gps0"
    let receiver = try SimulatedReceiver(
      linkPath: link, encoder: NMEAEncoder(version: .v4_11), output: try SimulatedOutput(baud: 4800)
    )
    defer { receiver.stop() }
    try receiver.start(rate: 5) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
    // The no-fix timeout comes long before 4 KiB of garbage: the state's detail must still
    // become the "no NMEA" text, not stay "no fix for 200 ms".
    var options = NMEAStreamBackend.Options()
    options.noFixTimeout = .milliseconds(200)
    let backend = try NMEAStreamBackend(uri: "serial:" + link + "?baud=115200", options: options)
    let events = StreamEvents(backend)
    try await backend.start()
    #expect(await events.wait { $0.errors.contains { $0.contains("no NMEA 0183") } })
    #expect(await events.wait { $0.statuses.last?.detail?.hasPrefix("no NMEA 0183") == true })
    await backend.stop()
    let text = try #require(events.errors.first { $0.contains("no NMEA 0183") })
    #expect(text.hasPrefix("no NMEA 0183 from \(link): ") && text.contains("0 valid"), "\(text)")
    #expect(events.locations.isEmpty)
    let noFix = events.statuses.filter { $0.status == .noFix }.compactMap(\.detail)
    #expect(noFix.first?.hasPrefix("no fix from") == true, "\(noFix)")
    #expect(noFix.contains(text), "\(noFix)")
  }

  /// The `unplug` fault three times in a row: `deviceRemoved` each time, then the path returns
  /// (inotify), the device is reopened and fixes flow again; no descriptor is left behind.
  @Test func unplugAndReplugGiveDeviceRemovedThenFixesAgainWithoutLeaks() async throws {
    let directory = try privateDirectory()
    let link = directory + "/gps0"
    let faults = try NMEAFaultSchedule.parse("unplug@1-1.5,unplug@2.5-3,unplug@4-4.5")
    let receiver = try SimulatedReceiver(
      linkPath: link, encoder: NMEAEncoder(version: .v4_11),
      output: try SimulatedOutput(faults: faults))
    defer { receiver.stop() }
    let descriptorsBefore = readerDescriptors().count
    let backend = try NMEAStreamBackend(uri: "serial:" + link + "?baud=4800")
    let events = StreamEvents(backend)
    try await backend.start()
    try receiver.start(rate: 10) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
    // Until the third unplug has been followed by a reopening and a fix: four opens (the first
    // and three reopenings, each after a loss; the schedule has no fourth unplug). Counting
    // deviceRemoved statuses or losses would not do: one unplug may give two, its hang-up and
    // then the failed open's reason, so three could come from two unplugs while the third was
    // still to come.
    #expect(
      await events.wait { seen in
        guard backend.statistics.losses >= 3, backend.statistics.opens >= 4 else { return false }
        let all = seen.all
        guard
          let last = all.lastIndex(where: {
            if case .status(.deviceRemoved, _) = $0.event { true } else { false }
          })
        else { return false }
        return all[(last + 1)...].contains { if case .status(.connected, _) = $0.event { true } else { false } }
          && all.last.map { if case .location = $0.event { true } else { false } } == true
      })
    await backend.stop()
    // Every removal is followed by a reopening and by fixes.
    let all = events.all
    let removals = all.indices.filter {
      if case .status(.deviceRemoved, _) = all[$0].event { true } else { false }
    }
    #expect(removals.count >= 3)
    for index in removals {
      let after = all[(index + 1)...]
      #expect(after.contains { if case .status(.connected, _) = $0.event { true } else { false } })
      #expect(after.contains { if case .location = $0.event { true } else { false } })
      // How long from the reopening to the first fix (printed, not judged: a loaded machine).
      if let reopened = after.first(where: {
        if case .status(.connected, _) = $0.event { true } else { false }
      }),
        let fix = after.first(where: { if case .location = $0.event { true } else { false } })
      {
        print("reopened to first fix: \(Double(Int64(fix.at) - Int64(reopened.at)) / 1e6) ms")
      }
    }
    let statistics = backend.statistics
    #expect(statistics.opens >= 4 && statistics.losses >= 3)
    // No slave of any of the four ptys and no inotify instance stays open (earlier tests' objects
    // may still be closing theirs, so the count may only fall). Pipes are not counted here: other
    // suites open them in parallel in this process; the reader's wake pipe is WorkerThread's,
    // whose closing WorkerThreadTests checks.
    let after = readerDescriptors()
    #expect(after.count <= descriptorsBefore, "a descriptor was leaked: \(after)")
    #expect(!after.contains { $0.hasPrefix("/dev/pts/") || $0 == "anon_inode:inotify" }, "\(after)")
  }

  /// The device's link replaced in one step by a link to another receiver (a new link renamed
  /// over the old one, as udev does): the rename is the only change in the directory, and the
  /// backend opens the new device at once rather than waiting for another change.
  @Test func aLinkReplacedInOneStepIsOpenedAtOnce() async throws {
    let directory = try privateDirectory()
    let first = try SimulatedReceiver(linkPath: directory + "/first", encoder: NMEAEncoder(version: .v4_11))
    defer { first.stop() }
    let second = try SimulatedReceiver(linkPath: directory + "/second", encoder: NMEAEncoder(version: .v4_11))
    defer { second.stop() }
    let link = directory + "/gps0"
    let firstDevice = try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/first")
    let secondDevice = try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/second")
    try #require(symlink(firstDevice, link) == 0)
    try first.start(rate: 10) { elapsed in TestRoute.fix(Int((elapsed * 10).rounded())) }
    try second.start(rate: 10) { elapsed in TestRoute.fix(1000 + Int((elapsed * 10).rounded())) }
    let backend = try NMEAStreamBackend(uri: "serial:" + link + "?baud=4800")
    let events = StreamEvents(backend)
    try await backend.start()
    #expect(await events.wait { !$0.locations.isEmpty })
    let before = events.all.count
    try #require(symlink(secondDevice, link + ".new") == 0)
    try #require(rename(link + ".new", link) == 0)
    #expect(
      await events.wait { events in
        let after = events.all.dropFirst(before)
        return after.contains { if case .status(.deviceRemoved, let detail) = $0.event { detail?.contains("node replaced by another device") == true } else { false } }
          && after.contains { if case .status(.connected, _) = $0.event { true } else { false } }
          && after.last.map { if case .location = $0.event { true } else { false } } == true
      })
    await backend.stop()
    #expect(backend.statistics.opens == 2 && backend.statistics.losses == 1)
  }

  /// A stream of binary data: reported with what was seen, not as silence.
  @Test func aStreamWithoutNMEAIsReportedWithWhatWasSeen() async throws {
    let peer = try TCPPeer()
    let backend = try NMEAStreamBackend(uri: "tcp://127.0.0.1:\(peer.port)")
    let events = StreamEvents(backend)
    try await backend.start()
    let connection = peer.accept()
    try #require(connection >= 0)
    defer { close(connection) }
    // u-blox NAV-PVT frames, over and over.
    var ubx: [UInt8] = []
    for index in 0..<100 {
      ubx +=
        [0xB5, 0x62, 0x01, 0x07, 0x5C, 0x00] + [UInt8](repeating: UInt8(index), count: 92) + [
          0x24, 0x0A,
        ]
    }
    try SystemIO.writeAll(connection, ubx)
    #expect(await events.wait { $0.errors.contains { $0.contains("no NMEA 0183") } })
    await backend.stop()
    let text = try #require(events.errors.first { $0.contains("no NMEA 0183") })
    #expect(text.contains("first bytes b5 62 01 07") && text.contains("UBX"), "\(text)")
    #expect(
      events.statuses.contains { $0.status == .noFix && ($0.detail ?? "").contains("no NMEA") })
  }

  /// A TCP peer that sends garbage, a 1 MB line and a stream one byte at a time: the bad parts are
  /// counted and skipped on the same connection, and the fixes equal the decode of the bytes.
  @Test func tcpGarbageLongLinesAndTrickleKeepTheConnection() async throws {
    let peer = try TCPPeer()
    let backend = try NMEAStreamBackend(uri: "tcp://127.0.0.1:\(peer.port)")
    let events = StreamEvents(backend)
    try await backend.start()
    let connection = peer.accept()
    try #require(connection >= 0)
    defer { close(connection) }
    var stream: [UInt8] = []
    for index in 0..<5 { stream += epochBytes(index) }
    stream += [UInt8](repeating: 0x00, count: 3000) + [0xFF, 0x13, 0x24, 0x24]
    stream += Array("$GPGGA,".utf8) + [UInt8](repeating: 0x41, count: 1 << 20) + [0x0D, 0x0A]
    for index in 5..<10 { stream += epochBytes(index) }
    try SystemIO.writeAll(connection, stream)
    // The rest one byte at a time.
    var trickle: [UInt8] = []
    for index in 10..<13 { trickle += epochBytes(index) }
    for byte in trickle { try SystemIO.writeAll(connection, [byte]) }
    stream += trickle
    var decoder = NMEADecoder(rolloverFloor: CivilDate.days(year: 2019, month: 4, day: 7))
    var expected: [Fix] = []
    decoder.feed(stream) { expected.append($0.fix) }
    // The last epoch too: the backend reports it at its end of cycle, with the value the decoder
    // gives it at the end of the input.
    decoder.finish { expected.append($0.fix) }
    #expect(expected.count == 13)
    #expect(await events.wait { $0.locations.count >= expected.count })
    await backend.stop()
    #expect(events.locations.map(\.fix) == expected)
    let statistics = backend.statistics
    #expect(statistics.opens == 1 && statistics.losses == 0, "the connection was kept")
    #expect((statistics.sentences.rejected[.tooLong] ?? 0) >= 1)
    #expect(events.errors.contains { $0.contains("rejected and skipped") })
  }

  /// The TCP source restarts: `disconnected`, then the backend reconnects by itself.
  @Test func tcpSourceRestartIsReconnected() async throws {
    let peer = try TCPPeer()
    let backend = try NMEAStreamBackend(uri: "tcp://127.0.0.1:\(peer.port)")
    let events = StreamEvents(backend)
    try await backend.start()
    for round in 0..<3 {
      let connection = peer.accept()
      try #require(connection >= 0)
      var bytes: [UInt8] = []
      for index in (round * 4)..<(round * 4 + 4) { bytes += epochBytes(index) }
      try SystemIO.writeAll(connection, bytes)
      // At least three of the four epochs (the fourth comes at its end of cycle once the cycle is
      // learned, else it is held until a next epoch that never comes).
      #expect(await events.wait { $0.locations.count >= (round + 1) * 3 })
      close(connection)
      #expect(
        await events.wait { $0.statuses.filter { $0.status == .disconnected }.count >= round + 1 })
    }
    await backend.stop()
    #expect(backend.statistics.opens == 3 && backend.statistics.losses == 3)
  }

  /// RMC and GGA, then RMC alone: no sentence kind ends two epochs in a row, so the stream's
  /// cycle end is never learned and each epoch waits for the next one to begin.
  static let sparseGGAStream: [UInt8] = {
    func line(_ body: String) -> String {
      String(format: "$%@*%02X\r\n", body, body.utf8.reduce(UInt8(0), ^))
    }
    var text = ""
    for second in 0..<6 {
      let time = String(format: "1200%02d.00", second)
      text += line("GPRMC,\(time),A,4807.038,N,01131.000,E,1.0,45.0,071020,,,A")
      if second % 2 == 0 { text += line("GPGGA,\(time),4807.038,N,01131.000,E,1,08,1.0,545.4,M,46.9,M,,") }
    }
    return Array(text.utf8)
  }()

  /// The times of day (ms) `decode` gives the stream: every epoch, the last one at the end of
  /// the input.
  static func decodedTimes(_ bytes: [UInt8]) -> [Int32?] {
    var decoder = NMEADecoder(liveWithRolloverFloor: nil)
    var times: [Int32?] = []
    decoder.feed(bytes) { times.append($0.fix.timeOfDay) }
    decoder.finish { times.append($0.fix.timeOfDay) }
    return times
  }

  /// A receiver that stops sending: its last epoch is reported once the source stays silent
  /// (``NMEAStreamBackend/Options/epochSilence``), with the connection still open; one that
  /// closes the connection gets it reported at the loss, whatever the silence setting.
  /// A TCP backend with `epochSilence` that has read ``sparseGGAStream`` from a peer whose
  /// connection stays open; the times decode gives the stream.
  private static func servingSparseStream(epochSilence: Duration) async throws
    -> (peer: TCPPeer, backend: NMEAStreamBackend, events: StreamEvents, connection: Int32, expected: [Int32?])
  {
    let peer = try TCPPeer()
    var options = NMEAStreamBackend.Options()
    options.epochSilence = epochSilence
    let backend = try NMEAStreamBackend(uri: "tcp://127.0.0.1:\(peer.port)", options: options)
    let events = StreamEvents(backend)
    try await backend.start()
    let connection = peer.accept()
    try #require(connection >= 0)
    try SystemIO.writeAll(connection, sparseGGAStream)
    return (peer, backend, events, connection, decodedTimes(sparseGGAStream))
  }

  @Test(arguments: [true, false])
  func theLastEpochIsReportedWhenTheSourceFallsSilentOrCloses(_ silence: Bool) async throws {
    let (peer, backend, events, connection, expected) = try await Self.servingSparseStream(
      epochSilence: silence ? .milliseconds(200) : .seconds(3600))
    defer { _ = peer }
    #expect(expected.count == 6 && expected.last == 43_205_000)
    if silence {
      #expect(await events.wait { $0.locations.count == expected.count })
      close(connection)
    } else {
      #expect(await events.wait { $0.locations.count == expected.count - 1 })
      close(connection)
      #expect(await events.wait { $0.locations.count == expected.count })
    }
    #expect(await events.wait { $0.statuses.contains { $0.status == .disconnected } })
    await backend.stop()
    // Each epoch once, as decode gives it: the loss does not report the silent epoch again.
    #expect(events.locations.map(\.fix.timeOfDay) == expected)
    #expect(events.locations.last?.fix.mode == .fix3D)
    #expect(backend.statistics.locations == expected.count)
  }

  /// Bytes that complete no sentence (line ends, the start of a sentence) do not put off the end
  /// of a silent epoch: it is reported while they keep coming.
  @Test func bytesThatCompleteNoSentenceDoNotHoldTheLastEpoch() async throws {
    let (peer, backend, events, connection, expected) = try await Self.servingSparseStream(
      epochSilence: .milliseconds(200))
    defer { _ = peer }
    // A line end, then a sentence's first bytes, a byte every 20 ms until the last epoch comes.
    let trickle = Array("\r\n$GPGGA,1200".utf8)
    var sent = 0
    let deadline = MonotonicClock.nanoseconds() + 60_000_000_000
    while events.locations.count < expected.count, MonotonicClock.nanoseconds() < deadline {
      try SystemIO.writeAll(connection, [trickle[sent % trickle.count]])
      sent += 1
      try await Task.sleep(for: .milliseconds(20))
    }
    #expect(events.locations.map(\.fix.timeOfDay) == expected)
    #expect(!events.statuses.contains { $0.status == .noFix }, "\(events.statuses)")
    close(connection)
    await backend.stop()
  }

  /// Nothing listens: each refused attempt that waits longer than the one before says so, so the
  /// state's detail names the delay in force; the same delay again is not repeated.
  @Test func refusedTCPConnectionsReportTheirGrowingDelay() async throws {
    var options = NMEAStreamBackend.Options()
    options.reconnectInitialDelay = .milliseconds(10)
    options.reconnectMaximumDelay = .milliseconds(40)
    let backend = try NMEAStreamBackend(uri: "tcp://127.0.0.1:1", options: options)
    let events = StreamEvents(backend)
    try await backend.start()
    #expect(
      await events.wait {
        $0.statuses.contains { $0.status == .disconnected && ($0.detail ?? "").hasSuffix("retrying in 40 ms") }
      })
    // Several more attempts at 40 ms.
    try await Task.sleep(for: .milliseconds(300))
    await backend.stop()
    let delays = events.statuses.filter { $0.status == .disconnected }.compactMap(\.detail).map {
      String($0.split(separator: ";").last ?? "")
    }
    #expect(delays == [" retrying in 10 ms", " retrying in 20 ms", " retrying in 40 ms"], "\(delays)")
  }

  /// A TCP peer that stops sending without closing (half-open): reconnected after the idle
  /// timeout.
  @Test func halfOpenTCPConnectionIsReconnected() async throws {
    let peer = try TCPPeer()
    var options = NMEAStreamBackend.Options()
    options.idleTimeout = .milliseconds(300)
    let backend = try NMEAStreamBackend(uri: "tcp://127.0.0.1:\(peer.port)", options: options)
    let events = StreamEvents(backend)
    try await backend.start()
    let first = peer.accept()
    defer { close(first) }
    try SystemIO.writeAll(first, epochBytes(0) + epochBytes(1))
    let second = peer.accept()
    defer { close(second) }
    #expect(
      await events.wait {
        $0.statuses.contains { $0.status == .disconnected && ($0.detail ?? "").contains("no data") }
      })
    #expect(await events.wait { _ in backend.statistics.opens == 2 })
    await backend.stop()
  }

  /// UDP: several sentences per datagram, truncated datagrams, and a flood of noise from another
  /// port; the fixes of the whole datagrams still come out.
  @Test func udpDatagramsSeveralSentencesTruncationAndFlood() async throws {
    // A free UDP port.
    let any = try #require(
      try NetworkSocket.resolve(host: "127.0.0.1", port: 0, type: Int32(SOCK_DGRAM.rawValue)).first)
    let probe = try NetworkSocket.bindDatagram(any)
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(probe, $0, &length) }
    }
    close(probe)
    let port = UInt16(bigEndian: address.sin_port)
    let backend = try NMEAStreamBackend(uri: "udp://127.0.0.1:\(port)")
    let events = StreamEvents(backend)
    try await backend.start()
    #expect(await events.wait { $0.statuses.contains { $0.status == .connected } })
    let sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    let flooder = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer {
      close(sender)
      close(flooder)
    }
    func send(_ fd: Int32, _ bytes: [UInt8]) {
      var target = sockaddr_in()
      target.sin_family = sa_family_t(AF_INET)
      target.sin_port = port.bigEndian
      target.sin_addr.s_addr = inet_addr("127.0.0.1")
      _ = bytes.withUnsafeBytes { raw in
        withUnsafePointer(to: &target) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
          }
        }
      }
    }
    var wholeTimes: [Int64] = []
    var sent = 0
    for index in 0..<20 {
      let bytes = epochBytes(index)
      if index % 5 == 4 {
        send(sender, Array(bytes.prefix(bytes.count / 2)))  // truncated
      } else {
        send(sender, bytes)  // the whole epoch in one datagram
        if let time = TestRoute.fix(index).time { wholeTimes.append(time) }
      }
      for _ in 0..<50 { send(flooder, [UInt8](repeating: 0x55, count: 512)) }
      sent += 51
      // Each burst is read before the next is sent: however slow the machine (a sanitizer, a
      // loaded CI), the kernel never drops an epoch's datagram for a full receive buffer, which
      // would fail the test for the machine's speed, not the backend's reading.
      _ = await events.wait(10) { _ in backend.statistics.datagrams >= sent }
    }
    // Every whole epoch but the last (held until the next epoch shows the cycle ended).
    let wanted = Set(wholeTimes.dropLast())
    #expect(await events.wait { Set($0.locations.compactMap(\.fix.time)).isSuperset(of: wanted) })
    await backend.stop()
    let statistics = backend.statistics
    #expect(statistics.datagrams > 20)
    // The cut sentences are rejected (run into by the next datagram or by the noise).
    #expect(statistics.sentences.rejectedTotal >= 4)
    #expect(events.locations.allSatisfy { $0.fix.coordinate != nil })
  }
}
