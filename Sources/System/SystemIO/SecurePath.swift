import Glibc

/// Checks that no other user can replace what lies below a directory by renaming or re-linking
/// one of the directories above it (the rule of OpenSSH's `safe_path`): the directory `/etc`
/// is safe to put a socket or state in only if `/` is too.
public enum SecurePath {
  /// The first ancestor of `directory` (an absolute or relative path; checked from `/` down,
  /// excluding `directory` itself, which its caller checks by its own rule) that another user
  /// could use to swap what is below it, and why; `nil` when every ancestor is safe.
  ///
  /// An ancestor is safe when it is owned by root or this process's effective user, and is not
  /// writable by group or others unless its sticky bit is set (`/tmp`: others cannot rename or
  /// remove what they do not own there). A symbolic link on the way must be owned by root or
  /// this user too, and the directories it leads to are checked by the same rule; so must
  /// `directory` itself when it is a symbolic link (in a sticky directory its owner could point
  /// it elsewhere). Ancestors that do not exist yet end the check (they will be created by this
  /// process). Each reason ends with what to do.
  ///
  /// - Returns: `(path, reason)` of the first unsafe ancestor.
  public static func unsafeAncestor(of directory: String) -> (path: String, reason: String)? {
    var absolute = directory
    if !absolute.hasPrefix("/") {
      var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
      guard getcwd(&buffer, buffer.count) != nil else { return nil }
      let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      absolute = cwd + "/" + absolute
    }
    if let problem = check(ancestorsOf: absolute) { return problem }
    // Through the links: the directories the path really goes through.
    guard let resolved = realpath(absolute, nil) else { return nil }
    defer { free(resolved) }
    return check(ancestorsOf: String(cString: resolved))
  }

  private static func check(ancestorsOf path: String) -> (path: String, reason: String)? {
    let components = path.split(separator: "/").map(String.init)
    var prefix = ""
    let me = geteuid()
    // "/" and every ancestor: all components but the last.
    for index in 0..<max(0, components.count) {
      let ancestor = prefix.isEmpty ? "/" : prefix
      var link = stat()
      guard lstat(ancestor, &link) == 0 else { return nil }
      if link.st_mode & S_IFMT == S_IFLNK, link.st_uid != 0, link.st_uid != me {
        return (
          ancestor,
          "a symbolic link owned by uid \(link.st_uid): give the real path, or a link owned by root or uid \(me)"
        )
      }
      var info = stat()
      guard stat(ancestor, &info) == 0 else { return nil }
      if info.st_uid != 0 && info.st_uid != me {
        return (
          ancestor,
          "owned by uid \(info.st_uid), who could replace what is below it: give a directory whose parents belong to root or uid \(me)"
        )
      }
      if info.st_mode & 0o022 != 0 && info.st_mode & S_ISVTX == 0 {
        return (
          ancestor,
          "writable by group or others without the sticky bit (mode \(String(info.st_mode & 0o7777, radix: 8))): chmod go-w \(ancestor), or give another directory"
        )
      }
      prefix += "/" + components[index]
    }
    var link = stat()
    if !components.isEmpty, lstat(path, &link) == 0, link.st_mode & S_IFMT == S_IFLNK, link.st_uid != 0,
      link.st_uid != me
    {
      return (path, "a symbolic link owned by uid \(link.st_uid): give the real path, or a link owned by root or uid \(me)")
    }
    return nil
  }
}
