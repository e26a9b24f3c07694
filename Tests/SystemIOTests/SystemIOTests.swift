import Glibc
import SystemIO
import Testing

@Suite("SystemIO")
struct SystemIOTests {
  /// A pipe whose ends are closed when the test ends.
  final class Pipe {
    let read: Int32
    let write: Int32
    init() throws {
      var fds: [Int32] = [0, 0]
      try #require(pipe(&fds) == 0)
      read = fds[0]
      write = fds[1]
    }
    deinit {
      close(read)
      close(write)
    }
  }

  @Test("writeAll and readToEnd carry every byte, in order")
  func roundTrip() throws {
    let pipe = try Pipe()
    let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    // More than a pipe holds at once would block: 50 KB fits the default 64 KiB.
    try SystemIO.writeAll(pipe.write, bytes)
    try SystemIO.writeAll(pipe.write, "end")
    close(pipe.write)
    let read = try SystemIO.readToEnd(pipe.read, limit: 1 << 20)
    #expect(read == bytes + Array("end".utf8))
  }

  @Test("readToEnd refuses more than its limit without reading it all")
  func limit() throws {
    let pipe = try Pipe()
    try SystemIO.writeAll(pipe.write, [UInt8](repeating: 7, count: 101))
    close(pipe.write)
    #expect(throws: SystemIO.ReadToEndError.tooLarge(limit: 100)) {
      try SystemIO.readToEnd(pipe.read, limit: 100)
    }
    let exact = try Pipe()
    try SystemIO.writeAll(exact.write, [UInt8](repeating: 7, count: 100))
    close(exact.write)
    #expect(try SystemIO.readToEnd(exact.read, limit: 100).count == 100)
    let empty = try Pipe()
    close(empty.write)
    #expect(try SystemIO.readToEnd(empty.read, limit: 0) == [])
  }

  @Test("read fills at most the buffer and says how much")
  func readCount() throws {
    let pipe = try Pipe()
    try SystemIO.writeAll(pipe.write, Array("abcdefgh".utf8))
    var buffer = [UInt8](repeating: 0, count: 3)
    #expect(try SystemIO.read(pipe.read, into: &buffer) == 3)
    #expect(buffer == Array("abc".utf8))
    var empty: [UInt8] = []
    #expect(try SystemIO.read(pipe.read, into: &empty) == 0)
  }

  @Test("errors carry errno: a closed descriptor, a full non-blocking pipe")
  func errors() throws {
    var buffer = [UInt8](repeating: 0, count: 8)
    #expect(throws: SystemError(EBADF)) { try SystemIO.read(-1, into: &buffer) }
    #expect(throws: SystemError(EBADF)) { try SystemIO.writeAll(-1, "x") }
    #expect(throws: SystemIO.ReadToEndError.system(SystemError(EBADF))) {
      try SystemIO.readToEnd(-1, limit: 10)
    }
    let pipe = try Pipe()
    _ = fcntl(pipe.write, F_SETFL, O_NONBLOCK)
    #expect(throws: SystemError(EAGAIN)) {
      try SystemIO.writeAll(pipe.write, [UInt8](repeating: 1, count: 1 << 20))
    }
    _ = fcntl(pipe.read, F_SETFL, O_NONBLOCK)
    var drain = [UInt8](repeating: 0, count: 1 << 16)
    while (try? SystemIO.read(pipe.read, into: &drain)) ?? 0 > 0 {}
    #expect(throws: SystemError(EAGAIN)) { try SystemIO.read(pipe.read, into: &drain) }
    #expect(SystemError(ENOSPC).description == String(cString: strerror(ENOSPC)))
  }

  @Test("sendAll sends every byte on a socket; a closed peer is EPIPE, without SIGPIPE")
  func send() throws {
    var fds: [Int32] = [0, 0]
    try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    defer { close(fds[0]) }
    let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0) }
    try SystemIO.sendAll(fds[0], bytes, flags: Int32(MSG_NOSIGNAL))
    shutdown(fds[0], Int32(SHUT_WR))
    #expect(try SystemIO.readToEnd(fds[1], limit: 1 << 20) == bytes)
    close(fds[1])
    #expect(throws: SystemError(EPIPE)) { try SystemIO.sendAll(fds[0], [1], flags: Int32(MSG_NOSIGNAL)) }
  }
}
