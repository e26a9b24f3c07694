import Foundation
import GPSDBackend
import Glibc
import LocationCore
import LocationTestKit
import NMEA
import SystemIO
import Testing
import LocationModel

/// Simulated GPS hardware -> real gpsd (private port) -> GPSDBackend.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GPSDEndToEndTests {
  /// Starts the receiver writing the test route at 10 Hz, recording what it writes.
  private func startReceiver(
    _ name: String, log: WriteLog, deviceMode: mode_t? = nil, fix: (@Sendable (Int) -> Fix?)? = nil
  ) throws -> SimulatedReceiver {
    let receiver = try SimulatedReceiver(
      linkPath: temporaryLinkPath(name), deviceMode: deviceMode, onWrite: { log.record($0) })
    let make = fix ?? { routeFix($0) }
    try receiver.start(rate: 10) { elapsed in make(Int((elapsed * 10).rounded())) }
    return receiver
  }

  @Test func fixesMatchTheWrittenRouteAndGpspipeSeesTheSame() async throws {
    let log = WriteLog()
    let receiver = try startReceiver("route", log: log)
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }

    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    let gotFixes = await collector.wait(timeout: 10) { events in
      events.filter { if case .location = $0.event { return true } else { return false } }.count
        >= 30
    }
    await backend.stop()
    #expect(gotFixes, "30 fixes within 10 s; statuses: \(collector.statuses.map(\.status))")

    let locations = collector.locations.map(\.location)
    try #require(locations.count >= 30)
    var previous: Int64 = .min
    for location in locations {
      let fix = location.fix
      let time = try #require(fix.time)
      #expect(time > previous, "one fix per epoch, in order")
      previous = time
      let written = try #require(
        await log.epoch(time), "fix time \(time) was written; \(log.nearest(time))")
      let expected = try #require(written.fix.coordinate)
      let coordinate = try #require(fix.coordinate)
      #expect(abs(coordinate.latitude - expected.latitude) < 1e-6)
      #expect(abs(coordinate.longitude - expected.longitude) < 1e-6)
      #expect(fix.mode == .fix3D)
      #expect(location.provenance.backend == "gpsd://127.0.0.1:\(gpsd.port)")
      #expect(location.provenance.source == receiver.linkPath)
      #expect(location.provenance.isSimulated == false)
    }
    // Beyond position: altitude, speed and course as written (NMEA field precision).
    let last = try #require(locations.last?.fix)
    let lastTime = try #require(last.time)
    let written = try #require(await log.epoch(lastTime)).fix
    #expect(abs((last.altitudeMSL ?? .nan) - (written.altitudeMSL ?? 0)) < 0.006)
    #expect(abs((last.speedOverGround ?? .nan) - 12.5) < 0.001)
    #expect(abs((last.courseOverGround ?? .nan) - 45.0) < 0.006)
    #expect(last.hdop == 0.9)
    #expect(last.satellites.count == 5 && last.satellites.filter(\.used).count == 4)
    // The status sequence starts connecting -> connected.
    #expect(collector.statuses.prefix(2).map(\.status) == [.connecting, .connected])
    #expect(await collector.wait(timeout: 30) { _ in collector.statuses.last?.status == .stopped })

    // gpspipe on the same gpsd sees the same positions.
    let tpvs = try await gpspipeTPVs(port: gpsd.port, count: 40)
    #expect(tpvs.count >= 10)
    for tpv in tpvs {
      let written = try #require(
        await log.epoch(tpv.time), "gpspipe time \(tpv.time) was written; \(log.nearest(tpv.time))")
      let expected = try #require(written.fix.coordinate)
      #expect(abs(tpv.latitude - expected.latitude) < 1e-6)
      #expect(abs(tpv.longitude - expected.longitude) < 1e-6)
    }
  }

  @Test func gpsdRestartIsRecoveredWithoutClientActionAndWithoutSpinning() async throws {
    let log = WriteLog()
    let receiver = try startReceiver("restart", log: log)
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    #expect(await collector.wait(timeout: 10) { _ in collector.locations.count >= 5 })

    // Crash gpsd while the client watches.
    let killedAt = MonotonicClock.nanoseconds()
    gpsd.kill()
    #expect(
      await collector.wait(timeout: 30) { _ in
        collector.statuses.contains { $0.status == .disconnected }
      })
    let disconnectedAt = try #require(collector.statuses.first { $0.status == .disconnected }?.at)
    #expect(disconnectedAt >= killedAt)
    // Outage: the connection thread's CPU time while gpsd is down (it retries with backoff and
    // sleeps in poll in between). A busy loop would use about the whole 1.5 s.
    let cpuBefore = try #require(backend.connectionThreadCPUTime)
    try await Task.sleep(for: .milliseconds(1500))
    let cpuDuring = try #require(backend.connectionThreadCPUTime) - cpuBefore
    #expect(
      cpuDuring < .milliseconds(15),
      "connection thread used \(cpuDuring) of CPU during a 1.5 s outage")
    let locationsBeforeRestart = collector.locations.count

    let restartingAt = MonotonicClock.nanoseconds()
    try await gpsd.start()
    let restartedAt = MonotonicClock.nanoseconds()
    // The backend reconnects on its own (how soon depends on the backoff and on the machine's
    // load: only a backend that never comes back fails the generous wait).
    let resumed = await collector.wait(timeout: 30) { _ in
      collector.locations.count > locationsBeforeRestart
    }
    #expect(resumed)
    let firstAfter = try #require(collector.locations.dropFirst(locationsBeforeRestart).first)
    #expect(firstAfter.at >= restartedAt)
    // Status: ... connected, disconnected, (connected) ... in that order, and fixes are fresh.
    let statuses = collector.statuses.map(\.status)
    let disconnectIndex = try #require(statuses.firstIndex(of: .disconnected))
    #expect(statuses[..<disconnectIndex].contains(.connected))
    #expect(statuses[disconnectIndex...].contains(.connected))
    let firstAfterTime = try #require(firstAfter.location.fix.time)
    let written = try #require(await log.epoch(firstAfterTime))
    // Epochs written during the outage are not replayed to the new gpsd: the first fix after the
    // restart was written at most about one epoch before gpsd started.
    #expect(
      written.finishedAt + 150_000_000 > restartingAt, "the first fix after the restart is fresh")
    await backend.stop()
  }

  @Test func backendStartedBeforeGPSDConnectsWhenItAppears() async throws {
    let log = WriteLog()
    let receiver = try startReceiver("late", log: log)
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    defer { gpsd.stop() }
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    #expect(
      await collector.wait(timeout: 30) { _ in
        collector.statuses.contains { $0.status == .disconnected }
      })
    let cpuBefore = try #require(backend.connectionThreadCPUTime)
    try await Task.sleep(for: .seconds(1))
    let cpuWaiting = try #require(backend.connectionThreadCPUTime) - cpuBefore
    #expect(cpuWaiting < .milliseconds(10), "waiting for gpsd used \(cpuWaiting) of CPU")
    #expect(collector.locations.isEmpty)

    try await gpsd.start()
    #expect(await collector.wait(timeout: 30) { _ in !collector.locations.isEmpty })
    let statuses = collector.statuses.map(\.status)
    #expect(statuses.first == .connecting)
    #expect(Array(statuses.drop { $0 != .disconnected }.prefix(2)) == [.disconnected, .connected])
    let fix = try #require(collector.locations.first?.location.fix)
    let fixTime = try #require(fix.time)
    let written = try #require(await log.epoch(fixTime)).fix
    #expect(
      fix.coordinate.map { abs($0.latitude - (written.coordinate?.latitude ?? 0)) < 1e-6 } == true)
    await backend.stop()
  }

  @Test func stopReleasesTheWatchOnGPSD() async throws {
    let log = WriteLog()
    let receiver = try startReceiver("release", log: log)
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }
    // Let gpsd settle: the readiness probe's own connection must be gone.
    #expect(await waitUntil(timeout: 30) { gpsd.clientConnectionCount() == 0 })

    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    #expect(await collector.wait(timeout: 10) { _ in collector.locations.count >= 3 })
    #expect(gpsd.clientConnectionCount() == 1, "the backend watches gpsd")

    await backend.stop()
    // stop() returns after WATCH disable and gps_close: gpsd's side of the connection goes away.
    #expect(await waitUntil(timeout: 30) { gpsd.clientConnectionCount() == 0 })
    #expect(await collector.wait(timeout: 30) { _ in collector.statuses.last?.status == .stopped })
    let countAfterStop = collector.locations.count

    // Tracking again reconnects and watches again.
    try await backend.start()
    #expect(
      await collector.wait(timeout: 30) { _ in collector.locations.count >= countAfterStop + 3 })
    #expect(gpsd.clientConnectionCount() == 1)
    // No fix came after stop: between `stopped` and the next session's `connecting` the stream
    // holds no location (events are recorded in the order the backend sent them).
    let events = collector.all.map(\.event)
    let stoppedIndex = try #require(
      events.firstIndex { if case .status(.stopped, _) = $0 { true } else { false } })
    let restartIndex = try #require(
      events[stoppedIndex...].firstIndex {
        if case .status(.connecting, _) = $0 { true } else { false }
      })
    #expect(
      !events[stoppedIndex..<restartIndex].contains {
        if case .location = $0 { true } else { false }
      }, "fixes after stop")
    await backend.stop()
    #expect(await waitUntil(timeout: 30) { gpsd.clientConnectionCount() == 0 })
  }

  @Test func tpvWithoutAltitudeSpeedOrClimbGivesUnknownNotZero() async throws {
    let log = WriteLog()
    // A receiver that knows neither altitude nor speed nor course: GGA without altitude, RMC and
    // VTG with empty speed and course fields.
    // Every other epoch is a no-fix epoch: gpsd derives a speed from two consecutive positions
    // when the receiver sends none, and a no-fix epoch in between leaves it nothing to derive from.
    let receiver = try startReceiver("sparse", log: log) { index in
      var fix = routeFix(index)
      if index % 2 == 1 {
        var noFix = Fix(mode: .noFix)
        noFix.time = fix.time
        return noFix
      }
      fix.mode = .fix2D
      fix.altitudeMSL = nil
      fix.geoidSeparation = nil
      fix.speedOverGround = nil
      fix.courseOverGround = nil
      return fix
    }
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    #expect(await collector.wait(timeout: 10) { _ in collector.locations.count >= 10 })
    await backend.stop()
    #expect(
      collector.statuses.contains { $0.status == .noFix }, "no-fix epochs are reported as status")
    let fixes = collector.locations.map(\.location.fix)
    try #require(fixes.count >= 10)
    for fix in fixes {
      #expect(fix.mode == .fix2D)
      #expect(fix.coordinate != nil)
      #expect(fix.altitudeMSL == nil)
      #expect(fix.altitudeHAE == nil)
      #expect(fix.climb == nil)
      #expect(fix.speedOverGround == nil)
      #expect(fix.courseOverGround == nil)
    }
  }

  @Test func silentReceiverIsReportedByTheNoFixTimeoutAndRecovers() async throws {
    let log = WriteLog()
    // Fixes for 1 s, silence for 2 s (gpsd stays connected), then fixes again.
    let receiver = try startReceiver("silent", log: log) { index in
      (10..<30).contains(index) ? nil : routeFix(index)
    }
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }
    var options = GPSDBackend.Options()
    options.noFixTimeout = .milliseconds(800)
    let backend = try GPSDBackend(
      uri: "gpsd://127.0.0.1:\(gpsd.port)\(receiver.linkPath)", options: options)
    let collector = EventCollector(backend)
    try await backend.start()
    /// The index in the event stream of the first `noFix` after a location (gpsd's own
    /// start-up may take longer than the timeout on a loaded machine).
    func noFixAfterFixes(_ events: [TimedEvent]) -> Int? {
      guard
        let first = events.firstIndex(where: {
          if case .location = $0.event { true } else { false }
        })
      else { return nil }
      return events[first...].firstIndex {
        if case .status(.noFix, _) = $0.event { true } else { false }
      }
    }
    #expect(await collector.wait(timeout: 30) { noFixAfterFixes($0) != nil })
    let events = collector.all
    let noFixIndex = try #require(noFixAfterFixes(events))
    #expect(
      !collector.statuses.contains { $0.status == .disconnected }, "gpsd itself stayed connected")
    #expect(
      await collector.wait(timeout: 30) { all in
        all.dropFirst(noFixIndex).contains { if case .location = $0.event { true } else { false } }
      })
    // The noFix came in the receiver's silence (epochs 10 to 29, 100 ms each): the last fix
    // before it and the first after it are at least the 2 s of silence apart in fix time.
    let all = collector.all
    let before = all[..<noFixIndex].compactMap { item -> Int64? in
      if case .location(let location) = item.event { return location.fix.time } else { return nil }
    }
    let after = all[noFixIndex...].compactMap { item -> Int64? in
      if case .location(let location) = item.event { return location.fix.time } else { return nil }
    }
    let lastBefore = try #require(before.last)
    let firstAfter = try #require(after.first)
    #expect(firstAfter - lastBefore >= 2000, "noFix between fixes \(lastBefore) and \(firstAfter)")
    let statuses = collector.statuses.map(\.status)
    #expect(Array(statuses.drop { $0 != .noFix }.prefix(2)) == [.noFix, .connected])
    // Watching one device: locations name it.
    #expect(collector.locations.allSatisfy { $0.location.provenance.source == receiver.linkPath })
    #expect(
      collector.locations.first?.location.provenance.backend
        == "gpsd://127.0.0.1:\(gpsd.port)\(receiver.linkPath)")
    await backend.stop()
  }

  @Test func conformsToTheBackendContract() async throws {
    let receiver = try startReceiver("conformance", log: WriteLog())
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    #expect(await backendConformance(backend) == [])
  }
}

