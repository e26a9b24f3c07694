import LocationProtocol
import LocationModel
import SystemIO
import Glibc

/// Why the listening socket could not be set up; each message says what to do.
public enum ListenError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The path does not fit `sockaddr_un` (at most 107 bytes).
  case pathTooLong(String)
  /// The parent directory could not be created.
  case cannotCreateDirectory(String, errno: Int32)
  /// A live server already listens at the path.
  case alreadyListening(String)
  /// Something other than a socket exists at the path.
  case notASocket(String)
  /// A system call failed.
  case systemCall(String, path: String, errno: Int32)
  /// `--group` names a group that does not exist.
  case noSuchGroup(String)
  /// `$LISTEN_FDS` passed a descriptor that is not a listening Unix stream socket.
  case invalidActivatedSocket(fd: Int32)

  /// A message for the log that says what to do, naming the settings as flags (`--group`).
  public var description: String { description(naming: { "--" + $0 }) }

  /// A message for the log that says what to do, naming each setting (`socket`, `group`) as
  /// `naming` writes it: `--group` for a flag, `group` for a config file line.
  public func description(naming setting: (String) -> String) -> String {
    switch self {
    case .pathTooLong(let path):
      return "socket path \(path) is longer than 107 bytes: choose a shorter \(setting("socket")) path"
    case .cannotCreateDirectory(let path, let code):
      return
        "cannot create directory \(path): \(String(cString: strerror(code))); locationd creates the socket's directory but not its parents: create them or choose another \(setting("socket")) path"
    case .alreadyListening(let path):
      return
        "another server is listening at \(path): stop it (systemctl stop locationd) or choose another \(setting("socket")) path"
    case .notASocket(let path):
      return "\(path) exists and is not a socket: remove it or choose another \(setting("socket")) path"
    case .systemCall(let call, let path, let code):
      return "\(call) failed for \(path): \(String(cString: strerror(code)))"
    case .noSuchGroup(let name):
      let name = TextRules.escapingInvisibles(name)
      return "group \(name) does not exist: create it (groupadd \(name)) or change \(setting("group"))"
    case .invalidActivatedSocket(let fd):
      return
        "file descriptor \(fd) passed by systemd is not a listening Unix stream socket: check locationd.socket (ListenStream=)"
    }
  }
}

/// Socket activation (`sd_listen_fds(3)` protocol): descriptors passed by systemd from fd 3 on.
public enum SocketActivation {
  /// The first passed descriptor, `SD_LISTEN_FDS_START`.
  public static let firstDescriptor: Int32 = 3

  /// The descriptors passed to this process: `$LISTEN_FDS` of them from fd 3, when `$LISTEN_PID`
  /// equals `pid` (or is unset, as some launchers leave it). Empty otherwise or on malformed values.
  public static func passedDescriptors(environment: [String: String], pid: Int32) -> [Int32] {
    guard let countText = environment["LISTEN_FDS"], let count = Int32(countText), count > 0,
      count < 4096
    else {
      return []
    }
    if let pidText = environment["LISTEN_PID"], !pidText.isEmpty {
      guard let listenPID = Int32(pidText), listenPID == pid else { return [] }
    }
    return Array(firstDescriptor..<(firstDescriptor + count))
  }

  /// Removes `LISTEN_FDS`, `LISTEN_PID` and `LISTEN_FDNAMES` from this process's environment, so
  /// children do not inherit them (as `sd_listen_fds(1)` does).
  public static func unsetEnvironment() {
    unsetenv("LISTEN_FDS")
    unsetenv("LISTEN_PID")
    unsetenv("LISTEN_FDNAMES")
  }
}

/// A listening Unix stream socket: passed by systemd, or created at a path.
public struct ListeningSocket: Sendable {
  /// The listening descriptor (non-blocking, close-on-exec).
  public let fd: Int32
  /// The path, when known (created here, or the configured path when activated).
  public let path: String
  /// Whether systemd passed the socket (then the path belongs to systemd and is not removed).
  public let isActivated: Bool
  /// The socket's directory when ``create(path:group:)`` made it (removed again by ``close()``
  /// when empty), `nil` when it existed.
  public var createdDirectory: String? = nil

