import Glibc
import LocationModel
import LocationProtocol
import SystemIO

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
    guard let gid = GroupDatabase.groupID(named: groupName) else { return (.denied, "noSuchGroup") }
    if peer.gid == gid || peer.groups.contains(gid) { return (.authorized, "group") }
    return (.denied, "notInGroup")
  }
}
