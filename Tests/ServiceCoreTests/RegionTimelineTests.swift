import Foundation
import LocationCore
import LocationModel
import LocationTestKit
import MapState
import NMEA
import Regions
import Synchronization
import Testing

@testable import LocationProtocol
@testable import ServiceCore

/// A recorded drive (1 Hz, eastwards at 10 m/s along 48.8566° N from 2019-05-01T12:00:00Z)
/// through circle `a` (entry and exit), circle `b` with a 20 s dwell (the car stands in it for
/// 60 s), and polygon `p`, ending outside every region: the same regions are entered and left on
/// every pass of a loop.
private enum Drive {
  static let start: Int64 = 1_556_712_000_000
  static let latitude = 48.8566
  static let longitude = 2.3522
  static let metresPerDegreeOfLongitude = 111_320 * cos(latitude * .pi / 180)

  /// East offsets in metres, one per second.
  static let offsets: [Double] = {
    var offsets: [Double] = []
    var x = -300.0
    while x < 1500 {
      offsets.append(x)
      x += 10
    }
    offsets += Array(repeating: 1500, count: 60)
    while x < 3500 {
      offsets.append(x)
      x += 10
    }
    return offsets
  }()

  static func coordinate(east: Double) -> Coordinate {
    Coordinate(latitude: latitude, longitude: longitude + east / metresPerDegreeOfLongitude)
  }

  static var fixes: [DecodedFix] {
    offsets.enumerated().map { index, east in
      let point = coordinate(east: east)
      return DecodedFix(
        fix: TestFixes.fix(latitude: point.latitude, longitude: point.longitude, time: start + Int64(index) * 1000),
        line: 1 + index * 3)
    }
  }

  static var regionRequests: [String] {
    let a = coordinate(east: 500)
    let b = coordinate(east: 1500)
    let west = coordinate(east: 2500).longitude
    let east = coordinate(east: 2800).longitude
    let north = latitude + 150 / 111_195.0
    let south = latitude - 150 / 111_195.0
    return [
      #"{"cmd":"region","action":"add","region":{"id":"a","circle":{"lat":\#(a.latitude),"lon":\#(a.longitude),"radius":100}}}"#,
      #"{"cmd":"region","action":"add","region":{"id":"b","circle":{"lat":\#(b.latitude),"lon":\#(b.longitude),"radius":150},"dwell":20}}"#,
      #"{"cmd":"region","action":"add","region":{"id":"p","polygon":{"type":"Polygon","coordinates":[[[\#(west),\#(south)],[\#(east),\#(south)],[\#(east),\#(north)],[\#(west),\#(north)],[\#(west),\#(south)]]]}}}"#,
    ]
  }

  /// Events of one pass: enter a, exit a, enter b, dwell b, exit b, enter p, exit p.
  static let eventsPerPass = 7
}

private let root = PeerCredentials(pid: 1, uid: 0, gid: 0)