  /// Uses the descriptor systemd passed when there is one, otherwise creates the socket at `path`.
  ///
  /// - Parameters:
  ///   - path: the socket path, e.g. `/run/locationd/locationd.sock`.
  ///   - group: group to own a created socket (mode 0660), or `nil` to keep the creator's group.
  ///   - environment: the process environment (`LISTEN_FDS`, `LISTEN_PID`).
  /// - Throws: ``ListenError``.
  public static func open(path: String, group: String?, environment: [String: String])
    throws(ListenError)
    -> ListeningSocket
  {
    let passed = SocketActivation.passedDescriptors(environment: environment, pid: getpid())
    if let fd = passed.first {
      SocketActivation.unsetEnvironment()
      return try adopt(fd: fd, path: path)
    }
    return try create(path: path, group: group)
  }

  /// Adopts an inherited listening socket (checks it is a listening Unix stream socket); its
  /// ``path`` is the address it is bound to, or `path` when that cannot be read.
  ///
  /// - Throws: ``ListenError/invalidActivatedSocket(fd:)``.
  public static func adopt(fd: Int32, path: String) throws(ListenError) -> ListeningSocket {
    var type: Int32 = 0
    var accepting: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0,
      type == Int32(SOCK_STREAM.rawValue)
    else {
      throw .invalidActivatedSocket(fd: fd)
    }
    length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting == 1 else {
      throw .invalidActivatedSocket(fd: fd)
    }
    setNonBlockingCloseOnExec(fd)
    return ListeningSocket(fd: fd, path: boundPath(of: fd) ?? path, isActivated: true)
  }

  /// The path a Unix socket is bound to (`getsockname`), `@name` for an abstract socket, `nil`
  /// when unnamed or not a Unix socket.
  public static func boundPath(of fd: Int32) -> String? {
    var address = sockaddr_un()
    var length = socklen_t(MemoryLayout<sockaddr_un>.size)
    let result = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
    guard result == 0, address.sun_family == sa_family_t(AF_UNIX), Int(length) > offset else {
      return nil
    }
    var bytes = withUnsafeBytes(of: &address.sun_path) {
      Array($0.prefix(min($0.count, Int(length) - offset)))
    }
    guard let first = bytes.first else { return nil }
    if first == 0 {
      bytes[0] = UInt8(ascii: "@")
    } else if let end = bytes.firstIndex(of: 0) {
      bytes.removeSubrange(end...)
    }
    return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
  }

  /// Creates, binds and listens at `path`: creates the socket's directory (0755) when it is
  /// missing and its own parent exists (one level, never a whole path: the same rule as the state
  /// directory), removes a stale socket file only when nothing accepts on it, and gives it mode
  /// 0660 and the group when `group` names one, or mode 0600 (only its owner may connect) when
  /// `group` is `nil` or empty: the same rule as the service's authorization, which is root only
  /// then.
  ///
  /// - Throws: ``ListenError``.
  public static func create(path: String, group: String?) throws(ListenError) -> ListeningSocket {
    guard var address = UnixAddress(path: path), !path.hasPrefix("@") else {
      throw .pathTooLong(path)
    }
    var gid: UInt32? = nil
    if let group, !group.isEmpty {
      guard let found = GroupDatabase.groupID(named: group) else { throw .noSuchGroup(group) }
      gid = found
    }
    let created = try makeParentDirectory(of: path)
    func undo() { if let created { rmdir(created) } }
    do throws(ListenError) {
      try removeStaleSocket(at: path)
    } catch {
      undo()
      throw error
    }
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else {
      let code = errno
      undo()
      throw .systemCall("socket", path: path, errno: code)
    }
    // Bind with a restrictive umask so the socket is never briefly world-connectable: 0660 when
    // a group may connect, 0600 when only the owner may.
    let oldMask = umask(gid == nil ? 0o177 : 0o117)
    let bound = address.withSockaddr { bind(fd, $0, $1) }
    let bindErrno = errno
    umask(oldMask)
    guard bound == 0 else {
      _ = Glibc.close(fd)
      undo()
      if bindErrno == EADDRINUSE { throw .alreadyListening(path) }
      throw .systemCall("bind", path: path, errno: bindErrno)
    }
    // The umask gave the socket its mode at bind; only the group is left to set.
    if let gid, let code = Self.setGroup(path, gid) {
      _ = Glibc.close(fd)
      unlink(path)
      undo()
      throw .systemCall("chown", path: path, errno: code)
    }
    guard listen(fd, 64) == 0 else {
      let code = errno
      _ = Glibc.close(fd)
      unlink(path)
      undo()
      throw .systemCall("listen", path: path, errno: code)
    }
    setNonBlockingCloseOnExec(fd)
    return ListeningSocket(fd: fd, path: path, isActivated: false, createdDirectory: created)
  }

