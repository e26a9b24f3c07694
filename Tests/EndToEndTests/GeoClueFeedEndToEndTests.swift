import Foundation
import Glibc
import LocationTestKit
import Testing

/// Debian's stock GeoClue 2.6 (`geoclue-2.0`) fed by locationd's NMEA socket, asked by Debian's
/// unmodified `where-am-i` (`geoclue-2-demo`), all on a private bus.
///
/// GeoClue reads its configuration only from `/etc/geoclue/geoclue.conf` (no option names
/// another file), so it runs in a private mount namespace (`unshare --mount`) where the test's
/// file is bind-mounted over that path; the system's file is never touched. The test file enables
/// only `[network-nmea]` with `nmea-socket=` locationd's socket. GeoClue 2.6 completes a client's
/// `GetClient`/`CreateClient` only once an agent for the client's user has registered (a client
/// waits for one forever otherwise), so Debian's demo agent (`geoclue-demo-agent`, whitelisted)
/// runs too; `where-am-i` (desktop id `geoclue-where-am-i`) is configured as an allowed system
/// application, so the agent is never asked.
@Suite("End to end: a stock GeoClue fed by locationd", .serialized, .timeLimit(.minutes(3)))
struct GeoClueFeedEndToEndTests {
  static let geoclue = "/usr/libexec/geoclue"
  static let demos = "/usr/libexec/geoclue-2.0/demos"

  /// The test's geoclue.conf: the NMEA socket is the only source.
  static func configuration(nmeaSocket: String) -> String {
    """
    [agent]
    whitelist=geoclue-demo-agent

    [network-nmea]
    enable=true
    nmea-socket=\(nmeaSocket)

    [3g]
    enable=false

    [cdma]
    enable=false

    [modem-gps]
    enable=false

    [wifi]
    enable=false

    [compass]
    enable=false

    [geoclue-where-am-i]
    allowed=true
    system=true
    users=

    """
  }

  /// The (latitude, longitude) pairs where-am-i printed, in order (`Latitude:    -37.784788°`).
  static func printedLocations(_ output: String) -> [(Double, Double)] {
    var latitudes: [Double] = []
    var longitudes: [Double] = []
    for line in output.split(separator: "\n") {
      let parts = line.split(separator: " ", omittingEmptySubsequences: true)
      guard parts.count == 2, let value = Double(parts[1].replacingOccurrences(of: "°", with: ""))
      else { continue }
      if parts[0] == "Latitude:" { latitudes.append(value) }
      if parts[0] == "Longitude:" { longitudes.append(value) }
    }
    return Array(zip(latitudes, longitudes))
  }

  /// Whether `name` has an owner on the bus at `address` (dbus-send `NameHasOwner`).
  static func hasOwner(_ name: String, address: String) async throws -> Bool {
    let run = try await runTool(
      "/usr/bin/dbus-send",
      [
        "--bus=" + address, "--print-reply", "--dest=org.freedesktop.DBus", "/",
        "org.freedesktop.DBus.NameHasOwner", "string:" + name,
      ])
    return run.stdout.contains("boolean true")
  }

