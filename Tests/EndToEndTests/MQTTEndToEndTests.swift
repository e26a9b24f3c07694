import Foundation
import Glibc
import LocationTestKit
import Testing

extension EndToEnd {
  /// The MQTT front-end against a real Mosquitto on a private port: what `mosquitto_sub` sees,
  /// store-and-forward across a broker outage, the Last Will, the fleet view, and failures.
  @Suite("End to end: OwnTracks over MQTT", .serialized)
  struct MQTTEndToEndTests {
    /// A `mosquitto_sub` writing one payload per line to `scratch/NAME.out`, returned once its
    /// subscription is in place: it also subscribes to `probe/NAME`, where a retained `ready` waits,
    /// and both topics are subscribed in one request. ``lines(_:)`` leaves `ready` out.
    static func subscriber(
      _ broker: PrivateMosquitto, _ scratch: Scratch, name: String, topic: String, count: Int? = nil,
      persistent: Bool = false, verbose: Bool = false
    ) async throws -> (Child, String) {
      let out = scratch.file(name + ".out")
      let probe = try await runTool(
        "/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(broker.port), "-t", "probe/" + name, "-r", "-q", "1", "-m", "ready"])
      try #require(probe.status == 0, "mosquitto_pub: \(probe.stderr)")
      var arguments = ["-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", topic, "-t", "probe/" + name, "-i", name]
      if persistent { arguments.append("-c") }
      if verbose { arguments.append("-v") }
      if let count { arguments += ["-C", String(count + 1)] }
      let child = try Child("/usr/bin/mosquitto_sub", arguments, stdout: out, stderr: scratch.file(name + ".err"))
      let deadline = now() + 30
      while now() < deadline {
        if ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("ready") { return (child, out) }
        await pause(0.01)
      }
      throw E2EError("\(name) did not subscribe")
    }

    static func lines(_ path: String) -> [String] {
      ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init).filter { $0 != "ready" }
    }

    static func waitForLines(_ path: String, count: Int, timeout: Double = 60) async -> [String] {
      let deadline = now() + timeout
      while now() < deadline {
        let lines = lines(path)
        if lines.count >= count { return lines }
        await pause(0.02)
      }
      return lines(path)
    }

    /// What locationd must publish for a decoded TPV (docs/mqtt.md's mapping), or `nil` for a
    /// TPV without a position or time.
    static func expectedMessage(_ tpv: JSONObject, tid: String) -> JSONObject? {
      guard let mode = tpv["mode"] as? Int, mode >= 2, let lat = tpv["lat"] as? Double, let lon = tpv["lon"] as? Double,
        let time = tpv["time"] as? String
      else { return nil }
      let formatter = ISO8601DateFormatter()
      formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
      guard let date = formatter.date(from: time) else { return nil }
      var message: JSONObject = [
        "_type": "location", "tid": tid, "tst": Int(date.timeIntervalSince1970.rounded(.down)), "lat": lat, "lon": lon,
        "t": "t",
      ]
      if let eph = tpv["eph"] as? Double { message["acc"] = Int(eph.rounded()) }
      if mode == 3, let alt = tpv["altMSL"] as? Double { message["alt"] = Int(alt.rounded()) }
      if let speed = tpv["speed"] as? Double { message["vel"] = Int((speed * 3.6).rounded()) }
      if let track = tpv["track"] as? Double { message["cog"] = Int(track.rounded()) % 360 }
      return message
    }

    /// The first member that differs, comparing coordinates to 7 decimals.
    static func difference(_ received: JSONObject, _ expected: JSONObject) -> String? {
      guard Set(received.keys) == Set(expected.keys) else {
        return "members \(received.keys.sorted()) instead of \(expected.keys.sorted())"
      }
      for (key, value) in expected {
        if key == "lat" || key == "lon" {
          guard let got = received[key] as? Double, let want = value as? Double, abs(got - want) < 5e-8 else {
            return "\(key) \(received[key] ?? "nil") instead of \(value)"
          }
        } else if !jsonEqual(received[key], value) {
          return "\(key) \(received[key] ?? "nil") instead of \(value)"
        }
      }
      return nil
    }

