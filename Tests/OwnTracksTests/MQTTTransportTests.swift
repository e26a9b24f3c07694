import Glibc
import LocationModel
import MQTTTransport
import OwnTracks
import Testing
import TrackStore

@Suite("MQTT front-end parts")
struct MQTTTransportTests {
  @Test("broker URIs: scheme, default ports, IPv6, and no credentials on the command line")
  func brokerAddress() throws {
    #expect(try MQTTBrokerAddress(uri: "mqtt://broker.example").description == "mqtt://broker.example:1883")
    #expect(try MQTTBrokerAddress(uri: "mqtts://broker.example").description == "mqtts://broker.example:8883")
    #expect(try MQTTBrokerAddress(uri: "mqtt://[::1]:1884").description == "mqtt://[::1]:1884")
    for bad in ["tcp://h", "mqtt://", "mqtt://h:0", "mqtt://h:70000", "mqtt://user:pw@h", "mqtt://h/path"] {
      #expect(throws: MQTTSettingError.self, "\(bad)") { try MQTTBrokerAddress(uri: bad) }
    }
  }

  @Test("settings keys: ranges checked, the broker needed first")
  func settings() throws {
    var settings: MQTTSettings?
    #expect(throws: MQTTSettingError.self) { try MQTTSettings.apply("mqtt-qos", "1", to: &settings) }
    try MQTTSettings.apply("mqtt", "mqtt://127.0.0.1:1883", to: &settings)
    try MQTTSettings.apply("mqtt-topic", "owntracks/alice/car", to: &settings)
    try MQTTSettings.apply("mqtt-subscribe", "owntracks/+/+", to: &settings)
    try MQTTSettings.apply("mqtt-retain", "off", to: &settings)
    #expect(settings?.effectiveTopic == "owntracks/alice/car")
    #expect(settings?.effectiveTrackerID == "ca")
    #expect(settings?.retain == false)
    #expect(settings?.qos == 1)
    for (key, value) in [
      ("mqtt-qos", "2"), ("mqtt-topic", "owntracks/+/x"), ("mqtt-subscribe", "owntracks/#/x"),
      ("mqtt-subscribe", "owntracks/a+"), ("mqtt-keepalive", "1"), ("mqtt-credentials", "relative"),
    ] {
      #expect(throws: MQTTSettingError.self, "\(key) \(value)") { try MQTTSettings.apply(key, value, to: &settings) }
    }
  }

  @Test("the default client id follows the topic: two daemons on one host do not share one")
  func defaultClientID() throws {
    var first: MQTTSettings?
    var second: MQTTSettings?
    try MQTTSettings.apply("mqtt", "mqtt://127.0.0.1:1883", to: &first)
    try MQTTSettings.apply("mqtt", "mqtt://127.0.0.1:1883", to: &second)
    try MQTTSettings.apply("mqtt-topic", "owntracks/alice/car", to: &first)
    try MQTTSettings.apply("mqtt-topic", "owntracks/alice/van", to: &second)
    #expect(first?.effectiveClientID == "locationd-alice-car")
    #expect(second?.effectiveClientID == "locationd-alice-van")
    try MQTTSettings.apply("mqtt-client-id", "mine", to: &second)
    #expect(second?.effectiveClientID == "mine")
    // Too long, or characters outside letters and digits: a hash of the whole topic, 23 bytes at most.
    let topics = [
      "owntracks/alexandria/delivery-van-12", "owntracks/alexandria/delivery-van-13", "owntracks/a-b/c",
      "owntracks/a/b-c", "fleet/owntracks/alice/car", "owntracks/ü/x",
    ]
    let ids = topics.map(MQTTSettings.defaultClientID(topic:))
    #expect(Set(ids).count == topics.count, "\(ids)")
    for id in ids {
      #expect(id.utf8.count <= 23, "\(id)")
      #expect(id.hasPrefix("locationd-"))
      #expect(id.utf8.allSatisfy { $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) || (0x41...0x5a).contains($0) })
    }
    #expect(ids[0].hasPrefix("locationd-deli-"))
  }

  @Test("credentials files are refused when group or others may read them, like ssh keys")
  func credentialsFileMode() throws {
    let path = "/tmp/locationd-credentials-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    defer { unlink(path) }
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
    try #require(fd >= 0)
    _ = "alice:s3cr:et\n".withCString { write(fd, $0, 14) }
    close(fd)
    #expect(try MQTTCredentials.read(path: path) == MQTTCredentials(user: "alice", password: "s3cr:et"))
    chmod(path, 0o640)
    #expect(throws: MQTTSettingError.self) { try MQTTCredentials.read(path: path) }
    chmod(path, 0o604)
    do {
      _ = try MQTTCredentials.read(path: path)
      Issue.record("a world-readable file was accepted")
    } catch {
      #expect(error.reason.contains("chmod 600"), "\(error)")
    }
  }

