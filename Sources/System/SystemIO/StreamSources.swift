import Glibc

/// Serial devices in raw mode through termios(3), opened the way gpsd opens a receiver: not as a
/// controlling terminal, non-blocking, close-on-exec, exclusive (`TIOCEXCL`).
public enum SerialPort {
  /// The rates ``setRate(_:_:)`` accepts, in bits per second: NMEA 0183's 4800 up to 921600.
  public static let standardRates = [
    4800, 9600, 19200, 38400, 57600, 115_200, 230_400, 460_800, 921_600,
  ]

  /// Opens `path` for reading and writing, raw 8N1, `CLOCAL | CREAD`, no flow control, and
  /// claims it exclusively (`TIOCEXCL`: a second open by anyone but root fails with `EBUSY`).
  ///
  /// - Returns: the descriptor; the caller closes it.
  /// - Throws: ``SystemError`` with `open`'s `errno` (`ENOENT` when the node is gone, `EACCES`,
  ///   `EBUSY`, `ENODEV`), or that of `tcgetattr`/`tcsetattr`/`ioctl` (`ENOTTY` for a path that
  ///   is not a terminal); nothing stays open after a failure.
  public static func open(_ path: String) throws(SystemError) -> Int32 {
    let fd = Glibc.open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { throw SystemError(errno) }
    var attributes = termios()
    guard tcgetattr(fd, &attributes) == 0 else {
      let code = errno
      close(fd)
      throw SystemError(code)
    }
    cfmakeraw(&attributes)
    attributes.c_cflag |= tcflag_t(CLOCAL) | tcflag_t(CREAD)
    attributes.c_cflag &= ~(tcflag_t(CRTSCTS) | tcflag_t(CSTOPB))
    guard tcsetattr(fd, TCSANOW, &attributes) == 0, ioctl(fd, UInt(TIOCEXCL)) == 0 else {
      let code = errno
      close(fd)
      throw SystemError(code)
    }
    return fd
  }

  /// Sets the line's input and output rate to `baud` (one of ``standardRates``) and drops what
  /// was received at the previous rate.
  ///
  /// - Throws: ``SystemError`` `EINVAL` for a rate not in ``standardRates``, or the `errno` of
  ///   `tcgetattr`/`tcsetattr`.
  public static func setRate(_ fd: Int32, _ baud: Int) throws(SystemError) {
    guard let speed = speed(baud) else { throw SystemError(EINVAL) }
    var attributes = termios()
    guard tcgetattr(fd, &attributes) == 0 else { throw SystemError(errno) }
    guard cfsetispeed(&attributes, speed) == 0, cfsetospeed(&attributes, speed) == 0 else {
      throw SystemError(EINVAL)
    }
    guard tcsetattr(fd, TCSANOW, &attributes) == 0 else { throw SystemError(errno) }
    _ = tcflush(fd, TCIFLUSH)
  }

  /// The termios speed constant of `baud`, or `nil` when it is not in ``standardRates``.
  static func speed(_ baud: Int) -> speed_t? {
    switch baud {
    case 4800: return speed_t(B4800)
    case 9600: return speed_t(B9600)
    case 19200: return speed_t(B19200)
    case 38400: return speed_t(B38400)
    case 57600: return speed_t(B57600)
    case 115_200: return speed_t(B115200)
    case 230_400: return speed_t(B230400)
    case 460_800: return speed_t(B460800)
    case 921_600: return speed_t(B921600)
    default: return nil
    }
  }
}

