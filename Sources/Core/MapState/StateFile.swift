import SystemIO

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One state file in the daemon's state directory, saved atomically and loaded without following
/// anything someone else planted: the mechanism under ``MapStateStore`` (`mapstate.json`) and the
/// region store (`regions.json`).
///
/// Saving writes a new temporary file in the same directory (an unpredictable name
/// `.NAME.tmp-` plus 128 random bits, created with `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`, mode
/// 0600, relative to a descriptor of the directory), `fsync`s it, `rename`s it over the file and
/// `fsync`s the directory: a reader sees the old file or the new one, never a mix. Loading opens
/// the file with `O_NOFOLLOW|O_NONBLOCK` and reads it only when it is a regular file of at most
/// ``maxFileSize`` bytes. The directory must pass ``MapStateStore/checkDirectory(_:)`` (owned by
/// the daemon's user or root, not writable by group or others) at every load and save.
public struct StateFile: Sendable {
  /// What a load found.
  public enum Contents: Sendable, Equatable {
    /// No file: a first start.
    case missing
    /// The file exists but could not be read (unreadable, a link, not a regular file, too
    /// large); one line was logged and the file was set aside when it exists.
    case unusable
    /// The file's bytes.
    case bytes([UInt8])
  }

  /// The state directory.
  public let directory: String
  /// The file name inside ``directory`` (e.g. `regions.json`).
  public let fileName: String
  /// What the file holds, for log lines (`regions`): "`SUBJECT` file corrupt, ...".
  public let subject: String
  /// What the daemon does instead of loading it, for log lines (`starting with no regions`).
  public let fallback: String
  /// Largest file accepted on load, bytes.
  public let maxFileSize: Int
  /// Where log lines go; one line per call, without a trailing newline.
  public let log: @Sendable (String) -> Void
  private let failureInjector: MapStateStore.FailureInjector?

  /// Creates the description of a state file; nothing is touched until ``load()`` or ``save(_:)``.
  ///
  /// - Parameters:
  ///   - failureInjector: makes chosen steps of ``save(_:)`` fail (tests): `open`, `write`,
  ///     `fsync`, `close`, `rename`, `fsyncDirectory`.
  public init(
    directory: String, fileName: String, subject: String, fallback: String, maxFileSize: Int,
    log: @escaping @Sendable (String) -> Void, failureInjector: MapStateStore.FailureInjector? = nil
  ) {
    self.directory = directory
    self.fileName = fileName
    self.subject = subject
    self.fallback = fallback
    self.maxFileSize = maxFileSize
    self.log = log
    self.failureInjector = failureInjector
  }

  /// Full path of the file.
  public var path: String { directory + "/" + fileName }
  /// Prefix of the temporary files written by ``save(_:)``; leftovers are removed on load.
  public var temporaryPrefix: String { "." + fileName + ".tmp-" }
  /// The name a file that cannot be loaded is renamed to, so that the next save keeps it; when
  /// it is taken (an earlier bad start), `NAME.rejected.1` ... `NAME.rejected.9` are used, the
  /// first free one, so an earlier rejected file is not overwritten.
  public var rejectedFileName: String { fileName + ".rejected" }
  /// At most this many rejected files are kept (10): with all names taken, the oldest (by
  /// modification time) is replaced.
  public static let maxRejectedFiles = 10

  /// The name a rejected file gets in the directory `directoryFD`: the first free one of
  /// `BASE`, `BASE.1` ... `BASE.9` (``maxRejectedFiles`` in all), or the oldest of them by
  /// modification time when all are taken (`replacing` is then `true`); `nil` when none can be
  /// examined. Shared by every state file (map state, regions).
  static func rejectedName(_ directoryFD: Int32, base: String) -> (name: String, replacing: Bool)? {
    var oldest: (name: String, time: Int)?
    for name in [base] + (1..<maxRejectedFiles).map({ base + ".\($0)" }) {
      var info = stat()
      if fstatat(directoryFD, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
        if errno == ENOENT { return (name, false) }
        continue
      }
      let time = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
      if oldest == nil || time < (oldest?.time ?? 0) { oldest = (name, time) }
    }
    return oldest.map { ($0.name, true) }
  }

  /// Renames `fileName` in `directoryFD` (whatever it is: a link is renamed, not followed) to
  /// ``rejectedName(_:base:)``; returns the name, or `nil` when that failed (`log` gets a line
  /// naming `subject`, `path` and the reason).
  static func setAside(
    _ directoryFD: Int32, fileName: String, base: String, subject: String, path: String,
    log: (String) -> Void
  ) -> String? {
    guard let (name, _) = rejectedName(directoryFD, base: base) else { return nil }
    if renameat(directoryFD, fileName, directoryFD, name) != 0 {
      log("\(subject) file could not be set aside path=\(path) error=\(String(cString: strerror(errno)))")
      return nil
    }
    return name
  }

  /// Keeps a copy of `fileName` as a hard link under ``rejectedName(_:base:)`` (the file itself
  /// stays, to be replaced by the next save); returns the name, or `nil` when it failed.
  static func keepCopy(_ directoryFD: Int32, fileName: String, base: String) -> String? {
    guard let (name, replacing) = rejectedName(directoryFD, base: base) else { return nil }
    if replacing { unlinkat(directoryFD, name, 0) }
    return linkat(directoryFD, fileName, directoryFD, name, 0) == 0 ? name : nil
  }