/// Runs `gpspipe -w -n COUNT localhost:PORT` and returns its TPVs with a position.
func gpspipeTPVs(port: UInt16, count: Int) async throws -> [(
  time: Int64, latitude: Double, longitude: Double
)] {
  // The shell writes gpspipe's output to a file: nothing can fill up while the test waits for
  // the exit, and no descriptor of this process is handed to the child (Foundation may close a
  // FileHandle given as standard output, so closing it here again could close a reused number).
  let outputPath = NSTemporaryDirectory() + "locationd-gpspipe-\(getpid())-\(port).json"
  defer { try? FileManager.default.removeItem(atPath: outputPath) }
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/bin/sh")
  process.arguments = [
    "-c", "exec /usr/bin/gpspipe -w -n \"$1\" \"$2\" > \"$3\"", "sh", String(count),
    "127.0.0.1:\(port)",
    outputPath,
  ]
  process.standardOutput = FileHandle.nullDevice
  process.standardError = FileHandle.nullDevice
  try process.run()
  let exited = await process.hasExited(within: .seconds(20))
  if !exited { process.terminate() }
  #expect(exited, "gpspipe printed \(count) lines within 20 s")
  let data = try Data(contentsOf: URL(fileURLWithPath: outputPath))
  var result: [(Int64, Double, Double)] = []
  for line in data.split(separator: UInt8(ascii: "\n")) {
    guard let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any],
      object["class"] as? String == "TPV", let latitude = object["lat"] as? Double,
      let longitude = object["lon"] as? Double, let timeText = object["time"] as? String,
      let time = parseISO8601Milliseconds(timeText)
    else { continue }
    result.append((time, latitude, longitude))
  }
  return result
}

