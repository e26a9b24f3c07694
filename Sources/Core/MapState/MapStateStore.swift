import LocationModel

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
import LocationModel
import SystemIO

/// What survives a restart: viewport, user-tracking mode and client annotations.
///
/// The current location and the track are not saved: they come from fixes. JSON shape of
/// `mapstate.json` (keys sorted, indented; see ``json`` and ``init(fileContents:)``):
/// `{"version": 1, "viewport": {"center": {"latitude","longitude"}, "zoom", "size": {"width","height"}, "rotation"},
///   "mode": String, "annotations": [Annotation]}`.
public struct PersistedMapState: Sendable, Hashable {
  /// Format version; this code writes and reads 1.
  public var version: Int
  /// The viewport.
  public var viewport: Viewport
  /// The user-tracking mode.
  public var mode: UserTrackingMode
  /// Client annotations in display order (never the `"location"` one).
  public var annotations: [Annotation]

  /// The format version this code writes.
  public static let currentVersion = 1

  /// Creates a state to save.
  public init(viewport: Viewport, mode: UserTrackingMode, annotations: [Annotation]) {
    version = Self.currentVersion
    self.viewport = viewport
    self.mode = mode
    self.annotations = annotations
  }

  /// Checks what a file may contain wrongly even when it parses.
  ///
  /// - Throws: a ``MapStateError`` describing the first bad value, or
  ///   ``MapStateError/invalidIdentifier(_:reason:)`` for a duplicate or reserved identifier, or
  ///   ``MapStateError/limitExceeded(count:bytes:)`` beyond ``AnnotationLimits``.
  func validate() throws(MapStateError) {
    let center = viewport.center
    guard center.isValid else {
      throw .invalidCoordinate(latitude: center.latitude, longitude: center.longitude)
    }
    guard viewport.zoom.isFinite, WebMercator.zoomRange.contains(viewport.zoom) else {
      throw .invalidZoom(viewport.zoom)
    }
    guard viewport.size.isValid else {
      throw .invalidViewportSize(width: viewport.size.width, height: viewport.size.height)
    }
    guard viewport.rotation.isFinite else { throw .invalidRotation(viewport.rotation) }
    guard annotations.count <= AnnotationLimits.maxCount,
      annotations.reduce(0, { $0 + $1.textByteCount }) <= AnnotationLimits.maxTotalBytes
    else {
      throw .limitExceeded(
        count: annotations.count, bytes: annotations.reduce(0, { $0 + $1.textByteCount }))
    }
    var seen = Set<String>()
    for annotation in annotations {
      try annotation.validate()
      if annotation.id == Annotation.locationID { throw .reservedIdentifier(annotation.id) }
      if !seen.insert(annotation.id).inserted {
        throw .invalidIdentifier(annotation.id, reason: "appears twice")
      }
    }
  }
}

/// Why the map state could not be saved, or its directory cannot be used. The description names
/// the path and the system error.
public enum MapStoreError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The state directory could not be created.
  case createDirectory(path: String, message: String)
  /// A system call failed: `operation` is `open`, `write`, `fsync`, `rename` or `close`.
  case system(operation: String, path: String, errno: Int32)
  /// The state could not be encoded (a non-finite number).
  case encoding(String)
  /// The state directory is owned by another user or writable by group or others, so another
  /// user could plant links or files in it (see ``MapStateStore/checkDirectory(_:)``).
  case unsafeDirectory(path: String, reason: String)
  /// The save did not finish within `seconds`: the disk is stalled (a frozen or hung file
  /// system); the save goes on and may still complete.
  case stalled(path: String, seconds: Double)

  /// A one-line explanation.
  public var description: String {
    switch self {
    case .createDirectory(let path, let message):
      return "cannot create map state directory \(path): \(message)"
    case .system(let operation, let path, let code):
      return "\(operation) \(path) failed: \(String(cString: strerror(code))) (errno \(code))"
    case .encoding(let message):
      return "cannot encode map state: \(message)"
    case .unsafeDirectory(let path, let reason):
      return "state directory \(path) is not safe: \(reason)"
    case .stalled(let path, let seconds):
      return "saving \(path) did not finish within \(seconds) s (the disk is stalled)"
    }
  }
}