/// Runs the drive through the real service and replay backend: the replay paced on its own
/// virtual clock (automatic: no wall time passes), the regions' clock a manual virtual clock far
/// from the log's times that never moves, so nothing can depend on it.
private func replayDrive(
  speed: Double, timestamps: ReplayTimestamps, passes: Int = 1, fixes: [DecodedFix] = Drive.fixes,
  controls: (@Sendable (ReplayBackend, Int) async throws -> Void)? = nil
) async throws -> [JSONValue] {
  let replayClock = VirtualClock(wallOrigin: 1_800_000_000_000, autoAdvance: true)
  let regionClock = VirtualClock(wallOrigin: 2_000_000_000_000)
  let backend = ReplayBackend(
    source: DecodedFixesSource(name: "drive.nmea", fixes: fixes),
    options: .init(path: "drive.nmea", speed: speed, loop: passes > 1, timestamps: timestamps),
    clock: replayClock, uri: "replay:drive.nmea")
  let service = LocationService(
    manager: LocationManager(backend: backend), map: MapStateService(), backend: backend,
    authority: AuthorizationAuthority(Authorizer(groupName: nil)),
    regions: RegionService(clock: regionClock))
  await service.start()
  let channel = EventChannel()
  let context = ClientContext(connection: channel, peer: root)
  _ = await service.handle(Request(command: .requestAuthorization), from: context)
  for line in Drive.regionRequests {
    let reply = await service.handle(try Request.parse(Array(line.utf8)), from: context)
    #expect(reply.json(id: nil).jsonString.contains(#""class":"REGION""#), "\(reply.json(id: nil).jsonString)")
  }
  _ = await service.handle(try Request.parse(Array(#"{"cmd":"watch"}"#.utf8)), from: context)
  let expected = Drive.eventsPerPass * passes
  var controlled = 0
  // A hang guard, not a timing assertion: the replay takes no wall time.
  for _ in 0..<60_000 {
    let count = channel.events("REGION").count
    if let controls, controlled < count {
      try await controls(backend, count)
      controlled = count
    }
    if count >= expected { break }
    if passes == 1, channel.events("BACKEND").contains(where: { $0["state"] == "endOfData" }) { break }
    try await Task.sleep(for: .milliseconds(1))
  }
  await service.shutdown(reason: "test")
  return channel.events("REGION")
}

/// What must agree between passes with shifted timestamps: the region, the event, the deciding
/// fix's log line and the event's time relative to the pass's first event.
private func signature(_ events: [JSONValue]) -> [String] {
  let base = events.first.flatMap { time($0) } ?? 0
  return events.map {
    "\($0["region"]?.stringValue ?? "?") \($0["event"]?.stringValue ?? "?") line \($0["fix"]?["line"]?.intValue ?? -1) +\((time($0) ?? 0) - base) ms"
  }
}

/// The event's `time` (ISO 8601 UTC with milliseconds) in milliseconds since 1970.
private func time(_ event: JSONValue) -> Int64? {
  guard let text = event["time"]?.stringValue else { return nil }
  let formatter = ISO8601DateFormatter()
  formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
  return formatter.date(from: text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
}

@Suite("Regions on the source's timeline", .serialized, .timeLimit(.minutes(5)))
struct RegionTimelineTests {
  @Test("a recorded drive gives the same REGION events at speeds 0, 1, 10 and 1000, original and shifted")
  func sameEventsAtAnySpeed() async throws {
    let reference = try await replayDrive(speed: 0, timestamps: .original)
    #expect(reference.map { "\($0["region"]?.stringValue ?? "") \($0["event"]?.stringValue ?? "")" } == [
      "a enter", "a exit", "b enter", "b dwell", "b exit", "p enter", "p exit",
    ])
    // The dwell fires 20 s of log time after the entry, at that instant of the log.
    let enterB = try #require(reference.first { $0["region"] == "b" && $0["event"] == "enter" })
    let dwellB = try #require(reference.first { $0["region"] == "b" && $0["event"] == "dwell" })
    #expect(try #require(time(dwellB)) - (try #require(time(enterB))) == 20_000)
    // Times are the log's (original timestamps).
    let first = try #require(time(reference[0]))
    #expect(first > Drive.start && first < Drive.start + 120_000)
    for speed in [1.0, 10, 1000] {
      let events = try await replayDrive(speed: speed, timestamps: .original)
      #expect(events.map(\.jsonString) == reference.map(\.jsonString), "speed \(speed)")
    }
    let shiftedReference = try await replayDrive(speed: 0, timestamps: .shifted)
    #expect(signature(shiftedReference) == signature(reference))
    for speed in [1.0, 10, 1000] {
      let events = try await replayDrive(speed: speed, timestamps: .shifted)
      #expect(events.map(\.jsonString) == shiftedReference.map(\.jsonString), "shifted, speed \(speed)")
    }
  }

  @Test("a log whose times jump back gives the same events with original and shifted timestamps")
  func aLogThatJumpsBack() async throws {
    // After leaving circle a, the log repeats the 40 s through it (times jump back 40 s and more).
    var fixes = Drive.fixes
    let exitA = 110
    fixes.insert(contentsOf: Array(Drive.fixes[60..<100]), at: exitA)
    let original = try await replayDrive(speed: 0, timestamps: .original, fixes: fixes)
    let shifted = try await replayDrive(speed: 10, timestamps: .shifted, fixes: fixes)
    #expect(original.map { "\($0["region"]?.stringValue ?? "") \($0["event"]?.stringValue ?? "")" } == [
      "a enter", "a exit", "b enter", "b dwell", "b exit", "p enter", "p exit",
    ])
    #expect(signature(shifted) == signature(original))
  }

  @Test("a looped replay gives the same events on every pass", arguments: [ReplayTimestamps.original, .shifted])
  func everyPassOfALoop(timestamps: ReplayTimestamps) async throws {
    let events = try await replayDrive(speed: 10, timestamps: timestamps, passes: 3)
    #expect(events.count == 3 * Drive.eventsPerPass)
    let passes = stride(from: 0, to: events.count, by: Drive.eventsPerPass).map {
      Array(events[$0..<min($0 + Drive.eventsPerPass, events.count)])
    }
    for pass in passes.dropFirst() {
      if timestamps == .original {
        #expect(pass.map(\.jsonString) == passes[0].map(\.jsonString))
      } else {
        #expect(signature(pass) == signature(passes[0]))
      }
    }
  }

  @Test("a pause, a seek back and forward to the same place, and speed changes change no event")
  func controlsInTheMiddle() async throws {
    let reference = try await replayDrive(speed: 10, timestamps: .original)
    let controlled = try await replayDrive(speed: 10, timestamps: .original) { replay, count in
      // After each event: pause, seek back 30 s and forward again to where the replay stood,
      // change the speed, resume.
      guard replay.isRunning else { return }
      let position = try await replay.perform(.pause).logOffsetMilliseconds ?? 0
      _ = try await replay.perform(.seek(.offset(.milliseconds(max(0, position - 30_000)))))
      _ = try await replay.perform(.seek(.offset(.milliseconds(position))))
      _ = try await replay.perform(.speed(count % 2 == 0 ? 1000 : 3))
      _ = try await replay.perform(.resume)
    }
    #expect(controlled.map(\.jsonString) == reference.map(\.jsonString))
  }

  @Test("a region confirmed outside without an event shows outside on the map")
  func outsideWithoutAnEventReachesTheMap() async throws {
    let clock = VirtualClock(wallOrigin: 1_790_000_000_000)
    let backend = FakeBackend()
    let map = MapStateService()
    let service = LocationService(
      manager: LocationManager(backend: backend), map: map, backend: backend,
      authority: AuthorizationAuthority(Authorizer(groupName: nil)), regions: RegionService(clock: clock))
    await service.start()
    let channel = EventChannel()
    let context = ClientContext(connection: channel, peer: root)
    _ = await service.handle(Request(command: .requestAuthorization), from: context)
    _ = await service.handle(try Request.parse(Array(Drive.regionRequests[0].utf8)), from: context)
    _ = await service.handle(try Request.parse(Array(#"{"cmd":"watch"}"#.utf8)), from: context)
    #expect(await eventually { backend.isRunning })
    let far = Drive.coordinate(east: -3000)
    for _ in 0..<2 {
      clock.advance(by: .seconds(1))
      backend.send(fix: TestFixes.fix(latitude: far.latitude, longitude: far.longitude, time: clock.wallTimeMilliseconds))
    }
    #expect(await eventually { await map.geoJSON().contains(#""state":"outside""#) })
    let state = await service.handle(
      try Request.parse(Array(#"{"cmd":"region","action":"state","region":"a"}"#.utf8)), from: context
    ).json(id: nil)
    #expect(state["region"]?["state"] == "outside")
    #expect(state["region"]?["measured"]?.stringValue == GPSDJSON.iso8601(milliseconds: clock.wallTimeMilliseconds))
    #expect(channel.events("REGION").isEmpty)
    await service.shutdown(reason: "test")
  }
}