  /// Closes the socket and, unless systemd owns it, removes the socket file, and the socket's
  /// directory when ``create(path:group:)`` made it and it is empty.
  public func close() {
    _ = Glibc.close(fd)
    if !isActivated { unlink(path) }
    if let createdDirectory { rmdir(createdDirectory) }
  }

  /// Gives the socket file mode 0660 and `group`, or mode 0600 and the daemon's own group when
  /// `group` is `nil` or empty (root only), as ``create(path:group:)`` does: a reload's new
  /// `group` applies to who may connect.
  /// A path that is no longer a socket (a link or another file put there) is left alone.
  ///
  /// - Returns: `false` for a socket systemd passed: its owner, group and mode are systemd's
  ///   (`SocketUser=`, `SocketGroup=`, `SocketMode=` in locationd.socket) and stay as they are.
  /// - Throws: ``ListenError/noSuchGroup(_:)``, or ``ListenError/systemCall(_:path:errno:)``
  ///   when `chown` or `chmod` fails or the path is no longer a socket (`ENOTSOCK`).
  public func applyOwnership(group: String?) throws(ListenError) -> Bool {
    guard !isActivated else { return false }
    var gid = getegid()
    var mode: mode_t = 0o600
    if let group, !group.isEmpty {
      guard let found = GroupDatabase.groupID(named: group) else { throw .noSuchGroup(group) }
      gid = found
      mode = 0o660
    }
    if let code = Self.setGroup(path, gid) { throw .systemCall("chown", path: path, errno: code) }
    // Not through a link either (glibc checks the path is not one before changing the mode).
    if fchmodat(AT_FDCWD, path, mode, AT_SYMLINK_NOFOLLOW) != 0 {
      throw .systemCall("chmod", path: path, errno: errno)
    }
    return true
  }

  /// Gives the socket file at `path` the group `gid`, without following a symbolic link and only
  /// when `path` is still a socket: someone who could replace it (with a link, or a hard link to
  /// another file) must not get another file's group changed. The mode stays the one it was
  /// bound with. Returns the `errno` of the failure (`ENOTSOCK` when `path` is no longer a
  /// socket), `nil` on success.
  package static func setGroup(_ path: String, _ gid: UInt32) -> Int32? {
    var info = stat()
    guard fstatat(AT_FDCWD, path, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return errno }
    guard info.st_mode & S_IFMT == S_IFSOCK else { return ENOTSOCK }
    guard fchownat(AT_FDCWD, path, UInt32.max, gid, AT_SYMLINK_NOFOLLOW) == 0 else { return errno }
    return nil
  }

  package static func setNonBlockingCloseOnExec(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFL)
    if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    let fdFlags = fcntl(fd, F_GETFD)
    if fdFlags >= 0 { _ = fcntl(fd, F_SETFD, fdFlags | FD_CLOEXEC) }
  }

  /// Creates the socket's directory when missing (one level); returns it when it was created.
  private static func makeParentDirectory(of path: String) throws(ListenError) -> String? {
    guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return nil }
    let parent = String(path[..<slash])
    if mkdir(parent, 0o755) == 0 { return parent }
    let code = errno
    guard code == EEXIST else { throw .cannotCreateDirectory(parent, errno: code) }
    // Something is there: it must be a directory (a link to one will do). A regular file or a
    // dangling link leaves no directory to put the socket in, as a missing parent would.
    var info = stat()
    guard stat(parent, &info) == 0 else { throw .cannotCreateDirectory(parent, errno: errno) }
    guard info.st_mode & S_IFMT == S_IFDIR else { throw .cannotCreateDirectory(parent, errno: ENOTDIR) }
    return nil
  }

  private static func removeStaleSocket(at path: String) throws(ListenError) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    guard (info.st_mode & S_IFMT) == S_IFSOCK else { throw .notASocket(path) }
    // Something listens when a connect succeeds (or is only refused for lack of backlog room).
    let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard probe >= 0 else { throw .systemCall("socket", path: path, errno: errno) }
    defer { _ = Glibc.close(probe) }
    guard var address = UnixAddress(path: path) else { throw .pathTooLong(path) }
    let connected = address.withSockaddr { connect(probe, $0, $1) }
    if connected == 0 || errno == EAGAIN { throw .alreadyListening(path) }
    guard errno == ECONNREFUSED else { throw .systemCall("connect", path: path, errno: errno) }
    Log.event("staleSocketRemoved", ["path": path])
    guard unlink(path) == 0 else { throw .systemCall("unlink", path: path, errno: errno) }
  }
}
