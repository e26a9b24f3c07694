import Glibc
import LocationModel
import LocationProtocol

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

  /// Creates credentials (a front-end reads them from its transport; tests make them up).
  public init(pid: Int32, uid: UInt32, gid: UInt32) {
    self.pid = pid
    self.uid = uid
    self.gid = gid
  }
}

/// Decides whether a peer may use the service: root, or a member of the configured group.
///
/// Membership counts the peer's effective gid (from `SO_PEERCRED`), the user's primary group
/// and its supplementary groups from the group database (`getpwuid_r` + `getgrouplist`). The
/// group is looked up at every decision, so a group created after start counts.
///
/// Supplementary groups count because that is what "member of group G" means on Linux: `usermod
/// -aG G USER` adds a supplementary group, and the other services that gate on a group decide
/// the same way (polkit's `unix-group:`, the D-Bus daemon's `<policy group="G">`, gpsd's and
/// every other socket whose file mode admits a group, which the kernel checks against the
/// process's supplementary groups). They are read from the group database, not from the peer
/// process (`SO_PEERCRED` carries only its effective ids), so a user added to the group is
/// authorized from its next connection on, without logging in again; one removed from it is not.
/// A process that dropped its supplementary groups (`setpriv --clear-groups`) still counts as its
/// user: the decision is about the user, as polkit's is.
///
/// The process holds one rule at a time, in ``AuthorizationAuthority``.
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