/// Parses gpsd's `2026-03-14T12:00:00.100Z` into milliseconds since 1970.
func parseISO8601Milliseconds(_ text: String) -> Int64? {
  let parts = text.split(whereSeparator: { "-T:Z".contains($0) })
  guard parts.count == 6, let year = Int(parts[0]), let month = Int(parts[1]),
    let day = Int(parts[2]),
    let hour = Int(parts[3]), let minute = Int(parts[4]), let seconds = Double(parts[5])
  else { return nil }
  // days_from_civil (Howard Hinnant).
  let y = month <= 2 ? year - 1 : year
  let era = (y >= 0 ? y : y - 399) / 400
  let yoe = y - era * 400
  let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
  let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
  let days = Int64(era * 146_097 + doe - 719_468)
  return days * 86_400_000 + Int64(hour * 3_600_000 + minute * 60_000)
    + Int64((seconds * 1000).rounded())
}

/// Polls `condition` every 10 ms for at most `timeout` seconds.
func waitUntil(timeout: Double, _ condition: () -> Bool) async -> Bool {
  let deadline = MonotonicClock.nanoseconds() + UInt64(timeout * 1e9)
  while MonotonicClock.nanoseconds() < deadline {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(10))
  }
  return condition()
}

@Suite struct PrivateGPSDConnectionCountTests {
  /// A loopback TCP socket bound to `port` (0: any free one), listening; its port.
  private func listener(port: UInt16 = 0) throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
        bind(fd, pointer, length) == 0 && listen(fd, 16) == 0
          && getsockname(fd, pointer, &length) == 0
      }
    }
    try #require(bound, "bind/listen: errno \(errno)")
    return (fd, UInt16(bigEndian: address.sin_port))
  }

  /// A socket bound to [::1]:`port`, or -1 when the port is taken there.
  private func reserveIPv6Loopback(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    address.sin6_port = port.bigEndian
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
      }
    }
    if bound { return fd }
    close(fd)
    return -1
  }

  /// With hundreds of sockets in `/proc/net/tcp` (as in a parallel test run), every connection
  /// to gpsd's port is counted, not only those in the table's first 4 KiB.
  @Test func countsConnectionsBeyondTheFirstPageOfTheTable() throws {
    var descriptors: [Int32] = []
    defer { for fd in descriptors { close(fd) } }
    for _ in 0..<300 { descriptors.append(try listener().fd) }
    // The port is held on ::1 too: a gpsd of a test running beside this one, started on a port
    // that was free a moment before, listens on whichever loopback address it can get, and its
    // clients there would be counted.
    var server = try listener()
    descriptors.append(server.fd)
    while true {
      let reserved = try reserveIPv6Loopback(port: server.port)
      if reserved >= 0 {
        descriptors.append(reserved)
        break
      }
      server = try listener()
      descriptors.append(server.fd)
    }
    for _ in 0..<5 {
      let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      try #require(client >= 0)
      descriptors.append(client)
      var address = sockaddr_in()
      address.sin_family = sa_family_t(AF_INET)
      address.sin_addr.s_addr = inet_addr("127.0.0.1")
      address.sin_port = server.port.bigEndian
      let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
      }
      try #require(connected)
      let accepted = accept(server.fd, nil, nil)
      try #require(accepted >= 0)
      descriptors.append(accepted)
    }
    let table = try #require(PrivateGPSD.procText("/proc/net/tcp"))
    #expect(table.split(separator: "\n").count > 300)
    let gpsd = try PrivateGPSD(device: "/dev/null", port: server.port)
    #expect(gpsd.clientConnectionCount() == 5)
  }
}