    @Test("every published message is an OwnTracks location, checked field by field with mosquitto_sub", .timeLimit(.minutes(3)))
    func fieldByField() async throws {
      guard let log = try corpusLog("nmea-rtk.log") else { return }
      let expected = try await decodedFixes(log).compactMap { Self.expectedMessage($0, tid: "rt") }
      try #require(expected.count > 50)
      let scratch = try Scratch()
      defer { scratch.remove() }
      let broker = try PrivateMosquitto()
      try await broker.start()
      defer { broker.stop() }
      let topic = "owntracks/test/rtk"
      let (subscriber, out) = try await Self.subscriber(broker, scratch, name: "fields", topic: topic, count: expected.count)
      defer { kill(subscriber.pid, SIGKILL) }
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "replay:\(log)?speed=0&gaps=skip",
        extra: ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", topic, "--mqtt-tid", "rt", "--mqtt-catch-up-rate", "100000"])
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let lines = await Self.waitForLines(out, count: expected.count)
      #expect(lines.count == expected.count, "received \(lines.count) of \(expected.count):\n\(daemon.log)")
      for (index, (line, want)) in zip(lines, expected).enumerated() {
        guard let received = parseObject(line) else {
          Issue.record("message \(index) is not JSON: \(line)")
          continue
        }
        if let difference = Self.difference(received, want) {
          Issue.record("message \(index): \(difference)\n\(line)")
          break
        }
      }
      #expect(daemon.log.contains("locationd: mqtt uri=mqtt://127.0.0.1:\(broker.port) state=connected"))
      // The front-end tracks as a client of the service: status shows the backend active and
      // the front-end among the clients, with no socket client tracking.
      let status = try await locationctl(daemon.socketPath, ["status"])
      let object = try #require(parseObject(status.stdout), "\(status.stdout) \(status.stderr)")
      #expect(object["backendActive"] as? Bool == true, "\(status.stdout)")
      #expect((object["clients"] as? Int ?? 0) >= 2, "the MQTT front-end and this status client: \(status.stdout)")
      await daemon.stop()
    }

