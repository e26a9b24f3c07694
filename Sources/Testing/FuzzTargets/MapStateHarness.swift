import LocationModel
#if canImport(Glibc)
  import Glibc
#endif
import MapState
import NMEA
import Synchronization

/// Map-state target: the input is the content of `mapstate.json`, loaded as the daemon loads
/// it at start (from a private temporary directory; the file is rewritten for every input).
///
/// Invariants:
/// - a loaded state validates: center within range, zoom within 0...22, a valid viewport size,
///   a finite rotation, every annotation valid, identifiers unique and never `"location"`;
/// - when nothing is loaded, exactly one log line explains why, naming the file and saying that
///   the map starts empty; a loaded state logs nothing, or one line when annotations the rules
///   refuse were left out.
enum MapStateHarness {
  final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
  }

  /// The private directory, created once per process: in /dev/shm when there is one, because
  /// rewriting a file on a disk file system waits for the disk (ext4 flushes a truncated file).
  static let directory: String = {
    let parent = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
    var template = Array("\(parent)/locationd-fuzz-mapstate-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { buffer in
      guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return "/tmp" }
      atexit {
        _ = unlink(MapStateHarness.directory + "/" + MapStateStore.fileName)
        _ = unlink(MapStateHarness.directory + "/" + MapStateStore.rejectedFileName)
        _ = rmdir(MapStateHarness.directory)
      }
      return String(cString: result)
    }
  }()

  static func check(_ input: [UInt8]) throws(FuzzFailure) {
    let path = directory + "/" + MapStateStore.fileName
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    try require(fd >= 0, "cannot write \(path): errno \(errno)")
    let written = input.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    try require(written == input.count, "short write to \(path)")

    let log = LogLines()
    let store = MapStateStore(directory: directory, log: { line in log.lines.withLock { $0.append(line) } })
    let state = store.load()
    let lines = log.lines.withLock { $0 }
    guard let state else {
      try require(lines.count == 1, "\(lines.count) log lines for one unusable file: \(lines)")
      let line = lines[0]
      try require(
        line.containsBytes("starting with an empty map") && line.containsBytes(path) && !line.utf8.contains(0x0A),
        "unclear log line: \(line)")
      return
    }
    // Annotations the rules refuse are left out of a loaded state, with one line saying so.
    try require(
      lines.isEmpty
        || (lines.count == 1 && lines[0].containsBytes("map state file holds annotations beyond the limits or invalid ones")
          && lines[0].containsBytes(path) && !lines[0].utf8.contains(0x0A)),
      "a loaded state logged: \(lines)")
    let center = state.viewport.center
    try require(
      center.latitude.isFinite && (-90...90).contains(center.latitude) && center.longitude.isFinite
        && (-180...180).contains(center.longitude),
      "center out of range: \(center)")
    try require(
      state.viewport.zoom.isFinite && (0...22).contains(state.viewport.zoom), "zoom \(state.viewport.zoom)")
    try require(state.viewport.size.isValid, "viewport size \(state.viewport.size)")
    try require(state.viewport.rotation.isFinite, "rotation \(state.viewport.rotation)")
    var seen = Set<String>()
    for annotation in state.annotations {
      do { try annotation.validate() } catch { throw FuzzFailure("loaded annotation invalid: \(error)") }
      try require(annotation.id != Annotation.locationID, "reserved annotation id loaded")
      try require(seen.insert(annotation.id).inserted, "duplicate annotation id \(annotation.id) loaded")
    }
  }
}
