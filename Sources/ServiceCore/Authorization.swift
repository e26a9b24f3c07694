import Glibc
import LocationModel
import LocationProtocol

/// The credentials of the process at the other end of a Unix socket, from `SO_PEERCRED` and
/// `SO_PEERGROUPS`.
///
/// The kernel records them when the peer called `connect(2)`; they cannot be forged by the peer.
public struct PeerCredentials: Sendable, Hashable {
  /// The peer's process id.
  public var pid: Int32
  /// The peer's effective user id.
  public var uid: UInt32
  /// The peer's effective group id.
  public var gid: UInt32
  /// The peer process's supplementary group ids at `connect(2)` (`SO_PEERGROUPS`, Linux 4.13 and
  /// later; empty when the kernel does not report them). The same list the kernel checks
  /// against the socket file's group; D-Bus reports it as `UnixGroupIDs` in
  /// `GetConnectionCredentials`.
  public var groups: [UInt32]

  /// Creates credentials (a front-end reads them from its transport; tests make them up).
  public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
    self.pid = pid
    self.uid = uid
    self.gid = gid
    self.groups = groups
  }
}

/// Decides whether a peer may use the service: root, or a process in the configured group.
///
/// "In the group" means the group is the peer process's effective gid or one of its
/// supplementary groups, as the kernel reported them when it connected (``PeerCredentials``:
/// `SO_PEERCRED` and `SO_PEERGROUPS`); the group database is read only for the group's name to
/// gid. These are the groups the kernel checks against the socket file's mode (0660, the
/// configured group), so the file-mode gate and this rule agree by construction: a process
/// that may connect is authorized and one that is authorized could connect. polkit's
/// `unix-group:` and the D-Bus daemon's `<policy group="G">` differ (they read the group
/// database); deciding on the process's own groups is what a D-Bus front-end can do too, from
/// `GetConnectionCredentials` (`UnixGroupIDs`).
///
/// As with any file permission, a user newly added to the group (`usermod -aG G USER`) is
/// authorized from a process of a new login session on, which carries the group; processes of
/// the old session, and a process that dropped its supplementary groups
/// (`setpriv --clear-groups`), are not. A reload re-decides with the credentials recorded at
/// connect, so a reload can grant or revoke by changing the configured group, never by a change
/// of the database's members.
///
/// The process holds one rule at a time, in ``AuthorizationAuthority``.
public struct Authorizer: Sendable {
  /// The group whose members are authorized (e.g. `locationd`), or `nil` for root only.
  public var groupName: String?

  /// Creates an authorizer for `groupName` (root is always authorized).
  public init(groupName: String?) {
    self.groupName = groupName
  }

  /// Decides for `peer`: root, or a peer whose effective gid or one of whose supplementary
  /// groups (``PeerCredentials/groups``) is the configured group.
  ///
  /// - Returns: `.authorized` or `.denied`, and a reason for the log (`root`, `group`,
  ///   `rootOnly`, `notInGroup`, `noSuchGroup`).
  public func decide(for peer: PeerCredentials) -> (status: AuthorizationStatus, reason: String) {
    if peer.uid == 0 { return (.authorized, "root") }
    guard let groupName, !groupName.isEmpty else { return (.denied, "rootOnly") }
    guard let gid = Self.groupID(named: groupName) else { return (.denied, "noSuchGroup") }
    if peer.gid == gid || peer.groups.contains(gid) { return (.authorized, "group") }
    return (.denied, "notInGroup")
  }

  /// The gid of a group name (`getgrnam_r`), or `nil` when there is no such group.
  public static func groupID(named name: String) -> UInt32? {
    var group = group()
    let found = withEntryBuffer { buffer, size, result in getgrnam_r(name, &group, buffer, size, &result) }
    return found ? group.gr_gid : nil
  }

  /// The name of the group `gid` (`getgrgid_r`), or `nil` when the group database has none.
  public static func groupName(id gid: UInt32) -> String? {
    var group = group()
    var name: String?
    _ = withEntryBuffer { buffer, size, result in
      let status = getgrgid_r(gid, &group, buffer, size, &result)
      // The strings live in the buffer: copy while it exists.
      if status == 0, result != nil, let text = group.gr_name { name = String(cString: text) }
      return status
    }
    return name
  }

  /// Calls a `get*_r` lookup with a buffer for the entry's strings, from 16 KiB doubling up to
  /// 1 MiB while the lookup answers `ERANGE` (a group with thousands of members needs more than
  /// the first size). The C library never writes past the size it is given.
  ///
  /// - Returns: whether the lookup found an entry (returned 0 and set its result pointer).
  /// The entry's strings point into the buffer, which exists only during `lookup`: copy them
  /// there.
  static func withEntryBuffer<Entry>(
    _ lookup: (UnsafeMutablePointer<CChar>, Int, inout UnsafeMutablePointer<Entry>?) -> Int32
  ) -> Bool {
    var size = 16_384
    while size <= 1 << 20 {
      var buffer = [CChar](repeating: 0, count: size)
      var result: UnsafeMutablePointer<Entry>? = nil
      let status = buffer.withUnsafeMutableBufferPointer { storage -> Int32 in
        guard let base = storage.baseAddress else { return ENOMEM }
        return lookup(base, storage.count, &result)
      }
      if status == ERANGE {
        size *= 2
        continue
      }
      return status == 0 && result != nil
    }
    return false
  }

  /// The primary and supplementary gids of the user `uid` (`getpwuid_r` + `getgrouplist`);
  /// empty when the uid has no passwd entry.
  public static func groups(ofUser uid: UInt32) -> [UInt32] {
    var passwd = passwd()
    var userName: String?
    _ = withEntryBuffer { buffer, size, result in
      let status = getpwuid_r(uid, &passwd, buffer, size, &result)
      if status == 0, result != nil, let text = passwd.pw_name { userName = String(cString: text) }
      return status
    }
    guard let name = userName else { return [] }
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
