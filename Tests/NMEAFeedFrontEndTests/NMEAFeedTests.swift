import Foundation
import Glibc
import LocationCore
import LocationModel
import LocationProtocol
import LocationTestKit
import MapState
import NMEA
import NMEAFeedFrontEnd
import ServiceCore
import Synchronization
import SystemIO
import Testing

@testable import LocationDaemon

struct FeedTestError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// A fix in the southern and western hemispheres with every field GGA and RMC carry filled, at
/// their widest: the longest lines the feed writes.
func widestFix() -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.time = TestRoute.start + 86_399_999 - 12  // 23:59:59.987 UTC
  fix.timeOfDay = 86_399_987
  fix.quality = .dgps
  fix.coordinate = Coordinate(latitude: -89.999_999_9, longitude: -179.999_999_9)
  fix.altitudeMSL = -12_345.67
  fix.geoidSeparation = -105.5
  fix.speedOverGround = 514.4
  fix.courseOverGround = 359.99
  fix.magneticVariation = -12.3
  fix.hdop = 99.99
  fix.satellitesUsed = 12
  fix.dgpsAge = 999.9
  fix.dgpsStation = 1023
  return fix
}

/// The feed's lines for `fix`, CRLF removed, after checking each one's framing and checksum
/// independently of the encoder: `$`, body, `*`, two upper-case hex digits of the XOR of the
/// body's bytes, CRLF.
func checkedLines(_ bytes: [UInt8]) throws -> [String] {
  let text = String(decoding: bytes, as: UTF8.self)
  #expect(text.hasSuffix("\r\n"))
  var lines: [String] = []
  for raw in text.components(separatedBy: "\r\n") where !raw.isEmpty {
    let body = try #require(raw.split(separator: "*").first?.dropFirst())
    let stated = try #require(raw.split(separator: "*").last)
    #expect(raw.hasPrefix("$"))
    let xor = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
    #expect(stated == String(format: "%02X", xor), "checksum of \(raw)")
    lines.append(raw)
  }
  return lines
}

@Suite("NMEA feed: the sentences")
struct NMEAFeedSentenceTests {
  @Test(arguments: [0, 1, 17, 99])
  func rmcAndGGACarryTheFix(_ index: Int) throws {
    let fix = TestRoute.fix(index)
    let lines = try checkedLines(NMEAFeedFrontEnd.sentences(for: fix))
    try #require(lines.count == 2)
    #expect(lines[0].hasPrefix("$GPRMC,"))
    #expect(lines[1].hasPrefix("$GPGGA,"))
    let coordinate = try #require(fix.coordinate)

    guard case .rmc(let rmc) = try NMEAParser.parse(lines[0]).payload else {
      Issue.record("not RMC: \(lines[0])")
      return
    }
    #expect(rmc.isValid == true)
    let rmcPosition = try #require(rmc.coordinate)
    #expect(abs(rmcPosition.latitude - coordinate.latitude) < 2e-8)
    #expect(abs(rmcPosition.longitude - coordinate.longitude) < 2e-8)
    let knots = try #require(rmc.speedOverGroundKnots)
    #expect(abs(knots * 1852.0 / 3600.0 - (fix.speedOverGround ?? -1)) < 0.001)
    #expect(rmc.courseOverGround == fix.courseOverGround)

    guard case .gga(let gga) = try NMEAParser.parse(lines[1]).payload else {
      Issue.record("not GGA: \(lines[1])")
      return
    }
    let ggaPosition = try #require(gga.coordinate)
    #expect(abs(ggaPosition.latitude - coordinate.latitude) < 2e-8)
    #expect(abs(ggaPosition.longitude - coordinate.longitude) < 2e-8)
    #expect(gga.quality == fix.quality)
    #expect(gga.hdop == fix.hdop)
    #expect(gga.satellitesUsed == fix.satellitesUsed)
    #expect(abs((gga.altitudeMSL ?? 0) - (fix.altitudeMSL ?? 1)) < 0.005)
  }

