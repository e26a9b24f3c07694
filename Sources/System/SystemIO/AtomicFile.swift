#if canImport(Glibc)
  import Glibc
#endif

/// Replaces a file in a directory atomically and durably: every state file of the daemon (the
/// map state, the regions, the web token) is written this one way.
///
/// The steps: a temporary file with an unpredictable name (`.NAME.tmp-HEX`, or the caller's
/// prefix) is created with `O_CREAT|O_EXCL|O_NOFOLLOW` relative to the open directory (a link
/// or file someone planted is never followed or reused) with its final mode, written, `fsync`ed
/// and closed, then `renameat` over the name, and the directory is `fsync`ed so that the rename
/// itself survives a power loss (POSIX leaves a rename's durability to the directory's sync).
/// A reader sees the old file or the new one, never a part. A failed step removes the temporary
/// file and leaves the old file as it was; only a failure of the last step (the directory's
/// `fsync`) leaves the new file in place, perhaps not yet durable.
public enum AtomicFile {
  /// The step that failed, the path it concerned and `errno`.
  public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
    /// `open`, `write`, `fsync`, `close`, `rename` or `fsyncDirectory`.
    public var step: String
    /// The temporary file's path (open, write, fsync, close), the final path (rename) or the
    /// directory (fsyncDirectory).
    public var path: String
    /// The `errno` of the failed call.
    public var code: Int32

    /// Creates a failure.
    public init(step: String, path: String, code: Int32) {
      self.step = step
      self.path = path
      self.code = code
    }

    /// `STEP PATH: strerror`.
    public var description: String { "\(step) \(path): \(SystemError(code))" }
  }

  /// Replaces `fileName` in the directory open as `directoryFD` with `bytes`.
  ///
  /// - Parameters:
  ///   - fileName: a name without `/` inside the directory.
  ///   - directoryFD: the directory, opened by the caller (which checked its owner and mode).
  ///   - directoryPath: the directory's path, for messages only.
  ///   - bytes: the whole new content.
  ///   - mode: the file's permission bits from creation (default 0600).
  ///   - temporaryPrefix: the temporary file's name before the random suffix (default
  ///     `.NAME.tmp-`), so a caller can find and remove what a crash left.
  ///   - failureInjector: for tests: given a step's name, an `errno` to fail it with.
  /// - Throws: ``Failure`` naming the failed step.
  public static func replace(
    _ fileName: String, in directoryFD: Int32, directoryPath: String, with bytes: [UInt8],
    mode: mode_t = 0o600, temporaryPrefix: String? = nil,
    failureInjector: (@Sendable (String) -> Int32?)? = nil
  ) throws(Failure) {
    var random = SystemRandomNumberGenerator()
    let name =
      (temporaryPrefix ?? "." + fileName + ".tmp-") + String(random.next(), radix: 16)
      + String(random.next(), radix: 16)
    let temporary = directoryPath + "/" + name
    let target = directoryPath + "/" + fileName
    if let code = failureInjector?("open") { throw Failure(step: "open", path: temporary, code: code) }
    let fd = openat(directoryFD, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
    guard fd >= 0 else { throw Failure(step: "open", path: temporary, code: errno) }
    var failure: Failure?
    if let code = failureInjector?("write") { failure = Failure(step: "write", path: temporary, code: code) }
    if failure == nil {
      do throws(SystemError) { try SystemIO.writeAll(fd, bytes) } catch {
        failure = Failure(step: "write", path: temporary, code: error.code)
      }
    }
    if failure == nil, let code = failureInjector?("fsync") {
      failure = Failure(step: "fsync", path: temporary, code: code)
    }
    if failure == nil && fsync(fd) != 0 { failure = Failure(step: "fsync", path: temporary, code: errno) }
    if close(fd) != 0 && failure == nil { failure = Failure(step: "close", path: temporary, code: errno) }
    if failure == nil, let code = failureInjector?("close") {
      failure = Failure(step: "close", path: temporary, code: code)
    }
    if let failure {
      unlinkat(directoryFD, name, 0)
      throw failure
    }
    if let code = failureInjector?("rename") {
      unlinkat(directoryFD, name, 0)
      throw Failure(step: "rename", path: target, code: code)
    }
    guard renameat(directoryFD, name, directoryFD, fileName) == 0 else {
      let code = errno
      unlinkat(directoryFD, name, 0)
      throw Failure(step: "rename", path: target, code: code)
    }
    if let code = failureInjector?("fsyncDirectory") {
      throw Failure(step: "fsyncDirectory", path: directoryPath, code: code)
    }
    guard fsync(directoryFD) == 0 else { throw Failure(step: "fsyncDirectory", path: directoryPath, code: errno) }
  }

  /// ``replace(_:in:directoryPath:with:mode:temporaryPrefix:failureInjector:)`` in the directory at
  /// `directoryPath`, opened here with `O_DIRECTORY|O_NOFOLLOW` (the directory itself may not be
  /// a link).
  ///
  /// - Throws: ``Failure`` naming the failed step (`openDirectory` when the directory cannot be
  ///   opened).
  public static func replace(
    _ fileName: String, inDirectory directoryPath: String, with bytes: [UInt8], mode: mode_t = 0o600
  ) throws(Failure) {
    let directoryFD = open(directoryPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard directoryFD >= 0 else { throw Failure(step: "openDirectory", path: directoryPath, code: errno) }
    defer { close(directoryFD) }
    try replace(fileName, in: directoryFD, directoryPath: directoryPath, with: bytes, mode: mode)
  }
}
