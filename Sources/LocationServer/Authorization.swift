import Glibc

/// The credentials of the process at the other end of a Unix socket, from `SO_PEERCRED`.
///
/// The kernel records them when the peer called `connect(2)`; they cannot be forged by the peer.
public struct PeerCredentials: Sendable, Hashable {
  /// The peer's process id.
  public var pid: Int32
  /// The peer's effective user id.
  public var uid: UInt32
  /// The peer's effective group id.
  public var gid: UInt32

  /// Creates credentials (tests; the server reads them with ``read(socket:)``).
  public init(pid: Int32, uid: UInt32, gid: UInt32) {
    self.pid = pid
    self.uid = uid
    self.gid = gid
  }

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

/// Decides whether a peer may use the service: root, or a member of the configured group.
///
/// Membership counts the peer's effective gid (from `SO_PEERCRED`), the user's primary group
/// and its supplementary groups from the group database (`getpwuid_r` + `getgrouplist`). The
/// group is looked up at every decision, so a group created after start counts.
public struct Authorizer: Sendable {
  /// The group whose members are authorized (e.g. `locationd`), or `nil` for root only.
  public var groupName: String?

  /// Creates an authorizer for `groupName` (root is always authorized).
  public init(groupName: String?) {
    self.groupName = groupName
  }

  /// Decides for `peer`.
  ///
  /// - Returns: `.authorized` or `.denied`, and a reason for the log (e.g. `root`, `group`,
  ///   `notInGroup`, `noSuchGroup`).
  public func decide(for peer: PeerCredentials) -> (status: AuthorizationStatus, reason: String) {
    if peer.uid == 0 { return (.authorized, "root") }
    guard let groupName, !groupName.isEmpty else { return (.denied, "rootOnly") }
    guard let gid = Self.groupID(named: groupName) else { return (.denied, "noSuchGroup") }
    if peer.gid == gid { return (.authorized, "group") }
    if Self.groups(ofUser: peer.uid).contains(gid) { return (.authorized, "group") }
    return (.denied, "notInGroup")
  }

  /// The gid of a group name (`getgrnam_r`), or `nil` when there is no such group.
  public static func groupID(named name: String) -> UInt32? {
    var group = group()
    var result: UnsafeMutablePointer<group>? = nil
    var buffer = [CChar](repeating: 0, count: 16_384)
    let status = getgrnam_r(name, &group, &buffer, buffer.count, &result)
    guard status == 0, result != nil else { return nil }
    return group.gr_gid
  }

  /// The name of the group `gid` (`getgrgid_r`), or `nil` when the group database has none.
  public static func groupName(id gid: UInt32) -> String? {
    var group = group()
    var result: UnsafeMutablePointer<group>? = nil
    var buffer = [CChar](repeating: 0, count: 16_384)
    let status = getgrgid_r(gid, &group, &buffer, buffer.count, &result)
    guard status == 0, result != nil, let name = group.gr_name else { return nil }
    return String(cString: name)
  }

  /// The primary and supplementary gids of the user `uid` (`getpwuid_r` + `getgrouplist`);
  /// empty when the uid has no passwd entry.
  public static func groups(ofUser uid: UInt32) -> [UInt32] {
    var passwd = passwd()
    var result: UnsafeMutablePointer<passwd>? = nil
    var buffer = [CChar](repeating: 0, count: 16_384)
    guard getpwuid_r(uid, &passwd, &buffer, buffer.count, &result) == 0, result != nil,
      let name = passwd.pw_name
    else { return [] }
    let primary = passwd.pw_gid
    var count: Int32 = 64
    for _ in 0..<4 {
      var groups = [gid_t](repeating: 0, count: Int(count))
      var wanted = count
      if getgrouplist(name, primary, &groups, &wanted) >= 0 {
        return Array(groups.prefix(Int(max(0, wanted))))
      }
      guard wanted > count else { break }
      count = wanted
    }
    return [primary]
  }
}
