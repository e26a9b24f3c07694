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

/// What survives a restart: viewport, user-tracking mode and client annotations.
///
/// The current location and the track are not saved: they come from fixes. JSON shape of
/// `mapstate.json`:
/// `{"version": 1, "viewport": {"center": {"latitude","longitude"}, "zoom", "size": {"width","height"}, "rotation"},
///   "mode": String, "annotations": [Annotation]}`.
public struct PersistedMapState: Sendable, Hashable, Codable {
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
  ///   ``MapStateError/invalidIdentifier(_:reason:)`` for a duplicate or reserved identifier.
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

/// Why the map state could not be saved. The description names the path and the system error.
public enum MapStoreError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The state directory could not be created.
  case createDirectory(path: String, message: String)
  /// A system call failed: `operation` is `open`, `write`, `fsync`, `rename` or `close`.
  case system(operation: String, path: String, errno: Int32)
  /// The state could not be encoded (a non-finite number).
  case encoding(String)

  /// A one-line explanation.
  public var description: String {
    switch self {
    case .createDirectory(let path, let message):
      return "cannot create map state directory \(path): \(message)"
    case .system(let operation, let path, let code):
      return "\(operation) \(path) failed: \(String(cString: strerror(code))) (errno \(code))"
    case .encoding(let message):
      return "cannot encode map state: \(message)"
    }
  }
}

/// Saves and restores ``PersistedMapState`` as `mapstate.json` in a state directory.
///
/// Saving is atomic: the JSON goes to a temporary file in the same directory, which is
/// `fsync`ed, `rename`d over `mapstate.json`, and the directory is `fsync`ed so the rename
/// survives a power loss. A reader sees the old file or the new one, never a mix.
public struct MapStateStore: Sendable {
  /// The state directory (e.g. `/var/lib/locationd`).
  public let directory: String
  /// Where log lines go; one line per call, without a trailing newline.
  public let log: @Sendable (String) -> Void

  /// File name inside ``directory``.
  public static let fileName = "mapstate.json"
  /// Largest file accepted on load, bytes.
  public static let maxFileSize = 16 * 1024 * 1024

  /// Creates a store for `directory`; nothing is touched until ``load()`` or ``save(_:)``.
  ///
  /// - Parameter log: receives one line per problem; defaults to standard error.
  public init(
    directory: String, log: @escaping @Sendable (String) -> Void = MapStateStore.logToStandardError
  ) {
    self.directory = directory
    self.log = log
  }

  /// Full path of the state file.
  public var path: String { directory + "/" + Self.fileName }