  @Test("backoff doubles from 1 s to at most 60 s and starts again after a success")
  func backoff() {
    var backoff = Backoff()
    let delays = (0..<9).map { _ in backoff.next() }
    #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60])
    backoff.reset()
    #expect(backoff.next() == 1)
  }

  @Test("the catch-up rate: a burst, then tokens at the rate on a virtual clock")
  func rateLimiter() {
    var limiter = RateLimiter(rate: 100)
    #expect(limiter.available(now: 0) == 10)
    limiter.take(10)
    #expect(limiter.available(now: 0.05) == 5)
    limiter.take(5)
    #expect(limiter.available(now: 10) == 10)  // capped at the burst
  }

  @Test("the in-memory queue keeps order, removes through a sequence and drops the oldest at its bound")
  func memoryOutbox() throws {
    let outbox = MemoryOutbox(limit: 3)
    for index in 1...5 { try outbox.append(topic: "t", payload: [UInt8(index)], retain: index % 2 == 0) }
    #expect(outbox.count == 3)
    #expect(try outbox.oldest(after: nil, limit: 10).map(\.retain) == [false, true, false])
    #expect(outbox.droppedCount == 2)
    #expect(try outbox.oldest(after: nil, limit: 10).map(\.payload) == [[3], [4], [5]])
    #expect(try outbox.oldest(after: 3, limit: 10).map(\.sequence) == [4, 5])
    try outbox.remove(through: 4)
    #expect(try outbox.oldest(after: nil, limit: 10).map(\.payload) == [[5]])
  }

