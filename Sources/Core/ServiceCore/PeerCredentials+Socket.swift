import Glibc

extension PeerCredentials {
  /// Reads the peer credentials of a connected Unix stream socket: `SO_PEERCRED` (pid, effective
  /// uid and gid) and `SO_PEERGROUPS` (supplementary groups).
  ///
  /// - Returns: `nil` when `getsockopt(SO_PEERCRED)` fails (not a Unix socket). When the kernel
  ///   cannot report the supplementary groups (before Linux 4.13), `groups` is empty: only the
  ///   effective gid then counts, never more than the kernel granted.
  public static func read(socket: Int32) -> PeerCredentials? {
    var credentials = UCred(pid: 0, uid: 0, gid: 0)
    var length = socklen_t(MemoryLayout<UCred>.size)
    let result = getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length)
    guard result == 0, Int(length) == MemoryLayout<UCred>.size else { return nil }
    return PeerCredentials(
      pid: credentials.pid, uid: credentials.uid, gid: credentials.gid,
      groups: supplementaryGroups(socket: socket) ?? [])
  }

  /// The peer's supplementary groups (`getsockopt(SO_PEERGROUPS)`), or `nil` when the kernel does
  /// not report them.
  ///
  /// Starts with room for 32 gids; when the kernel answers `ERANGE` it has set the length it needs,
  /// and the buffer grows to that (at most `NGROUPS_MAX`, 65536 gids). The kernel's length must
  /// be a whole number of gids within the buffer given.
  static func supplementaryGroups(socket: Int32) -> [UInt32]? {
    let size = MemoryLayout<gid_t>.size
    let maximum = 65_536
    var capacity = 32
    for _ in 0..<4 {
      var groups = [gid_t](repeating: 0, count: capacity)
      var length = socklen_t(capacity * size)
      let result = groups.withUnsafeMutableBytes { buffer in
        getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, buffer.baseAddress, &length)
      }
      let bytes = Int(length)
      if result == 0 {
        guard bytes >= 0, bytes <= capacity * size, bytes % size == 0 else { return nil }
        return Array(groups.prefix(bytes / size))
      }
      guard errno == ERANGE, bytes > capacity * size, bytes <= maximum * size else { return nil }
      capacity = (bytes + size - 1) / size
    }
    return nil
  }
}

/// Linux `struct ucred` (`<sys/socket.h>`, hidden without `_GNU_SOURCE`): pid_t, uid_t, gid_t.
struct UCred {
  var pid: pid_t
  var uid: uid_t
  var gid: gid_t
}