/// Network sockets for NMEA sources: a TCP client connected without blocking, a bound UDP
/// socket. IPv4 and IPv6, names resolved with `getaddrinfo(3)`.
public enum NetworkSocket {
  /// Resolves `host` and `port` for `type` (`SOCK_STREAM` or `SOCK_DGRAM`) and returns every
  /// address, as `sockaddr_storage` bytes with their length.
  ///
  /// - Throws: ``SystemError`` `EHOSTUNREACH` when the name does not resolve (the resolver's
  ///   own code is not an `errno`), `EINVAL` for an address too long for `sockaddr_storage`.
  public static func resolve(host: String, port: UInt16, type: Int32, passive: Bool = false)
    throws(SystemError) -> [(storage: sockaddr_storage, length: socklen_t)]
  {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = type
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
    var list: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &list) == 0 else {
      throw SystemError(EHOSTUNREACH)
    }
    defer { freeaddrinfo(list) }
    var result: [(storage: sockaddr_storage, length: socklen_t)] = []
    var node = list
    while let current = node {
      let length = current.pointee.ai_addrlen
      if let address = current.pointee.ai_addr, Int(length) <= MemoryLayout<sockaddr_storage>.size {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
          raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length)))
        }
        result.append((storage, length))
      }
      node = current.pointee.ai_next
    }
    guard !result.isEmpty else { throw SystemError(EINVAL) }
    return result
  }

  /// Starts a non-blocking TCP connection to `address`; wait for the descriptor to become
  /// writable, then call ``finishConnect(_:)``.
  ///
  /// - Returns: the descriptor (non-blocking, close-on-exec); the caller closes it.
  /// - Throws: ``SystemError`` from `socket` or `connect` (other than `EINPROGRESS`).
  public static func startConnect(_ address: (storage: sockaddr_storage, length: socklen_t))
    throws(SystemError) -> Int32
  {
    var storage = address.storage
    let fd = socket(
      Int32(storage.ss_family),
      Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
      0)
    guard fd >= 0 else { throw SystemError(errno) }
    let result = withUnsafePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, address.length) }
    }
    if result != 0 && errno != EINPROGRESS {
      let code = errno
      close(fd)
      throw SystemError(code)
    }
    var on: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    _ = setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, socklen_t(MemoryLayout<Int32>.size))
    return fd
  }

  /// Whether the connection started by ``startConnect(_:)`` succeeded, once its descriptor
  /// became writable.
  ///
  /// - Throws: ``SystemError`` with the connection's error (`ECONNREFUSED`, `ETIMEDOUT`...).
  public static func finishConnect(_ fd: Int32) throws(SystemError) {
    var code: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else {
      throw SystemError(errno)
    }
    guard code == 0 else { throw SystemError(code) }
  }

  /// Binds a non-blocking UDP socket to `address` (`SO_REUSEADDR`, so that a restarted reader
  /// gets the port back at once).
  ///
  /// - Returns: the descriptor; the caller closes it.
  /// - Throws: ``SystemError`` from `socket` or `bind` (`EADDRINUSE`, `EADDRNOTAVAIL`).
  public static func bindDatagram(_ address: (storage: sockaddr_storage, length: socklen_t))
    throws(SystemError) -> Int32
  {
    var storage = address.storage
    let fd = socket(
      Int32(storage.ss_family),
      Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
      0)
    guard fd >= 0 else { throw SystemError(errno) }
    var on: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
    let result = withUnsafePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, address.length) }
    }
    guard result == 0 else {
      let code = errno
      close(fd)
      throw SystemError(code)
    }
    return fd
  }

  /// Receives one datagram into the start of `buffer`.
  ///
  /// - Returns: the bytes stored, `0...buffer.count`, and whether the datagram was longer than
  ///   `buffer` (its tail was discarded by the kernel); `nil` when nothing is waiting.
  /// - Throws: ``SystemError`` with `recv`'s `errno`.
  public static func receive(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> (
    count: Int, truncated: Bool
  )? {
    let result: Result<(count: Int, truncated: Bool)?, SystemError> = buffer.withUnsafeMutableBytes
    { raw in
      guard let base = raw.baseAddress else { return .success((0, false)) }
      while true {
        let size = recv(fd, base, raw.count, Int32(MSG_TRUNC))
        if size < 0 {
          let code = errno
          if code == EINTR { continue }
          if code == EAGAIN || code == EWOULDBLOCK { return .success(nil) }
          return .failure(SystemError(code))
        }
        return .success((min(size, raw.count), size > raw.count))
      }
    }
    return try result.get()
  }
}
