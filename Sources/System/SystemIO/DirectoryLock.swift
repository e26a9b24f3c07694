#if canImport(Glibc)
  import Glibc
#endif

/// Why a ``DirectoryLock`` could not be taken.
public enum DirectoryLockError: Error, Hashable, Sendable, CustomStringConvertible {
  /// Another process holds the lock: its PID as the kernel lists it in `/proc/locks`, else as
  /// the holder wrote it in the file; `nil` when neither says.
  case held(path: String, pid: Int32?)
  /// The lock file could not be opened or locked: `reason` says why (permission, a link or
  /// other non-file in its place, a read-only file system).
  case unusable(path: String, reason: String)

  /// A sentence naming the holder or the failed step.
  public var description: String {
    switch self {
    case .held(let path, let pid):
      let holder = pid.map { "process \($0)" } ?? "another process"
      return "\(holder) holds \(path): another locationd uses this state directory"
        + (pid.map { " (stop it, or give each daemon its own --state-dir; see: ps -p \($0) -o pid,args)" }
          ?? " (give each daemon its own --state-dir)")
    case .unusable(let path, let reason):
      return "cannot lock \(path): \(reason)"
    }
  }
}

/// An exclusive advisory lock (`flock(2)`) on a file inside a directory, held for the life of
/// the process: one owner of a state directory at a time. The kernel releases it when the
/// process ends, however it ends (`kill -9` included), so a stale lock never blocks a restart.
///
/// The file holds the owner's PID as decimal text and a newline, for the message a second
/// process gets. It is opened with `O_NOFOLLOW` (a link planted in its place is refused), mode
/// 0644, never deleted (deleting a lock file that another process is opening would let two
/// owners lock two different files).
public final class DirectoryLock: Sendable {
  /// Name of the lock file inside the directory.
  public static let fileName = "locationd.lock"

  /// Full path of the lock file.
  public let path: String
  private let descriptor: Int32

  /// Takes the lock on `directory`/``fileName`` without waiting, and writes this process's PID
  /// into the file.
  ///
  /// - Throws: ``DirectoryLockError/held(path:pid:)`` when another process holds it;
  ///   ``DirectoryLockError/unusable(path:error:)`` when the file cannot be opened or locked.
  public init(directory: String) throws(DirectoryLockError) {
    let path = (directory.hasSuffix("/") ? directory : directory + "/") + Self.fileName
    let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o644)
    guard fd >= 0 else {
      let code = errno
      throw .unusable(
        path: path,
        reason: code == ELOOP
          ? "it is a symbolic link (refused: a link could point anywhere); remove it" : "\(SystemError(code))")
    }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      let code = errno
      close(fd)
      throw .unusable(path: path, reason: "\(SystemError(code))")
    }
    guard (info.st_mode & S_IFMT) == S_IFREG else {
      close(fd)
      throw .unusable(path: path, reason: "it is not a regular file (a directory, FIFO or device); remove it")
    }
    if flock(fd, LOCK_EX | LOCK_NB) != 0 {
      let code = errno
      defer { close(fd) }
      if code == EWOULDBLOCK {
        // The kernel's word first (/proc/locks names the holder); the file's text second.
        let pid = Self.flockHolder(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)) ?? Self.readPID(fd)
        throw .held(path: path, pid: pid)
      }
      throw .unusable(path: path, reason: "\(SystemError(code))")
    }
    // Ours now: record the PID for the next process's message (a failure here only loses that).
    _ = ftruncate(fd, 0)
    _ = try? SystemIO.writeAll(fd, "\(getpid())\n")
    self.path = path
    self.descriptor = fd
  }

  /// The PID of the process holding a `flock` on the file with this device and inode, from
  /// `/proc/locks` (lines `N: FLOCK ADVISORY WRITE PID MAJOR:MINOR:INODE 0 EOF`, device numbers in
  /// hexadecimal); `nil` when none is listed or the file cannot be read.
  static func flockHolder(device: UInt64, inode: UInt64) -> Int32? {
    let fd = open("/proc/locks", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    guard let bytes = try? SystemIO.readToEnd(fd, limit: 1 << 20) else { return nil }
    let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
    let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
    return holder(inLocks: String(decoding: bytes, as: UTF8.self), major: major, minor: minor, inode: inode)
  }

  /// The PID of the `FLOCK` line of `text` (the format of `/proc/locks`) for the file
  /// `major:minor:inode`; `nil` when there is none.
  static func holder(inLocks text: String, major: UInt64, minor: UInt64, inode: UInt64) -> Int32? {
    for line in text.split(separator: "\n") {
      let fields = line.split(separator: " ", omittingEmptySubsequences: true)
      // "1:", "FLOCK", "ADVISORY", "WRITE", PID, "MAJ:MIN:INODE", start, end; a waiter's line
      // has "->" before "FLOCK".
      guard let kind = fields.firstIndex(of: "FLOCK"), fields.count > kind + 4,
        !fields[..<kind].contains("->"),
        let pid = Int32(fields[kind + 3]), pid > 0
      else { continue }
      let file = fields[kind + 4].split(separator: ":")
      guard file.count == 3, UInt64(file[0], radix: 16) == major, UInt64(file[1], radix: 16) == minor,
        UInt64(file[2]) == inode
      else { continue }
      return pid
    }
    return nil
  }

  /// The PID another process wrote into the lock file, `nil` when it is not a positive decimal
  /// number of at most 10 digits.
  static func readPID(_ fd: Int32) -> Int32? {
    // Freshly opened: the file offset is 0.
    var buffer = [UInt8](repeating: 0, count: 32)
    guard let count = try? SystemIO.read(fd, into: &buffer), count > 0 else { return nil }
    return parsePID(buffer.prefix(count))
  }

  /// The decimal number at the start of `bytes` (up to the first newline), `nil` unless it is
  /// 1 to 10 digits with a value in `1...Int32.max`.
  static func parsePID(_ bytes: some Collection<UInt8>) -> Int32? {
    let digits = bytes.prefix { $0 != UInt8(ascii: "\n") }
    guard !digits.isEmpty, digits.count <= 10,
      digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
    else { return nil }
    let value = digits.reduce(Int64(0)) { $0 * 10 + Int64($1 - UInt8(ascii: "0")) }
    guard value >= 1, value <= Int64(Int32.max) else { return nil }
    return Int32(value)
  }

  deinit {
    close(descriptor)
  }
}
