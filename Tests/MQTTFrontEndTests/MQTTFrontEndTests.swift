import Glibc
import LocationModel
import MQTTFrontEnd
import MapState
import OwnTracks
import Testing
import TrackStore

@Suite("MQTT front-end parts")
struct MQTTFrontEndTests {
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

  @Test("backoff doubles from 1 s to at most mqtt-reconnect-max (default 5 s) and starts again after a success")
  func backoff() throws {
    var backoff = Backoff()
    let delays = (0..<7).map { _ in backoff.next() }
    #expect(delays == [1, 2, 4, 5, 5, 5, 5])
    backoff.reset()
    #expect(backoff.next() == 1)
    // The setting: a broker back after an outage is found within that many seconds.
    var settings: MQTTSettings?
    try MQTTSettings.apply("mqtt", "mqtt://127.0.0.1", to: &settings)
    #expect(settings?.reconnectMaximum == 5)
    try MQTTSettings.apply("mqtt-reconnect-max", "60", to: &settings)
    var long = Backoff(maximum: try #require(settings).reconnectMaximum)
    #expect((0..<8).map { _ in long.next() } == [1, 2, 4, 8, 16, 32, 60, 60])
    #expect(throws: MQTTSettingError.self) { try MQTTSettings.apply("mqtt-reconnect-max", "0", to: &settings) }
    #expect(throws: MQTTSettingError.self) { try MQTTSettings.apply("mqtt-reconnect-max", "3601", to: &settings) }
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
      id: "fleet:owntracks/bob/phone", coordinate: Coordinate(latitude: 1, longitude: 2), title: "AB",
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
    #expect(offline?.kind == "owntracks-offline")
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
    // The id is "fleet:" and the topic: at most 256 bytes of UTF-8 (TextRules), however few
    // characters they are, and at most 4 combining marks on a character.
    let fits = "owntracks/" + String(repeating: "x", count: Annotation.maxIdentifierBytes - 16)
    #expect(roster.receive(at(now, 1), topic: fits, at: now)?.id.utf8.count == Annotation.maxIdentifierBytes)
    let long = "owntracks/" + String(repeating: "x", count: Annotation.maxIdentifierBytes - 15)
    #expect(roster.receive(at(now, 1), topic: long, at: now) == nil)
    // 22 characters of 6,022 bytes (the topic of the report): refused, never an id `remove` refuses later.
    let heavy = "owntracks/" + String(repeating: "\u{1F600}", count: 11) + String(repeating: "a\u{0301}", count: 1)
      + String(repeating: "\u{0301}", count: 2990)
    #expect(heavy.utf8.count > 6000)
    #expect(roster.receive(at(now, 1), topic: heavy, at: now) == nil)
    let accents = "owntracks/e" + String(repeating: "\u{0301}", count: 5) + "/x"
    #expect(accents.utf8.count < 40)
    #expect(roster.receive(at(now, 1), topic: accents, at: now) == nil)
    #expect(roster.topicRefused == 3)
  }

  @Test("fleet roster: stale and offline updates count against the 56 KiB cap, which never grows past it")
  func rosterCapCountsEveryUpdate() throws {
    var roster = FleetRoster(staleAfter: 60, ownTopic: "owntracks/me/here")
    let now: Int64 = 1_700_000_000
    // Devices with long topics, as many as the cap admits (the report's 437 devices).
    var shown: [String: Annotation] = [:]
    for device in 0..<437 {
      let topic = "owntracks/" + String(repeating: "u", count: 70) + "/device-\(device)"
      let location = OwnTracksLocation(latitude: 1, longitude: 2, timestamp: now, trackerID: "T\(device % 100)")
      if let annotation = roster.receive(.location(location), topic: topic, at: now) { shown[annotation.id] = annotation }
    }
    #expect(roster.capacityRefused > 0, "the test fills the cap")
    func textBytes() -> Int { shown.values.reduce(0) { $0 + $1.textByteCount } }
    #expect(textBytes() <= FleetRoster.maxTextBytes)
    // Every device goes silent: each one turns stale, and the fleet's text stays within the cap.
    for annotation in roster.expire(at: now + 61) { shown[annotation.id] = annotation }
    #expect(shown.values.allSatisfy { $0.kind == FleetRoster.staleKind }, "a device stayed live")
    #expect(textBytes() <= FleetRoster.maxTextBytes, "stale updates grew the fleet to \(textBytes()) bytes")
    // Then each one's Last Will: offline, still within the cap.
    for id in Array(shown.keys) {
      let topic = String(id.dropFirst(Annotation.fleetPrefix.count))
      let received = roster.receive(.lastWill(OwnTracksLastWill(timestamp: now + 70)), topic: topic, at: now + 70)
      let offline = try #require(received)
      shown[id] = offline
    }
    #expect(shown.values.allSatisfy { $0.kind == FleetRoster.offlineKind })
    #expect(textBytes() <= FleetRoster.maxTextBytes, "offline updates grew the fleet to \(textBytes()) bytes")
    #expect(roster.textBytes <= FleetRoster.maxTextBytes && roster.textBytes >= textBytes())
    // A known device whose report would pass the cap (a longer tid) is refused and keeps its place.
    let full = roster.textBytes
    let refused = roster.capacityRefused
    if let (id, _) = shown.first, FleetRoster.maxTextBytes - full < 6 {
      let topic = String(id.dropFirst(Annotation.fleetPrefix.count))
      let longer = OwnTracksLocation(latitude: 3, longitude: 4, timestamp: now + 80, trackerID: "ABCDEFGH")
      #expect(roster.receive(.location(longer), topic: topic, at: now + 80) == nil)
      #expect(roster.capacityRefused == refused + 1)
    }
  }

  @Test("fleet and user share the map: a full fleet gone stale leaves the user's 100 annotations and 8 KiB")
  func userShareIsReserved() async throws {
    let map = MapStateService()
    var roster = FleetRoster(staleAfter: 60, ownTopic: "owntracks/me/here")
    let now: Int64 = 1_700_000_000
    var batch: [Annotation] = []
    for device in 0..<1000 {
      let location = OwnTracksLocation(latitude: 1, longitude: 2, timestamp: now, trackerID: "T\(device % 100)")
      let topic = "owntracks/" + String(repeating: "u", count: 40) + "/d\(device)"
      if let annotation = roster.receive(.location(location), topic: topic, at: now) { batch.append(annotation) }
    }
    #expect(await map.addAnnotations(batch).isEmpty)
    #expect(await map.addAnnotations(roster.expire(at: now + 61)).isEmpty, "the map refused stale updates")
    // The user's share: 32 small annotations (the report's test) and more, up to 100 and 8 KiB.
    var accepted = 0
    for index in 0..<100 {
      let text = String(repeating: "n", count: 70) + String(index + 100)
      let annotation = Annotation(id: "u\(index + 100)", coordinate: Coordinate(latitude: 0, longitude: 0), title: text)
      if (try? await map.addAnnotation(annotation)) != nil { accepted += 1 }
    }
    #expect(accepted == 100)
    #expect(await map.annotations.count == batch.count + 100)
  }

  @Test("the fleet's ids live in their own namespace: a user's annotation with a device's topic as id stays")
  func fleetNamespace() async throws {
    let map = MapStateService()
    let mine = Annotation(id: "owntracks/bob/phone", coordinate: Coordinate(latitude: 5, longitude: 6), title: "Mine")
    try await map.addAnnotation(mine)
    var roster = FleetRoster(staleAfter: 60, ownTopic: "owntracks/me/here")
    let received = roster.receive(
      .location(OwnTracksLocation(latitude: 1, longitude: 2, timestamp: 1000, trackerID: "BO")), topic: "owntracks/bob/phone",
      at: 1000)
    let device = try #require(received)
    #expect(device.id == "fleet:owntracks/bob/phone")
    #expect(Annotation.isFleetIdentifier(device.id) && !Annotation.isFleetIdentifier(mine.id))
    #expect(await map.addAnnotations([device]).isEmpty)
    let annotations = await map.annotations
    #expect(annotations.first { $0.id == "owntracks/bob/phone" } == mine)
    #expect(annotations.count == 2)
  }

  @Test("a retained location on an anonymous connection is warned about at start; with credentials or without retain it is not")
  func anonymousRetainWarning() throws {
    var settings: MQTTSettings?
    try MQTTSettings.apply("mqtt", "mqtt://127.0.0.1", to: &settings)
    try MQTTSettings.apply("mqtt-topic", "owntracks/alice/car", to: &settings)
    let retained = try #require(settings)
    let warning = try #require(retained.anonymousRetainWarning(hasCredentials: false))
    #expect(warning.contains("anonymous") && warning.contains("owntracks/alice/car") && warning.contains("mqtt-credentials"))
    #expect(retained.anonymousRetainWarning(hasCredentials: true) == nil)
    try MQTTSettings.apply("mqtt-retain", "off", to: &settings)
    #expect(try #require(settings).anonymousRetainWarning(hasCredentials: false) == nil)
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
    // Short topics (each device counted at 63 bytes or less) reach the device cap first.
    for device in 0..<1000 { _ = roster.receive(location, topic: "o/d\(device)", at: 1000) }
    #expect(roster.count == FleetRoster.maxDevices)
    #expect(roster.capacityRefused == 100)
    // The map's limits (docs/map.md): 1000 annotations, 64 KiB of text.
    #expect(FleetRoster.maxDevices <= 1000 - 100 && FleetRoster.maxTextBytes <= 64 * 1024 - 8 * 1024)
    // A known device still updates; a new one is still refused.
    #expect(roster.receive(location, topic: "o/d0", at: 1001) != nil)
    #expect(roster.receive(location, topic: "o/new", at: 1001) == nil)
    // Long topics fill the text cap before the device cap.
    var long = FleetRoster(staleAfter: 600, ownTopic: "owntracks/me/here")
    let prefix = "owntracks/" + String(repeating: "u", count: 100) + "/"
    for device in 0..<900 { _ = long.receive(location, topic: prefix + "d\(device)", at: 1000) }
    #expect(long.textBytes <= FleetRoster.maxTextBytes)
    #expect(long.count < 900 && long.capacityRefused == 900 - long.count)
  }
}
