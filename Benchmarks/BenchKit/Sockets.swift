// Sockets of the benchmarks: systemd's notify socket stood in for, clients of locationd (Unix
// stream socket) and of gpsd (TCP).

import Glibc
import SystemIO

/// A `sockaddr_un` (AF_UNIX) for `path`, cut to fit `sun_path` (107 bytes and the NUL).
public func unixAddress(_ path: String) -> sockaddr_un {
  var address = sockaddr_un()
  address.sun_family = sa_family_t(AF_UNIX)
  withUnsafeMutableBytes(of: &address.sun_path) { raw in
    for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
  }
  return address
}

/// A datagram socket bound at `path` (an old file there is removed first) that stands in for
/// systemd's notify socket (sd_notify(3)); throws ``BenchError`` when it cannot be bound.
public func notifySocket(_ path: String) throws(BenchError) -> Int32 {
  unlink(path)
  let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
  var address = unixAddress(path)
  let bound = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
    }
  }
  guard fd >= 0, bound == 0 else { throw BenchError("cannot bind the notify socket \(path)") }
  return fd
}

/// Waits on notify socket `fd` for a datagram with a `READY=1` line; the monotonic time it
/// arrived (seconds, ``MonotonicClock.seconds()``), or nil after `timeout` seconds.
public func waitForReady(_ fd: Int32, timeout: Double) -> Double? {
  let deadline = MonotonicClock.seconds() + timeout
  var buffer = [UInt8](repeating: 0, count: 4096)
  while MonotonicClock.seconds() < deadline {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let milliseconds = Int32(max(1, (deadline - MonotonicClock.seconds()) * 1000))
    guard poll(&descriptor, 1, milliseconds) > 0 else { continue }
    let count = recv(fd, &buffer, buffer.count, 0)
    let at = MonotonicClock.seconds()
    if count > 0,
      String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").contains("READY=1")
    {
      return at
    }
  }
  return nil
}

/// connect(2) of socket `fd` to `address` (a `sockaddr_un` or `sockaddr_in`); `fd`, or nil
/// (with `fd` closed) when it fails.
private func connect<Address>(_ fd: Int32, to address: Address) -> Int32? {
  var address = address
  let result = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      Glibc.connect(fd, $0, socklen_t(MemoryLayout<Address>.size))
    }
  }
  guard result == 0 else {
    close(fd)
    return nil
  }
  return fd
}

/// A blocking connection to the Unix stream socket at `path` (locationd's); nil when it fails.
public func connectUnix(_ path: String) -> Int32? {
  let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return nil }
  return connect(fd, to: unixAddress(path))
}

/// A blocking TCP connection to 127.0.0.1:`port` (gpsd's), with TCP_NODELAY; nil when it fails.
public func connectTCP(port: UInt16) -> Int32? {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return nil }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  address.sin_port = port.bigEndian
  guard connect(fd, to: address) != nil else { return nil }
  var on: Int32 = 1
  setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
  return fd
}

/// Writes all of `text` (UTF-8) to socket `fd` in one send(2) without SIGPIPE; false when the
/// peer is gone or the send was short.
public func sendLine(_ fd: Int32, _ text: String) -> Bool {
  let bytes = Array(text.utf8)
  return bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    == bytes.count
}

/// Peeks at blocking socket `fd` until a newline arrives and returns the first line (without
/// it), leaving the bytes for whoever reads the socket next; at most `timeout` seconds. nil on
/// end of file, error, timeout, or a first line over 4 KiB.
public func readFirstLine(_ fd: Int32, timeout: Double) -> String? {
  let deadline = MonotonicClock.seconds() + timeout
  var chunk = [UInt8](repeating: 0, count: 4096)
  while MonotonicClock.seconds() < deadline {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let milliseconds = Int32(max(1, (deadline - MonotonicClock.seconds()) * 1000))
    guard poll(&descriptor, 1, milliseconds) > 0 else { continue }
    // MSG_PEEK: leave the bytes for the reader that takes the socket over.
    let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_PEEK)) }
    guard count > 0 else { return nil }
    if let newline = chunk[0..<count].firstIndex(of: 0x0A) {
      return String(decoding: chunk[0..<newline], as: UTF8.self)
    }
    if count == chunk.count { return nil }  // a first line over 4 KiB: not gpsd's banner
    usleep(1_000)
  }
  return nil
}
