import Glibc
import SystemIO
import Testing

@Suite("SystemIO")
struct SystemIOTests {
  /// A pipe whose ends are closed when the test ends. Each end is closed once: closing a
  /// descriptor number twice could close another test's descriptor that reused it (the suites run
  /// in parallel in one process).
  final class Pipe {
    let read: Int32
    let write: Int32
    private var writeOpen = true
    init() throws {
      var fds: [Int32] = [0, 0]
      try #require(pipe(&fds) == 0)
      read = fds[0]
      write = fds[1]
    }
    /// Closes the writing end now (the reader then sees end of file).
    func closeWrite() {
      guard writeOpen else { return }
      writeOpen = false
      close(write)
    }
    deinit {
      close(read)
      closeWrite()
    }
  }

  @Test("writeAll and readToEnd carry every byte, in order")
  func roundTrip() throws {
    let pipe = try Pipe()
    let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    // More than a pipe holds at once would block: 50 KB fits the default 64 KiB.
    try SystemIO.writeAll(pipe.write, bytes)
    try SystemIO.writeAll(pipe.write, "end")
    pipe.closeWrite()
    let read = try SystemIO.readToEnd(pipe.read, limit: 1 << 20)
    #expect(read == bytes + Array("end".utf8))
  }

  @Test("readToEnd refuses more than its limit without reading it all")
  func limit() throws {
    let pipe = try Pipe()
    try SystemIO.writeAll(pipe.write, [UInt8](repeating: 7, count: 101))
    pipe.closeWrite()
    #expect(throws: SystemIO.ReadToEndError.tooLarge(limit: 100)) {
      try SystemIO.readToEnd(pipe.read, limit: 100)
    }
    let exact = try Pipe()
    try SystemIO.writeAll(exact.write, [UInt8](repeating: 7, count: 100))
    exact.closeWrite()
    #expect(try SystemIO.readToEnd(exact.read, limit: 100).count == 100)
    let empty = try Pipe()
    empty.closeWrite()
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

  @Test("sendSome takes what a non-blocking socket accepts, nil when full, and resumes at an offset")
  func sendSome() throws {
    var fds: [Int32] = [0, 0]
    try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    defer { close(fds[0]) }
    _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
    let bytes = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    // More than the socket buffer holds: a first part goes, then the socket is full.
    let first = try #require(try SystemIO.sendSome(fds[0], bytes, from: 0, flags: Int32(MSG_NOSIGNAL)))
    #expect(first > 0 && first < bytes.count)
    var offset = first
    let flags = Int32(MSG_NOSIGNAL)
    while let sent = try SystemIO.sendSome(fds[0], bytes, from: offset, flags: flags) { offset += sent }
    #expect(offset < bytes.count)
    // The reader sees exactly the prefix that was reported sent, in order.
    _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while let count = try? SystemIO.read(fds[1], into: &chunk), count > 0 { received += chunk.prefix(count) }
    #expect(received == Array(bytes.prefix(offset)))
    #expect(try SystemIO.sendSome(fds[0], bytes, from: bytes.count, flags: 0) == 0)
    #expect(throws: SystemError(EINVAL)) { try SystemIO.sendSome(fds[0], bytes, from: -1, flags: 0) }
    #expect(throws: SystemError(EINVAL)) { try SystemIO.sendSome(fds[0], bytes, from: bytes.count + 1, flags: 0) }
    close(fds[1])
    #expect(throws: SystemError(EPIPE)) { try SystemIO.sendSome(fds[0], [1], from: 0, flags: Int32(MSG_NOSIGNAL)) }
  }

  @Test("writeSome writes from an offset; a full non-blocking pipe answers nil")
  func writeSome() throws {
    let pipe = try Pipe()
    _ = fcntl(pipe.write, F_SETFL, O_NONBLOCK)
    #expect(try SystemIO.writeSome(pipe.write, Array("abcdef".utf8), from: 2) == 4)
    var buffer = [UInt8](repeating: 0, count: 16)
    #expect(try SystemIO.read(pipe.read, into: &buffer) == 4)
    #expect(Array(buffer.prefix(4)) == Array("cdef".utf8))
    let big = [UInt8](repeating: 1, count: 1 << 20)
    var offset = 0
    while let written = try SystemIO.writeSome(pipe.write, big, from: offset) { offset += written }
    #expect(offset > 0 && offset < big.count)
    #expect(throws: SystemError(EBADF)) { try SystemIO.writeSome(-1, [1], from: 0) }
  }
}
