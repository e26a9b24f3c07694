import Foundation
import Glibc
import Testing

extension EndToEnd {
  /// One timeline per source and one daemon per state directory, through the real binaries: a
  /// recorded drive tests geofences at any speed; a second daemon on the same state directory is
  /// refused.
  @Suite("End to end: the source's timeline and the state directory's owner")
  struct TimelineEndToEndTests {
    /// An NMEA 0183 log of a drive east along 48.8566 N at 10 m/s, RMC and GGA once a second from
    /// 2019-05-01T12:00:00Z, from 300 m west of 2.3522 E to 1,200 m east of it: it crosses a
    /// circle of 100 m around (48.8566, 2.3522 + 500 m) and ends outside.
    static func driveLog() -> String {
      let latitude = 48.8566
      let metresPerDegree = 111_320 * cos(latitude * .pi / 180)
      var text = ""
      for second in 0..<151 {
        let east = -300.0 + Double(second) * 10
        let longitude = 2.3522 + east / metresPerDegree
        let time = String(format: "12%02d%02d.00", second / 60, second % 60)
        let lat = String(format: "%02d%08.5f", Int(latitude), (latitude - Double(Int(latitude))) * 60)
        let lon = String(format: "%03d%08.5f", Int(longitude), (longitude - Double(Int(longitude))) * 60)
        text += sentence("GPRMC,\(time),A,\(lat),N,\(lon),E,19.438,90.0,010519,,,A")
        text += sentence("GPGGA,\(time),\(lat),N,\(lon),E,1,09,0.9,35.0,M,47.0,M,,")
      }
      return text
    }

    static func sentence(_ body: String) -> String {
      let checksum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
      return "$" + body + String(format: "*%02X\r\n", checksum)
    }

    static let circle = ["region", "add", "a", "circle", "48.8566", String(2.3522 + 500 / (111_320 * cos(48.8566 * .pi / 180))), "100"]

    /// Runs the drive with `query` on the replay URI and returns the REGION events `watch` saw
    /// once `count` of them arrived (or the replay ended).
    func regionEvents(query: String, count: Int) async throws -> [JSONObject] {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.driveLog().write(toFile: log, atomically: true, encoding: .utf8)
      let daemon = try DaemonProcess(scratch: scratch, backend: "replay:\(log)?paused=true&\(query)")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let added = try await locationctl(daemon.socketPath, Self.circle)
      #expect(added.status == 0, "\(added.stderr)")
      let out = scratch.file("watch.out")
      let watch = try Child(
        try Products.path("locationctl"), ["--socket", daemon.socketPath, "--json", "watch"], stdout: out,
        stderr: scratch.file("watch.err"))
      defer {
        kill(watch.pid, SIGTERM)
        _ = watch.waitForExitBlocking(timeout: 5)
      }
      func lines() -> [JSONObject] {
        ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n")
          .compactMap { parseObject(String($0)) }
      }
      // The replay starts paused: resumed once the watch has started it, so no fix is missed.
      #expect(
        await waitUntil(timeout: 60) {
          lines().contains { $0["class"] as? String == "BACKEND" && $0["state"] as? String == "paused" }
        }, "\(lines())")
      let resumed = try await locationctl(daemon.socketPath, ["replay", "resume"])
      #expect(resumed.status == 0, "\(resumed.stderr)")
      func regions() -> [JSONObject] { lines().filter { $0["class"] as? String == "REGION" } }
      _ = await waitUntil(timeout: 120) {
        regions().count >= count
          || lines().contains { $0["class"] as? String == "BACKEND" && $0["state"] as? String == "endOfData" }
      }
      let state = try await locationctl(daemon.socketPath, ["region", "state", "a"])
      #expect(((parseObject(state.stdout)?["region"] as? JSONObject)?["state"] as? String) == "outside", "\(state.stdout)")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
      return regions()
    }

    @Test(
      "a recorded drive fires enter and exit at speed 0 with original timestamps, at speed 20 shifted, and on two passes at speed 40",
      .timeLimit(.minutes(5)))
    func recordedDriveAtAnySpeed() async throws {
      let original = try await regionEvents(query: "speed=0", count: 2)
      #expect(original.map { $0["event"] as? String } == ["enter", "exit"], "\(original)")
      // The log's own times: 2019, not now.
      #expect(original.allSatisfy { ($0["time"] as? String)?.hasPrefix("2019-05-01T12:") == true }, "\(original)")
      let shifted = try await regionEvents(query: "speed=20&timestamps=shifted", count: 2)
      #expect(shifted.map { $0["event"] as? String } == ["enter", "exit"], "\(shifted)")
      let looped = try await regionEvents(query: "speed=40&loop=true", count: 4)
      #expect(looped.prefix(4).map { $0["event"] as? String } == ["enter", "exit", "enter", "exit"], "\(looped)")
      // Each pass decides at the same fixes of the log.
      let times = looped.prefix(4).map { $0["time"] as? String }
      #expect(times.count == 4 && times[0] == times[2] && times[1] == times[3], "\(times)")
      #expect(original.map { $0["time"] as? String } == Array(times.prefix(2)))
    }

    @Test("a second daemon on the same state directory exits 73 naming the first's PID; after kill -9 a new one starts",
      .timeLimit(.minutes(3)))
    func oneDaemonPerStateDirectory() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let first = try DaemonProcess(scratch: scratch, backend: "simulate", name: "first")
      defer { first.cleanUp() }
      try await first.waitUntilReady()
      let second = try DaemonProcess(
        scratch: scratch, backend: "simulate", name: "second", socketPath: scratch.file("second.sock"),
        stateDirectory: first.stateDirectory)
      defer { second.cleanUp() }
      #expect(await second.waitForExit(timeout: 30) == 73, "\(second.log)")
      #expect(second.log.contains("process \(first.pid) holds"), "\(second.log)")
      #expect(second.log.contains("another locationd uses this state directory"), "\(second.log)")
      #expect(!FileManager.default.fileExists(atPath: scratch.file("second.sock")))
      // The first daemon still serves.
      #expect(try await locationctl(first.socketPath, ["status"]).status == 0)
      first.signal(SIGKILL)
      _ = await first.waitForExit(timeout: 10)
      let third = try DaemonProcess(
        scratch: scratch, backend: "simulate", name: "third", socketPath: scratch.file("third.sock"),
        stateDirectory: first.stateDirectory)
      defer { third.cleanUp() }
      try await third.waitUntilReady()
      #expect(await third.stop() == 0, "\(third.log)")
    }
  }
}
