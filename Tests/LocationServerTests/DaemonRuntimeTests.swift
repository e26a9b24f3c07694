import Foundation
import Glibc
import Synchronization
import Testing

@testable import LocationServer

@Suite("Daemon runtime", .timeLimit(.minutes(1)))
struct DaemonRuntimeTests {
  @Test("READY after listening, SIGHUP reloads the config file, cancellation stops with STOPPING")
  func lifecycle() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let notifyPath = directory.path + "/notify"
    let listener = try DatagramListener(path: notifyPath)
    let configPath = directory.path + "/locationd.conf"
    let socketPath = directory.path + "/run/locationd.sock"
    try "max-clients = 5\n".write(toFile: configPath, atomically: true, encoding: .utf8)
    let configuration = try Configuration.parse(arguments: [
      "--config", configPath, "--socket", socketPath, "--group", "", "--backend", "simulate",
    ])
    #expect(configuration.maxClients == 5)
    let reloads = Mutex<[Configuration]>([])
    let stopped = Mutex<Bool>(false)
    let daemon = Task {
      try await DaemonRuntime.run(
        configuration: configuration, handler: FakeHandler(), environment: ["NOTIFY_SOCKET": notifyPath],
        reload: { next in reloads.withLock { $0.append(next) } },
        stopping: { stopped.withLock { $0 = true } })
    }
    #expect(await listener.receive() == "READY=1\nSTATUS=serving simulate on \(socketPath)")
    let first = try TestClient(path: socketPath)
    #expect(try await first.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")

    try "max-clients = 1\n".write(toFile: configPath, atomically: true, encoding: .utf8)
    kill(getpid(), SIGHUP)
    #expect(await listener.receive()?.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") == true)
    #expect(await listener.receive() == "READY=1\nSTATUS=serving simulate on \(socketPath)")
    #expect(reloads.withLock { $0.map(\.maxClients) } == [1])
    let second = try TestClient(path: socketPath)
    #expect(await second.readJSON()?["code"] == "tooManyClients")

    daemon.cancel()
    #expect(await listener.receive() == "STOPPING=1")
    try await daemon.value
    let didStop = stopped.withLock { $0 }
    #expect(didStop)
    #expect(access(socketPath, F_OK) != 0)
    #expect(await first.waitForClose())
  }
}
