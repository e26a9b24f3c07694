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
  /// it elsewhere), and every link a link leads through: the path is walked component by
  /// component as the kernel resolves it (``untrustedLink(in:)``), so a trailing `/` or a chain
  /// of links hides none. Ancestors that do not exist yet end the check (they will be created by
  /// this process). Each reason ends with what to do.
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
    if let problem = untrustedLink(in: absolute) { return problem }
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
          "a symbolic link owned by uid \(link.st_uid): give the real path, or a link owned by \(owners(me))"
        )
      }
      var info = stat()
      guard stat(ancestor, &info) == 0 else { return nil }
      if info.st_uid != 0 && info.st_uid != me {
        return (
          ancestor,
          "owned by uid \(info.st_uid), who could replace what is below it: give a directory whose parents belong to \(owners(me))"
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
    return nil
  }

  /// The first symbolic link met while `path` (absolute) is resolved as the kernel resolves it
  /// (component by component, each link's target put in its place, `..` taken on the resolved
  /// path) that is owned by neither root nor this process's effective user; `nil` when there is
  /// none. A component that does not exist ends the walk (it will be created), and so do more
  /// than 40 links (the kernel's limit: opening the path then fails with `ELOOP`).
  static func untrustedLink(in path: String) -> (path: String, reason: String)? {
    let me = geteuid()
    var pending = path.split(separator: "/").map(String.init)
    var resolved = ""
    var links = 0
    var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    while !pending.isEmpty {
      let name = pending.removeFirst()
      if name == "." { continue }
      if name == ".." {
        resolved = resolved.lastIndex(of: "/").map { String(resolved[..<$0]) } ?? ""
        continue
      }
      let candidate = resolved + "/" + name
      var info = stat()
      guard lstat(candidate, &info) == 0 else { return nil }
      guard info.st_mode & S_IFMT == S_IFLNK else {
        resolved = candidate
        continue
      }
      if info.st_uid != 0 && info.st_uid != me {
        return (
          candidate,
          "a symbolic link owned by uid \(info.st_uid): give the real path, or a link owned by \(owners(me))"
        )
      }
      links += 1
      let count = readlink(candidate, &target, target.count - 1)
      guard links <= 40, count > 0 else { return nil }
      let text = String(decoding: target.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
      if text.hasPrefix("/") { resolved = "" }
      pending = text.split(separator: "/").map(String.init) + pending
    }
    return nil
  }

  /// Who may own what is on the way: `root`, or `root or uid N` for a daemon that is not root.
  static func owners(_ me: uid_t) -> String { me == 0 ? "root" : "root or uid \(me)" }
}
