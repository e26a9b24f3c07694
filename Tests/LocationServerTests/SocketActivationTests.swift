import Foundation
import Glibc
import Testing

@testable import LocationServer

@Suite("Socket activation end to end", .timeLimit(.minutes(1)))
struct SocketActivationTests {
  @Test("locationd under systemd-socket-activate serves on fd 3 and notifies READY and STOPPING")
  func activated() async throws {
    let activate = "/usr/bin/systemd-socket-activate"
    try #require(
      access(activate, X_OK) == 0, "systemd-socket-activate is missing: run scripts/setup")
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let daemon = testBinary.appendingPathComponent("locationd").path
    try #require(access(daemon, X_OK) == 0, "locationd is not built: run swift build --build-tests")
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let notifyPath = directory.path + "/notify"
    let socketPath = directory.path + "/activated.sock"
    let listener = try DatagramListener(path: notifyPath)

    let process = Process()
    process.executableURL = URL(fileURLWithPath: activate)
    process.arguments = [
      "-l", socketPath, "-E", "NOTIFY_SOCKET=\(notifyPath)", daemon, "--backend", "simulate",
      "--group", "",
      "--state-dir", directory.path + "/state",
    ]
    process.standardError = FileHandle.nullDevice
    let (exited, finished) = AsyncStream.makeStream(of: Int32.self)
    process.terminationHandler = { finished.yield($0.terminationStatus) }
    try process.run()
    defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

    // systemd-socket-activate binds, then listens, and starts the daemon on the first connection.
    var connected: TestClient?
    for _ in 0..<500 where connected == nil {
      connected = try? TestClient(path: socketPath)
      if connected == nil { try await Task.sleep(for: .milliseconds(10)) }
    }
    let client = try #require(connected, "could not connect to \(socketPath)")
    let status = try await client.roundTrip(#"{"cmd":"status","id":1}"#)
    #expect(status?["class"] == "STATUS")
    #expect(status?["backend"]?["uri"] == "simulate")
    let ready = await listener.receive() ?? ""
    #expect(ready.hasPrefix("READY=1\nSTATUS="))
    #expect(ready.contains(socketPath), "the status names the socket systemd passed: \(ready)")

    kill(process.processIdentifier, SIGTERM)
    #expect(await listener.receive() == "STOPPING=1")
    var iterator = exited.makeAsyncIterator()
    #expect(await iterator.next() == 0)
    #expect(await client.waitForClose())
    var info = stat()
    #expect(
      lstat(socketPath, &info) == 0, "the activated socket belongs to the activator and stays")
  }
}
