import Foundation
import Glibc
import LocationTestKit
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel

/// The built `locationctl` next to the test binary (`swift build --build-tests` builds it).
private func locationctlPath() throws -> String {
  let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent()
    .deletingLastPathComponent()
  for candidate in [
    testBinary.appendingPathComponent("locationctl").path,
    packageRoot.path + "/.build/debug/locationctl",
  ]
  where access(candidate, X_OK) == 0 {
    return candidate
  }
  throw TestError("locationctl is not built: run swift build --build-tests")
}

private struct Run {
  var status: Int32
  var stdout: String
  var stderr: String
}

private func locationctl(_ arguments: [String]) async throws -> Run {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: try locationctlPath())
  process.arguments = arguments
  let out = Pipe()
  let err = Pipe()
  process.standardOutput = out
  process.standardError = err
  try await runToExit(process)
  return Run(
    status: process.terminationStatus,
    stdout: String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
    stderr: String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
}

@Suite("locationctl", .serialized)
struct ControlClientTests {
  @Test("--json status prints one object with the documented members")
  func statusJSON() async throws {
    let fixture = try ServerFixture()
    let run = try await locationctl(["--socket", fixture.path, "--json", "status"])
    #expect(run.status == 0, "\(run.stderr)")
    let lines = run.stdout.split(separator: "\n")
    #expect(lines.count == 1)
    #expect(
      run.stdout.hasPrefix(#"{"class":"STATUS","authorization":"authorized","tracking":false,"#))
    let status = try JSONValue.parse(Array((lines.first ?? "").utf8))
    #expect(status["class"] == "STATUS")
    #expect(status["authorization"] == "authorized")
    #expect(status["tracking"] == false)
    #expect(status["backend"]?["uri"] == "simulate")
    #expect(status["backend"]?["state"] == "stopped")
    #expect(status["initial"] == .null)
    #expect(status["current"] == .null)
    #expect(status["id"] == nil)
    await fixture.stop()
  }

  @Test("decode says plainly when an input holds no NMEA sentence, and exits 1")
  func decodeNonNMEA() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let gpx = directory.path + "/route.gpx"
    let empty = directory.path + "/empty.nmea"
    let nmea = directory.path + "/one.nmea"
    _ = FileManager.default.createFile(
      atPath: gpx,
      contents: Data(#"<?xml version="1.0"?><gpx version="1.1"><wpt lat="1" lon="2"/></gpx>"#.utf8))
    _ = FileManager.default.createFile(atPath: empty, contents: Data())
    _ = FileManager.default.createFile(
      atPath: nmea,
      contents: Data(
        "$GPRMC,225446,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,E*68\r\n".utf8))
    let notNMEA = try await locationctl(["decode", gpx])
    #expect(notNMEA.status == 1 && notNMEA.stdout.isEmpty)
    #expect(notNMEA.stderr.contains("no NMEA sentences found in \(gpx)"), "\(notNMEA.stderr)")
    let nothing = try await locationctl(["decode", empty])
    #expect(nothing.status == 1)
    #expect(nothing.stderr.contains("no NMEA sentences found in \(empty) (it is empty)"))
    let one = try await locationctl(["decode", nmea])
    #expect(one.status == 0 && one.stdout.hasPrefix(#"{"class":"TPV""#), "\(one.stderr)")
    #expect(!one.stderr.contains("no NMEA"))
  }

  @Test("text output, error replies exit 1, bad usage exits 64")
  func exitStatuses() async throws {
    let fixture = try ServerFixture()
    let status = try await locationctl(["status", "--socket", fixture.path])
    #expect(status.status == 0)
    #expect(status.stdout.contains("authorization: authorized"))
    #expect(status.stdout.contains("backend: simulate (stopped)"))
    let noFix = try await locationctl(["--socket", fixture.path, "location"])
    #expect(noFix.status == 1)
    #expect(noFix.stderr.contains("noFix"))
    let zoom = try await locationctl(["--socket", fixture.path, "--json", "zoom", "30"])
    #expect(zoom.status == 1)
    #expect(try JSONValue.parse(Array(zoom.stdout.utf8.dropLast()))["code"] == "invalidArgument")
    let usage = try await locationctl(["--socket", fixture.path, "annotate", "home"])
    #expect(usage.status == 64)
    #expect(usage.stderr.contains("annotate takes ID LAT LON [TITLE]"))
    let unknown = try await locationctl(["frobnicate"])
    #expect(unknown.status == 64)
    // A page size is digits only, 1...100000, as the protocol says: nothing rounded or passed on.
    for limit in ["+3", "2.5", "0", "1e2", "100001", "-1", " 3", "٣"] {
      let list = try await locationctl(["--socket", fixture.path, "region", "list", "--limit", limit])
      #expect(list.status == 64, "--limit \(limit)")
      #expect(list.stderr.contains("--limit needs a whole number of regions from 1 to 100000"), "\(list.stderr)")
    }
    let annotate = try await locationctl([
      "--socket", fixture.path, "annotate", "home", "49.5", "-123.25", "Home",
    ])
    #expect(annotate.status == 0)
    #expect(
      fixture.handler.handled.withLock { $0 }.contains(
        .annotate(
          Annotation(
            id: "home", coordinate: .init(latitude: 49.5, longitude: -123.25), title: "Home"))))
    await fixture.stop()
  }

  @Test(
    "COMMAND --help prints that command's usage and exits 0, for every command",
    arguments: [
      "request", "start", "stop", "status", "location", "watch", "center", "zoom", "mode",
      "annotate", "remove", "map", "replay", "decode", "simulate", "track",
    ])
  func commandHelp(_ command: String) async throws {
    for flag in ["--help", "-h"] {
      let run = try await locationctl(["--socket", "/nonexistent/l.sock", command, flag])
      #expect(run.status == 0, "\(command) \(flag): \(run.stderr)")
      #expect(run.stdout.hasPrefix("usage: locationctl"), "\(command) \(flag): \(run.stdout)")
      #expect(run.stdout.contains(command), "\(command) \(flag): \(run.stdout)")
    }
  }

  @Test("-- ends the options: negative coordinates and option-like titles are operands")
  func endOfOptions() async throws {
    let fixture = try ServerFixture()
    let center = try await locationctl(["--socket", fixture.path, "center", "--", "-33", "151"])
    #expect(center.status == 0, "\(center.stderr)")
    let annotate = try await locationctl([
      "--socket", fixture.path, "annotate", "--", "x", "-33.5", "-70.25", "--json",
    ])
    #expect(annotate.status == 0, "\(annotate.stderr)")
    let handled = fixture.handler.handled.withLock { $0 }
    #expect(handled.contains(.setCenter(.init(latitude: -33, longitude: 151))))
    #expect(
      handled.contains(
        .annotate(
          Annotation(
            id: "x", coordinate: .init(latitude: -33.5, longitude: -70.25), title: "--json"))))
    // Without `--` a negative number still works where no option is expected.
    let plain = try await locationctl(["--socket", fixture.path, "center", "-34", "150"])
    #expect(plain.status == 0, "\(plain.stderr)")
    await fixture.stop()
  }

