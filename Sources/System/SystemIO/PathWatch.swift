import Glibc

/// Watches, with inotify(7), the directory that holds a path, for the path coming and going: no
/// polling loop, the kernel wakes the reader.
///
/// The watch is on the nearest directory of the path that exists (`/dev/serial/by-id` goes away
/// with its last device, so `/dev/serial` or `/dev` is watched meanwhile) and moves down as the
/// directories appear. Names created, moved in, moved out, deleted or whose attributes change
/// (udev sets a node's group after creating it) all count as changes; ``takeChanges()`` says
/// whether the watched path may have appeared or vanished since the last call.
public final class PathWatch {
  /// The watched path, as given.
  public let path: String
  /// The inotify descriptor, to wait on for readability.
  public let fileDescriptor: Int32
  private var watch: Int32 = -1
  private var watchedDirectory = ""
  private var buffer = [UInt8](repeating: 0, count: 4096)

  /// Starts watching for `path`.
  ///
  /// - Throws: ``SystemError`` from `inotify_init1` (`EMFILE` when out of watches) or from
  ///   `inotify_add_watch` on every ancestor (`EACCES`).
  public init(path: String) throws(SystemError) {
    self.path = path
    let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
    guard fd >= 0 else { throw SystemError(errno) }
    fileDescriptor = fd
    // Every stored property is set: a throw runs deinit, which closes `fd` (once).
    try rewatch()
  }

  deinit { close(fileDescriptor) }

  /// The directory watched now: the path's own directory, or its nearest existing ancestor.
  public var directory: String { watchedDirectory }

  /// The directories from the path's own up to `/`.
  static func ancestors(of path: String) -> [String] {
    var result: [String] = []
    var current = Substring(path)
    while let slash = current.lastIndex(of: "/") {
      current = current[..<slash]
      result.append(current.isEmpty ? "/" : String(current))
      if current.isEmpty { break }
    }
    if result.isEmpty { result.append(".") }
    return result
  }

  /// Moves the watch to the nearest existing ancestor of ``path``.
  private func rewatch() throws(SystemError) {
    let mask = UInt32(
      IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB | IN_DELETE_SELF
        | IN_MOVE_SELF)
    var lastError = SystemError(ENOENT)
    for directory in Self.ancestors(of: path) {
      if directory == watchedDirectory, watch >= 0 { return }
      let descriptor = inotify_add_watch(fileDescriptor, directory, mask)
      if descriptor >= 0 {
        if watch >= 0, watch != descriptor { _ = inotify_rm_watch(fileDescriptor, watch) }
        watch = descriptor
        watchedDirectory = directory
        return
      }
      lastError = SystemError(errno)
    }
    throw lastError
  }

  /// Reads every pending inotify event and re-aims the watch when directories came or went.
  ///
  /// - Returns: whether any event arrived (the path may have appeared, vanished or changed
  ///   permissions): the caller then tries the path again.
  public func takeChanges() -> Bool {
    var changed = false
    while true {
      let count: Int
      do throws(SystemError) { count = try SystemIO.read(fileDescriptor, into: &buffer) } catch {
        break  // EAGAIN: drained
      }
      if count == 0 { break }
      changed = true
      // Each event: wd (4), mask (4), cookie (4), len (4), then `len` bytes of name.
      var offset = 0
      while offset + 16 <= count {
        let mask = buffer.withUnsafeBytes {
          $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
        }
        let length = Int(
          buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self) })
        if mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 { watch = -1 }
        offset += 16 + length
      }
    }
    if changed { try? rewatch() }
    return changed
  }
}