  /// The project's own decoder turns the feed's bytes back into the same fix (position, time,
  /// altitude, speed, course).
  @Test(arguments: [0, 5, 42])
  func decoderReadsTheSameFixBack(_ index: Int) throws {
    let fixes = [TestRoute.fix(index), TestRoute.fix(index + 10, periodMilliseconds: 1000)]
    var decoder = NMEADecoder()
    var decoded: [Fix] = []
    for fix in fixes {
      decoder.feed(NMEAFeedFrontEnd.sentences(for: fix)) { decoded.append($0.fix) }
    }
    decoder.finish { decoded.append($0.fix) }
    try #require(decoded.count == fixes.count)
    for (sent, back) in zip(fixes, decoded) {
      let a = try #require(sent.coordinate)
      let b = try #require(back.coordinate)
      #expect(abs(a.latitude - b.latitude) < 2e-8)
      #expect(abs(a.longitude - b.longitude) < 2e-8)
      #expect(back.time == sent.time)
      #expect(back.mode == .fix3D)
      #expect(abs((back.altitudeMSL ?? 0) - (sent.altitudeMSL ?? 1)) < 0.005)
      #expect(abs((back.speedOverGround ?? 0) - (sent.speedOverGround ?? 1)) < 0.001)
      #expect(back.courseOverGround == sent.courseOverGround)
    }
  }

  /// What GeoClue 2.6 (`gclue-location.c`, `gclue-nmea-source.c`) needs of each line: at most
  /// 127 bytes before CRLF (it copies sentences into 128-byte buffers), at least 14 comma-separated
  /// fields for GGA and 13 for RMC, the talker in bytes 1-2 and the type in bytes 3-5, RMC status
  /// `A`, GGA quality above 0, and the decimal point of each coordinate within its first 6 bytes.
  @Test(arguments: [widestFix(), TestRoute.fix(3)])
  func linesFitWhatGeoClueParses(_ fix: Fix) throws {
    let lines = try checkedLines(NMEAFeedFrontEnd.sentences(for: fix))
    try #require(lines.count == 2)
    for line in lines { #expect(line.utf8.count <= 127, "\(line.utf8.count) bytes: \(line)") }
    let rmc = lines[0].components(separatedBy: ",")
    let gga = lines[1].components(separatedBy: ",")
    #expect(rmc.count >= 13)
    #expect(gga.count >= 14)
    #expect(rmc[0] == "$GPRMC" && gga[0] == "$GPGGA")
    #expect(rmc[2] == "A")
    #expect((Int(gga[6]) ?? 0) > 0)
    for field in [rmc[3], rmc[5], gga[2], gga[4]] {
      let dot = try #require(field.firstIndex(of: "."), "no decimal point in \(field)")
      #expect(field.distance(from: field.startIndex, to: dot) < 6, "\(field)")
    }
  }

  /// A fix without a position is written as a receiver writes it (RMC `V`, GGA quality 0), which
  /// GeoClue skips.
  @Test func noFixIsMarkedInvalid() throws {
    var fix = Fix(mode: .noFix)
    fix.time = TestRoute.start
    fix.timeOfDay = 43_200_000
    let lines = try checkedLines(NMEAFeedFrontEnd.sentences(for: fix))
    try #require(lines.count == 2)
    #expect(lines[0].components(separatedBy: ",")[2] == "V")
    #expect(lines[1].components(separatedBy: ",")[6] == "0")
  }
}

/// A connected reader of the feed's socket (non-blocking; reads wait with `Task.sleep`).
final class FeedReader {
  let fd: Int32
  private(set) var received: [UInt8] = []
  private(set) var closedByPeer = false

  init(path: String) throws {
    fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FeedTestError("socket failed") }
    guard var address = UnixAddress(path: path) else { throw FeedTestError("bad path") }
    // No close before a throw: every stored property is set, so deinit runs and closes `fd`.
    guard address.withSockaddr({ connect(fd, $0, $1) }) == 0 else {
      throw FeedTestError("connect failed: \(String(cString: strerror(errno)))")
    }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
  }

