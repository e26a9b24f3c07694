import Dispatch
import Glibc
import SystemIO
import TrackStore

// `locationctl track export|stats|clear`: reads the track store file directly (read-only for
// export and stats; WAL mode lets it read beside a recording daemon, seeing the last committed
// fix), rather than asking the daemon over the socket: an export of a million fixes streams from
// SQLite to the output without passing through the daemon's event loop, and works while the
// daemon is stopped. Access is the file's: the store is created 0600 for the daemon's user, so a
// location history (more sensitive than the live position) is read by that user or root.

/// The store's path: `--store FILE`, else `--state-dir DIR` (or `$LOCATIOND_STATE_DIR`, or
/// /var/lib/locationd) plus `track.sqlite`.
///
/// - Throws: ``UsageError`` when both `--store` and `--state-dir` are given: one would be ignored.
private func storePath(_ list: ArgumentList) throws -> String {
  if let file = list.values["--store"] {
    guard list.values["--state-dir"] == nil else {
      throw UsageError("give --store FILE or --state-dir DIR, not both")
    }
    return file
  }
  let directory =
    list.values["--state-dir"] ?? getenv("LOCATIOND_STATE_DIR").map { String(cString: $0) } ?? "/var/lib/locationd"
  return directory + "/" + TrackStore.fileName
}

private func time(_ list: ArgumentList, _ name: String) throws -> Int64? {
  guard let text = list.values[name] else { return nil }
  guard let milliseconds = TrackTime.parse(text) else {
    throw UsageError("\(name) needs ISO 8601 (2019-05-01T12:00:00Z) or Unix seconds, got \(text)")
  }
  return milliseconds
}

/// Why the store at `path` cannot be reached, or `nil` when it exists: "no track store" only
/// when there is none (`ENOENT`); a directory this user may not search is named as such.
private func unreachableStore(_ path: String, whenMissing advice: String) -> ClientError? {
  guard access(path, F_OK) != 0 else { return nil }
  let code = errno
  guard code == ENOENT || code == ENOTDIR else {
    return ClientError(
      "cannot reach the track store at \(path): \(String(cString: strerror(code))) (run as root or as locationd's user, or give --store with a copy you may read)")
  }
  return ClientError("no track store at \(path)" + advice)
}

private func openForReading(_ path: String) throws -> TrackStore {
  if let error = unreachableStore(
    path,
    whenMissing:
      " (the daemon records live sources only, a replay or simulation with track = all; give --state-dir or --store)")
  {
    throw error
  }
  do { return try TrackStore(readingAt: path) } catch { throw ClientError(error.description) }
}

/// `--source live|simulated|all` (default all): which recorded fixes a command reads.
private func sourceFilter(_ list: ArgumentList) throws -> TrackSourceFilter {
  guard let value = list.values["--source"] else { return .all }
  guard let filter = TrackSourceFilter(rawValue: value.lowercased()) else {
    throw UsageError("--source takes live, simulated or all, got \(value)")
  }
  return filter
}