/// Saves and restores ``PersistedMapState`` as `mapstate.json` in a state directory.
///
/// Saving is atomic: the JSON goes to a new temporary file in the same directory (an
/// unpredictable name, created exclusively: `O_CREAT|O_EXCL|O_NOFOLLOW`, so a planted link or
/// file is never followed or reused), which is `fsync`ed, `rename`d over `mapstate.json`, and
/// the directory is `fsync`ed so the rename survives a power loss. A reader sees the old file or
/// the new one, never a mix.
///
/// The directory must belong to the daemon's user (or to root) and must not be writable by group
/// or others (``checkDirectory(_:)``); every load and save checks it again on the descriptor it
/// then works through. Loading opens the file with `O_NOFOLLOW|O_NONBLOCK` and reads it only when
/// it is a regular file, so a planted symbolic link or FIFO is refused instead of followed or
/// waited on. Temporary files left by a crash are removed when the state is loaded.
public struct MapStateStore: Sendable {
  /// Makes a step of ``save(_:)`` fail: called with the step's name (`open`, `write`, `fsync`,
  /// `close`, `rename`, `fsyncDirectory`) before the system call; a non-nil `errno` value makes
  /// the step fail with that error instead. For tests of failing disks (ENOSPC, EIO, EMFILE).
  public typealias FailureInjector = @Sendable (_ step: String) -> Int32?

  /// The state directory (e.g. `/var/lib/locationd`).
  public let directory: String
  /// Where log lines go; one line per call, without a trailing newline.
  public let log: @Sendable (String) -> Void
  private let failureInjector: FailureInjector?

  /// File name inside ``directory``.
  public static let fileName = "mapstate.json"
  /// Prefix of the temporary files written by ``save(_:)``; leftovers are removed on load.
  public static let temporaryPrefix = "." + fileName + ".tmp-"
  /// Name inside ``directory`` under which a state file that cannot be loaded (too large,
  /// corrupt, not a regular file) is set aside, so that the next save does not destroy it.
  public static let rejectedFileName = fileName + ".rejected"
  /// Largest file accepted on load, bytes.
  public static let maxFileSize = 16 * 1024 * 1024

  /// Creates a store for `directory`; nothing is touched until ``load()`` or ``save(_:)``.
  ///
  /// - Parameters:
  ///   - log: receives one line per problem; defaults to standard error.
  ///   - failureInjector: makes chosen steps of ``save(_:)`` fail (tests); `nil` in the daemon.
  public init(
    directory: String, log: @escaping @Sendable (String) -> Void = MapStateStore.logToStandardError,
    failureInjector: FailureInjector? = nil
  ) {
    self.directory = directory
    self.log = log
    self.failureInjector = failureInjector
  }

  /// Full path of the state file.
  public var path: String { directory + "/" + Self.fileName }

  /// Writes `line` and a newline to standard error.
  public static func logToStandardError(_ line: String) {
    try? SystemIO.writeAll(STDERR_FILENO, line + "\n")
  }

  /// Checks that `path` is a directory the daemon may trust: owned by the effective user or by
  /// root, and not writable by group or others (mode `& 0o022 == 0`). A symbolic link to such a
  /// directory is accepted (the directory it names is checked).
  ///
  /// - Throws: ``MapStoreError/system(operation:path:errno:)`` when it cannot be opened (also
  ///   `ENOTDIR`), ``MapStoreError/unsafeDirectory(path:reason:)`` when the rule is broken.
  public static func checkDirectory(_ path: String) throws(MapStoreError) {
    // Ancestors first: an owner of one of them could swap the whole directory.
    if let (ancestor, reason) = SecurePath.unsafeAncestor(of: path) {
      throw .unsafeDirectory(path: ancestor, reason: reason)
    }
    close(try openDirectory(path))
  }

  /// Opens `path` as a directory and checks owner and mode on the open descriptor
  /// (``TrustedDirectory/open(_:)``).
  static func openDirectory(_ path: String) throws(MapStoreError) -> Int32 {
    do throws(TrustedDirectory.Failure) {
      return try TrustedDirectory.open(path)
    } catch {
      switch error {
      case .untrusted(let path, let reason): throw .unsafeDirectory(path: path, reason: reason)
      case .system(let operation, let path, let code): throw .system(operation: operation, path: path, errno: code)
      }
    }
  }