  deinit { if fd >= 0 { Glibc.close(fd) } }

  /// Reads what is there now; `false` once the feed has closed the connection.
  @discardableResult func pump() -> Bool {
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
      let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count > 0 {
        received += chunk[0..<count]
        continue
      }
      if count == 0 || (errno != EAGAIN && errno != EINTR) { closedByPeer = true }
      return !closedByPeer
    }
  }

  /// Reads until `received` holds `count` bytes or the connection closes; waits at most
  /// `timeout` (a guard against a hang, not a speed check).
  func read(bytes count: Int, timeout: Duration = .seconds(20)) async {
    let deadline = ContinuousClock.now + timeout
    while received.count < count && pump() && ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(2))
    }
  }

  /// Reads until the feed closes the connection (at most `timeout`).
  func readUntilClosed(timeout: Duration = .seconds(20)) async {
    let deadline = ContinuousClock.now + timeout
    while pump() && ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(2))
    }
  }
}

/// The real service on a fake backend, with an NMEA feed on a socket in a fresh directory.
struct FeedFixture {
  let directory: String
  let backend: FakeBackend
  let manager: LocationManager
  let service: LocationService
  let feed: NMEAFeedFrontEnd

  var path: String { directory + "/nmea.sock" }

  /// `handler` is what the feed calls: the service itself, or something in front of it.
  init(
    group: String? = nil, options: NMEAFeedOptions = NMEAFeedOptions(),
    handler: (LocationService) -> any RequestHandler = { $0 }
  ) async throws {
    var template = Array("/tmp/locationd-nmea-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw FeedTestError("mkdtemp failed") }
    directory = String(cString: made)
    chmod(directory, 0o755)
    backend = FakeBackend()
    manager = LocationManager(backend: backend)
    let map = MapStateService(store: MapStateStore(directory: directory + "/state") { _ in })
    service = LocationService(
      manager: manager, map: map, backend: backend,
      authority: AuthorizationAuthority(Authorizer(groupName: group)))
    feed = try NMEAFeedFrontEnd(
      path: directory + "/nmea.sock", group: group, handler: handler(service), options: options)
    await service.attach(feed)
    await service.start()
    try feed.start()
  }

  func tearDown() async {
    feed.stop()
    await feed.waitUntilStopped()
    await service.shutdown(reason: "test")
    try? FileManager.default.removeItem(atPath: directory)
  }
}

@Suite("NMEA feed: the front-end on the service", .serialized, .timeLimit(.minutes(2)))
struct NMEAFeedServiceTests {
  /// A reader starts tracking (the backend runs), receives each fix as RMC and GGA, and its
  /// leaving stops tracking again.
  @Test func trackingRunsWhileAReaderIsConnected() async throws {
    let fixture = try await FeedFixture()
    #expect(!fixture.backend.isRunning)
    let reader = try FeedReader(path: fixture.path)
    #expect(await eventually { fixture.backend.isRunning })
    #expect(fixture.feed.clientCount == 1)
    #expect(await fixture.manager.isTracking)

    var expected: [UInt8] = []
    for index in 0..<3 {
      let fix = TestRoute.fix(index, periodMilliseconds: 1000)
      expected += NMEAFeedFrontEnd.sentences(for: fix)
      fixture.backend.send(fix: fix)
      await reader.read(bytes: expected.count)
    }
    #expect(reader.received == expected)

    Glibc.shutdown(reader.fd, Int32(SHUT_RDWR))
    #expect(await eventually { !fixture.backend.isRunning })
    #expect(await eventually { fixture.feed.clientCount == 0 })
    #expect(await !fixture.manager.isTracking)
    await fixture.tearDown()
  }

