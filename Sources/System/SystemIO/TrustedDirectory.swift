#if canImport(Glibc)
  import Glibc
#endif

/// The one rule for a directory the daemon writes in or serves a socket from (the state
/// directory, the NMEA feed's socket directory): nobody but the daemon's user (or root) may
/// plant or swap anything in it or above it.
///
/// The directory itself must be owned by this process's effective user or by root and must not
/// be writable by group or others (mode `& 0o022 == 0`); every directory above it must pass
/// ``SecurePath/unsafeAncestor(of:)`` (OpenSSH's `safe_path` rule, sticky directories allowed).
public enum TrustedDirectory {
  /// Why a directory breaks the rule, or could not be examined.
  public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
    /// `path` (the directory or one above it) would let another user plant or swap files;
    /// `reason` says why and, for the directory itself, what to change (`chown`, `chmod go-w`).
    case untrusted(path: String, reason: String)
    /// A system call failed: `operation` (`open`, `fstat`), the path and `errno`.
    case system(operation: String, path: String, errno: Int32)

    /// One line naming the path and the reason.
    public var description: String {
      switch self {
      case .untrusted(let path, let reason): return "\(path) is \(reason)"
      case .system(let operation, let path, let code): return "\(operation) \(path): \(SystemError(code))"
      }
    }
  }

  /// Why the directory described by `info` at `path` breaks the rule (owner and mode only, not
  /// its ancestors); `nil` when it keeps it.
  public static func problem(_ info: stat, path: String) -> String? {
    let me = geteuid()
    if info.st_uid != me && info.st_uid != 0 {
      return "owned by uid \(info.st_uid), not by the daemon's uid \(me) or root: chown \(me) \(path)"
    }
    if info.st_mode & 0o022 != 0 {
      return "writable by group or others (mode \(String(info.st_mode & 0o7777, radix: 8))): chmod go-w \(path)"
    }
    return nil
  }

  /// Opens `path` as a directory (`O_DIRECTORY|O_CLOEXEC`) and checks owner and mode on the open
  /// descriptor, so what is checked is what is then used; the caller closes it.
  ///
  /// - Throws: ``Failure/system(operation:path:errno:)`` when it cannot be opened or examined,
  ///   ``Failure/untrusted(path:reason:)`` when it breaks the rule.
  public static func open(_ path: String) throws(Failure) -> Int32 {
    let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw .system(operation: "open", path: path, errno: errno) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      let code = errno
      close(fd)
      throw .system(operation: "fstat", path: path, errno: code)
    }
    if let reason = problem(info, path: path) {
      close(fd)
      throw .untrusted(path: path, reason: reason)
    }
    return fd
  }

  /// Checks `path` and every directory above it.
  ///
  /// - Parameter missingIsAllowed: when `true`, a directory that does not exist passes (its
  ///   ancestors are still checked): the caller creates it.
  /// - Throws: ``Failure``: the first directory (from `/` down) that breaks the rule, or the
  ///   directory's open failing.
  public static func check(_ path: String, missingIsAllowed: Bool = false) throws(Failure) {
    if let (ancestor, reason) = SecurePath.unsafeAncestor(of: path) {
      throw .untrusted(path: ancestor, reason: reason)
    }
    let fd: Int32
    do {
      fd = try open(path)
    } catch {
      if missingIsAllowed, case .system(_, _, ENOENT) = error { return }
      throw error
    }
    close(fd)
  }
}
