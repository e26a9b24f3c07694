import Glibc
import SystemIO

/// A user name and password for the broker, read from a file (never from the command line,
/// where every user could read them in `/proc`).
public struct MQTTCredentials: Sendable, Hashable {
  /// The user name, 1...256 bytes.
  public var user: String
  /// The password, 0...1024 bytes.
  public var password: String

  /// Creates credentials.
  public init(user: String, password: String) {
    self.user = user
    self.password = password
  }

  /// Reads `USER:PASSWORD` from the first line of `path` (the password is everything after the
  /// first `:`; a trailing newline is dropped).
  ///
  /// Checked as ssh checks a private key: a regular file (symbolic links not followed), owned by
  /// the daemon's effective user or root, readable or writable by nobody else (mode `0600` or
  /// `0400`: no group or other bits), at most 4 KiB.
  ///
  /// - Throws: ``MQTTSettingError`` (key `mqtt-credentials`) saying what to change, e.g.
  ///   `chmod 600 FILE`.
  public static func read(path: String) throws(MQTTSettingError) -> MQTTCredentials {
    func fail(_ reason: String) -> MQTTSettingError { MQTTSettingError(key: "mqtt-credentials", value: path, reason: reason) }
    let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    guard descriptor >= 0 else {
      // O_NOFOLLOW on a link fails with ELOOP, whose text ("too many levels") misleads.
      guard errno != ELOOP else { throw fail("a symbolic link, not followed: give the file itself") }
      throw fail("cannot open it: \(String(cString: strerror(errno)))")
    }
    defer { close(descriptor) }
    var info = stat()
    guard fstat(descriptor, &info) == 0 else { throw fail("cannot stat it: \(String(cString: strerror(errno)))") }
    guard (info.st_mode & S_IFMT) == S_IFREG else { throw fail("not a regular file") }
    guard info.st_uid == geteuid() || info.st_uid == 0 else {
      throw fail(
        "owned by uid \(info.st_uid): it must belong to the daemon's user (uid \(geteuid())) or root: chown \(geteuid()) \(path)")
    }
    guard info.st_mode & 0o077 == 0 else {
      throw fail(
        "mode \(String(info.st_mode & 0o777, radix: 8)) lets group or others access it: chmod 600 \(path)")
    }
    guard info.st_size <= 4096 else { throw fail("larger than 4 KiB: it holds one USER:PASSWORD line") }
    let bytes: [UInt8]
    do { bytes = try SystemIO.readToEnd(descriptor, limit: 4096) } catch { throw fail("cannot read it: \(error)") }
    // A byte-order mark some editors write is not part of the user name (as in the config file).
    let text = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...]
    var line = text.prefix { $0 != UInt8(ascii: "\n") }
    if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
    guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
      throw fail("the first line must be USER:PASSWORD")
    }
    let user = String(decoding: line[..<colon], as: UTF8.self)
    let password = String(decoding: line[(colon + 1)...], as: UTF8.self)
    guard user.utf8.count <= 256, password.utf8.count <= 1024, !line.contains(0) else {
      throw fail("the user name (at most 256 bytes) or password (at most 1024 bytes) is too long or holds NUL")
    }
    return MQTTCredentials(user: user, password: password)
  }
}
