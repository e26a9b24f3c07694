import Foundation
import Testing

/// A broken GPX route given to the daemon: one clear line of its own, nothing from libxml2.
@Suite(.timeLimit(.minutes(3)))
struct GPXRouteErrorTests {
  @Test(
    "a route in an encoding libxml2 cannot convert, or not XML at all: exit 78 with one line on standard error",
    arguments: [
      "<?xml version=\"1.0\" encoding=\"EBCDIC-US\"?>\u{1}gpx><trkpt lat=\"1\" lon=\"2\"/></gpx>",
      "<?xml version=\"1.0\" encoding=\"UTF-16\"?><gpx><trkpt lat=\"1\" lon=\"2\"/></gpx>",
      "<?xml version=\"1.0\" encoding=\"NO-SUCH-CHARSET\"?><gpx/>",
      "<gpx>\u{1}</gpx>",
    ])
  func brokenRoute(document: String) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let route = scratch.file("route.gpx")
    try document.write(toFile: route, atomically: true, encoding: .utf8)
    let run = try await runTool(
      try Products.path("locationd"),
      [
        "--backend", "simulate:" + route, "--socket", scratch.file("s.sock"), "--state-dir",
        scratch.file("state"), "--group", "", "--track", "off",
      ])
    #expect(run.status == 78, "\(run)")
    let lines = run.stderr.split(separator: "\n")
    #expect(lines.count == 1, "\(run.stderr)")
    #expect(lines.first?.hasPrefix("locationd: invalid backend \"simulate:\(route)\": GPX") == true, "\(run.stderr)")
  }
}