func runTrack(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  guard let action = arguments.first else { throw UsageError("track takes export, stats or clear") }
  let rest = Array(arguments.dropFirst())
  switch action {
  case "export":
    let list = try ArgumentList(
      rest, valued: ["--since", "--until", "--format", "--gap", "--source", "--state-dir", "--store"])
    guard list.positional.count <= 1 else { throw UsageError("track export takes at most one FILE") }
    var exportOptions = TrackExportOptions(since: try time(list, "--since"), until: try time(list, "--until"))
    exportOptions.sources = try sourceFilter(list)
    if let format = list.values["--format"] {
      guard let chosen = TrackFormat(rawValue: format) else { throw UsageError("--format takes gpx, geojson or csv") }
      exportOptions.format = chosen
    }
    if let gap = try list.number("--gap") {
      // Milliseconds are the store's resolution: a gap that rounds to 0 ms would split at every fix.
      guard gap >= 0.001, gap <= 365 * 86_400 else {
        throw UsageError("--gap takes seconds from 0.001 to 31536000 (365 days), got \(list.values["--gap"] ?? "")")
      }
      exportOptions.gap = Int64((gap * 1000).rounded())
    }
    if let since = exportOptions.since, let until = exportOptions.until, until <= since {
      throw UsageError("--until must be later than --since")
    }
    let store = try openForReading(try storePath(list))
    let target = list.positional.first ?? "-"
    if let descriptor = target == "-" ? 1 : openDescriptor(named: target) {
      do { try TrackExporter.export(from: store, options: exportOptions, to: descriptor) } catch {
        // `track export | head`: the reader has what it wanted.
        if descriptor == 1, case .output(let cause) = error, cause.code == EPIPE { endForBrokenPipe() }
        throw ClientError(error.description)
      }
    } else {
      try exportToFile(store, exportOptions, target: target, storePath: try storePath(list))
    }
    reportInvalidRows(store, since: exportOptions.since, until: exportOptions.until)
    return ExitCode.success.rawValue
  case "stats":
    let list = try ArgumentList(rest, valued: ["--since", "--until", "--source", "--state-dir", "--store"])
    try expectNoArguments(list.positional, "track stats")
    let sources = try sourceFilter(list)
    let since = try time(list, "--since")
    let until = try time(list, "--until")
    if let since, let until, until <= since { throw UsageError("--until must be later than --since") }
    // The MQTT outbox has its own file beside the store (an earlier version kept it in the
    // store: both are counted).
    let storeFile = try storePath(list)
    let directory = storeFile.lastIndex(of: "/").map { String(storeFile[..<$0]) } ?? "."
    let outboxPath = directory + "/" + TrackStore.outboxFileName
    var statistics = TrackStatistics.empty
    var store: TrackStore?
    if identity(storeFile) == nil, list.values["--store"] == nil, identity(outboxPath) != nil {
      // `track off` with --mqtt: no history, but the queue is on disk and is counted.
      writeError(
        "locationctl: no track store at \(storeFile) (track off?): only the MQTT queue is counted")
    } else {
      let opened = try openForReading(storeFile)
      store = opened
      do { statistics = try opened.statistics(since: since, until: until, sources: sources) } catch {
        throw ClientError(error.description)
      }
    }
    // No file is no queue (no --mqtt); one that cannot be read is said so, not counted as empty.
    if identity(outboxPath) != nil {
      do {
        let outbox = try TrackStore(readingAt: outboxPath)
        defer { outbox.close() }
        let queued = try outbox.statistics(since: 0, until: 0)
        statistics.outgoing += queued.outgoing
        statistics.outgoingDropped += queued.outgoingDropped
      } catch {
        writeError(
          "locationctl: the MQTT queue's store cannot be read, its messages are not counted: "
            + "\(error)")
      }
    }
    if let store { reportInvalidRows(store, since: since, until: until) }
    let first = statistics.firstTime.map(TrackTime.iso8601)
    let last = statistics.lastTime.map(TrackTime.iso8601)
    if options.json {
      var line = "{\"class\":\"TRACKSTATS\",\"points\":\(statistics.points)"
      line += ",\"distance\":\((statistics.distance * 1000).rounded() / 1000)"
      line += ",\"duration\":\(Double(statistics.duration) / 1000)"
      if let first, let last { line += ",\"first\":\"\(first)\",\"last\":\"\(last)\"" }
      line += ",\"bytes\":\(statistics.bytes),\"outgoing\":\(statistics.outgoing)"
      line += ",\"outgoingDropped\":\(statistics.outgoingDropped)}"
      print(line)
    } else {
      let seconds = statistics.duration / 1000
      print("points:   \(statistics.points)")
      print("distance: \(String(format3: statistics.distance / 1000)) km")
      print("duration: \(seconds / 3600)h \(seconds / 60 % 60)m \(seconds % 60)s")
      print("first:    \(first ?? "-")")
      print("last:     \(last ?? "-")")
      print("size:     \(statistics.bytes) bytes")
      print("outbox:   \(statistics.outgoing) waiting, \(statistics.outgoingDropped) dropped")
    }
    return ExitCode.success.rawValue
  case "clear":
    let list = try ArgumentList(rest, valued: ["--state-dir", "--store"])
    try expectNoArguments(list.positional, "track clear")
    let path = try storePath(list)
    if let error = unreachableStore(path, whenMissing: "") { throw error }
    do {
      // Only an existing store is cleared: opened read-only first, so that an empty or foreign
      // file is refused rather than given the track schema.
      try TrackStore(readingAt: path).close()
      let store = try TrackStore(path: path)
      let deleted = try store.clear()
      store.close()
      print(options.json ? "{\"class\":\"TRACKCLEAR\",\"deleted\":\(deleted)}" : "deleted \(deleted) fixes")
    } catch {
      throw ClientError(error.description)
    }
    return ExitCode.success.rawValue
  default:
    throw UsageError("track takes export, stats or clear, not \(action)")
  }
}

