import Foundation
import Glibc
import LocationTestKit
import Testing

/// The private bus itself: it listens on its own socket, prints that address, lets root and
/// uid 65534 own names on it, and leaves nothing behind.
@Suite("Private D-Bus bus for tests", .timeLimit(.minutes(1)))
struct PrivateBusTests {
  /// `RequestName` through dbus-send as the current user (`asNobody` false) or as uid 65534: the
  /// reply's `uint32` (1 = primary owner).
  static func requestName(_ name: String, bus: String, asNobody: Bool) async throws -> ToolRun {
    let arguments = [
      "/usr/bin/dbus-send", "--bus=" + bus, "--print-reply", "--dest=org.freedesktop.DBus", "/",
      "org.freedesktop.DBus.RequestName", "string:" + name, "uint32:0",
    ]
    if asNobody { return try await runAsNobody(arguments) }
    return try await runTool(arguments[0], Array(arguments.dropFirst()))
  }

  @Test func rootAndNobodyOwnNamesOnThePrivateSocket() async throws {
    try requireNobodyClient(python: false)
    try #require(access("/usr/bin/dbus-send", X_OK) == 0, "dbus-send missing: run scripts/setup")
    let bus = try PrivateBus()
    defer { bus.stop() }
    let address = try await bus.start()
    #expect(address.hasPrefix("unix:path=\(bus.socketPath),guid="))
    #expect(bus.address == address)
    #expect(bus.environment([:])["DBUS_SYSTEM_BUS_ADDRESS"] == address)
    let root = try await Self.requestName("org.example.Root", bus: address, asNobody: false)
    #expect(root.status == 0, "\(root.stderr)")
    #expect(root.stdout.contains("uint32 1"), "\(root.stdout)")
    let nobody = try await Self.requestName("org.example.Nobody", bus: address, asNobody: true)
    #expect(nobody.status == 0, "\(nobody.stderr)")
    #expect(nobody.stdout.contains("uint32 1"), "\(nobody.stdout)")
  }

  @Test func stopKillsTheDaemonAndRemovesItsFiles() async throws {
    let bus = try PrivateBus()
    try await bus.start()
    let pid = try #require(bus.pid)
    #expect(FileManager.default.fileExists(atPath: bus.socketPath))
    bus.stop()
    let state = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    #expect(state == nil || state?.contains(") Z") == true, "dbus-daemon \(pid) still runs")
    #expect(bus.pid == nil)
    #expect(!FileManager.default.fileExists(atPath: bus.directory))
    // A second stop does nothing.
    bus.stop()
  }

  @Test func configurationListensOnlyOnItsOwnSocket() {
    let text = PrivateBus.configuration(socketPath: "/tmp/x/bus")
    #expect(text.contains("<listen>unix:path=/tmp/x/bus</listen>"))
    #expect(text.components(separatedBy: "<listen>").count == 2)
    #expect(text.contains("<type>session</type>"))
  }
}
