#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Look-ups in the system's group and user databases (`/etc/group`, `/etc/passwd` or whatever
/// NSS is configured to consult), through the reentrant POSIX calls `getgrnam_r`, `getgrgid_r`,
/// `getpwuid_r` and `getgrouplist`.
///
/// Each call may block while NSS asks a directory service: call them outside locks. Nothing is
/// cached, so a group created or changed after start is seen at the next look-up.
public enum GroupDatabase {
  /// The gid of the group called `name` (`getgrnam_r`, POSIX.1-2008), or `nil` when the group
  /// database has no such group (or the look-up failed).
  public static func groupID(named name: String) -> UInt32? {
    var group = group()
    let found = withEntryBuffer { buffer, size, result in getgrnam_r(name, &group, buffer, size, &result) }
    return found ? group.gr_gid : nil
  }

  /// The name of the group `gid` (`getgrgid_r`, POSIX.1-2008), or `nil` when the group database
  /// has none.
  public static func groupName(id gid: UInt32) -> String? {
    var group = group()
    var name: String?
    _ = withEntryBuffer { buffer, size, result in
      let status = getgrgid_r(gid, &group, buffer, size, &result)
      // The strings live in the buffer: copy while it exists.
      if status == 0, result != nil, let text = group.gr_name { name = String(cString: text) }
      return status
    }
    return name
  }

  /// The primary and supplementary gids of the user `uid` (`getpwuid_r` + `getgrouplist`), the
  /// primary first; empty when the uid has no passwd entry. At most four growing tries are made
  /// for a user in very many groups; if they all fall short, only the primary gid is returned.
  public static func groups(ofUser uid: UInt32) -> [UInt32] {
    var passwd = passwd()
    var userName: String?
    _ = withEntryBuffer { buffer, size, result in
      let status = getpwuid_r(uid, &passwd, buffer, size, &result)
      if status == 0, result != nil, let text = passwd.pw_name { userName = String(cString: text) }
      return status
    }
    guard let name = userName else { return [] }
    let primary = passwd.pw_gid
    var count: Int32 = 64
    for _ in 0..<4 {
      var groups = [gid_t](repeating: 0, count: Int(count))
      var wanted = count
      if getgrouplist(name, primary, &groups, &wanted) >= 0 {
        return Array(groups.prefix(Int(max(0, wanted))))
      }
      guard wanted > count else { break }
      count = wanted
    }
    return [primary]
  }

  /// Calls a `get*_r` lookup with a buffer for the entry's strings, from 16 KiB doubling up to
  /// 1 MiB while the lookup answers `ERANGE` (a group with thousands of members needs more than
  /// the first size). The C library never writes past the size it is given.
  ///
  /// - Returns: whether the lookup found an entry (returned 0 and set its result pointer).
  /// The entry's strings point into the buffer, which exists only during `lookup`: copy them
  /// there.
  static func withEntryBuffer<Entry>(
    _ lookup: (UnsafeMutablePointer<CChar>, Int, inout UnsafeMutablePointer<Entry>?) -> Int32
  ) -> Bool {
    var size = 16_384
    while size <= 1 << 20 {
      var buffer = [CChar](repeating: 0, count: size)
      var result: UnsafeMutablePointer<Entry>? = nil
      let status = buffer.withUnsafeMutableBufferPointer { storage -> Int32 in
        guard let base = storage.baseAddress else { return ENOMEM }
        return lookup(base, storage.count, &result)
      }
      if status == ERANGE {
        size *= 2
        continue
      }
      return status == 0 && result != nil
    }
    return false
  }
}
