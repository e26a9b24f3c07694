/// Whether a client may receive locations (CoreLocation's `CLAuthorizationStatus`, reduced to
/// the three states a daemon can tell apart). The raw values are the wire names.
public enum AuthorizationStatus: String, Sendable, Hashable, Codable {
  /// The client has not asked yet (`request` not sent), or nothing decided.
  case notDetermined
  /// The client asked and is root or a member of the configured group: it receives locations.
  case authorized
  /// The client asked and is neither root nor a member of the configured group: it receives
  /// nothing.
  case denied
}
