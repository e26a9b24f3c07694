import Foundation
import Glibc
import LocationClient
import LocationTestKit
import Testing

extension EndToEnd {
  /// LocationClient against a real locationd (simulated and replay backends): authorization,
  /// who tracks, cancellation, one-shot fixes, the map, a restart, a silent daemon.
  @Suite("End to end: LocationClient", .timeLimit(.minutes(3)))
  struct LocationClientEndToEndTests {
    /// Whether the daemon's backend runs, asked by a client of its own.
    static func backendActive(_ socket: String) async throws -> Bool {
      try await LocationClient(socketPath: socket, timeout: .seconds(20)).status().backendActive
    }

    @Test(
      "authorization: uid 65534 outside the group is denied, inside it authorized (location-map --once)"
    )
    func authorizationRefusedAndGranted() async throws {
      try requireNobodyClient(python: false)
      let tool = try Products.path("location-map")
      for (group, expected, status) in [
        ("daemon", "denied", Int32(1)), ("nogroup", "authorized", Int32(0)),
      ] {
        let scratch = try Scratch(mode: 0o755)
        defer { scratch.remove() }
        let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10", group: group)
        defer { daemon.cleanUp() }
        try await daemon.waitUntilReady()
        // Authorization is by SO_PEERCRED; the file mode only decides who can connect at all.
        chmod(daemon.socketPath, 0o666)
        let run = try await runAsNobody([tool, "--socket", daemon.socketPath, "--once"])
        #expect(run.status == status, "\(group): \(run)")
        #expect(run.lines.first == "authorization: \(expected)", "\(group): \(run.stdout)")
        #expect(daemon.log.contains("uid=65534 status=\(expected)"), "\(daemon.log)")
        #expect(await daemon.stop() == 0, "\(daemon.log)")
      }
    }

    @Test(
      "the backend runs while anyone tracks: a user's start, an iterated locationUpdates; breaking the loop stops it"
    )
    func trackingIsCountedAndBreakingStops() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let socket = daemon.socketPath
      let first = LocationClient(socketPath: socket, timeout: .seconds(20))
      let second = LocationClient(socketPath: socket, timeout: .seconds(20))
      #expect(try await first.requestAuthorization() == .authorized)
      #expect(try await second.requestAuthorization() == .authorized)
      #expect(try await Self.backendActive(socket) == false)

