#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import CSQLite
import LocationModel
import SystemIO

/// A store file that was not locationd's, or was damaged, and was renamed aside so that a fresh
/// store could start: what was wrong and where the operator's file is now.
public struct TrackStoreRejection: Sendable, Hashable, CustomStringConvertible {
  /// The store's path (where the fresh store now is).
  public var path: String
  /// Why the file was set aside (not SQLite, another application's database, a foreign -wal,
  /// truncated, damaged...).
  public var reason: String
  /// The new name of the file (`PATH.rejected-YYYYMMDDTHHMMSSZ`, with `.1` ... added when taken);
  /// its `-wal` and `-shm` files, when there were any, carry the same name plus `-wal` and `-shm`,
  /// so SQLite opens the three together.
  public var keptAs: String

  /// `path=... reason=... keptAs=...`, for the log.
  public var description: String { "\(path): \(reason); kept as \(keptAs)" }
}

/// The checks a store file passes before the daemon writes to it, and setting a file aside.
enum StoreCheck {
  static let tables: Set<String> = ["meta", "sources", "fixes", "outbox"]

  /// Files up to this size (16 MiB) get `PRAGMA quick_check` at open; it reads the whole file
  /// (measured: 7 s for a 300 MB store on a loaded machine), so larger ones are checked by use:
  /// damage SQLite meets while writing sets the store aside then.
  static let quickCheckLimit: Int64 = 16 << 20

  /// Why the file at `path` is not a locationd track store, or `nil` when it is one (or is empty:
  /// a new store). Reads the header, the `-wal` header, then the database read-only (a read-only
  /// connection never checkpoints a foreign WAL into the file).
  ///
  /// - Throws: ``TrackStoreError`` for failures that say nothing about the file (the library is
  ///   missing, an I/O error, permission): the file is then neither used nor set aside.
  static func reasonToReject(_ path: String) throws(TrackStoreError) -> String? {
    let header = read(path, count: 100)
    let size = fileSize(path)
    guard size > 0 else { return nil }
    let magic = Array("SQLite format 3".utf8) + [0]
    guard header.count == 100, Array(header[0..<16]) == magic else {
      return "not an SQLite database (\(size) bytes without the SQLite header)"
    }
    let rawPageSize = Int(header[16]) << 8 | Int(header[17])
    let pageSize = rawPageSize == 1 ? 65_536 : rawPageSize
    guard pageSize >= 512, pageSize & (pageSize - 1) == 0 else {
      return "not an SQLite database (page size \(rawPageSize) in its header)"
    }
    let walHeader = read(path + "-wal", count: 32)
    let walMagic = walHeader.count == 32 ? bigEndian(walHeader, 0) : 0
    let walInUse = walMagic == 0x377f_0682 || walMagic == 0x377f_0683
    if walInUse {
      let walPageSize = Int(bigEndian(walHeader, 8))
      if walPageSize != pageSize {
        return "its -wal file does not belong to it (page size \(walPageSize), the store's is \(pageSize))"
      }
    } else {
      // Without a WAL to supply pages, the file must hold every page its header counts (the
      // count is valid when the change counter matches the version-valid-for number).
      let pages = Int64(bigEndian(header, 28))
      if pages > 0, bigEndian(header, 24) == bigEndian(header, 92), size < pages * Int64(pageSize) {
        return "truncated (\(size) bytes, its header counts \(pages) pages of \(pageSize) bytes)"
      }
      if size % Int64(pageSize) != 0 {
        return "truncated (\(size) bytes is not a whole number of \(pageSize)-byte pages)"
      }
    }
    // A rollback journal left by a process killed in a write outside WAL mode (while the store
    // was being created): a read-only connection cannot roll it back (SQLITE_READONLY_ROLLBACK)
    // and would refuse the file at every start. A read-write connection rolls it back, SQLite's
    // own recovery, before the file is judged.
    if !walInUse, fileSize(path + "-journal") > 0 {
      let recovery = try SQLiteConnection(path: path, readOnly: false)
      _ = try? recovery.integer("PRAGMA schema_version")
      recovery.close()
    }
    let connection: SQLiteConnection
    do {
      connection = try SQLiteConnection(path: path, readOnly: true)
    } catch .openFailed(_, let code, let message) where isDamage(code) {
      return "not a usable SQLite database: \(message)"
    }
    defer { connection.close() }
    do throws(TrackStoreError) {
      let application = Int32(truncatingIfNeeded: try connection.integer("PRAGMA application_id") ?? 0)
      var names: Set<String> = []
      let list = try connection.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
      defer { list.finalize() }
      while try list.step() { names.insert(list.text(0)) }
      names = names.filter { !$0.hasPrefix("sqlite_") }
      if application != 0 && application != TrackStore.applicationID {
        return "another application's database (application id \(hex(application)), locationd's is \(hex(TrackStore.applicationID)))"
      }
      let foreign = names.subtracting(tables)
      if !foreign.isEmpty {
        return "holds tables that are not a track store's: \(foreign.sorted().prefix(5).joined(separator: ", "))"
      }
      // An empty database without our id is a new store (created, then killed before its schema).
      if !names.isEmpty || application == TrackStore.applicationID {
        let missing = tables.subtracting(names)
        if !missing.isEmpty { return "track store tables missing: \(missing.sorted().joined(separator: ", "))" }
      }
      if size <= quickCheckLimit {
        let check = try connection.text("PRAGMA quick_check(1)") ?? ""
        if check != "ok" { return "damaged: \(check)" }
      }
    } catch .sqlite(let code, let message, _) where isDamage(code) {
      return "damaged: \(message)"
    }
    return nil
  }