  /// Reads the saved state.
  ///
  /// Removes temporary files a crash left behind first. Annotations the current rules refuse
  /// (invalid, duplicate, or beyond ``AnnotationLimits``) are left out and the rest is loaded,
  /// with one log line saying how many were left out.
  ///
  /// - Returns: the state, or `nil` when the file is missing, unreadable, not a regular file,
  ///   too large, not valid JSON, of another version, or has an invalid viewport; each case logs
  ///   one line naming the path and the reason ("starting with an empty map"). A file that exists
  ///   but cannot be loaded is renamed to ``rejectedFileName`` so that the next save keeps it.
  ///   When annotations were left out, the full file stays as a hard link named
  ///   ``rejectedFileName``. Never throws, never traps.
  public func load() -> PersistedMapState? {
    // Messages quote values from the file (a bad mode string, an annotation id): keep each on
    // one line whatever the file holds.
    func report(_ message: String) { log(Self.oneLine(message)) }
    let directoryFD: Int32
    do {
      directoryFD = try Self.openDirectory(directory)
    } catch {
      if case .system(_, _, let code) = error, code == ENOENT {
        report("map state file missing, starting with an empty map path=\(path)")
      } else {
        report("map state directory unusable, starting with an empty map path=\(path) error=\(error)")
      }
      return nil
    }
    defer { close(directoryFD) }
    removeLeftovers(directoryFD)
    let fd = openat(directoryFD, Self.fileName, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
    if fd < 0 {
      let code = errno
      if code == ENOENT {
        report("map state file missing, starting with an empty map path=\(path)")
        return nil
      }
      let reason = code == ELOOP ? "a symbolic link" : String(cString: strerror(code))
      // Set aside whatever the reason (a link, a mode, an I/O error): a save would replace it.
      let kept = setAside(directoryFD)
      report("map state file unreadable, starting with an empty map path=\(path) error=\(reason)\(keptAs(kept))")
      return nil
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      let reason = String(cString: strerror(errno))
      let kept = setAside(directoryFD)
      report("map state file unreadable, starting with an empty map path=\(path) error=\(reason)\(keptAs(kept))")
      return nil
    }
    guard info.st_mode & S_IFMT == S_IFREG else {
      let kept = setAside(directoryFD)
      report("map state file is not a regular file, starting with an empty map path=\(path)\(keptAs(kept))")
      return nil
    }
    guard Int(info.st_size) <= Self.maxFileSize else {
      let kept = setAside(directoryFD)
      report(
        "map state file too large, starting with an empty map path=\(path) bytes=\(info.st_size) limit=\(Self.maxFileSize)\(keptAs(kept))"
      )
      return nil
    }
    let bytes: [UInt8]
    do {
      bytes = try SystemIO.readToEnd(fd, limit: Self.maxFileSize)
    } catch {
      switch error {
      case .system(let error):
        let kept = setAside(directoryFD)
        report("map state file unreadable, starting with an empty map path=\(path) error=\(error)\(keptAs(kept))")
        return nil
      case .tooLarge:
        let kept = setAside(directoryFD)
        report(
          "map state file too large, starting with an empty map path=\(path) limit=\(Self.maxFileSize)\(keptAs(kept))"
        )
        return nil
      }
    }
    var state: PersistedMapState
    do {
      state = try PersistedMapState(fileContents: bytes)
    } catch {
      let kept = setAside(directoryFD)
      report(
        "map state file corrupt, starting with an empty map path=\(path) bytes=\(bytes.count) error=\(error)\(keptAs(kept))"
      )
      return nil
    }
    guard state.version == PersistedMapState.currentVersion else {
      let kept = setAside(directoryFD)
      report(
        "map state file has unknown version, starting with an empty map path=\(path) version=\(state.version)\(keptAs(kept))"
      )
      return nil
    }
    let (kept, leftOut) = Self.admissibleAnnotations(state.annotations)
    let total = state.annotations.count
    state.annotations = kept
    // The viewport first: a file that cannot be loaded at all gets its one line, not a second
    // one about annotations that would have been left out.
    do {
      try state.validate()
    } catch {
      let kept = setAside(directoryFD)
      report(
        "map state file holds invalid values, starting with an empty map path=\(path) error=\(error)\(keptAs(kept))"
      )
      return nil
    }
    if !leftOut.isEmpty {
      // The next save replaces mapstate.json; a hard link keeps the full file for the admin.
      let copied = StateFile.keepCopy(directoryFD, fileName: Self.fileName, base: Self.rejectedFileName)
      report(
        "map state file holds annotations beyond the limits or invalid ones, loading \(kept.count) of \(total) path=\(path) maxAnnotations=\(AnnotationLimits.maxCount) maxBytes=\(AnnotationLimits.maxTotalBytes) first=\(leftOut[0])"
          + keptAs(copied)
      )
    }
    return state
  }

  /// The annotations that pass ``Annotation/validate()``, are not reserved or repeated, and fit
  /// ``AnnotationLimits`` in list order; and why each other one was left out.
  static func admissibleAnnotations(_ annotations: [Annotation]) -> ([Annotation], [String]) {
    var kept: [Annotation] = []
    var leftOut: [String] = []
    var seen = Set<String>()
    var bytes = 0
    for annotation in annotations {
      do {
        try annotation.validate()
      } catch {
        leftOut.append(error.description)
        continue
      }
      if annotation.id == Annotation.locationID {
        leftOut.append(MapStateError.reservedIdentifier(annotation.id).description)
        continue
      }
      guard !seen.contains(annotation.id) else {
        leftOut.append("annotation id \"\(annotation.id)\" appears twice")
        continue
      }
      let size = annotation.textByteCount
      guard kept.count < AnnotationLimits.maxCount, bytes + size <= AnnotationLimits.maxTotalBytes
      else {
        leftOut.append(
          MapStateError.limitExceeded(count: kept.count + 1, bytes: bytes + size).description)
        continue
      }
      seen.insert(annotation.id)
      bytes += size
      kept.append(annotation)
    }
    return (kept, leftOut)
  }

  /// Removes `.mapstate.json.tmp-*` files (a crash between creating and renaming leaves them).
  private func removeLeftovers(_ directoryFD: Int32) {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
    var removed = 0
    for name in names where name.hasPrefix(Self.temporaryPrefix) {
      // unlinkat removes the entry itself: a link is not followed, a FIFO is not opened.
      if unlinkat(directoryFD, name, 0) == 0 { removed += 1 }
    }
    if removed > 0 {
      log("removed temporary map state files left by an earlier run path=\(directory) count=\(removed)")
    }
  }

  /// Renames the state file to a free rejected name (``StateFile/rejectedName(_:base:)``:
  /// ``rejectedFileName``, then `.1` ... `.9`, an earlier one is not overwritten); returns it.
  private func setAside(_ directoryFD: Int32) -> String? {
    StateFile.setAside(
      directoryFD, fileName: Self.fileName, base: Self.rejectedFileName, subject: "map state", path: path,
      log: log)
  }

  /// ` keptAs=NAME` for a log line, or nothing when the file could not be kept.
  private func keptAs(_ name: String?) -> String { name.map { " keptAs=" + $0 } ?? "" }

  /// Saves `state` atomically (new temporary file, fsync, rename, fsync of the directory),
  /// creating the directory (mode 0700) when missing. The file has mode 0600.
  ///
  /// - Throws: ``MapStoreError`` naming the failed step (``MapStoreError/unsafeDirectory(path:reason:)``
  ///   when the directory breaks the rule of ``checkDirectory(_:)``); the previous file is then
  ///   unchanged (or, when only the final directory fsync failed, replaced but perhaps not yet
  ///   durable).
  public func save(_ state: PersistedMapState) throws(MapStoreError) {
    guard !state.json.containsNonFiniteNumber else {
      throw .encoding("a number is NaN or infinite")
    }
    // The same atomic steps as every state file (StateFile); the names and messages are this
    // file's.
    try StateFile(
      directory: directory, fileName: Self.fileName, subject: "map state", fallback: "starting with an empty map",
      maxFileSize: Self.maxFileSize, log: log, failureInjector: failureInjector
    ).save(state.fileContents)
  }

  /// `text` with line breaks and other control characters (C0, DEL, C1, U+2028, U+2029)
  /// written as `\n`, `\r`, `\t` or `\u{XX}`, so a log call stays one line.
  static func oneLine(_ text: String) -> String {
    // Most lines have nothing to escape: return them as they are, not rebuilt scalar by scalar.
    let plain = !text.unicodeScalars.contains { scalar in
      switch scalar.value {
      case 0x00..<0x20, 0x7F...0x9F, 0x2028, 0x2029: true
      default: false
      }
    }
    if plain { return text }
    var result = ""
    result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
    for scalar in text.unicodeScalars {
      switch scalar.value {
      case 0x0A: result += "\\n"
      case 0x0D: result += "\\r"
      case 0x09: result += "\\t"
      case 0x00..<0x20, 0x7F...0x9F, 0x2028, 0x2029:
        result += "\\u{" + String(scalar.value, radix: 16) + "}"
      default: result.unicodeScalars.append(scalar)
      }
    }
    return result
  }
}
