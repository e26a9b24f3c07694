import Glibc
import ServiceCore

extension PeerCredentials {
  /// Reads the peer credentials of a connected Unix stream socket.
  ///
  /// - Returns: `nil` when `getsockopt(SO_PEERCRED)` fails (not a Unix socket).
  public static func read(socket: Int32) -> PeerCredentials? {
    var credentials = UCred(pid: 0, uid: 0, gid: 0)
    var length = socklen_t(MemoryLayout<UCred>.size)
    let result = getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length)
    guard result == 0, Int(length) == MemoryLayout<UCred>.size else { return nil }
    return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
  }
}

/// Linux `struct ucred` (`<sys/socket.h>`, hidden without `_GNU_SOURCE`): pid_t, uid_t, gid_t.
struct UCred {
  var pid: pid_t
  var uid: uid_t
  var gid: gid_t
}