      // The second client iterates; the first starts and stops the user's tracking meanwhile.
      let (started, signal) = AsyncStream<Void>.makeStream()
      let (proceed, release) = AsyncStream<Void>.makeStream()
      let consumer = Task {
        var count = 0
        var waiting = proceed.makeAsyncIterator()
        for try await location in second.locationUpdates {
          #expect(location.fix.coordinate != nil)
          count += 1
          if count == 1 {
            signal.yield()
            _ = await waiting.next()
          }
          if count == 3 { break }
        }
        return count
      }
      var startedIterator = started.makeAsyncIterator()
      _ = await startedIterator.next()
      #expect(try await Self.backendActive(socket))
      #expect(try await first.currentLocation != nil)
      try await first.startTracking()
      try await first.stopTracking()
      // The user's stop ends the user's start, not the other connection's iteration.
      #expect(try await Self.backendActive(socket))
      release.yield()
      #expect(try await consumer.value == 3)
      #expect(
        try await waitUntil(timeout: 30) { try await !Self.backendActive(socket) },
        "tracking outlived the loop that was left")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "requestLocation starts the backend for one fix when nobody tracks, and leaves another tracker running"
    )
    func requestLocationWithAndWithoutAnotherTracker() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let socket = daemon.socketPath
      let client = LocationClient(socketPath: socket, timeout: .seconds(20))
      #expect(try await client.requestAuthorization() == .authorized)
      #expect(try await client.currentLocation == nil)
      let location = try await client.requestLocation(timeout: .seconds(30))
      let coordinate = try #require(location.fix.coordinate)
      #expect((-90...90).contains(coordinate.latitude) && location.provenance.isSimulated)
      #expect(
        try await waitUntil(timeout: 30) { try await !Self.backendActive(socket) },
        "the one-shot request left the backend running")

      try await client.startTracking()
      _ = try await client.requestLocation(timeout: .seconds(30))
      #expect(
        try await Self.backendActive(socket), "the one-shot request stopped the user's tracking")
      let status = try await client.status()
      #expect(status.tracking && status.currentLocation != nil && status.initialLocation != nil)
      try await client.stopTracking()
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "map changes arrive as a sequence; an annotation with the same identifier replaces the first")
    func mapChangesAndAnnotationReplacement() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let client = LocationClient(socketPath: daemon.socketPath, timeout: .seconds(20))
      #expect(try await client.requestAuthorization() == .authorized)
      let (watching, ready) = AsyncStream<Void>.makeStream()
      let changes = Task {
        var seen: [String] = []
        var last: MapStateSnapshot?
        for try await map in client.mapChanges {
          if seen.isEmpty { ready.yield() }
          seen += map.changes
          last = map
          if seen.contains("annotationReplaced") { break }
        }
        return (seen, last)
      }
      var signal = watching.makeAsyncIterator()
      // The first MAP event comes with the watch (tracking starts); then the changes asked for.
      _ = await signal.next()
      let home = Coordinate(latitude: 48.1372, longitude: 11.5761)
      var map = try await client.addAnnotation(identifier: "home", coordinate: home, title: "Home")
      #expect(map.annotations.filter { $0.id == "home" }.map(\.title) == ["Home"])
      map = try await client.addAnnotation(
        identifier: "home", coordinate: Coordinate(latitude: 48.2, longitude: 11.6),
        title: "New home")
      #expect(map.annotations.filter { $0.id == "home" }.map(\.title) == ["New home"])
      let (seen, last) = try await changes.value
      #expect(seen.contains("annotationAdded") && seen.contains("annotationReplaced"), "\(seen)")
      #expect(
        last?.annotations.filter { $0.id == "home" }.map(\.coordinate) == [
          Coordinate(latitude: 48.2, longitude: 11.6)
        ])
      let state = try await client.mapState
      #expect(state.annotations.filter { $0.id == "home" }.count == 1)
      map = try await client.setZoom(12)
      #expect(map.zoom == 12)
      map = try await client.center(on: home)
      #expect(map.center == home && map.mode == .none)
      try await client.removeAnnotation(identifier: "home")
      do {
        try await client.removeAnnotation(identifier: "home")
        Issue.record("a second remove succeeded")
      } catch let error as LocationClientError {
        #expect(error.code == .notFound)
      }
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "a daemon restart mid-stream (a clean stop, or SIGKILL: no SHUTDOWN and a stale socket file): the sequence resumes, initialLocation is the new run's",
      arguments: [false, true])
    func restartMidStream(killed: Bool) async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try EndToEnd.CommandLineEndToEndTests.writeLog(log)
      var daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10", name: "first")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let socket = daemon.socketPath
      let client = LocationClient(socketPath: socket, timeout: .seconds(20))
      #expect(try await client.requestAuthorization() == .authorized)
      let (firstFix, signal) = AsyncStream<Void>.makeStream()
      let consumer = Task {
        var backends: [String] = []
        for try await location in client.locationUpdates {
          if backends.isEmpty { signal.yield() }
          if backends.last != location.provenance.backend {
            backends.append(location.provenance.backend)
          }
          if location.provenance.backend.hasPrefix("replay:") { break }
        }
        return backends
      }
      var fixes = firstFix.makeAsyncIterator()
      _ = await fixes.next()
      #expect(try await client.initialLocation?.provenance.backend.hasPrefix("simulate") == true)
      if killed {
        daemon.signal(SIGKILL)
        #expect(await daemon.waitForExit() != nil)
      } else {
        #expect(await daemon.stop() == 0, "\(daemon.log)")
      }
      daemon = try DaemonProcess(
        scratch: scratch, backend: "replay:\(log)?speed=10&loop=true", name: "second",
        socketPath: socket)
      try await daemon.waitUntilReady()
      let backends = try await consumer.value
      #expect(backends.count == 2 && backends.last?.hasPrefix("replay:") == true, "\(backends)")
      // The command connection ended with the first daemon: the client reopens it and asks for
      // authorization again by itself.
      try await client.startTracking()
      #expect(
        try await waitUntil(timeout: 30) { try await client.initialLocation != nil },
        "no initial location")
      let initial = try await client.initialLocation
      #expect(initial?.provenance.backend.hasPrefix("replay:") == true)
      try await client.stopTracking()
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "a daemon that accepts but never answers, or never accepts: timedOut after the client's timeout"
    )
    func silentDaemonTimesOut() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let listener = try ClientTimeoutTests.SilentListener(path: scratch.file("s.sock"))
      let client = LocationClient(socketPath: listener.path, timeout: .milliseconds(500))
      for attempt in 0..<2 {
        if attempt == 1 { try listener.fillQueue() }
        do {
          _ = try await client.status()
          Issue.record("a silent daemon answered")
        } catch let error as LocationClientError {
          #expect(error.code == .timedOut, "\(error)")
        }
      }
      do {
        for try await _ in client.locationUpdates {}
        Issue.record("updates from a silent daemon")
      } catch let error as LocationClientError {
        #expect(error.code == .timedOut, "\(error)")
      }
      let missing = LocationClient(socketPath: scratch.file("none.sock"), timeout: .seconds(1))
      do {
        _ = try await missing.requestAuthorization()
        Issue.record("no daemon, yet an answer")
      } catch let error as LocationClientError {
        #expect(
          error.code == .noDaemon && error.message.contains("is locationd running?"), "\(error)")
      }
      withExtendedLifetime(listener) {}
    }
  }
}