  /// Reads the file, after removing temporary files a crash left behind.
  ///
  /// Never throws, never traps: every problem logs one line naming the path and the reason
  /// ("`SUBJECT` file unreadable, `FALLBACK` path=... error=..."), and a file that exists but
  /// cannot be read is renamed to ``rejectedFileName``.
  public func load() -> Contents {
    func report(_ message: String) { log(MapStateStore.oneLine(message)) }
    let directoryFD: Int32
    do {
      directoryFD = try MapStateStore.openDirectory(directory)
    } catch {
      if case .system(_, _, let code) = error, code == ENOENT { return .missing }
      report("\(subject) directory unusable, \(fallback) path=\(path) error=\(error)")
      return .unusable
    }
    defer { close(directoryFD) }
    removeLeftovers(directoryFD)
    let fd = openat(directoryFD, fileName, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
    if fd < 0 {
      let code = errno
      if code == ENOENT { return .missing }
      let reason = code == ELOOP ? "a symbolic link" : String(cString: strerror(code))
      // Set aside whatever the reason (a link, a mode, an I/O error): a save would replace it.
      let kept = setAside(directoryFD)
      report("\(subject) file unreadable, \(fallback) path=\(path) error=\(reason)\(keptAs(kept))")
      return .unusable
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      let reason = String(cString: strerror(errno))
      let kept = setAside(directoryFD)
      report("\(subject) file unreadable, \(fallback) path=\(path) error=\(reason)\(keptAs(kept))")
      return .unusable
    }
    guard info.st_mode & S_IFMT == S_IFREG else {
      let kept = setAside(directoryFD)
      report("\(subject) file is not a regular file, \(fallback) path=\(path)\(keptAs(kept))")
      return .unusable
    }
    guard Int(info.st_size) <= maxFileSize else {
      let kept = setAside(directoryFD)
      report(
        "\(subject) file too large, \(fallback) path=\(path) bytes=\(info.st_size) limit=\(maxFileSize)\(keptAs(kept))"
      )
      return .unusable
    }
    do {
      return .bytes(try SystemIO.readToEnd(fd, limit: maxFileSize))
    } catch {
      switch error {
      case .system(let error):
        let kept = setAside(directoryFD)
        report("\(subject) file unreadable, \(fallback) path=\(path) error=\(error)\(keptAs(kept))")
      case .tooLarge:
        let kept = setAside(directoryFD)
        report(
          "\(subject) file too large, \(fallback) path=\(path) limit=\(maxFileSize)\(keptAs(kept))")
      }
      return .unusable
    }
  }

  /// Logs that the file's contents could not be used ("`SUBJECT` file corrupt, `FALLBACK`
  /// path=... bytes=N error=`reason` keptAs=...") and renames it to ``rejectedFileName``.
  public func reject(byteCount: Int, reason: String) {
    var kept: String?
    if let directoryFD = try? MapStateStore.openDirectory(directory) {
      kept = setAside(directoryFD)
      close(directoryFD)
    }
    log(
      MapStateStore.oneLine(
        "\(subject) file corrupt, \(fallback) path=\(path) bytes=\(byteCount) error=\(reason)\(keptAs(kept))"
      ))
  }

  /// ` keptAs=NAME` for a log line, or nothing when the file could not be set aside.
  private func keptAs(_ name: String?) -> String { name.map { " keptAs=" + $0 } ?? "" }

  /// Removes `.NAME.tmp-*` files (a crash between creating and renaming leaves them).
  private func removeLeftovers(_ directoryFD: Int32) {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
      return
    }
    var removed = 0
    for name in names where name.hasPrefix(temporaryPrefix) {
      // unlinkat removes the entry itself: a link is not followed, a FIFO is not opened.
      if unlinkat(directoryFD, name, 0) == 0 { removed += 1 }
    }
    if removed > 0 {
      log(
        "removed temporary \(subject) files left by an earlier run path=\(directory) count=\(removed)"
      )
    }
  }

  /// Sets the file aside (``setAside(_:fileName:base:subject:path:log:)``).
  private func setAside(_ directoryFD: Int32) -> String? {
    Self.setAside(
      directoryFD, fileName: fileName, base: rejectedFileName, subject: subject, path: path, log: log)
  }

  private func injected(_ step: String) -> Int32? { failureInjector?(step) }

  /// Saves `data` atomically (see the type's discussion), creating the directory (mode 0700)
  /// when missing. The file has mode 0600.
  ///
  /// - Throws: ``MapStoreError`` naming the failed step (``MapStoreError/unsafeDirectory(path:reason:)``
  ///   when the directory breaks the rule); the previous file is then unchanged (or, when only
  ///   the final directory fsync failed, replaced but perhaps not yet durable).
  public func save(_ data: [UInt8]) throws(MapStoreError) {
    if mkdir(directory, 0o700) != 0 && errno != EEXIST {
      do {
        try FileManager.default.createDirectory(
          atPath: directory, withIntermediateDirectories: true,
          attributes: [.posixPermissions: 0o700])
      } catch {
        throw .createDirectory(path: directory, message: String(describing: error))
      }
    }
    let directoryFD = try MapStateStore.openDirectory(directory)
    defer { close(directoryFD) }
    do throws(AtomicFile.Failure) {
      try AtomicFile.replace(
        fileName, in: directoryFD, directoryPath: directory, with: data, mode: 0o600,
        temporaryPrefix: temporaryPrefix, failureInjector: failureInjector)
    } catch {
      // The directory's fsync is reported as an fsync of the directory, as before.
      throw .system(
        operation: error.step == "fsyncDirectory" ? "fsync" : error.step, path: error.path, errno: error.code)
    }
  }
}
