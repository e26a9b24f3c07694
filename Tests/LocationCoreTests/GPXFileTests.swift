import Foundation
import Glibc
import LocationCore
import LocationTestKit
import Synchronization
import Testing
import LocationModel

@Suite("GPX files", .timeLimit(.minutes(3)))
struct GPXFileTests {
  @Test("more points than the limit are refused before they are all collected")
  func pointLimit() throws {
    func gpx(_ count: Int) -> [UInt8] {
      Array(("<gpx version=\"1.1\">" + String(repeating: "<wpt lat=\"1\" lon=\"2\"/>", count: count) + "</gpx>").utf8)
    }
    #expect(try GPXReader.points(from: gpx(GPXReader.maximumPoints)).count == GPXReader.maximumPoints)
    #expect(throws: GPXError.tooManyPoints(limit: GPXReader.maximumPoints)) {
      try GPXReader.points(from: gpx(GPXReader.maximumPoints + 1))
    }
  }

  @Test("a FIFO in place of a route file is refused instead of hanging the backend")
  func fifoRoute() async throws {
    var template = Array("/tmp/gpx-fifo-XXXXXX".utf8CString)
    let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/route.gpx"
    #expect(mkfifo(path, 0o600) == 0)
    let result = await resultOnItsOwnThread { () -> String in
      do {
        _ = try GPXReader.points(contentsOf: path)
        return "read"
      } catch {
        return "\(error)"
      }
    }
    let outcome = try #require(result, "reading a FIFO route hung")
    #expect(outcome.contains("not a regular file"), "\(outcome)")
  }
}