extension EndToEnd.LocationClientEndToEndTests {
  @Test(
    "regions: a circle around the device gives enter on regionEvents, state inside, and can be removed"
  )
  func regionEventsAndState() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    let client = LocationClient(socketPath: daemon.socketPath, timeout: .seconds(20))
    #expect(try await client.requestAuthorization() == .authorized)
    let here = try #require(try await client.requestLocation(timeout: .seconds(30)).fix.coordinate)
    let events = Task { () -> RegionEvent? in
      for try await event in client.regionEvents where event.identifier == "here" { return event }
      return nil
    }
    // The region is added once the sequence watches, so that its first decision reaches it.
    #expect(
      try await waitUntil(timeout: 30) {
        try await client.status().json["userTracking"]?["watches"]?.intValue == 1
      }, "regionEvents does not watch")
    try await client.monitor(
      Region(id: "here", title: "Here", shape: .circle(center: here, radius: 2000)))
    let event = try #require(try await events.value, "no region event")
    #expect(event.kind == .enter)
    #expect(event.location.fix.coordinate != nil)
    #expect(try await client.state(of: "here") == .inside)
    try await client.stopMonitoring(identifier: "here")
    do {
      _ = try await client.state(of: "here")
      Issue.record("a removed region still has a state")
    } catch let error as LocationClientError {
      #expect(error.code == .notFound)
    }
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }
}

extension EndToEnd.LocationClientEndToEndTests {
  @Test(
    "location-map on a real daemon: the initial fix centres the map once, later fixes move only the current coordinate"
  )
  func locationMapCentresOnceInNone() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    let run = try await runTool(
      try Products.path("location-map"), ["--socket", daemon.socketPath, "--fixes", "5"],
      timeout: 60)
    #expect(run.status == 0, "\(run)")
    let states = run.lines.filter { $0.hasPrefix("initial: ") }
    let centres = run.lines.filter { $0.hasPrefix("map: centre ") }
    #expect(states.count >= 5, "\(run.stdout)")
    #expect(centres.count == 1, "the map moved after the initial fix: \(run.stdout)")
    // Every line names the same initial coordinate and centre; the current one moves.
    let initials = Set(states.map { $0.components(separatedBy: "  current: ")[0] })
    let centreTexts = Set(states.map { $0.components(separatedBy: "  centre: ").last ?? "" })
    let currents = Set(
      states.map {
        $0.components(separatedBy: "  current: ").last?.components(separatedBy: "  centre: ")[0]
          ?? ""
      })
    #expect(initials.count == 1 && centreTexts.count == 1, "\(states)")
    #expect(currents.count > 1, "the current coordinate did not move: \(states)")
    #expect(
      initials.first.map { "initial: " + (centreTexts.first ?? "") == $0 } == true,
      "the centre is not the initial fix: \(states)")
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }
}

extension EndToEnd.LocationClientEndToEndTests {
  @Test(
    "location-map at its keys: after r and s, each fix is printed as it comes while standard input is idle"
  )
  func locationMapPrintsWhileWaitingForKeys() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let daemon = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10")
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()
    let keys = scratch.file("keys")
    try #require(mkfifo(keys, 0o600) == 0)
    let output = scratch.file("out")
    let child = try Child(
      try Products.path("location-map"), ["--socket", daemon.socketPath], stdin: keys, stdout: output,
      stderr: output)
    // The keys' writing end stays open, so standard input is idle after "s" until "q".
    let writer = open(keys, O_WRONLY)
    try #require(writer >= 0)
    defer { if writer >= 0 { close(writer) } }
    _ = "r\ns\n".withCString { write(writer, $0, strlen($0)) }
    func currents() -> Set<String> {
      let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
      return Set(
        text.split(separator: "\n").filter { $0.hasPrefix("initial: ") }.compactMap {
          $0.components(separatedBy: "  current: ").last?.components(separatedBy: "  centre: ").first
        })
    }
    // Three different current coordinates printed without another key.
    let moved = try await waitUntil(timeout: 60) { currents().count >= 3 }
    #expect(moved, "\((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
    _ = "q\n".withCString { write(writer, $0, strlen($0)) }
    #expect(await child.waitForExit(timeout: 30) == 0)
    #expect(await daemon.stop() == 0, "\(daemon.log)")
  }
}
