#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import CLinux

/// A failed system call: its `errno` value.
public struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The `errno` value (`EIO`, `ENOSPC`, `EAGAIN`...).
  public let code: Int32

  /// The error for `errno` value `code`.
  public init(_ code: Int32) { self.code = code }

  /// `strerror(code)`, e.g. "No space left on device".
  public var description: String { String(cString: strerror(code)) }
}

/// Reading and writing file descriptors through `read(2)`, `write(2)` and `send(2)`, with every
/// index checked: the one place outside the socket server's event loop that hands Swift buffers
/// to the kernel.
///
/// Invariants kept here rather than at each caller: a call never passes more bytes than the
/// buffer holds, never trusts a count the kernel returns beyond what was asked for (such a count
/// is an `EIO` error), retries after `EINTR`, and continues after a partial write.
public enum SystemIO {
  /// Writes every byte of `bytes` to `fd`, retrying after a partial write and after `EINTR`.
  ///
  /// - Throws: ``SystemError`` with the `errno` of the write that failed (`EAGAIN` when a
  ///   non-blocking `fd` is full, `EPIPE`, `ENOSPC`...), or `EIO` when `write` wrote nothing.
  ///   Bytes before the failure may have been written.
  public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
    guard let base = bytes.baseAddress else { return }
    var offset = 0
    while offset < bytes.count {
      let remaining = bytes.count - offset
      let written = write(fd, base + offset, remaining)
      if written < 0 {
        let code = errno
        if code == EINTR { continue }
        throw SystemError(code)
      }
      guard written > 0, written <= remaining else { throw SystemError(EIO) }
      offset += written
    }
  }

  /// Writes every byte of `bytes` to `fd`; see ``writeAll(_:_:)-(Int32,UnsafeRawBufferPointer)``.
  ///
  /// - Throws: ``SystemError``.
  public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
    let result: Result<Void, SystemError> = bytes.withUnsafeBytes { raw in
      do throws(SystemError) { try writeAll(fd, raw) } catch { return .failure(error) }
      return .success(())
    }
    try result.get()
  }

  /// Writes `text` as UTF-8 to `fd`; see ``writeAll(_:_:)-(Int32,UnsafeRawBufferPointer)``.
  ///
  /// - Throws: ``SystemError``.
  public static func writeAll(_ fd: Int32, _ text: String) throws(SystemError) {
    try writeAll(fd, Array(text.utf8))
  }

  /// Sends every byte of `bytes` on the socket `fd` with `send(2)` and `flags` (e.g.
  /// `MSG_NOSIGNAL`), retrying after a partial send and after `EINTR`.
  ///
  /// - Throws: ``SystemError`` as ``writeAll(_:_:)-(Int32,UnsafeRawBufferPointer)``.
  public static func sendAll(_ fd: Int32, _ bytes: [UInt8], flags: Int32) throws(SystemError) {
    let result: Result<Void, SystemError> = bytes.withUnsafeBytes { raw in
      guard let base = raw.baseAddress else { return .success(()) }
      var offset = 0
      while offset < raw.count {
        let remaining = raw.count - offset
        let sent = send(fd, base + offset, remaining, flags)
        if sent < 0 {
          let code = errno
          if code == EINTR { continue }
          return .failure(SystemError(code))
        }
        guard sent > 0, sent <= remaining else { return .failure(SystemError(EIO)) }
        offset += sent
      }
      return .success(())
    }
    try result.get()
  }

  /// Sends what a non-blocking socket `fd` takes now of `bytes[offset...]`, with `send(2)` and
  /// `flags` (e.g. `MSG_NOSIGNAL`), retrying after `EINTR`: one step of a loop that keeps its
  /// own offset and waits for the socket to become writable when this answers `nil`.
  ///
  /// - Parameter offset: where the unsent part starts, `0...bytes.count`.
  /// - Returns: the number of bytes sent, `1...bytes.count - offset` (`0` only when nothing is
  ///   left to send), or `nil` when the socket takes nothing now (`EAGAIN`/`EWOULDBLOCK`).
  /// - Throws: ``SystemError`` with `send`'s `errno` (`EPIPE`, `ECONNRESET`...), `EINVAL` for an
  ///   `offset` outside `0...bytes.count`, or `EIO` when the kernel reports 0 bytes or more than
  ///   were asked for.
  public static func sendSome(_ fd: Int32, _ bytes: [UInt8], from offset: Int, flags: Int32)
    throws(SystemError) -> Int?
  {
    try transferSome(bytes, from: offset) { base, count in send(fd, base, count, flags) }
  }

  /// Writes what a non-blocking `fd` (a pipe, a pty) takes now of `bytes[offset...]` with
  /// `write(2)`, retrying after `EINTR`; see ``sendSome(_:_:from:flags:)``.
  ///
  /// - Returns: the number of bytes written, `1...bytes.count - offset` (`0` only when nothing is
  ///   left), or `nil` when `fd` takes nothing now (`EAGAIN`/`EWOULDBLOCK`).
  /// - Throws: ``SystemError`` as ``sendSome(_:_:from:flags:)`` (`EIO` from a pty whose other
  ///   side is closed, too).
  public static func writeSome(_ fd: Int32, _ bytes: [UInt8], from offset: Int)
    throws(SystemError) -> Int?
  {
    try transferSome(bytes, from: offset) { base, count in write(fd, base, count) }
  }

  /// One non-blocking `send`/`write` of `bytes[offset...]` by `call`, with both sides checked:
  /// `call` gets a pointer inside the array and the exact count left after it, and a count it
  /// returns outside `1...that` is refused as `EIO`.
  @inline(__always)
  private static func transferSome(
    _ bytes: [UInt8], from offset: Int, _ call: (UnsafeRawPointer, Int) -> Int
  ) throws(SystemError) -> Int? {
    guard offset >= 0, offset <= bytes.count else { throw SystemError(EINVAL) }
    if offset == bytes.count { return 0 }
    let result: Result<Int?, SystemError> = bytes.withUnsafeBytes { raw in
      guard let base = raw.baseAddress else { return .success(0) }
      let remaining = raw.count - offset
      while true {
        let count = call(base + offset, remaining)
        if count < 0 {
          let code = errno
          if code == EINTR { continue }
          if code == EAGAIN || code == EWOULDBLOCK { return .success(nil) }
          return .failure(SystemError(code))
        }
        guard count > 0, count <= remaining else { return .failure(SystemError(EIO)) }
        return .success(count)
      }
    }
    return try result.get()
  }

  /// Reads at most `buffer.count` bytes from `fd` into the start of `buffer`, retrying after
  /// `EINTR`.
  ///
  /// - Returns: the number of bytes read, `0...buffer.count`; `0` at end of file (or for an
  ///   empty `buffer`). Only `buffer[0..<count]` holds what was read.
  /// - Throws: ``SystemError`` with `read`'s `errno` (`EAGAIN` when a non-blocking `fd` has
  ///   nothing), or `EIO` when the kernel reports more bytes than were asked for.
  public static func read(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int {
    let result: Result<Int, SystemError> = buffer.withUnsafeMutableBytes { raw in
      guard let base = raw.baseAddress else { return .success(0) }
      while true {
        let count = readSystemCall(fd, base, raw.count)
        if count < 0 {
          let code = errno
          if code == EINTR { continue }
          return .failure(SystemError(code))
        }
        guard count <= raw.count else { return .failure(SystemError(EIO)) }
        return .success(count)
      }
    }
    return try result.get()
  }

  /// Why ``readToEnd(_:limit:)`` stopped.
  public enum ReadToEndError: Error, Hashable, Sendable {
    /// A `read` failed.
    case system(SystemError)
    /// The input holds more than `limit` bytes.
    case tooLarge(limit: Int)
  }

  /// Reads `fd` to its end, in chunks of at most 64 KiB, holding at most `limit` bytes
  /// (`limit` ≥ 0): a larger input is refused after `limit + 1` bytes, never read whole.
  ///
  /// - Returns: everything `fd` held.
  /// - Throws: ``ReadToEndError/system(_:)`` when a read fails (`EAGAIN` for a non-blocking
  ///   `fd` with nothing to read), ``ReadToEndError/tooLarge(limit:)`` past `limit`.
  public static func readToEnd(_ fd: Int32, limit: Int) throws(ReadToEndError) -> [UInt8] {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: min(1 << 16, max(limit, 0) + 1))
    while true {
      let count: Int
      do { count = try read(fd, into: &chunk) } catch { throw .system(error) }
      if count == 0 { return bytes }
      bytes.append(contentsOf: chunk.prefix(count))
      guard bytes.count <= limit else { throw .tooLarge(limit: limit) }
    }
  }

  /// `read(2)` under another name, so that ``read(_:into:)`` can call it.
  @inline(__always)
  private static func readSystemCall(_ fd: Int32, _ base: UnsafeMutableRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
      Glibc.read(fd, base, count)
    #else
      Darwin.read(fd, base, count)
    #endif
  }
}

/// Standard output as a command-line program writes it through `print`.
public enum StandardOutput {
  /// Flushes standard output's buffer and says whether anything written to it since the last
  /// call was lost: `0`, or an `errno` value (`EPIPE` when the reader of a pipe has gone, `ENOSPC`
  /// on a full disk; `EIO` when an earlier flush failed and its cause is no longer known).
  public static func flush() -> Int32 { locationd_flush_standard_output() }
}
