import Glibc
import LocationModel
import LocationProtocol
import SystemIO

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
    guard let gid = GroupDatabase.groupID(named: groupName) else { return (.denied, "noSuchGroup") }
    if peer.gid == gid { return (.authorized, "group") }
    if GroupDatabase.groups(ofUser: peer.uid).contains(gid) { return (.authorized, "group") }
    return (.denied, "notInGroup")
  }
}
