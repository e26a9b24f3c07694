import Foundation
import Glibc
import Testing

/// `locationctl --timeout`: a daemon that is stopped or stuck does not hang the command.
@Suite(.timeLimit(.minutes(3)))
struct ClientTimeoutTests {
  /// A Unix socket that listens (queue of one) and never accepts or answers: what a daemon
  /// stopped with SIGSTOP looks like to a client.
  final class SilentListener {
    let fd: Int32
    var extra: [Int32] = []
    let path: String

    init(path: String) throws {
      self.path = path
      fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
      guard fd >= 0 else { throw E2EError("socket failed") }
      var address = sockaddr_un()
      address.sun_family = sa_family_t(AF_UNIX)
      let bytes = Array(path.utf8)
      guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw E2EError("path too long") }
      withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
      }
      let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
      }
      guard bound == 0, listen(fd, 0) == 0 else { throw E2EError("bind/listen failed: errno \(errno)") }
    }

    /// Connects non-blocking clients until the listen queue refuses one: the queue is full.
    func fillQueue() throws {
      for _ in 0..<64 {
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
          for (index, byte) in Array(path.utf8).enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(client, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
          }
        }
        if result != 0 {
          let code = errno
          close(client)
          guard code == EAGAIN else { throw E2EError("connect failed: errno \(code)") }
          return
        }
        extra.append(client)
      }
      throw E2EError("the listen queue never filled")
    }

    deinit {
      for client in extra { close(client) }
      close(fd)
    }
  }

  @Test("a daemon that accepts but never answers: the command ends with a clear error after --timeout")
  func noAnswer() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let listener = try SilentListener(path: scratch.file("s.sock"))
    let tool = try Products.path("locationctl")
    let run = try await runTool(tool, ["--socket", listener.path, "--timeout", "0.5", "status"])
    #expect(run.status == 1, "\(run)")
    #expect(run.stderr.contains("did not answer request within 0.5 s"), "\(run.stderr)")
    // The option after the command and in the --timeout=S form.
    let joined = try await runTool(tool, ["--socket", listener.path, "map", "--timeout=1"])
    #expect(joined.status == 1, "\(joined)")
    #expect(joined.stderr.contains("within 1 s"), "\(joined.stderr)")
    withExtendedLifetime(listener) {}
  }

  @Test("a full listen queue: the connection attempt ends after --timeout")
  func fullQueue() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let listener = try SilentListener(path: scratch.file("s.sock"))
    try listener.fillQueue()
    let run = try await runTool(
      try Products.path("locationctl"), ["--socket", listener.path, "--timeout", "0.5", "location"])
    #expect(run.status == 1, "\(run)")
    #expect(run.stderr.contains("did not accept the connection"), "\(run.stderr)")
    withExtendedLifetime(listener) {}
  }

  @Test("--timeout takes seconds within 0...86400", arguments: ["-1", "abc", "nan", "86401", ""])
  func badValues(value: String) async throws {
    let run = try await runTool(try Products.path("locationctl"), ["--timeout", value, "status"])
    #expect(run.status == 64, "\(value): \(run)")
    #expect(run.stderr.contains("--timeout"), "\(run.stderr)")
  }
}