  /// Why the `-wal` file beside the store at `path` cannot be its own, or `nil`: the store's header
  /// says rollback mode (read and write versions 1), which the daemon leaves a store in when it
  /// closes it (``TrackStore/close()``), and SQLite deletes the `-wal` file before it writes
  /// that header. A `-wal` file there was put there later (a restore that mixed an old one with
  /// a newer store): switching the store to WAL mode would replay its pages over the newer ones.
  static func strayWAL(_ path: String) -> String? {
    let header = read(path, count: 100)
    guard header.count == 100, header[18] == 1, header[19] == 1 else { return nil }
    let walHeader = read(path + "-wal", count: 32)
    let walMagic = walHeader.count == 32 ? bigEndian(walHeader, 0) : 0
    guard walMagic == 0x377f_0682 || walMagic == 0x377f_0683 else { return nil }
    return "its -wal file does not belong to it (the store was closed out of WAL mode, which removes its -wal file)"
  }

  /// Renames the `-wal` and `-shm` files of the store at `path` to `PATH-wal.rejected-TIME` and
  /// `PATH-shm.rejected-TIME` (`.1`, `.2` ... when taken), leaving the store itself in place;
  /// returns the `-wal` file's new name.
  static func setAsideCompanions(_ path: String, now: Int64 = TrackStore.clockNow()) throws(TrackStoreError) -> String {
    let stamp = ".rejected-\(timestamp(now))"
    var suffix = stamp
    var index = 0
    while exists(path + "-wal" + suffix) || exists(path + "-shm" + suffix) {
      index += 1
      suffix = "\(stamp).\(index)"
    }
    guard rename(path + "-wal", path + "-wal" + suffix) == 0 else {
      let code = errno
      throw .openFailed(
        path: path, code: code, message: "cannot set its -wal file aside: " + String(cString: strerror(code)))
    }
    if exists(path + "-shm") { _ = rename(path + "-shm", path + "-shm" + suffix) }
    return path + "-wal" + suffix
  }

  /// Whether a result code says the file is damaged or not a database (`SQLITE_CORRUPT`,
  /// `SQLITE_NOTADB`), as opposed to a failure of the disk or of access.
  static func isDamage(_ code: Int32) -> Bool {
    code & 0xff == SQLITE_CORRUPT || code & 0xff == SQLITE_NOTADB
  }

  /// Renames the file at `path` and its `-wal` and `-shm` files to a free
  /// `PATH.rejected-TIME` name (never overwriting, never deleting); returns that name.
  ///
  /// - Throws: ``TrackStoreError/openFailed(path:code:message:)`` when the file cannot be renamed.
  static func setAside(_ path: String, now: Int64 = TrackStore.clockNow()) throws(TrackStoreError) -> String {
    let stamp = "\(path).rejected-\(timestamp(now))"
    var target = stamp
    var index = 0
    while exists(target) || exists(target + "-wal") || exists(target + "-shm") {
      index += 1
      target = "\(stamp).\(index)"
    }
    guard rename(path, target) == 0 else {
      let code = errno
      throw .openFailed(path: path, code: code, message: "cannot set it aside as \(target): " + String(cString: strerror(code)))
    }
    for suffix in ["-wal", "-shm"] where exists(path + suffix) {
      _ = rename(path + suffix, target + suffix)
    }
    return target
  }

  /// `YYYYMMDDTHHMMSSZ` (UTC, ISO 8601's basic format: ``UTCTime/iso8601Basic()``) for
  /// milliseconds since the Unix epoch.
  static func timestamp(_ milliseconds: Int64) -> String {
    UTCTime(milliseconds: milliseconds).iso8601Basic()
  }

  /// What is at `path` when it exists and is not a regular file (`"a symbolic link, not
  /// followed"`, `"a directory"`, `"a FIFO"`, `"a socket"`, `"a device"`); `nil` for a regular
  /// file or nothing. Looked at with `lstat`: a link is never followed.
  static func notRegularFile(_ path: String) -> String? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    switch info.st_mode & S_IFMT {
    case S_IFREG: return nil
    case S_IFLNK: return "a symbolic link, not followed"
    case S_IFDIR: return "a directory"
    case S_IFIFO: return "a FIFO"
    case S_IFSOCK: return "a socket"
    default: return "a device"
    }
  }

  static func exists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
  }

  static func fileSize(_ path: String) -> Int64 {
    var info = stat()
    guard stat(path, &info) == 0 else { return 0 }
    return Int64(info.st_size)
  }

  /// Up to `count` bytes from the start of the file (fewer when it is shorter; none when it
  /// cannot be opened).
  static func read(_ path: String, count: Int) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
    guard fd >= 0 else { return [] }
    defer { _ = close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: count)
    while bytes.count < count {
      // SystemIO.read checks the count the kernel returns against the buffer.
      guard let got = try? SystemIO.read(fd, into: &chunk), got > 0 else { break }
      bytes += chunk.prefix(min(got, count - bytes.count))
    }
    return bytes
  }

  static func bigEndian(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
    guard offset >= 0, offset + 4 <= bytes.count else { return 0 }
    return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
      | UInt32(bytes[offset + 3])
  }

  static func hex(_ value: Int32) -> String { "0x" + String(UInt32(bitPattern: value), radix: 16) }
}
