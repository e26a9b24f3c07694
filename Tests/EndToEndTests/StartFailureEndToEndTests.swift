import Foundation
import Glibc
import LocationTestKit
import Testing

extension EndToEnd {
  /// Each part of the daemon made to fail its start in turn, with the parts before it running:
  /// the process exits with that part's status, at once, and leaves nothing behind (socket
  /// files, the web token, the bus name, the state directory's lock).
  @Suite("End to end: a failed start leaves nothing running", .serialized, .timeLimit(.minutes(5)))
  struct StartFailureEndToEndTests {
    /// A TCP listener on 127.0.0.1 (an occupied port for `--http`); closed by `close()`.
    struct OccupiedPort {
      let fd: Int32
      let port: UInt16

      init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(listener, pointer, length) == 0 && listen(listener, 4) == 0
              && getsockname(listener, pointer, &length) == 0
          }
        }
        guard listener >= 0, bound else {
          throw E2EError("cannot listen on 127.0.0.1: errno \(errno)")
        }
        fd = listener
        port = UInt16(bigEndian: address.sin_port)
      }

      func close() { _ = Glibc.close(fd) }
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: UInt16) -> Bool {
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      defer { close(fd) }
      var address = sockaddr_in()
      address.sin_family = sa_family_t(AF_INET)
      address.sin_addr.s_addr = inet_addr("127.0.0.1")
      address.sin_port = port.bigEndian
      return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
      }
    }

    /// Runs locationd until it exits (it must, within 30 s) with its log.
    func run(_ arguments: [String], environment: [String: String]? = nil) async throws -> ToolRun {
      try await runTool(
        try Products.path("locationd"), arguments, environment: environment, timeout: 30)
    }

    @Test(
      "a socket another daemon serves (69) or the root directory as state directory (78): refused, nothing is created"
    )
    func busySocketAndRootStateDirectory() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let first = try DaemonProcess(scratch: scratch, backend: "simulate")
      defer { first.cleanUp() }
      try await first.waitUntilReady()
      let state = scratch.file("second-state")
      let busy = try await run([
        "--socket", first.socketPath, "--state-dir", state, "--group", "", "--backend", "simulate",
      ])
      #expect(busy.status == 69, "\(busy.stderr)")
      #expect(access(state, F_OK) != 0, "the refused start left its new state directory")
      // The running daemon is untouched.
      #expect(try await locationctl(first.socketPath, ["status"]).status == 0)

      let root = try await run([
        "--socket", scratch.file("root.sock"), "--state-dir", "/", "--group", "", "--backend", "simulate",
      ])
      #expect(root.status == 78, "\(root.stderr)")
      #expect(
        root.stderr.contains(
          "cannot be used (it is the root directory): give a directory of its own, such as /var/lib/locationd"),
        "\(root.stderr)")
      #expect(access("/" + "locationd.lock", F_OK) != 0)
      #expect(await first.stop() == 0, "\(first.log)")
    }

    /// The front-end made to fail, each in a test of its own.
    enum Failing: String, CaseIterable, Sendable {
      case socket, nmeaFeed, web, geoClue, mqtt
    }

    @Test(
      "a front-end's start fails: exit with its status, the parts started before it stop, nothing is left",
      arguments: Failing.allCases)
    func frontEndFails(_ failing: Failing) async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let socket = scratch.file("l.sock")
      let nmea = scratch.file("nmea.sock")
      let state = scratch.file("state")
      let file = scratch.file("regular")
      #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
      let base = ["--state-dir", state, "--group", "", "--backend", "simulate", "--track", "all"]
      let occupied = try OccupiedPort()
      defer { occupied.close() }
      let noBus = ["DBUS_SESSION_BUS_ADDRESS": "unix:path=" + scratch.file("no-bus")]
      func gone(_ path: String) -> Bool { access(path, F_OK) != 0 }
      let webPort = try OccupiedPort()
      let freePort = webPort.port
      webPort.close()

      switch failing {
      case .socket:
        // A regular file at its path; nothing after it is created.
        let run = try await run(base + ["--socket", file, "--nmea-socket", nmea, "--http", "0"])
        #expect(run.status == 78, "\(run.stderr)")
        #expect(run.stderr.contains("is not a socket"), "\(run.stderr)")
        #expect(gone(nmea), "the NMEA socket was created after the main socket failed")
        #expect(!run.stderr.contains("httpReady"), "\(run.stderr)")
        #expect(gone(state), "the state directory this start created was left behind")
      case .nmeaFeed:
        // A regular file at its path; the main socket (bound) is removed again.
        let run = try await run(base + ["--socket", socket, "--nmea-socket", file, "--http", "0"])
        #expect(run.status == 78, "\(run.stderr)")
        #expect(run.stderr.contains("is not a socket"), "\(run.stderr)")
        #expect(gone(socket), "the main socket file was left behind")
        #expect(!run.stderr.contains("httpReady"), "\(run.stderr)")
        #expect(access(file, F_OK) == 0, "the file in the way was removed")
      case .web:
        // Its port is taken; both sockets go, no token is written.
        let run = try await run(
          base + [
            "--socket", socket, "--nmea-socket", nmea, "--http", "127.0.0.1:\(occupied.port)",
          ])
        #expect(run.status == 71, "\(run.stderr)")
        #expect(run.stderr.contains("--http 127.0.0.1:\(occupied.port)"), "\(run.stderr)")
        #expect(gone(socket) && gone(nmea), "a socket file was left behind")
        #expect(
          gone(state + "/http-token"), "the web token was written for a page that never served")
      case .geoClue:
        // The bus is not there; the web page had started and is closed again.
        let run = try await run(
          base + [
            "--socket", socket, "--nmea-socket", nmea, "--http", "127.0.0.1:\(freePort)", "--dbus",
            "session",
          ],
          environment: noBus)
        #expect(run.status == 69, "\(run.stderr)")
        #expect(
          run.stderr.contains("httpReady"),
          "the web page did not start before GeoClue: \(run.stderr)")
        #expect(gone(socket) && gone(nmea), "a socket file was left behind")
        #expect(!Self.accepts(port: freePort), "the web page still answers")
      case .mqtt:
        // Its credentials file may be read by others (mode 644), which its start refuses;
        // everything before it stops (GeoClue on a private bus when dbus-daemon is installed:
        // its name is released).
        let credentials = scratch.file("open-credentials")
        #expect(FileManager.default.createFile(atPath: credentials, contents: Data("u:p\n".utf8)))
        #expect(chmod(credentials, 0o644) == 0)
        var bus: PrivateBus?
        var environment = noBus
        var dbus: [String] = []
        if geoClueTestsEnabled, let started = try? PrivateBus() {
          _ = try await started.start()
          bus = started
          environment = started.environment()
          dbus = ["--dbus", "system"]
        }
        defer { bus?.stop() }
        let run = try await run(
          base + ["--socket", socket, "--nmea-socket", nmea, "--http", "127.0.0.1:\(freePort)"]
            + dbus + [
              "--mqtt", "mqtt://127.0.0.1:1", "--mqtt-credentials", credentials,
            ], environment: environment)
        #expect(run.status == 78, "\(run.stderr)")
        #expect(run.stderr.contains("chmod 600 \(credentials)"), "\(run.stderr)")
        // A missing one is missing input, found before anything starts.
        let missing = try await self.run(
          base + ["--socket", socket, "--mqtt", "mqtt://127.0.0.1:1", "--mqtt-credentials", scratch.file("none")],
          environment: noBus)
        #expect(missing.status == 66, "\(missing.stderr)")
        #expect(
          missing.stderr.contains("mqtt-credentials") && !missing.stderr.contains("mapState"),
          "\(missing.stderr)")
        // So is a directory where the file should be (as a --config directory is).
        let directory = try await self.run(
          base + ["--socket", socket, "--mqtt", "mqtt://127.0.0.1:1", "--mqtt-credentials", scratch.path],
          environment: noBus)
        #expect(directory.status == 66, "\(directory.stderr)")
        #expect(directory.stderr.contains("a directory: give the file"), "\(directory.stderr)")
        // And the CA certificates of an mqtts broker, missing or a directory.
        for caFile in [scratch.file("no-ca.pem"), scratch.path] {
          let noCA = try await self.run(
            base + ["--socket", socket, "--mqtt", "mqtts://127.0.0.1:1", "--mqtt-ca-file", caFile],
            environment: noBus)
          #expect(noCA.status == 66, "\(noCA.stderr)")
          #expect(noCA.stderr.contains("invalid mqtt-ca-file"), "\(noCA.stderr)")
        }
        #expect(gone(socket) && gone(nmea), "a socket file was left behind")
        #expect(!Self.accepts(port: freePort), "the web page still answers")
        if let bus, let address = bus.address {
          #expect(run.stderr.contains("dbusReady"), "\(run.stderr)")
          let owner = try await runTool(
            "/usr/bin/dbus-send",
            [
              "--bus=" + address, "--print-reply", "--dest=org.freedesktop.DBus", "/",
              "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.GeoClue2",
            ])
          #expect(owner.stdout.contains("boolean false"), "\(owner.stdout) \(owner.stderr)")
        }
      }

      // Nothing was left holding the paths or the state directory's lock: a daemon starts on them.
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "simulate",
        extra: ["--nmea-socket", nmea, "--http", "127.0.0.1:\(freePort)"],
        socketPath: socket, stateDirectory: state)
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      #expect(await daemon.stop() == 0)
      #expect(gone(socket) && gone(nmea), "a socket file was left behind after a clean stop")
    }
  }
}
