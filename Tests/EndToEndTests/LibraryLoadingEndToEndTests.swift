import Foundation
import Glibc
import Testing

extension EndToEnd {
  /// libgps, libxml2 and libsystemd are loaded with dlopen when a gpsd backend, a GPX route or
  /// `--dbus` needs them, not at start: a daemon on the simulated loop maps none of them.
  @Suite("End to end: libraries loaded on first use", .serialized)
  struct LibraryLoadingEndToEndTests {
    /// `/proc/PID/maps`, read to the end (it reports a size of 0, and a single read of it can
    /// stop early).
    static func maps(_ pid: Int32) -> String {
      let fd = open("/proc/\(pid)/maps", O_RDONLY)
      guard fd >= 0 else { return "" }
      defer { close(fd) }
      var bytes: [UInt8] = []
      var chunk = [UInt8](repeating: 0, count: 65_536)
      while true {
        let count = read(fd, &chunk, chunk.count)
        guard count > 0 else { break }
        bytes += chunk[0..<count]
      }
      return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether a shared object whose file name starts with `name` is mapped into `pid`.
    static func mapped(_ pid: Int32, _ name: String) -> Bool {
      maps(pid).split(separator: "\n").contains { line in
        line.split(separator: "/").last.map { $0.hasPrefix(name) } ?? false
      }
    }

    @Test(
      "the simulated loop maps neither libgps nor libxml2; a GPX route maps libxml2; gpsd:// maps libgps",
      .timeLimit(.minutes(3)))
    func librariesOnFirstUse() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }

      // Built-in loop, tracking: nothing to load.
      let plain = try DaemonProcess(scratch: scratch, backend: "simulate?rate=10", name: "plain")
      defer { plain.cleanUp() }
      try await plain.waitUntilReady()
      let start = try await locationctl(plain.socketPath, ["start"])
      #expect(start.status == 0, "\(start.stderr)")
      #expect(
        try await waitUntil(timeout: 30) {
          try await TrackingEndToEndTests.status(plain.socketPath)["current"] is JSONObject
        })
      #expect(!Self.mapped(plain.pid, "libgps.so"), "libgps mapped by the simulated loop")
      #expect(!Self.mapped(plain.pid, "libxml2.so"), "libxml2 mapped by the simulated loop")
      #expect(!Self.mapped(plain.pid, "libsystemd.so"), "libsystemd mapped without --dbus")
      #expect(!Self.mapped(plain.pid, "libmicrohttpd.so"), "libmicrohttpd mapped without --http")
      await plain.stop()

      // A GPX route: read with libxml2 when the backend is made; fixes follow the route.
      let route = scratch.file("route.gpx")
      try """
      <?xml version="1.0" encoding="UTF-8"?>
      <gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">
        <rte><rtept lat="48.8584" lon="2.2945"/><rtept lat="48.8606" lon="2.3376"/></rte>
      </gpx>
      """.write(toFile: route, atomically: true, encoding: .utf8)
      let gpx = try DaemonProcess(
        scratch: scratch, backend: "simulate:\(route)?rate=10", name: "gpx",
        socketPath: scratch.file("gpx.sock"), stateDirectory: scratch.file("gpx-state"))
      defer { gpx.cleanUp() }
      try await gpx.waitUntilReady()
      #expect(Self.mapped(gpx.pid, "libxml2.so"), "libxml2 not mapped with a GPX route")
      #expect(!Self.mapped(gpx.pid, "libgps.so"))
      #expect(try await locationctl(gpx.socketPath, ["start"]).status == 0)
      var current: JSONObject?
      #expect(
        try await waitUntil(timeout: 30) {
          current = try await TrackingEndToEndTests.status(gpx.socketPath)["current"] as? JSONObject
          return current != nil
        })
      let lat = current?["lat"] as? Double ?? 0
      let lon = current?["lon"] as? Double ?? 0
      #expect(
        (48.85...48.87).contains(lat) && (2.29...2.34).contains(lon),
        "fix \(lat), \(lon) is not on the GPX route")
      await gpx.stop()

      // gpsd:// loads libgps when tracking starts, even with nothing listening.
      let gpsd = try DaemonProcess(
        scratch: scratch, backend: "gpsd://127.0.0.1:1", name: "gpsd",
        socketPath: scratch.file("gpsd.sock"), stateDirectory: scratch.file("gpsd-state"))
      defer { gpsd.cleanUp() }
      try await gpsd.waitUntilReady()
      #expect(!Self.mapped(gpsd.pid, "libgps.so"), "libgps mapped before any tracking")
      let tracking = try await locationctl(gpsd.socketPath, ["start"])
      #expect(tracking.status == 0, "\(tracking.stderr)")
      let loaded = await waitUntil(timeout: 30) { Self.mapped(gpsd.pid, "libgps.so") }
      let status = try await TrackingEndToEndTests.status(gpsd.socketPath)
      #expect(loaded, "libgps not mapped while tracking gpsd://: \(status)")
      await gpsd.stop()
    }

    @Test("--http maps libmicrohttpd, writes a 0600 token and locationctl web prints the URL with it")
    func httpFrontEnd() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let web = try DaemonProcess(
        scratch: scratch, backend: "simulate?rate=10", extra: ["--http", "127.0.0.1:0", "--http-tiles", "none"],
        name: "web")
      defer { web.cleanUp() }
      try await web.waitUntilReady()
      #expect(Self.mapped(web.pid, "libmicrohttpd.so"), "libmicrohttpd not mapped with --http")
      var info = stat()
      #expect(stat(web.stateDirectory + "/http-token", &info) == 0)
      #expect(info.st_mode & 0o777 == 0o600)
      let token = try String(contentsOfFile: web.stateDirectory + "/http-token", encoding: .utf8)
        .trimmingCharacters(in: .whitespacesAndNewlines)
      #expect(token.count == 64)
      let printed = try await locationctl(web.socketPath, ["web"])
      #expect(printed.status == 0, "\(printed.stderr)")
      let reply = try JSONSerialization.jsonObject(with: Data(printed.stdout.utf8)) as? [String: Any]
      let url = reply?["url"] as? String ?? ""
      #expect(url.hasPrefix("http://127.0.0.1:"), "\(printed.stdout)")
      #expect(url.hasSuffix("/#token=" + token), "\(printed.stdout)")
      await web.stop()
    }
  }
}
