#if canImport(Glibc)
  import Glibc
#endif
import LocationProtocol
import Regions
import ServiceCore
import Synchronization
import SystemIO

/// Regions target: the input is the content of `regions.json`, loaded as the daemon loads it at
/// start (``RegionStore/load(configuration:)``, in the map-state target's private directory).
///
/// Invariants:
/// - when nothing is loaded, exactly one log line explains why, naming the file and saying that
///   the daemon starts with no regions; a loaded file logs nothing;
/// - every loaded region passes the region rules again, ids are unique, and what the monitor
///   would save reads back to the same regions and states.
enum RegionsHarness {
  final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
  }

  /// The map-state target's directory, with this target's files removed at exit before that
  /// target removes the directory (exit handlers run in reverse order of registration).
  static let directory: String = {
    let directory = MapStateHarness.directory
    atexit {
      _ = unlink(MapStateHarness.directory + "/" + RegionStore.fileName)
      _ = unlink(MapStateHarness.directory + "/" + RegionStore.fileName + ".rejected")
    }
    return directory
  }()

  static func check(_ input: [UInt8]) throws(FuzzFailure) {
    let directory = Self.directory
    let path = directory + "/" + RegionStore.fileName
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    try require(fd >= 0, "cannot write \(path): errno \(errno)")
    defer { close(fd) }
    do { try SystemIO.writeAll(fd, input) } catch { throw FuzzFailure("cannot write \(path): \(error)") }

    let log = LogLines()
    let store = RegionStore(directory: directory, log: { line in log.lines.withLock { $0.append(line) } })
    let monitor = store.load(configuration: .default)
    let lines = log.lines.withLock { $0 }
    guard let monitor else {
      try require(lines.count == 1, "\(lines.count) log lines for one unusable file: \(lines)")
      try require(
        lines[0].containsBytes("starting with no regions") && lines[0].containsBytes(path) && !lines[0].utf8.contains(0x0A),
        "unclear log line: \(lines[0])")
      return
    }
    try require(lines.isEmpty, "a loaded file logged: \(lines)")
    var seen = Set<String>()
    for region in monitor.regions {
      try require(seen.insert(region.id).inserted, "duplicate region id \(region.id) loaded")
      do {
        let again = try Region(
          id: region.id, title: region.title, shape: region.shape, notifyOnEntry: region.notifyOnEntry,
          notifyOnExit: region.notifyOnExit, dwell: region.dwell)
        try require(again == region, "region \(region.id) changes when made again")
      } catch let error as FuzzFailure {
        throw error
      } catch {
        throw FuzzFailure("loaded region \(region.id) breaks the rules: \(error)")
      }
    }
    let restored: RegionMonitor
    do {
      restored = try RegionMonitor(restoring: monitor.persisted())
    } catch {
      throw FuzzFailure("saved regions do not read back: \(error)")
    }
    for region in monitor.regions {
      try require(
        restored.status(id: region.id) == monitor.status(id: region.id), "region \(region.id) changes on a round trip")
    }
    try require(restored.count == monitor.count, "\(monitor.count) regions read back as \(restored.count)")
  }
}
