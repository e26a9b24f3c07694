import SystemIO
import Foundation
import Glibc
import LocationCore
import LocationTestKit
import MapState
import Synchronization
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel

/// A blocking-free client for tests: non-blocking socket, async reads that sleep while idle.
final class TestClient {
  let fd: Int32
  private var buffer: [UInt8] = []
  private(set) var closedByPeer = false

  init(path: String) throws {
    fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestError("socket failed") }
    guard var address = UnixAddress(path: path) else { throw TestError("bad path") }
    let result = address.withSockaddr { connect(fd, $0, $1) }
    // No close before a throw: every stored property is set, so deinit runs and closes `fd`.
    guard result == 0 else {
      throw TestError("connect failed: \(String(cString: strerror(errno)))")
    }
    let flags = fcntl(fd, F_GETFL)
    _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
  }

  deinit { if fd >= 0 { Glibc.close(fd) } }

  /// Writes all bytes, waiting while the socket is full.
  func send(_ text: String) async throws {
    try await send(Array(text.utf8))
  }

  func send(_ bytes: [UInt8]) async throws {
    var offset = 0
    while offset < bytes.count {
      let written = bytes.withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress.map { $0 + offset }, $0.count - offset, Int32(MSG_NOSIGNAL))
      }
      if written < 0 {
        if errno == EAGAIN || errno == EINTR {
          try await Task.sleep(for: .milliseconds(1))
          continue
        }
        throw TestError("send failed: \(String(cString: strerror(errno)))")
      }
      offset += written
    }
  }

  /// Sends one request line.
  func request(_ json: String) async throws {
    try await send(json + "\n")
  }

  /// The next line, or `nil` at end of stream or after `timeout`.
  func readLine(timeout: Duration = .seconds(60)) async -> String? {
    let deadline = ContinuousClock.now + timeout
    while true {
      if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: buffer[..<newline], as: UTF8.self)
        buffer.removeSubrange(...newline)
        return line
      }
      if closedByPeer { return nil }
      var chunk = [UInt8](repeating: 0, count: 65_536)
      let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count > 0 {
        buffer.append(contentsOf: chunk[0..<count])
        continue
      }
      if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) {
        closedByPeer = true
        continue
      }
      if ContinuousClock.now > deadline { return nil }
      try? await Task.sleep(for: .milliseconds(2))
    }
  }

  /// The next line parsed as JSON, or `nil`.
  func readJSON(timeout: Duration = .seconds(60)) async -> JSONValue? {
    guard let line = await readLine(timeout: timeout) else { return nil }
    return try? JSONValue.parse(Array(line.utf8))
  }

  /// Sends a request and returns the next line as JSON.
  func roundTrip(_ json: String) async throws -> JSONValue? {
    try await request(json)
    return await readJSON()
  }

  /// Whether the server closed the connection (waits up to `timeout`; consumes pending lines).
  func waitForClose(timeout: Duration = .seconds(60)) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
      if await readLine(timeout: .milliseconds(50)) == nil && closedByPeer { return true }
    }
    return closedByPeer
  }
}

/// A trivial handler for transport tests: answers with fixed shapes, authorizes every `request`
/// (authorization itself is tested on ``LocationService`` through ``ServiceFixture``) and
/// remembers watching clients.
final class FakeHandler: RequestHandler {
  let watchers = Mutex<[any ClientChannel]>([])
  let disconnected = Mutex<[UInt64]>([])
  let handled = Mutex<[Command]>([])
  let authorized = Mutex<Set<UInt64>>([])

  func handle(_ request: Request, from client: ClientContext) async -> Reply {
    handled.withLock { $0.append(request.command) }
    switch request.command {
    case .requestAuthorization:
      authorized.withLock { _ = $0.insert(client.id) }
      return .authorization(.authorized)
    case .status:
      let authorization: AuthorizationStatus =
        authorized.withLock { $0.contains(client.id) } ? .authorized : .notDetermined
      return .status(
        authorization: authorization, tracking: false, backendActive: false,
        backendURI: "simulate",
        backendState: .stopped,
        initial: nil, current: nil, clients: 1)
    case .start(let options): return .tracking(true, options: options)
    case .stop: return .tracking(false)
    case .watch(let enable, _, _):
      watchers.withLock { watchers in
        watchers.removeAll { $0.id == client.id }
        if enable { watchers.append(client.connection) }
      }
      return .watch(enabled: enable)
    case .location: return .error(.noFix, message: "no fix yet")
    default: return .ok(request.command)
    }
  }

  func clientDisconnected(_ client: ClientContext) async {
    disconnected.withLock { $0.append(client.id) }
    watchers.withLock { $0.removeAll { $0.id == client.id } }
  }
}

/// A running server on a temporary socket.
struct ServerFixture {
  let directory: TemporaryDirectory
  let path: String
  let server: SocketServer
  let handler: FakeHandler

  init(options: ServerOptions = ServerOptions()) throws {
    directory = try TemporaryDirectory()
    path = directory.path + "/run/locationd.sock"
    let socket = try ListeningSocket.create(path: path, group: nil)
    handler = FakeHandler()
    server = SocketServer(socket: socket, handler: handler, options: options)
    try server.start()
  }

  func connect() throws -> TestClient { try TestClient(path: path) }

  func stop() async {
    server.stop()
    await server.waitUntilStopped()
    directory.remove()
  }
}

/// The real service (``ServiceParts``) behind a socket server on a temporary socket, whose directory and socket file anyone may reach (the
/// tests run clients as uid 65534).
struct ServiceFixture {
  let directory: TemporaryDirectory
  let path: String
  let server: SocketServer
  let service: LocationService
  let authority: AuthorizationAuthority
  let backend: FakeBackend

  init(group: String?) async throws {
    let parts = try ServiceParts(group: group)
    directory = parts.directory
    backend = parts.backend
    authority = parts.authority
    service = parts.service
    path = directory.path + "/run/locationd.sock"
    let socket = try ListeningSocket.create(path: path, group: nil)
    chmod(directory.path + "/run", 0o755)
    chmod(path, 0o666)
    server = SocketServer(socket: socket, handler: service)
    await service.attach(server)
    await service.start()
    try server.start()
  }

  func connect() throws -> TestClient { try TestClient(path: path) }

  func stop() async {
    server.stop()
    await server.waitUntilStopped()
    await service.shutdown(reason: "test")
    directory.remove()
  }
}