/// The open descriptor that `name` stands for: `/dev/stdout` (1), `/dev/stderr` (2),
/// `/dev/fd/N` and `/proc/self/fd/N` (N, when open). The export writes into that descriptor as
/// it writes `-` into standard output, whatever it is (a terminal, a pipe, a file the shell
/// opened), as shells and awk treat these names; `nil` for any other name.
func openDescriptor(named name: String) -> Int32? {
  let number: Int32?
  switch name {
  case "/dev/stdout": number = 1
  case "/dev/stderr": number = 2
  default:
    let prefixes = ["/dev/fd/", "/proc/self/fd/"]
    guard let prefix = prefixes.first(where: { name.hasPrefix($0) }),
      let value = Int32(name.dropFirst(prefix.count)), value >= 0
    else { return nil }
    number = value
  }
  guard let number, fcntl(number, F_GETFD) >= 0 else { return nil }
  return number
}

/// Says on standard error how many stored rows the export or statistics skipped because they
/// are not fixes (a damaged or hand-edited store); nothing when there are none.
private func reportInvalidRows(_ store: TrackStore, since: Int64?, until: Int64?) {
  guard let count = try? store.invalidRowCount(since: since, until: until), count > 0 else { return }
  writeError(
    "locationctl: skipped \(count) stored \(count == 1 ? "row that is not a valid fix" : "rows that are not valid fixes") (position out of range or not a number, mode below 2D, or a time outside the years 1-9999)"
  )
}

/// The device, inode and mode of `path` (without following a final symbolic link unless
/// `following`), or nil when it does
/// not exist.
private func identity(_ path: String, following: Bool = false) -> (device: UInt64, inode: UInt64, mode: UInt32)? {
  var status = stat()
  guard (following ? stat(path, &status) : lstat(path, &status)) == 0 else { return nil }
  return (UInt64(status.st_dev), UInt64(status.st_ino), UInt32(status.st_mode))
}

private func fileType(_ mode: UInt32) -> UInt32 { mode & UInt32(S_IFMT) }