    /// `count` epochs of RMC and GGA, one per second from 2026-03-01T00:00:00Z, moving north.
    static func writeLog(_ path: String, count: Int) throws {
      func checksum(_ body: String) -> String {
        let value = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
        return String(format: "%02X", value)
      }
      var text = "# Receiver: none (generated for a test)\n"
      for index in 0..<count {
        let time = String(format: "%02d%02d%02d.00", index / 3600, index / 60 % 60, index % 60)
        let minutes = 8.0 + Double(index) * 0.0006
        let lat = String(format: "03%08.5f", minutes)
        let rmc = "GPRMC,\(time),A,\(lat),N,10136.26400,E,2.0,0.0,010326,,,A"
        let gga = "GPGGA,\(time),\(lat),N,10136.26400,E,1,08,0.9,60.0,M,7.0,M,,"
        text += "$\(rmc)*\(checksum(rmc))\r\n$\(gga)*\(checksum(gga))\r\n"
      }
      try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test(
      "10,000 fixes at speed 0 with the broker stopped for part of the run all arrive, in order, after it returns",
      .timeLimit(.minutes(5)))
    func storeAndForward() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.writeLog(log, count: 10_000)
      let broker = try PrivateMosquitto(persistent: true)
      try await broker.start()
      defer { broker.stop() }
      let topic = "owntracks/test/outage"
      let (first, firstOut) = try await Self.subscriber(broker, scratch, name: "outage", topic: topic, persistent: true)
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "replay:\(log)?speed=0&paused=true",
        extra: ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", topic, "--mqtt-catch-up-rate", "100000"])
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      try await daemon.waitForLog("state=connected")
      let step = try await locationctl(daemon.socketPath, ["replay", "step", "3000"])
      try #require(step.status == 0, "\(step.stderr)")
      let before = await Self.waitForLines(firstOut, count: 3000)
      try #require(before.count >= 3000, "only \(before.count) before the outage:\n\(daemon.log)")
      // The broker goes away (saving the subscriber's session); the rest of the drive is queued.
      broker.stop()
      kill(first.pid, SIGKILL)
      _ = await first.waitForExit(timeout: 10)
      try await daemon.waitForLog("state=failed")
      let rest = try await locationctl(daemon.socketPath, ["replay", "step", "7000"])
      try #require(rest.status == 0, "\(rest.stderr)")
      try await broker.start()
      let secondOut = scratch.file("outage-2.out")
      let second = try Child(
        "/usr/bin/mosquitto_sub",
        ["-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", topic, "-t", "probe/outage", "-i", "outage", "-c"],
        stdout: secondOut, stderr: scratch.file("outage-2.err"))
      defer { kill(second.pid, SIGKILL) }
      let deadline = now() + 120
      var received: [String] = []
      var distinct = Set<Int>()
      while now() < deadline {
        received = Self.lines(firstOut) + Self.lines(secondOut)
        distinct = Set(received.compactMap { parseObject($0)?["tst"] as? Int })
        if distinct.count >= 10_000 { break }
        await pause(0.05)
      }
      let start = 1_772_323_200  // 2026-03-01T00:00:00Z
      #expect(distinct.count == 10_000, "\(distinct.count) distinct fixes arrived:\n\(daemon.log)")
      // In order: the first arrival of each fix follows the drive; a repeat (QoS 1 is at least
      // once: a message in flight when the broker stopped is sent again) is one already seen.
      var next = start
      var repeats = 0
      var outOfOrder: String?
      for line in received {
        guard let tst = parseObject(line)?["tst"] as? Int else { continue }
        if tst == next {
          next += 1
        } else if tst < next {
          repeats += 1
        } else if outOfOrder == nil {
          outOfOrder = "fix \(tst - start) arrived before fix \(next - start)"
        }
      }
      #expect(outOfOrder == nil, "\(outOfOrder ?? "")")
      #expect(next == start + 10_000)
      #expect(repeats <= 64, "\(repeats) repeats: at most the unacknowledged window is sent again")
      await daemon.stop()
    }