  /// Readers that hung up before the feed noticed do not hold slots: a reader that connects
  /// right after them is admitted, however the I/O thread's rounds fall.
  @Test func readersThatHungUpDoNotFillTheFeed() async throws {
    let fixture = try await FeedFixture(options: NMEAFeedOptions(maxReaders: 2))
    for round in 0..<30 {
      for _ in 0..<2 { _ = try FeedReader(path: fixture.path) }  // connected and closed at once
      let patient = try FeedReader(path: fixture.path)
      let feed = fixture.feed
      #expect(await eventually { feed.clientCount == 1 }, "round \(round)")
      #expect(patient.pump(), "round \(round): the patient reader was refused")
      Glibc.shutdown(patient.fd, Int32(SHUT_RDWR))
      #expect(await eventually { feed.clientCount == 0 }, "round \(round)")
    }
    await fixture.tearDown()
  }

  /// Tracking lasts while at least one of two readers is connected.
  @Test func trackingLastsUntilTheLastReaderLeaves() async throws {
    let fixture = try await FeedFixture()
    let first = try FeedReader(path: fixture.path)
    let second = try FeedReader(path: fixture.path)
    #expect(await eventually { fixture.feed.clientCount == 2 && fixture.backend.isRunning })
    // Both readers' watches are in effect (each reader's watch is set up on its own task, after
    // the reader is counted) before the first leaves.
    let manager = fixture.manager
    #expect(await eventually { await manager.trackingClientCount == 2 })
    Glibc.shutdown(first.fd, Int32(SHUT_RDWR))
    #expect(await eventually { fixture.feed.clientCount == 1 })
    let fix = TestRoute.fix(7)
    fixture.backend.send(fix: fix)
    await second.read(bytes: NMEAFeedFrontEnd.sentences(for: fix).count)
    #expect(second.received == NMEAFeedFrontEnd.sentences(for: fix))
    #expect(fixture.backend.isRunning)
    Glibc.shutdown(second.fd, Int32(SHUT_RDWR))
    #expect(await eventually { !fixture.backend.isRunning })
    await fixture.tearDown()
  }

  /// A reader that reads nothing is disconnected once its queue passes the bound; the reader
  /// that keeps up receives every fix, in order.
  @Test func slowReaderIsDroppedWithoutHoldingUpOthers() async throws {
    let fixture = try await FeedFixture(options: NMEAFeedOptions(bufferLimit: 1024))
    let slow = try FeedReader(path: fixture.path)
    let fast = try FeedReader(path: fixture.path)
    #expect(await eventually { fixture.feed.clientCount == 2 && fixture.backend.isRunning })
    var expected: [UInt8] = []
    // Far more than the kernel buffers of one Unix socket pair hold (a few hundred KiB).
    for round in 0..<40 {
      for index in 0..<100 {
        let fix = TestRoute.fix(round * 100 + index)
        expected += NMEAFeedFrontEnd.sentences(for: fix)
        fixture.feed.publish(fix)
      }
      await fast.read(bytes: expected.count)
    }
    #expect(fast.received == expected)
    #expect(!fast.closedByPeer)
    await slow.readUntilClosed()
    #expect(slow.closedByPeer)
    #expect(slow.received.count < expected.count)
    #expect(await eventually { fixture.feed.clientCount == 1 })
    await fixture.tearDown()
  }

  /// The feed's socket gets the main socket's modes: 0600 for root only, 0660 and the group
  /// when one is configured.
  @Test func socketModeFollowsTheGroup() async throws {
    let rootOnly = try await FeedFixture(group: nil)
    var info = stat()
    #expect(lstat(rootOnly.path, &info) == 0)
    #expect(info.st_mode & S_IFMT == S_IFSOCK)
    #expect(info.st_mode & 0o777 == 0o600)
    await rootOnly.tearDown()

    let grouped = try await FeedFixture(group: "nogroup")
    #expect(lstat(grouped.path, &info) == 0)
    #expect(info.st_mode & 0o777 == 0o660)
    #expect(info.st_gid == 65534)
    await grouped.tearDown()
  }

