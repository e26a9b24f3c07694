import Synchronization
import LocationModel

/// The one place the process decides who may use the service: holds the current ``Authorizer``
/// (root, or the members of one group), replaced as a whole when the configuration is reloaded.
///
/// Every decision goes through it: ``LocationService`` asks it for `request`, re-asks it for every
/// decided client when the rule changes (``LocationService/reloadAuthorization(_:)``), and pushes
/// the outcome down to the ``LocationManager``, which keeps no rule of its own. Front-ends never
/// decide: they pass each request with the peer's credentials. The socket file's mode admits the
/// same processes (``Authorizer``: the kernel checks the same groups against it).
///
/// Safe to use from any thread: the rule is kept under a `Mutex`, copied out, and the decision
/// (the group's name to gid, which may block on NSS) runs outside the lock.
public final class AuthorizationAuthority: Sendable {
  private let rule: Mutex<Authorizer>

  /// Creates an authority that decides with `authorizer` until ``replace(with:)``.
  public init(_ authorizer: Authorizer) {
    rule = Mutex(authorizer)
  }

  /// The current rule.
  public var authorizer: Authorizer { rule.withLock { $0 } }

  /// The group whose members are authorized now, or `nil` (or empty) when only root is.
  public var groupName: String? { rule.withLock { $0.groupName } }

  /// Replaces the rule; decisions made from now on use `authorizer`. Re-deciding clients already
  /// decided is the service's job (``LocationService/reloadAuthorization(_:)``).
  public func replace(with authorizer: Authorizer) {
    rule.withLock { $0 = authorizer }
  }

  /// Decides for `peer` with the current rule (see ``Authorizer/decide(for:)``).
  ///
  /// - Returns: `.authorized` or `.denied`, and the reason for the log.
  public func decide(for peer: PeerCredentials) -> (status: AuthorizationStatus, reason: String) {
    authorizer.decide(for: peer)
  }

  /// What to tell a peer that is not authorized: how to become so under the current rule.
  ///
  /// - Returns: e.g. `run as root or as a member of group locationd`, or `run as root`.
  public var remedy: String {
    guard let group = groupName, !group.isEmpty else { return "run as root" }
    return "run as root or as a member of group \(group)"
  }
}