    @Test(
      "fixes queued while the broker is down survive kill -9 of locationd and are delivered, in order, by the next locationd",
      .timeLimit(.minutes(3)))
    func queueSurvivesKill() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.writeLog(log, count: 500)
      let broker = try PrivateMosquitto()  // not started yet: the broker is down
      defer { broker.stop() }
      let topic = "owntracks/test/durable"
      let extra = ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", topic, "--mqtt-catch-up-rate", "100000"]
      let first = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?speed=0&paused=true", extra: extra, name: "first")
      defer { first.cleanUp() }
      try await first.waitUntilReady()
      try await first.waitForLog("state=failed")
      // A lossless watcher: the hub hands each fix to the MQTT front-end (client 1, which queues
      // it at once) before this later client, so when the watcher has the last fix every fix
      // is in the queue.
      let watcher = try LineClient(path: first.socketPath)
      defer { watcher.close() }
      try await watcher.authorizeAndWatch(coalesce: false)
      let step = try await locationctl(first.socketPath, ["replay", "step", "500"])
      try #require(step.status == 0, "\(step.stderr)")
      var seen = 0
      while seen < 500, let event = try await watcher.nextEvent(timeout: 60) {
        if event["class"] as? String == "TPV" { seen += 1 }
      }
      try #require(seen == 500, "the watcher saw \(seen) fixes")
      // The front-end hands each message to the outbox's own writer (no disk I/O on the fix
      // path): what is in mqtt-outbox.sqlite is what survives a kill -9. Wait for all 500 there.
      let outbox = first.stateDirectory + "/mqtt-outbox.sqlite"
      let count = "import sqlite3,sys\ntry:\n print(sqlite3.connect('file:'+sys.argv[1]+'?mode=ro',uri=True).execute('select count(*) from outbox').fetchone()[0])\nexcept Exception:\n print(0)"
      #expect(
        await waitUntil(timeout: 60) {
          let run = try? runToolSync("/usr/bin/python3", ["-c", count, outbox])
          return run?.trimmingCharacters(in: .whitespacesAndNewlines) == "500"
        }, "the outbox did not reach 500 messages")
      first.signal(SIGKILL)
      _ = await first.waitForExit()
      try await broker.start()
      let (subscriber, out) = try await Self.subscriber(broker, scratch, name: "durable", topic: topic, count: 500)
      defer { kill(subscriber.pid, SIGKILL) }
      // The next daemon on the same state directory, with nothing to replay, sends the queue.
      let second = try DaemonProcess(
        scratch: scratch, backend: "replay:\(log)?speed=0&paused=true", extra: extra, name: "second")
      defer { second.cleanUp() }
      let lines = await Self.waitForLines(out, count: 500)
      let times = lines.compactMap { parseObject($0)?["tst"] as? Int }
      let start = 1_772_323_200
      #expect(times == Array(start..<(start + 500)), "\(times.count) messages; first \(times.prefix(3)):\n\(second.log)")
      await second.stop()
    }

    @Test(
      "the simulated route crossing a circle region publishes OwnTracks transitions enter then leave on TOPIC/event, not retained",
      .timeLimit(.minutes(3)))
    func regionTransitions() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let broker = try PrivateMosquitto()
      try await broker.start()
      defer { broker.stop() }
      let topic = "owntracks/test/regions"
      let (subscriber, out) = try await Self.subscriber(broker, scratch, name: "events", topic: "owntracks/+/+/event", count: 2)
      defer { kill(subscriber.pid, SIGKILL) }
      // The default loop's first leg runs east along 3.1406 N from 101.6024 E at 30 m/s; the
      // circle of 100 m lies across it, 222 m ahead (as in the region monitoring test). A fix may
      // be 60 s late and still decide, so a starved test task does not make the route's fixes stale.
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "simulate?rate=10&speed=30",
        extra: [
          "--region-maximum-fix-age", "60", "--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", topic,
          "--mqtt-tid", "rg", "--mqtt-min-interval", "3600",
        ])
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let socket = daemon.socketPath
      // The socket's REGION events, to compare the published transitions with.
      let watchOut = scratch.file("watch.out")
      let watch = try Child(
        try Products.path("locationctl"), ["--socket", socket, "--json", "watch"], stdout: watchOut,
        stderr: scratch.file("watch.err"))
      defer {
        kill(watch.pid, SIGTERM)
        _ = watch.waitForExitBlocking(timeout: 5)
      }
      let added = try await locationctl(
        socket, ["region", "add", "crossing", "circle", "3.1406", "101.6044", "100", "--title", "Crossing"])
      #expect(added.status == 0, "\(added.stderr)")
      let lines = await Self.waitForLines(out, count: 2, timeout: 90)
      try #require(lines.count >= 2, "received \(lines):\n\(daemon.log)")
      let messages = lines.prefix(2).compactMap(parseObject)
      try #require(messages.count == 2, "\(lines)")
      func regionEvents() -> [JSONObject] {
        ((try? String(contentsOfFile: watchOut, encoding: .utf8)) ?? "").split(separator: "\n")
          .compactMap { parseObject(String($0)) }.filter { $0["class"] as? String == "REGION" }
      }
      #expect(await waitUntil(timeout: 30) { regionEvents().count >= 2 }, "\(regionEvents())")
      let events = Array(regionEvents().prefix(2))
      #expect(messages.map { $0["event"] as? String } == ["enter", "leave"], "\(messages)")
      #expect(events.map { $0["event"] as? String } == ["enter", "exit"], "\(events)")
      let formatter = ISO8601DateFormatter()
      formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
      for (message, event) in zip(messages, events) {
        let fix = try #require(event["fix"] as? JSONObject)
        let time = try #require((event["time"] as? String).flatMap { formatter.date(from: $0) })
        var expected: JSONObject = [
          "_type": "transition", "tid": "rg", "wtst": 0, "tst": Int(time.timeIntervalSince1970.rounded(.down)),
          "lat": try #require(fix["lat"] as? Double), "lon": try #require(fix["lon"] as? Double),
          "event": message["event"] ?? "", "desc": "Crossing", "t": "c", "rid": "crossing",
        ]
        if let eph = fix["eph"] as? Double { expected["acc"] = Int(eph.rounded()) }
        if let difference = Self.difference(message, expected) { Issue.record("\(difference)\n\(message)") }
      }
      // Entered west of the center, left east of it.
      let enterLongitude = try #require(messages.first?["lon"] as? Double)
      let leaveLongitude = try #require(messages.last?["lon"] as? Double)
      #expect(enterLongitude < 101.6044 && leaveLongitude > 101.6044, "\(messages)")
      // Not retained: a new subscriber asking only for retained messages gets none on the event
      // topic (the location topic keeps its retained location).
      let retained = try await runTool(
        "/usr/bin/mosquitto_sub",
        ["-h", "127.0.0.1", "-p", String(broker.port), "-t", topic + "/event", "-t", topic, "--retained-only", "-v", "-W", "3"])
      let retainedTopics = retained.stdout.split(separator: "\n").map { String($0.split(separator: " ").first ?? "") }
      #expect(retainedTopics == [topic], "retained: \(retained.stdout) \(retained.stderr)")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test("kill -9 of locationd makes the broker deliver OwnTracks' Last Will", .timeLimit(.minutes(2)))
    func lastWill() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let broker = try PrivateMosquitto()
      try await broker.start()
      defer { broker.stop() }
      let topic = "owntracks/test/will"
      let (subscriber, out) = try await Self.subscriber(broker, scratch, name: "will", topic: topic)
      defer { kill(subscriber.pid, SIGKILL) }
      let started = Int(Date().timeIntervalSince1970)
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "simulate", extra: ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", topic])
      defer { daemon.cleanUp() }
      try await daemon.waitForLog("state=connected")
      let located = await Self.waitForLines(out, count: 1)
      try #require(located.first.flatMap(parseObject)?["_type"] as? String == "location")
      daemon.signal(SIGKILL)
      _ = await daemon.waitForExit()
      let deadline = now() + 30
      var will: JSONObject?
      while now() < deadline, will == nil {
        will = Self.lines(out).compactMap(parseObject).first { $0["_type"] as? String == "lwt" }
        if will == nil { await pause(0.02) }
      }
      let tst = try #require(will?["tst"] as? Int, "no lwt:\n\(Self.lines(out).suffix(3))")
      #expect(tst >= started - 1 && tst <= Int(Date().timeIntervalSince1970), "lwt tst \(tst) is not the connection time")
      #expect(will?.count == 2, "lwt has exactly _type and tst: \(String(describing: will))")
    }

    @Test(
      "fleet devices of a previous run are removed at start; the user's annotations stay",
      .timeLimit(.minutes(2)))
    func fleetOfAPreviousRunIsRemoved() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let broker = try PrivateMosquitto()
      try await broker.start()
      defer { broker.stop() }
      let pub = "/usr/bin/mosquitto_pub"
      let base = ["-h", "127.0.0.1", "-p", String(broker.port), "-r", "-t", "owntracks/dave/old"]
      _ = try await runTool(pub, base + ["-m", #"{"_type":"location","lat":52.5,"lon":13.4,"tst":1700000000,"tid":"DO"}"#])
      let extra = ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", "owntracks/bob/bike", "--mqtt-subscribe", "owntracks/+/+"]
      func ids(_ daemon: DaemonProcess) async throws -> Set<String> {
        let map = try await locationctl(daemon.socketPath, ["map"])
        return Set(((parseObject(map.stdout)?["annotations"] as? [JSONObject]) ?? []).compactMap { $0["id"] as? String })
      }
      let first = try DaemonProcess(
        scratch: scratch, backend: "simulate", extra: extra, name: "bob1", socketPath: scratch.file("bob1.sock"),
        stateDirectory: scratch.file("bob-state"))
      defer { first.cleanUp() }
      try await first.waitForLog("state=connected")
      let annotate = try await locationctl(first.socketPath, ["annotate", "home", "1", "2", "Home"])
      #expect(annotate.status == 0, "\(annotate.stderr)")
      // The user's own annotation whose id is a device's topic: the fleet's ids have their own
      // namespace, so the device never replaces it, and the next start never deletes it.
      let mine = try await locationctl(first.socketPath, ["annotate", "owntracks/dave/old", "3", "4", "Mine"])
      #expect(mine.status == 0, "\(mine.stderr)")
      let reserved = try await locationctl(first.socketPath, ["annotate", "fleet:owntracks/dave/old", "3", "4", "Mine"])
      #expect(reserved.status != 0 && reserved.stderr.contains("namespace"), "\(reserved.stderr)")
      let deadline = now() + 30
      while now() < deadline, !(try await ids(first)).contains("fleet:owntracks/dave/old") { await pause(0.05) }
      #expect(try await ids(first).isSuperset(of: ["fleet:owntracks/dave/old", "owntracks/dave/old"]), "\(first.log)")
      await first.stop()
      // Dave is gone from the broker (its retained message cleared) before the next start.
      _ = try await runTool(pub, base + ["-n"])
      let second = try DaemonProcess(
        scratch: scratch, backend: "simulate", extra: extra, name: "bob2", socketPath: scratch.file("bob2.sock"),
        stateDirectory: scratch.file("bob-state"))
      defer { second.cleanUp() }
      try await second.waitForLog("state=connected")
      let shown = try await ids(second)
      #expect(!shown.contains("fleet:owntracks/dave/old"), "\(shown)\n\(second.log)")
      #expect(shown.contains("home") && shown.contains("owntracks/dave/old"), "\(shown)")
      try await second.waitForLog("mqttFleetCleared removed=1")
      await second.stop()
    }

    @Test(
      "a second locationd subscribed to the fleet shows the first one's position; malformed, oversized and own messages are ignored",
      .timeLimit(.minutes(2)))
    func fleetView() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let broker = try PrivateMosquitto()
      try await broker.start()
      defer { broker.stop() }
      let (recorder, recorded) = try await Self.subscriber(broker, scratch, name: "first", topic: "owntracks/alice/car")
      defer { kill(recorder.pid, SIGKILL) }
      let alice = try DaemonProcess(
        scratch: scratch, backend: "simulate",
        extra: ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", "owntracks/alice/car", "--mqtt-tid", "AC"],
        name: "alice", socketPath: scratch.file("alice.sock"), stateDirectory: scratch.file("alice-state"))
      defer { alice.cleanUp() }
      let bob = try DaemonProcess(
        scratch: scratch, backend: "simulate",
        extra: [
          "--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-topic", "owntracks/bob/bike", "--mqtt-subscribe", "owntracks/+/+",
        ],
        name: "bob", socketPath: scratch.file("bob.sock"), stateDirectory: scratch.file("bob-state"))
      defer { bob.cleanUp() }
      try await bob.waitForLog("state=connected")
      try await alice.waitForLog("state=connected")
      // Malformed and oversized messages from other devices: counted, logged, not shown. Retained,
      // as devices publish them, so they reach bob whenever its subscription took effect.
      let pub = "/usr/bin/mosquitto_pub"
      let base = ["-h", "127.0.0.1", "-p", String(broker.port), "-r", "-t"]
      _ = try await runTool(pub, base + ["owntracks/mallory/x", "-m", #"{"_type":"location","lat":"north","lon":1,"tst":1}"#])
      _ = try await runTool(pub, base + ["owntracks/mallory/y", "-m", String(repeating: "x", count: 5000)])
      _ = try await runTool(
        pub, base + ["owntracks/carol/van", "-m", #"{"_type":"location","lat":52.5,"lon":13.4,"tst":1700000000,"tid":"CV"}"#])
      var annotations: [JSONObject] = []
      let deadline = now() + 30
      while now() < deadline {
        let map = try await locationctl(bob.socketPath, ["map"])
        annotations = (parseObject(map.stdout)?["annotations"] as? [JSONObject]) ?? []
        let ids = Set(annotations.compactMap { $0["id"] as? String })
        if ids.contains("fleet:owntracks/alice/car") && ids.contains("fleet:owntracks/carol/van") { break }
        await pause(0.05)
      }
      let aliceOnBob = try #require(annotations.first { $0["id"] as? String == "fleet:owntracks/alice/car" }, "\(annotations)\n\(bob.log)")
      #expect(aliceOnBob["title"] as? String == "AC")
      #expect(aliceOnBob["kind"] as? String == "owntracks")
      // The position shown is one alice published.
      let published = Self.lines(recorded).compactMap(parseObject)
      let shown = (aliceOnBob["lat"] as? Double ?? 0, aliceOnBob["lon"] as? Double ?? 0)
      #expect(
        published.contains { abs(($0["lat"] as? Double ?? 99) - shown.0) < 1e-7 && abs(($0["lon"] as? Double ?? 999) - shown.1) < 1e-7 },
        "\(shown) is not among alice's messages")
      let carol = try #require(annotations.first { $0["id"] as? String == "fleet:owntracks/carol/van" })
      #expect(carol["title"] as? String == "CV")
      #expect(carol["kind"] as? String == "owntracks-stale", "a report from 2023 is stale at once")
      let ids = annotations.compactMap { $0["id"] as? String }
      #expect(!ids.contains("fleet:owntracks/bob/bike"), "bob's own messages are not shown")
      #expect(!ids.contains("fleet:owntracks/mallory/x") && !ids.contains("fleet:owntracks/mallory/y"))
      try await bob.waitForLog("mqttMessageIgnored topic=owntracks/mallory/x reason=\"\\\"lat\\\" must be a number")
      try await bob.waitForLog("mqttMessageIgnored topic=owntracks/mallory/y reason=\"payload of 5000 bytes exceeds 4096\"")
      await alice.stop()
      await bob.stop()
    }

    @Test(
      "a refused connection, refused credentials, a bad host and a TLS failure: one clear status line each and retries with backoff",
      .timeLimit(.minutes(2)))
    func failures() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      // Nothing listens on this port.
      let closed = try PrivateGPSD.freePort()
      let refused = try DaemonProcess(
        scratch: scratch, backend: "simulate", extra: ["--mqtt", "mqtt://127.0.0.1:\(closed)"], name: "refused",
        socketPath: scratch.file("refused.sock"), stateDirectory: scratch.file("refused-state"))
      defer { refused.cleanUp() }
      try await refused.waitUntilReady()
      try await refused.waitForLog(
        "mqtt uri=mqtt://127.0.0.1:\(closed) state=failed detail=\"cannot connect to mqtt://127.0.0.1:\(closed): ")
      try await refused.waitForLog(": Connection refused; retrying in 1 s\"")
      try await refused.waitForLog(": Connection refused; retrying in 2 s\"")
      // The longest wait is mqtt-reconnect-max, 5 s by default: a broker back after an outage
      // is found within 5 s. An anonymous connection with mqtt-retain on is warned about.
      try await refused.waitForLog(": Connection refused; retrying in 4 s\"")
      try await refused.waitForLog(": Connection refused; retrying in 5 s\"")
      #expect(!refused.log.contains("retrying in 8 s"), "\(refused.log)")
      try await refused.waitForLog("mqttWarning detail=\"mqtt-retain is on and the connection is anonymous")
      let short = try DaemonProcess(
        scratch: scratch, backend: "simulate", extra: ["--mqtt", "mqtt://127.0.0.1:\(closed)", "--mqtt-reconnect-max", "2", "--mqtt-retain", "off"],
        name: "short", socketPath: scratch.file("short.sock"), stateDirectory: scratch.file("short-state"))
      defer { short.cleanUp() }
      try await short.waitForLog(": Connection refused; retrying in 2 s\"")
      let deadline = now() + 30
      while now() < deadline, short.log.components(separatedBy: "retrying in 2 s").count < 4 { await pause(0.05) }
      #expect(short.log.components(separatedBy: "retrying in 2 s").count >= 4, "\(short.log)")
      #expect(!short.log.contains("retrying in 4 s") && !short.log.contains("mqttWarning"), "\(short.log)")

      let broker = try PrivateMosquitto(users: [("alice", "right")])
      try await broker.start()
      defer { broker.stop() }
      let credentials = scratch.file("credentials")
      try "alice:wrong\n".write(toFile: credentials, atomically: true, encoding: .utf8)
      chmod(credentials, 0o600)
      let denied = try DaemonProcess(
        scratch: scratch, backend: "simulate",
        extra: ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-credentials", credentials], name: "denied",
        socketPath: scratch.file("denied.sock"), stateDirectory: scratch.file("denied-state"))
      defer { denied.cleanUp() }
      try await denied.waitForLog("state=failed detail=\"the broker refused the connection: Connection Refused: not authorised.; retrying in 1 s\"")
      try await denied.waitForLog("not authorised.; retrying in 2 s\"")

      // A group-readable credentials file is refused at start, like ssh refuses such a key.
      chmod(credentials, 0o640)
      let open = try DaemonProcess(
        scratch: scratch, backend: "simulate",
        extra: ["--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-credentials", credentials], name: "open",
        socketPath: scratch.file("open.sock"), stateDirectory: scratch.file("open-state"))
      defer { open.cleanUp() }
      #expect(await open.waitForExit() == 78)
      #expect(open.log.contains("chmod 600 \(credentials)"), "\(open.log)")

      let unknown = try DaemonProcess(
        scratch: scratch, backend: "simulate", extra: ["--mqtt", "mqtt://no-such-host.invalid"], name: "unknown",
        socketPath: scratch.file("unknown.sock"), stateDirectory: scratch.file("unknown-state"))
      defer { unknown.cleanUp() }
      try await unknown.waitForLog("state=failed detail=\"cannot connect to mqtt://no-such-host.invalid:1883: ")

      // TLS to a listener that speaks plain MQTT: the handshake fails.
      let plain = try PrivateMosquitto()
      try await plain.start()
      defer { plain.stop() }
      let tls = try DaemonProcess(
        scratch: scratch, backend: "simulate",
        extra: ["--mqtt", "mqtts://127.0.0.1:\(plain.port)", "--mqtt-ca-file", "/etc/ssl/certs/ca-certificates.crt"],
        name: "tls", socketPath: scratch.file("tls.sock"), stateDirectory: scratch.file("tls-state"))
      defer { tls.cleanUp() }
      try await tls.waitForLog(
        "mqtt uri=mqtts://127.0.0.1:\(plain.port) state=failed detail=\"cannot connect to mqtts://127.0.0.1:\(plain.port): TLS handshake failed (A TLS error occurred.): check mqtt-ca-file, the broker's certificate and its name; retrying in 1 s\"")
      try await tls.waitForLog("its name; retrying in 2 s")
      for daemon in [refused, denied, unknown, tls] { await daemon.stop() }
    }
  }
}

/// Runs a tool, waits, and returns its standard output (for polling inside `waitUntil`).
private func runToolSync(_ executable: String, _ arguments: [String]) throws -> String {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  let pipe = Pipe()
  process.standardOutput = pipe
  process.standardError = FileHandle.nullDevice
  try process.run()
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  return String(decoding: data, as: UTF8.self)
}