  /// A peer that gets past the file mode is still decided by the authority: uid 65534, not in
  /// the (root-only) rule, is disconnected and tracking never starts.
  @Test func readerTheAuthorityRefusesIsClosed() async throws {
    try #require(getuid() == 0, "needs root to run a reader as uid 65534")
    try #require(access("/usr/bin/setpriv", X_OK) == 0 && access("/usr/bin/python3", X_OK) == 0)
    let fixture = try await FeedFixture(group: nil)
    // Open the file mode wide, so only the authority stands in the way.
    #expect(chmod(fixture.path, 0o666) == 0)
    let script = """
      import socket, sys
      s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      s.connect(sys.argv[1])
      s.settimeout(20)
      data = s.recv(4096)
      print("closed" if data == b"" else "data")
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments = [
      "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script,
      fixture.path,
    ]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    #expect(await process.hasExited(within: .seconds(30)))
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    #expect(text == "closed\n")
    #expect(fixture.backend.startCount == 0)
    #expect(await eventually { fixture.feed.clientCount == 0 })
    await fixture.tearDown()
  }
}

extension NMEAFeedServiceTests {
  /// Every way a reader leaves (it hangs up, the service closes it, it is dropped as slow, the
  /// feed stops) reaches the service exactly once, and tracking ends with the last.
  @Test func everyDepartureReportedOnce() async throws {
    var made: DepartureLog?
    let fixture = try await FeedFixture(options: NMEAFeedOptions(bufferLimit: 1024)) { service in
      let log = DepartureLog(service)
      made = log
      return log
    }
    let log = try #require(made)
    var readers = try (0..<5).map { _ in try FeedReader(path: fixture.path) }
    let manager = fixture.manager
    #expect(await eventually { await manager.trackingClientCount == 5 })
    let ids = log.opened.withLock { $0.map(\.id) }
    #expect(Set(ids).count == 5)
    @Sendable func gone() -> [UInt64] { log.gone.withLock { $0 } }

    // It hangs up.
    Glibc.shutdown(readers.removeFirst().fd, Int32(SHUT_RDWR))
    #expect(await eventually { gone().count == 1 })
    // The service closes one (a revoked authorization), twice.
    let channel = log.opened.withLock { $0.first { !gone().contains($0.id) } }
    channel?.close()
    channel?.close()
    #expect(await eventually { gone().count == 2 })
    let deadline = ContinuousClock.now + .seconds(30)
    while !readers.contains(where: \.closedByPeer) && ContinuousClock.now < deadline {
      for reader in readers { reader.pump() }
      try? await Task.sleep(for: .milliseconds(2))
    }
    #expect(readers.filter(\.closedByPeer).count == 1)
    readers.removeAll { $0.closedByPeer }
    // One stops reading and is dropped as slow; the others read on.
    let stalled = readers.removeFirst()
    var expected: [UInt8] = []
    for round in 0..<40 {
      for index in 0..<100 {
        let fix = TestRoute.fix(round * 100 + index)
        expected += NMEAFeedFrontEnd.sentences(for: fix)
        fixture.feed.publish(fix)
      }
      for reader in readers { await reader.read(bytes: expected.count) }
    }
    await stalled.readUntilClosed()
    #expect(stalled.closedByPeer)
    #expect(await eventually { gone().count == 3 })
    // The last two are connected when the feed stops.
    fixture.feed.stop()
    await fixture.feed.waitUntilStopped()
    for reader in readers { await reader.readUntilClosed() }
    #expect(readers.filter(\.closedByPeer).count == 2)
    #expect(await eventually { gone().count == 5 })
    for _ in 0..<100 { await Task.yield() }
    #expect(gone().sorted() == ids.sorted(), "\(gone()) for \(ids)")
    #expect(await eventually { await manager.trackingClientCount == 0 })
    await fixture.tearDown()
  }

  /// A reader authorized through the group loses the feed when a reload takes the group away:
  /// it is disconnected and tracking stops.
  @Test func readerARevocationRemovesIsClosed() async throws {
    try #require(getuid() == 0, "needs root to run a reader as uid 65534")
    try #require(access("/usr/bin/setpriv", X_OK) == 0 && access("/usr/bin/python3", X_OK) == 0)
    let fixture = try await FeedFixture(group: "nogroup")
    let script = """
      import socket, sys
      s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      s.connect(sys.argv[1])
      s.settimeout(60)
      while s.recv(4096):
          pass
      print("closed")
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments = [
      "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script,
      fixture.path,
    ]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    // Authorized through its gid (nogroup): it tracks.
    #expect(await eventually { fixture.backend.isRunning && fixture.feed.clientCount == 1 })
    let review = await fixture.service.reloadAuthorization(Authorizer(groupName: nil))
    #expect(review.revoked == 1)
    #expect(await process.hasExited(within: .seconds(30)))
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    #expect(text == "closed\n")
    #expect(await eventually { fixture.feed.clientCount == 0 && !fixture.backend.isRunning })
    await fixture.tearDown()
  }
}

@Suite("NMEA feed: the socket path")
struct NMEAFeedPathTests {
  func makeDirectory(mode: mode_t) throws -> String {
    var template = Array("/tmp/locationd-nmea-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw FeedTestError("mkdtemp failed") }
    let path = String(cString: made)
    chmod(path, mode)
    return path
  }

  final class NoHandler: RequestHandler {
    func handle(_ request: Request, from client: ClientContext) async -> Reply {
      .error(.notAuthorized, message: "test")
    }
  }

  /// A directory others may write to (where someone could plant their own socket) is refused,
  /// and nothing is created in it.
  @Test func directoryOthersCanWriteIsRefused() throws {
    let directory = try makeDirectory(mode: 0o777)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    #expect(chmod(directory, 0o1777) == 0)
    #expect(throws: NMEAFeedFrontEnd.Failure.self) {
      _ = try NMEAFeedFrontEnd(path: directory + "/nmea.sock", group: nil, handler: NoHandler())
    }
    #expect(!FileManager.default.fileExists(atPath: directory + "/nmea.sock"))
    do {
      _ = try NMEAFeedFrontEnd(path: directory + "/nmea.sock", group: nil, handler: NoHandler())
    } catch {
      guard case .unsafeDirectory(let path, _) = error else {
        Issue.record("expected unsafeDirectory, got \(error)")
        return
      }
      #expect(path == directory)
    }
  }