  @Test func whereAmIPrintsTheReplayedFixThroughGeoClue() async throws {
    for path in [
      Self.geoclue, Self.demos + "/where-am-i", Self.demos + "/agent", "/usr/bin/unshare",
      "/usr/bin/dbus-send", "/etc/geoclue/geoclue.conf",
    ] {
      try #require(access(path, F_OK) == 0, "\(path) is missing: run scripts/setup")
    }
    try #require(getuid() == 0, "needs root for a private mount namespace (unshare --mount)")
    guard let log = try corpusLog("bu353s4.log") else { return }
    let expected = try await decodedFixes(log).compactMap { fix -> (Double, Double)? in
      guard let lat = fix["lat"] as? Double, let lon = fix["lon"] as? Double else { return nil }
      return (lat, lon)
    }
    try #require(!expected.isEmpty)

    let scratch = try Scratch()
    defer { scratch.remove() }
    let bus = try PrivateBus()
    defer { bus.stop() }
    let address = try await bus.start()
    let environment = bus.environment()

    let nmeaSocket = scratch.file("nmea.sock")
    let daemon = try DaemonProcess(
      scratch: scratch, backend: "replay:" + log, extra: ["--nmea-socket", nmeaSocket])
    defer { daemon.cleanUp() }
    try await daemon.waitUntilReady()

    let configuration = scratch.file("geoclue.conf")
    try Self.configuration(nmeaSocket: nmeaSocket)
      .write(toFile: configuration, atomically: true, encoding: .utf8)
    var geoclueEnvironment = environment
    geoclueEnvironment["G_MESSAGES_DEBUG"] = "all"
    let geoclue = try Child(
      "/usr/bin/unshare",
      [
        "--mount", "--propagation", "private", "/bin/sh", "-c",
        "mount --bind \"$0\" /etc/geoclue/geoclue.conf && exec \(Self.geoclue) --timeout 0",
        configuration,
      ],
      environment: geoclueEnvironment, stdout: scratch.file("geoclue.log"),
      stderr: scratch.file("geoclue.log"))
    defer {
      kill(geoclue.pid, SIGKILL)
      _ = geoclue.waitForExitBlocking(timeout: 10)
    }
    let owned = try await waitUntil {
      try await Self.hasOwner("org.freedesktop.GeoClue2", address: address) || !geoclue.isRunning
    }
    let geoclueLog = {
      (try? String(contentsOfFile: scratch.file("geoclue.log"), encoding: .utf8)) ?? ""
    }
    try #require(owned && geoclue.isRunning, "GeoClue did not own its name:\n\(geoclueLog())")
    let agent = try Child(
      Self.demos + "/agent", [], environment: environment, stdout: scratch.file("agent.log"),
      stderr: scratch.file("agent.log"))
    defer {
      kill(agent.pid, SIGKILL)
      _ = agent.waitForExitBlocking(timeout: 10)
    }

    // Nothing reads the NMEA socket yet, so nothing tracks.
    #expect(!daemon.log.contains("nmeaReaderConnected"))
    let run = try await runTool(
      Self.demos + "/where-am-i", ["-t", "10"], environment: environment, timeout: 60)
    #expect(run.status == 0, "where-am-i: \(run.stderr)\nGeoClue:\n\(geoclueLog())")
    let printed = Self.printedLocations(run.stdout)
    try #require(
      !printed.isEmpty, "where-am-i printed no location:\n\(run.stdout)\n\(geoclueLog())")
    // where-am-i prints six decimals: each location is one of the replayed fixes at that
    // precision, and the first is the log's first fix (the replay starts when GeoClue reads).
    func matches(_ location: (Double, Double), _ fix: (Double, Double)) -> Bool {
      let precision = 0.000_000_5 + 1e-9
      return abs(location.0 - fix.0) <= precision && abs(location.1 - fix.1) <= precision
    }
    #expect(matches(printed[0], expected[0]), "first: \(printed[0]), replay: \(expected[0])")
    for location in printed {
      #expect(expected.contains { matches(location, $0) }, "\(location) is not a replayed fix")
    }
    #expect(daemon.log.contains("nmeaReaderConnected"))
    // where-am-i has gone: GeoClue stops its source and closes the socket, and the replay stops.
    #expect(try await waitUntil { daemon.log.contains("nmeaReaderDisconnected") })
    let stopped = try await waitUntil {
      let status = try await locationctl(daemon.socketPath, ["status"])
      return parseObject(status.stdout.split(separator: "\n").first.map(String.init) ?? "")?[
        "backendActive"] as? Bool == false
    }
    #expect(stopped)
    #expect(await daemon.stop() == 0)
    #expect(access(nmeaSocket, F_OK) != 0, "the NMEA socket file is left behind")
  }

  /// A socket directory others may write to is refused at start (exit status 78), before
  /// anything is created in it.
  @Test func unsafeNMEASocketDirectoryIsRefused() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let open = scratch.file("open")
    try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: false)
    chmod(open, 0o1777)
    let daemon = try DaemonProcess(
      scratch: scratch, backend: "simulate", extra: ["--nmea-socket", open + "/nmea.sock"])
    defer { daemon.cleanUp() }
    #expect(await daemon.waitForExit(timeout: 30) == 78)
    #expect(daemon.log.contains("NMEA socket directory \(open) is not safe"), "\(daemon.log)")
    #expect(access(open + "/nmea.sock", F_OK) != 0)
    #expect(access(daemon.socketPath, F_OK) != 0, "the main socket is left behind")
  }
}
