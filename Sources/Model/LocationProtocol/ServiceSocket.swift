/// Where clients find the service.
public enum ServiceSocket {
  /// The Unix stream socket locationd listens on unless configured otherwise (`--socket`, the
  /// config file, or the socket systemd passes), and where locationctl connects unless told
  /// otherwise (`--socket`, `$LOCATIOND_SOCKET`): `/run/locationd/locationd.sock` (systemd's
  /// `RuntimeDirectory=locationd`).
  public static let defaultPath = "/run/locationd/locationd.sock"
}