  /// A file at the path is neither replaced nor followed.
  @Test func fileAtThePathIsLeftAlone() throws {
    let directory = try makeDirectory(mode: 0o755)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/nmea.sock"
    try "keep me".write(toFile: path, atomically: false, encoding: .utf8)
    do {
      _ = try NMEAFeedFrontEnd(path: path, group: nil, handler: NoHandler())
      Issue.record("a regular file at the path was accepted")
    } catch {
      #expect(error == .listen(.notASocket(path)))
    }
    #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
  }
}

@Suite("NMEA feed: configuration")
struct NMEAFeedConfigurationTests {
  @Test func offByDefault() throws {
    #expect(try Configuration.parse(arguments: []).nmeaSocketPath == nil)
  }

  @Test func flagAndConfigFileKey() throws {
    let flag = try Configuration.parse(arguments: ["--nmea-socket", "/run/locationd/nmea.sock"])
    #expect(flag.nmeaSocketPath == "/run/locationd/nmea.sock")
    let file = try Configuration.parse(arguments: ["--config", "/c"]) { _ in
      "nmea-socket = /run/locationd/nmea.sock\n"
    }
    #expect(file.nmeaSocketPath == "/run/locationd/nmea.sock")
    let off = try Configuration.parse(arguments: ["--config", "/c", "--nmea-socket="]) { _ in
      "nmea-socket = /run/locationd/nmea.sock\n"
    }
    #expect(off.nmeaSocketPath == nil)
  }

  @Test(arguments: ["nmea.sock", "/" + String(repeating: "x", count: 107)])
  func badPathsAreRefused(_ path: String) {
    #expect(throws: ConfigurationError.self) {
      _ = try Configuration.parse(arguments: ["--nmea-socket", path])
    }
  }
}