/// Writes the export to `target`:
/// - a regular file (or a new name) is written as `target.partial`, mode 0600 like the store, and
///   renamed into place when complete, so a failed export leaves no truncated file and an existing
///   file untouched; SIGINT and SIGTERM remove the partial file;
/// - an existing character device or FIFO (/dev/null, a pipe) is written directly, never
///   replaced (the names of open descriptors, /dev/stdout, /dev/fd/N, are handled before:
///   ``openDescriptor(named:)``);
/// - a symbolic link, a directory, a socket, a block device, and the store itself or its -wal and
///   -shm files (same device and inode; the companion names beside the store also when they do
///   not exist) are refused before anything is written.
private func exportToFile(_ store: TrackStore, _ options: TrackExportOptions, target: String, storePath: String) throws {
  // The names SQLite gives the store's companion files, also while they do not exist (the
  // daemon stopped): an export written there would be read as the store's log at the next open.
  func split(_ path: String) -> (directory: String, name: String) {
    guard let slash = path.lastIndex(of: "/") else { return (".", path) }
    return (slash == path.startIndex ? "/" : String(path[..<slash]), String(path[path.index(after: slash)...]))
  }
  let (targetDirectory, targetName) = split(target)
  let (storeDirectory, storeName) = split(storePath)
  if [storeName + "-wal", storeName + "-shm", storeName + "-journal"].contains(targetName),
    let one = identity(targetDirectory, following: true), let two = identity(storeDirectory, following: true),
    one.device == two.device, one.inode == two.inode
  {
    throw ClientError("refusing to export onto the track store's \(targetName.dropFirst(storeName.count)) file (\(target))")
  }
  let existing = identity(target)
  if let existing {
    for file in [storePath, storePath + "-wal", storePath + "-shm"] {
      guard let other = identity(file, following: true) else { continue }
      if other.device == existing.device && other.inode == existing.inode {
        throw ClientError("refusing to export onto the track store itself (\(target) is \(file))")
      }
    }
    switch fileType(existing.mode) {
    case UInt32(S_IFREG): break
    case UInt32(S_IFLNK):
      throw ClientError("refusing to export to \(target): it is a symbolic link (give the file it points to)")
    case UInt32(S_IFCHR), UInt32(S_IFIFO):
      let fd = open(target, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
      guard fd >= 0 else { throw ClientError("cannot write \(target): \(String(cString: strerror(errno)))") }
      defer { _ = close(fd) }
      do { try TrackExporter.export(from: store, options: options, to: fd) } catch {
        throw ClientError("\(error)")
      }
      return
    case UInt32(S_IFDIR): throw ClientError("refusing to export to \(target): it is a directory")
    default: throw ClientError("refusing to export to \(target): not a regular file, character device or FIFO")
    }
  }
  let partial = target + ".partial"
  if let stale = identity(partial) {
    // A leftover of an interrupted export (or a link someone placed there): removed, never
    // written through.
    guard fileType(stale.mode) == UInt32(S_IFREG) || fileType(stale.mode) == UInt32(S_IFLNK), unlink(partial) == 0
    else { throw ClientError("cannot write \(partial): it exists and is not a regular file") }
  }
  let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
  guard fd >= 0 else { throw ClientError("cannot write \(partial): \(String(cString: strerror(errno)))") }
  let interruption = removeOnSignal(partial)
  defer { for source in interruption { source.cancel() } }
  // close(2) releases the descriptor even when it fails: it is called once, whatever happens.
  var open = true
  do {
    try TrackExporter.export(from: store, options: options, to: fd)
    guard fsync(fd) == 0 else { throw TrackExportError.output(SystemError(errno)) }
    open = false
    guard close(fd) == 0 else { throw TrackExportError.output(SystemError(errno)) }
  } catch {
    if open { _ = close(fd) }
    unlink(partial)
    throw ClientError("\(error)")
  }
  guard rename(partial, target) == 0 else {
    let reason = String(cString: strerror(errno))
    unlink(partial)
    throw ClientError("cannot write \(target): \(reason)")
  }
}

/// SIGINT and SIGTERM during an export remove `path` and exit 128 + signal, as the default action
/// would have (without the removal).
private func removeOnSignal(_ path: String) -> [any DispatchSourceSignal] {
  [SIGINT, SIGTERM].map { number in
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
    source.setEventHandler {
      unlink(path)
      _exit(128 + number)
    }
    source.resume()
    return source
  }
}

extension String {
  /// `value` with three decimals.
  fileprivate init(format3 value: Double) {
    let thousandths = Int64((value * 1000).rounded())
    let fraction = String(abs(thousandths) % 1000)
    self = (thousandths < 0 ? "-" : "") + String(abs(thousandths) / 1000) + "."
      + String(repeating: "0", count: 3 - fraction.count) + fraction
  }
}
