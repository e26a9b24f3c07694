import Glibc

/// A Unix-domain socket address (`sockaddr_un`, unix(7)): a filesystem path, or an abstract name
/// when the path starts with `@`.
public struct UnixAddress {
  /// The address; `sun_path` holds the path's bytes, NUL-terminated unless abstract.
  public var storage = sockaddr_un()
  /// The address length to pass with it: the path's offset plus its bytes (and NUL).
  public var length: socklen_t

  /// `nil` when the path is empty or does not fit `sun_path` (108 bytes including the NUL).
  public init?(path: String) {
    var bytes = Array(path.utf8)
    guard !bytes.isEmpty else { return nil }
    let abstract = bytes[0] == UInt8(ascii: "@")
    if abstract { bytes[0] = 0 }
    let capacity = MemoryLayout.size(ofValue: storage.sun_path)
    guard bytes.count < capacity || (abstract && bytes.count <= capacity) else { return nil }
    storage.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &storage.sun_path) { raw in
      for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
    length = socklen_t(offset + bytes.count + (abstract ? 0 : 1))
  }

  /// Calls `body` with the address as a `sockaddr` and its length, for `bind`, `connect`, `sendto`.
  public mutating func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    let length = self.length
    return withUnsafePointer(to: &storage) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
    }
  }
}