  @Test("control and bidi-override characters in error messages are printed escaped")
  func errorsAreEscaped() async throws {
    let fixture = try ServerFixture()
    // The daemon's message quotes the refused id.
    let id = "a\u{1B}[31mred\u{202E}x"
    let server = try await locationctl(["--socket", fixture.path, "region", "add", id, "circle", "48", "11", "100"])
    #expect(server.status == 1)
    #expect(server.stderr.contains("a\\x1B[31mred\\u{202E}x"), "\(server.stderr)")
    #expect(!server.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E })
    // locationctl's own message quotes the unknown command; a newline in it cannot forge a line.
    let own = try await locationctl(["--socket", fixture.path, "bad\u{1B}]0;title\u{07}\nlocationctl: ok"])
    #expect(own.status == 64)
    #expect(own.stderr.contains("bad\\x1B]0;title\\x07\\x0Alocationctl: ok"), "\(own.stderr)")
    #expect(own.stderr.split(separator: "\n").count == 2)
    #expect(!own.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 })
    await fixture.stop()
  }

  @Test("a missing socket says whether locationd runs")
  func missingSocket() async throws {
    let run = try await locationctl(["--socket", "/nonexistent/locationd.sock", "status"])
    #expect(run.status == 1)
    #expect(run.stderr.contains("does not exist: is locationd running?"))
  }

  @Test("--json watch authorizes, starts, prints events and exits 0 at end of data")
  func watch() async throws {
    let fixture = try ServerFixture()
    let process = Task { try await locationctl(["--socket", fixture.path, "--json", "watch"]) }
    #expect(await eventually { !fixture.handler.watchers.withLock { $0 }.isEmpty })
    let watcher = try #require(fixture.handler.watchers.withLock { $0.first })
    watcher.send(.location(.raw(Array(#"{"class":"TPV","mode":3,"lat":49.5,"lon":-123.25}"#.utf8))))
    watcher.send(.backend(uri: "replay:/x.nmea", state: .endOfData, detail: nil))
    let run = try await process.value
    #expect(run.status == 0, "\(run.stderr)")
    let lines = run.stdout.split(separator: "\n").map { try? JSONValue.parse(Array($0.utf8)) }
    #expect(lines.count == 2)
    #expect(lines.first??["class"] == "TPV")
    #expect(lines.first??["lat"] == .double(49.5))
    #expect(lines.last??["state"] == "endOfData")
    // watch tracks for its own connection: no persistent start.
    #expect(fixture.handler.handled.withLock { $0 } == [.requestAuthorization, .watch(enable: true)])
    await fixture.stop()
  }
}