  @Test("the durable queue keeps each message's retain flag across a reopen of the store")
  func trackStoreOutboxRetain() throws {
    var template = Array("/tmp/locationd-outbox-XXXXXX".utf8CString)
    let created = template.withUnsafeMutableBufferPointer { buffer -> String? in
      guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return nil }
      return String(cString: result)
    }
    let directory = try #require(created)
    defer {
      for name in ["track.sqlite", "track.sqlite-wal", "track.sqlite-shm"] { unlink(directory + "/" + name) }
      rmdir(directory)
    }
    do {
      let outbox = TrackStoreOutbox(store: try TrackStore(path: directory + "/track.sqlite"), qos: 1)
      try outbox.append(topic: "owntracks/a/b", payload: Array("L".utf8), retain: true)
      try outbox.append(topic: "owntracks/a/b/event", payload: Array("T".utf8), retain: false)
    }
    let reopened = TrackStoreOutbox(store: try TrackStore(path: directory + "/track.sqlite"), qos: 1)
    let messages = try reopened.oldest(after: nil, limit: 10)
    #expect(messages.map(\.topic) == ["owntracks/a/b", "owntracks/a/b/event"])
    #expect(messages.map(\.retain) == [true, false])
  }

  @Test("fleet roster: id from the topic, title from tid, own topic ignored, stale after the configured time")
  func roster() {
    var roster = FleetRoster(staleAfter: 60, ownTopic: "owntracks/me/here")
    let location = OwnTracksLocation(latitude: 1, longitude: 2, timestamp: 1000, trackerID: "AB")
    #expect(roster.receive(.location(location), topic: "owntracks/me/here", at: 1000) == nil)
    let annotation = roster.receive(.location(location), topic: "owntracks/bob/phone", at: 1001)
    #expect(annotation == Annotation(
      id: "owntracks/bob/phone", coordinate: Coordinate(latitude: 1, longitude: 2), title: "AB",
      subtitle: "1970-01-01T00:16:40Z", kind: "owntracks"))
    #expect(roster.expire(at: 1060).isEmpty)
    let stale = roster.expire(at: 1061)
    #expect(stale.map(\.kind) == ["owntracks-stale"])
    #expect(stale.first?.subtitle == "stale 1970-01-01T00:16:40Z")
    #expect(roster.expire(at: 2000).isEmpty, "marked once")
    // An older message than the one shown changes nothing; a Last Will marks it offline.
    #expect(roster.receive(.location(OwnTracksLocation(latitude: 5, longitude: 5, timestamp: 999)), topic: "owntracks/bob/phone", at: 2000) == nil)
    let offline = roster.receive(.lastWill(OwnTracksLastWill(timestamp: 1500)), topic: "owntracks/bob/phone", at: 2000)
    #expect(offline?.subtitle == "offline 1970-01-01T00:25:00Z")
    #expect(offline?.kind == "owntracks-stale")
    // Without tid the title is the device level of the topic.
    let untitled = roster.receive(
      .location(OwnTracksLocation(latitude: 0, longitude: 0, timestamp: 2000)), topic: "owntracks/carol/bike", at: 2000)
    #expect(untitled?.title == "bike")
  }

  @Test("fleet roster: a future tst is refused and never freezes the device; long topics are counted")
  func rosterFutureTimestamps() {
    var roster = FleetRoster(staleAfter: 600, ownTopic: "owntracks/me/here")
    let now: Int64 = 1_700_000_000
    func at(_ tst: Int64, _ lat: Double) -> OwnTracksMessage {
      .location(OwnTracksLocation(latitude: lat, longitude: 0, timestamp: tst))
    }
    #expect(roster.receive(at(now - 10, 1), topic: "owntracks/bob/phone", at: now) != nil)
    #expect(roster.receive(at(now + 3600, 2), topic: "owntracks/bob/phone", at: now) == nil)
    #expect(roster.receive(at(99_999_999_999, 3), topic: "owntracks/bob/phone", at: now) == nil)
    #expect(roster.futureRefused == 2)
    // The genuine report after them is shown.
    let genuine = roster.receive(at(now + 5, 4), topic: "owntracks/bob/phone", at: now + 5)
    #expect(genuine?.coordinate.latitude == 4)
    // Within the tolerance: accepted.
    #expect(roster.receive(at(now + 5 + FleetRoster.futureTolerance, 5), topic: "owntracks/bob/phone", at: now + 5) != nil)
    // A Last Will from the future shows the clock's time, not its own.
    let offline = roster.receive(.lastWill(OwnTracksLastWill(timestamp: 99_999_999_999)), topic: "owntracks/bob/phone", at: now + 600)
    #expect(offline?.subtitle == "offline 2023-11-14T22:23:20Z")
    let long = "owntracks/" + String(repeating: "x", count: Annotation.maxIdentifierLength)
    #expect(roster.receive(at(now, 1), topic: long, at: now) == nil)
    #expect(roster.topicRefused == 1)
  }

  @Test("the limiter starts again when the fix time steps backwards")
  func limiterBackwardsStep() {
    var limiter = PublishLimiter(minimumInterval: 10)
    func at(_ t: Int64) -> OwnTracksLocation { OwnTracksLocation(latitude: 0, longitude: 0, timestamp: t) }
    // A replay looping back to its start, then going on from there.
    let admitted = [at(1000), at(1010), at(100), at(105), at(110), at(120)].map { limiter.admit($0) }
    #expect(admitted == [true, true, true, false, true, true])
  }

  @Test("fleet roster: its own cap below the map's limits leaves room for the user's annotations")
  func rosterCapacity() {
    var roster = FleetRoster(staleAfter: 600, ownTopic: "owntracks/me/here")
    let location = OwnTracksMessage.location(OwnTracksLocation(latitude: 1, longitude: 2, timestamp: 1000, trackerID: "AB"))
    for device in 0..<1000 { _ = roster.receive(location, topic: "owntracks/user/d\(device)", at: 1000) }
    #expect(roster.count == FleetRoster.maxDevices)
    #expect(roster.capacityRefused == 100)
    // The map's limits (docs/map.md): 1000 annotations, 64 KiB of text.
    #expect(FleetRoster.maxDevices <= 1000 - 100 && FleetRoster.maxTextBytes <= 64 * 1024 - 8 * 1024)
    // A known device still updates; a new one is still refused.
    #expect(roster.receive(location, topic: "owntracks/user/d0", at: 1001) != nil)
    #expect(roster.receive(location, topic: "owntracks/user/new", at: 1001) == nil)
    // Long topics fill the text cap before the device cap.
    var long = FleetRoster(staleAfter: 600, ownTopic: "owntracks/me/here")
    let prefix = "owntracks/" + String(repeating: "u", count: 100) + "/"
    for device in 0..<900 { _ = long.receive(location, topic: prefix + "d\(device)", at: 1000) }
    #expect(long.textBytes <= FleetRoster.maxTextBytes)
    #expect(long.count < 900 && long.capacityRefused == 900 - long.count)
  }
}