  /// Writes `line` and a newline to standard error.
  public static func logToStandardError(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    bytes.withUnsafeMutableBytes { buffer in
      var offset = 0
      while offset < buffer.count, let base = buffer.baseAddress {
        let written = write(STDERR_FILENO, base + offset, buffer.count - offset)
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return }
        offset += written
      }
    }
  }

  /// Reads the saved state.
  ///
  /// - Returns: the state, or `nil` when the file is missing, unreadable, not a regular file
  ///   (a FIFO or a directory is not opened for reading, so it cannot block the start), too
  ///   large, not valid JSON, of another version, or holds invalid values; each case logs one
  ///   line naming the path and the reason ("starting with an empty map"). Never throws, never
  ///   traps.
  public func load() -> PersistedMapState? {
    // Messages quote values from the file (a bad mode string, an annotation id): keep each on
    // one line whatever the file holds.
    func report(_ message: String) { log(Self.oneLine(message)) }
    // O_NONBLOCK: a FIFO in place of the file must not block the start; only a regular file is
    // read, and never more than maxFileSize + 1 bytes (the file may grow after fstat).
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    if fd < 0 {
      let code = errno
      if code == ENOENT {
        report("map state file missing, starting with an empty map path=\(path)")
      } else {
        report(
          "map state file unreadable, starting with an empty map path=\(path) error=\(String(cString: strerror(code)))"
        )
      }
      return nil
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
      report("map state file is not a regular file, starting with an empty map path=\(path)")
      return nil
    }
    guard Int(info.st_size) <= Self.maxFileSize else {
      report(
        "map state file too large, starting with an empty map path=\(path) bytes=\(info.st_size) limit=\(Self.maxFileSize)"
      )
      return nil
    }
    var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
    var count = 0
    while count < bytes.count {
      let n = bytes.withUnsafeMutableBytes { buffer in
        read(fd, buffer.baseAddress.map { $0 + count }, buffer.count - count)
      }
      if n < 0 && errno == EINTR { continue }
      if n < 0 {
        report(
          "map state file unreadable, starting with an empty map path=\(path) error=\(String(cString: strerror(errno)))"
        )
        return nil
      }
      if n == 0 { break }
      count += n
      if count == bytes.count && count <= Self.maxFileSize {
        bytes.append(contentsOf: repeatElement(0, count: min(64 * 1024, Self.maxFileSize + 1 - count)))
      }
    }
    guard count <= Self.maxFileSize else {
      report(
        "map state file too large, starting with an empty map path=\(path) bytes=\(count) limit=\(Self.maxFileSize)"
      )
      return nil
    }
    let data = Data(bytes[0..<count])
    let state: PersistedMapState
    do {
      state = try JSONDecoder().decode(PersistedMapState.self, from: data)
    } catch {
      report(
        "map state file corrupt, starting with an empty map path=\(path) bytes=\(data.count) error=\(Self.describe(error))"
      )
      return nil
    }
    guard state.version == PersistedMapState.currentVersion else {
      report(
        "map state file has unknown version, starting with an empty map path=\(path) version=\(state.version)"
      )
      return nil
    }
    do {
      try state.validate()
    } catch {
      report(
        "map state file holds invalid values, starting with an empty map path=\(path) error=\(error)"
      )
      return nil
    }
    return state
  }

  /// Saves `state` atomically (temporary file, fsync, rename, fsync of the directory), creating
  /// the directory (mode 0700) when missing. The file has mode 0600.
  ///
  /// - Throws: ``MapStoreError`` naming the failed step; the previous file is then unchanged.
  public func save(_ state: PersistedMapState) throws(MapStoreError) {
    let data: Data
    do {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
      data = try encoder.encode(state)
    } catch {
      throw .encoding(String(describing: error))
    }
    if mkdir(directory, 0o700) != 0 && errno != EEXIST {
      do {
        try FileManager.default.createDirectory(
          atPath: directory, withIntermediateDirectories: true,
          attributes: [.posixPermissions: 0o700])
      } catch {
        throw .createDirectory(path: directory, message: String(describing: error))
      }
    }
    let temporary = directory + "/." + Self.fileName + ".tmp-\(getpid())"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw .system(operation: "open", path: temporary, errno: errno) }
    var failure: MapStoreError?
    data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
      var offset = 0
      while offset < buffer.count, let base = buffer.baseAddress {
        let written = write(fd, base + offset, buffer.count - offset)
        if written < 0 {
          if errno == EINTR { continue }
          failure = .system(operation: "write", path: temporary, errno: errno)
          return
        }
        offset += written
      }
    }
    if failure == nil && fsync(fd) != 0 {
      failure = .system(operation: "fsync", path: temporary, errno: errno)
    }
    if close(fd) != 0 && failure == nil {
      failure = .system(operation: "close", path: temporary, errno: errno)
    }
    if let failure {
      unlink(temporary)
      throw failure
    }
    guard rename(temporary, path) == 0 else {
      let code = errno
      unlink(temporary)
      throw .system(operation: "rename", path: path, errno: code)
    }
    let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard directoryFD >= 0 else { throw .system(operation: "open", path: directory, errno: errno) }
    defer { close(directoryFD) }
    guard fsync(directoryFD) == 0 else {
      throw .system(operation: "fsync", path: directory, errno: errno)
    }
  }

  /// A short description of a decoding error (the path of the bad key and the reason).
  /// `text` with line breaks and other control characters (C0, DEL, C1, U+2028, U+2029)
  /// written as `\n`, `\r`, `\t` or `\u{XX}`, so a log call stays one line.
  static func oneLine(_ text: String) -> String {
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

  static func describe(_ error: any Error) -> String {
    guard let decoding = error as? DecodingError else { return String(describing: error) }
    switch decoding {
    case .dataCorrupted(let context), .keyNotFound(_, let context), .typeMismatch(_, let context),
      .valueNotFound(_, let context):
      let keyPath = context.codingPath.map(\.stringValue).joined(separator: ".")
      return keyPath.isEmpty ? context.debugDescription : "\(keyPath): \(context.debugDescription)"
    @unknown default:
      return String(describing: error)
    }
  }
}
