#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import CSQLite
import LocationModel
import Synchronization

/// Limits and policies of a ``TrackStore``; the daemon's `track-*` configuration keys set them.
public struct TrackStoreConfiguration: Sendable, Hashable {
  /// Fixes older than this (milliseconds) before the newest recorded fix are deleted. Age is
  /// measured against the newest fix's time, not the wall clock: a replayed old log is not
  /// deleted on arrival and a wrong system clock cannot empty the store. Fixes dated more than
  /// ``TrackStore/futureTolerance`` after the clock are not taken as the newest, and the reference
  /// is never later than the clock: one future-dated fix (a bad receiver time, a replay with a late
  /// rollover floor) cannot delete the history. 0 keeps every age.
  /// Default 90 days (`track-max-age = 90d`).
  public var maxAge: Int64 = 90 * 86_400_000
  /// The store's live data (pages in use, `page_count - freelist_count` times `page_size`) is
  /// kept at or below this many bytes by deleting the oldest fixes; freed pages are reused, so
  /// the file stops growing there. 0 means no cap. Default 256 MiB (`track-max-size = 256M`):
  /// a fix takes about 133 bytes with its index, so about 2 million fixes (23 days at 1 Hz).
  public var maxBytes: Int64 = 256 * 1024 * 1024
  /// At most this many rows are deleted per retention step (one step after each committed
  /// batch), so retention never stalls recording: a store far over its limits converges over
  /// several batches. Default 5,000.
  public var retentionBatch: Int = 5_000
  /// Outbox bound: at most this many messages wait. Enqueuing at the bound deletes the oldest
  /// waiting message and counts it in ``TrackStore/outgoingDropped`` (the newest positions
  /// matter most to a receiver catching up). Default 100,000 (a day at about 1 message/s).
  public var outboxLimit: Int = 100_000
  /// Outbox bound in bytes: the waiting messages' topics and payloads together stay at or below
  /// this; enqueuing beyond it deletes the oldest messages, counted as for ``outboxLimit``. The
  /// file holds about 1.1 times this (row and page overhead) plus its WAL. Default 32 MiB
  /// (`mqtt-queue-size = 32M`).
  public var outboxMaxBytes: Int64 = 32 * 1024 * 1024
  /// Caps the database at this many pages (`PRAGMA max_page_count`); `nil` leaves SQLite's
  /// default. Lets tests reach SQLITE_FULL without filling a disk.
  public var maxPageCount: Int?

  /// The defaults above.
  public init() {}
}

/// The durable track store: recorded fixes and the outbox of a store-and-forward publisher, in
/// one SQLite database (WAL mode, `synchronous=NORMAL`) under the state directory.
///
/// One connection, behind a `Mutex`: every call runs to completion on the caller's thread while
/// holding it, so the connection is never used by two threads at once. In the daemon the
/// ``TrackRecorder`` calls ``append(_:)`` from its own serial queue, and the MQTT publisher calls
/// the outbox API; both are short transactions.
///
/// Durability: each ``append(_:)`` and each outbox change is one transaction. In WAL mode with
/// `synchronous=NORMAL` a committed transaction survives the process being killed (`kill -9`):
/// it is in the WAL file, which the next opener replays. A power loss may lose the transactions
/// since the last checkpoint's fsync but never corrupts the database (sqlite.org/wal.html).
///
/// Schema version 1 (`PRAGMA user_version`); docs/track.md lists the tables.
public final class TrackStore: Sendable {
  /// The store's file name in the state directory.
  public static let fileName = "track.sqlite"
  /// The MQTT outbox's file name in the state directory: a store of its own, so that the outbox
  /// and the history are bounded separately and neither can take the other's room.
  public static let outboxFileName = "mqtt-outbox.sqlite"
  /// The schema version this code writes and reads.
  public static let schemaVersion: Int64 = 1
  /// `PRAGMA application_id` of a locationd track store (bytes `LDTS`), set when the store is
  /// created (or adopted: a store of an earlier version without one, whose tables are ours) and
  /// checked at every open for writing; sqlite.org/fileformat.html#application_id.
  public static let applicationID: Int32 = 0x4C44_5453

  struct State: ~Copyable {
    var connection: SQLiteConnection
    /// Files set aside since the store was opened (at open and while running).
    var rejections: [TrackStoreRejection] = []
    var sources: [SourceKey: Int64] = [:]
    var outgoingCount: Int = 0
    var outgoingDropped: Int = 0
    /// Bytes of the waiting messages' topics and payloads.
    var outgoingBytes: Int64 = 0
    /// The highest outbox id given, carried into a fresh store when a damaged one is set aside
    /// (a publisher's position in the queue stays valid).
    var lastOutgoingID: Int64 = 0
  }

  struct SourceKey: Hashable {
    var backend: String
    var source: String
    var simulated: Bool
  }

  /// The database file.
  public let path: String
  /// The limits in force.
  public let configuration: TrackStoreConfiguration
  /// Whether the store was opened read-only (``open(readingAt:)``).
  public let isReadOnly: Bool
  let state: Mutex<State>
  let onRejected: @Sendable (TrackStoreRejection) -> Void
  /// Failures to inject into every write and outbox read, for tests of what the store's users do
  /// when the disk fails (see ``TrackStoreFaults``); none unless a test sets one.
  public let faults: TrackStoreFaults

  /// Opens the store at `path` for recording, creating it (and its schema) when missing.
  ///
  /// Only a locationd track store is used: a file that is not SQLite, another application's
  /// database (``applicationID``), a database whose tables are not ours or lack ours, a truncated
  /// or damaged one (`PRAGMA quick_check`), or one whose `-wal` file belongs to another database
  /// (its page size differs), is renamed aside with its `-wal` and `-shm` files
  /// (``TrackStoreRejection``), `onRejected` is called once with the reason, and a fresh store is
  /// created. So is something that is not a regular file at `path` (a symbolic link, which is
  /// never followed, a directory, a FIFO, a socket or a device): renamed, never deleted or opened. A store of an earlier version without the application id is adopted when its tables
  /// are ours. The same happens while running when SQLite reports the store damaged
  /// (`SQLITE_CORRUPT`, `SQLITE_NOTADB`): the operation is retried once on the fresh store.
  ///
  /// - Parameters:
  ///   - faults: failures to inject (tests): one set before the open makes the open throw it,
  ///     as a disk that fails at start does; a new, empty set unless given.
  ///   - onRejected: called (on the caller's thread, the store's lock held: it must not call the
  ///     store) for each file set aside.
  /// - Throws: ``TrackStoreError/libraryUnavailable(_:)`` without libsqlite3,
  ///   ``TrackStoreError/openFailed(path:code:message:)`` (the file cannot be opened, created or
  ///   set aside), ``TrackStoreError/incompatible(path:reason:)`` for a newer schema version,
  ///   ``TrackStoreError/diskFull(path:message:)``.
  public init(
    path: String, configuration: TrackStoreConfiguration = TrackStoreConfiguration(),
    faults: TrackStoreFaults = TrackStoreFaults(),
    onRejected: @escaping @Sendable (TrackStoreRejection) -> Void = { _ in }
  ) throws(TrackStoreError) {
    try Self.validate(configuration)
    try faults.check()
    var rejections: [TrackStoreRejection] = []
    // Something that is not a regular file where the store belongs (a link planted there, a
    // directory or a FIFO left by a restore) would otherwise keep the store unavailable for the
    // whole run, retried in vain: it is set aside like a foreign database and a fresh store starts.
    if let kind = StoreCheck.notRegularFile(path) {
      let rejection = TrackStoreRejection(
        path: path, reason: "not a regular file: \(kind)", keptAs: try StoreCheck.setAside(path))
      onRejected(rejection)
      rejections.append(rejection)
    }
    try Self.prepareFile(path)
    // A stray -wal file is set aside alone: the store beside it is sound and keeps its history.
    if let reason = StoreCheck.strayWAL(path) {
      let rejection = TrackStoreRejection(path: path, reason: reason, keptAs: try StoreCheck.setAsideCompanions(path))
      onRejected(rejection)
      rejections.append(rejection)
    }
    if let reason = try StoreCheck.reasonToReject(path) {
      let rejection = TrackStoreRejection(path: path, reason: reason, keptAs: try StoreCheck.setAside(path))
      onRejected(rejection)
      rejections.append(rejection)
      try Self.prepareFile(path)
    }
    let connection = try SQLiteConnection(path: path, readOnly: false)
    try Self.prepareWriter(connection, configuration)
    var initial = State(connection: connection)
    initial.rejections = rejections
    initial.outgoingCount = Int(try connection.integer("SELECT count(*) FROM outbox") ?? 0)
    initial.outgoingBytes = try connection.integer(Self.outboxBytesQuery) ?? 0
    initial.lastOutgoingID = try connection.integer("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'") ?? 0
    initial.outgoingDropped = Int(try connection.integer("SELECT value FROM meta WHERE key = 'outbox_dropped'") ?? 0)
    self.path = path
    self.configuration = configuration
    self.isReadOnly = false
    self.faults = faults
    self.onRejected = onRejected
    self.state = Mutex(initial)
  }

  /// Files set aside since the store was opened, oldest first.
  public var rejections: [TrackStoreRejection] { state.withLock { $0.rejections } }

  /// Creates the file owner-only when missing and checks it is a regular file.
  static func prepareFile(_ path: String) throws(TrackStoreError) {
    // Created owner-only before SQLite sees it (SQLite gives the -wal and -shm files the same
    // mode): a location history is more sensitive than the live position. O_NOFOLLOW: a link
    // planted at the path is refused, not followed.
    // O_NONBLOCK: a FIFO planted there does not block the open (it is refused below).
    let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
    guard fd >= 0 else {
      let code = errno
      // An existing store on a read-only filesystem, or without write permission, is not one
      // that could not be created.
      let verb = StoreCheck.exists(path) ? "cannot open it for writing: " : "cannot create it: "
      throw .openFailed(path: path, code: code, message: verb + String(cString: strerror(code)))
    }
    var status = stat()
    guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
      _ = Glibc.close(fd)
      throw .openFailed(path: path, code: EINVAL, message: "not a regular file")
    }
    // A store restored from a backup or copied in with a wider mode is the daemon's own file:
    // made owner-only again, with its -wal and -shm files, before anything more is written.
    if status.st_mode & 0o077 != 0 {
      _ = fchmod(fd, 0o600)
      for suffix in ["-wal", "-shm"] {
        let companion = open(path + suffix, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard companion >= 0 else { continue }
        var companionStatus = stat()
        if fstat(companion, &companionStatus) == 0, companionStatus.st_mode & S_IFMT == S_IFREG {
          _ = fchmod(companion, 0o600)
        }
        _ = Glibc.close(companion)
      }
    }
    _ = Glibc.close(fd)
  }

  /// Sets the damaged store aside and opens a fresh one in its place (see ``init(path:configuration:faults:onRejected:)``);
  /// `false` when `error` is not damage or the fresh store cannot be made (the error stands).
  func recover(from error: TrackStoreError, _ state: inout State) -> Bool {
    guard !isReadOnly, case .sqlite(let code, let message, _) = error, StoreCheck.isDamage(code) else { return false }
    state.connection.close()
    do throws(TrackStoreError) {
      let keptAs = try StoreCheck.setAside(path)
      let rejection = TrackStoreRejection(path: path, reason: "damaged while in use: \(message)", keptAs: keptAs)
      try Self.prepareFile(path)
      let connection = try SQLiteConnection(path: path, readOnly: false)
      try Self.prepareWriter(connection, configuration)
      state.connection = connection
      state.sources.removeAll()
      state.outgoingCount = 0
      state.outgoingBytes = 0
      state.rejections.append(rejection)
      if state.outgoingDropped > 0 {
        try? connection.execute("INSERT INTO meta(key, value) VALUES ('outbox_dropped', \(state.outgoingDropped))")
      }
      if state.lastOutgoingID > 0 {
        try? connection.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('outbox', \(state.lastOutgoingID))")
      }
      onRejected(rejection)
      return true
    } catch {
      return false
    }
  }

  /// Runs `body` on the connection; when SQLite reports the store damaged, sets it aside, opens a
  /// fresh store and runs `body` once more there.
  func writing<T: Sendable>(
    reading: Bool = false, _ body: (inout State) throws(TrackStoreError) -> T
  ) throws(TrackStoreError) -> T {
    if !reading { try faults.check() }
    return try state.withLock { (state: inout State) throws(TrackStoreError) -> T in
      do throws(TrackStoreError) {
        return try body(&state)
      } catch {
        guard recover(from: error, &state) else { throw error }
        return try body(&state)
      }
    }
  }

  /// Opens an existing store read-only (locationctl's `track export` and `track stats`), beside a
  /// daemon that may be writing it: WAL mode lets readers see the last committed state.
  ///
  /// - Throws: as ``init(path:configuration:)``; ``TrackStoreError/openFailed(path:code:message:)``
  ///   when the file does not exist.
  public init(readingAt path: String) throws(TrackStoreError) {
    // A FIFO or a device at the path would block or feed SQLite garbage: only a regular file
    // (through a link too: the reader writes nothing) is opened.
    var status = stat()
    guard stat(path, &status) == 0 else {
      let code = errno
      throw .openFailed(path: path, code: code, message: String(cString: strerror(code)))
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
      throw .openFailed(path: path, code: EINVAL, message: "not a regular file")
    }
    // SQLite says only "unable to open database file" when the file cannot be read: ask the
    // kernel first, so the reader learns it was permission (run as the daemon's user or root).
    let probe = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard probe >= 0 else {
      let code = errno
      throw .openFailed(path: path, code: code, message: String(cString: strerror(code)))
    }
    _ = Glibc.close(probe)
    let connection = try SQLiteConnection(path: path, readOnly: true)
    try Self.checkVersion(connection)
    var initial = State(connection: connection)
    initial.outgoingCount = Int(try connection.integer("SELECT count(*) FROM outbox") ?? 0)
    self.path = path
    self.configuration = TrackStoreConfiguration()
    self.isReadOnly = true
    self.faults = TrackStoreFaults()
    self.onRejected = { _ in }
    self.state = Mutex(initial)
  }

  /// Closes the connection; later calls throw ``TrackStoreError/closed``.
  ///
  /// A store opened for writing is first taken out of WAL mode (`PRAGMA journal_mode = DELETE`:
  /// a checkpoint, then SQLite deletes the `-wal` file and marks the header rollback mode), so
  /// that a `-wal` file found beside it at the next open cannot be its own (see
  /// ``init(path:configuration:faults:onRejected:)``). While another connection reads it (a
  /// `locationctl track export`) the switch is refused and the store stays in WAL mode, as before.
  public func close() {
    state.withLock { state in
      if !isReadOnly, state.connection.isOpen {
        state.connection.clearCache()
        _ = try? state.connection.text("PRAGMA journal_mode = DELETE")
      }
      state.connection.close()
    }
  }

  static func validate(_ configuration: TrackStoreConfiguration) throws(TrackStoreError) {
    guard configuration.maxAge >= 0 else { throw .invalidArgument("maxAge", reason: "must be 0 or more") }
    guard configuration.maxBytes >= 0 else { throw .invalidArgument("maxBytes", reason: "must be 0 or more") }
    guard configuration.retentionBatch > 0 else { throw .invalidArgument("retentionBatch", reason: "must be positive") }
    guard configuration.outboxLimit > 0 else { throw .invalidArgument("outboxLimit", reason: "must be positive") }
    guard configuration.outboxMaxBytes > 0 else { throw .invalidArgument("outboxMaxBytes", reason: "must be positive") }
    if let pages = configuration.maxPageCount, pages <= 0 {
      throw .invalidArgument("maxPageCount", reason: "must be positive")
    }
  }

  static func checkVersion(_ connection: SQLiteConnection) throws(TrackStoreError) {
    let version: Int64
    do throws(TrackStoreError) {
      version = try connection.integer("PRAGMA user_version") ?? 0
    } catch .sqlite(let code, let message, _) where !StoreCheck.isDamage(code) {
      // Not the file's content: the disk, a lock, or a read-only filesystem without the -shm file
      // a WAL store needs.
      var reason = message
      var info = statvfs()
      if code & 0xff == SQLITE_CANTOPEN, statvfs(connection.path, &info) == 0, info.f_flag & UInt(ST_RDONLY) != 0 {
        reason += " (read-only file system: SQLite cannot create the -shm file beside a WAL store there)"
      }
      throw .openFailed(path: connection.path, code: code, message: "\(reason) (SQLite code \(code))")
    } catch {
      throw .incompatible(path: connection.path, reason: error.description)
    }
    guard version <= schemaVersion else {
      throw .incompatible(path: connection.path, reason: "schema version \(version) is newer than \(schemaVersion)")
    }
    if version == 0 && connection.isOpen {
      // A read-only open of a file without our schema.
      let tables = (try? connection.integer("SELECT count(*) FROM sqlite_master WHERE name = 'fixes'")) ?? 0
      if tables == 0 { throw .incompatible(path: connection.path, reason: "no track tables") }
    }
  }

  static let schema = """
    CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS sources(
      id INTEGER PRIMARY KEY,
      backend TEXT NOT NULL,
      source TEXT NOT NULL,
      simulated INTEGER NOT NULL,
      UNIQUE(backend, source, simulated));
    CREATE TABLE IF NOT EXISTS fixes(
      id INTEGER PRIMARY KEY,
      time_ms INTEGER NOT NULL,
      lat REAL NOT NULL,
      lon REAL NOT NULL,
      alt_msl REAL,
      geoid_sep REAL,
      speed REAL,
      course REAL,
      climb REAL,
      eph REAL,
      epv REAL,
      hdop REAL,
      vdop REAL,
      pdop REAL,
      satellites_used INTEGER,
      mode INTEGER NOT NULL,
      quality INTEGER,
      source_id INTEGER NOT NULL REFERENCES sources(id));
    CREATE INDEX IF NOT EXISTS fixes_by_time ON fixes(time_ms);
    CREATE TABLE IF NOT EXISTS outbox(
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      topic TEXT NOT NULL,
      payload BLOB NOT NULL,
      qos INTEGER NOT NULL,
      retain INTEGER NOT NULL,
      enqueued_ms INTEGER);
    """

  static func prepareWriter(_ connection: SQLiteConnection, _ configuration: TrackStoreConfiguration)
    throws(TrackStoreError)
  {
    do {
      try checkVersion(connection)
    } catch .incompatible(let path, let reason) where reason == "no track tables" {
      _ = path  // a new file: the schema is created below
    }
    let mode = try connection.text("PRAGMA journal_mode = WAL")
    guard mode?.lowercased() == "wal" else {
      throw .incompatible(path: connection.path, reason: "cannot use WAL mode (journal_mode is \(mode ?? "unknown"))")
    }
    try connection.execute("PRAGMA synchronous = NORMAL")
    if let pages = configuration.maxPageCount {
      _ = try connection.integer("PRAGMA max_page_count = \(pages)")
    }
    try connection.beginImmediate()
    do throws(TrackStoreError) {
      try connection.execute(schema)
      if try connection.integer("PRAGMA user_version") == 0 {
        try connection.execute("PRAGMA user_version = \(schemaVersion)")
      }
      // New stores, and stores of earlier versions (their tables checked as ours), get the id.
      if try connection.integer("PRAGMA application_id") == 0 {
        try connection.execute("PRAGMA application_id = \(applicationID)")
      }
      try connection.execute("COMMIT")
    } catch {
      try? connection.execute("ROLLBACK")
      throw error
    }
  }
}

/// Why ``TrackStore/forEachPoint(since:until:_:)`` stopped: the store failed, or the body threw.
public enum TrackCursorError<Body: Error>: Error {
  /// Reading the store failed.
  case store(TrackStoreError)
  /// The body threw (a write to the export's output failed, say).
  case body(Body)
}

/// Which fixes a read of the store takes, by their source (``TrackPoint/isSimulated``).
public enum TrackSourceFilter: String, Sendable, Hashable, CaseIterable {
  /// Every fix.
  case all
  /// Fixes measured live (gpsd, a receiver).
  case live
  /// Fixes replayed from a log or simulated.
  case simulated

  /// The SQL condition on the `fixes` table's `source_id` (a constant per case: no input in it).
  var condition: String {
    switch self {
    case .all: return "1"
    case .live: return "source_id IN (SELECT id FROM sources WHERE simulated = 0)"
    case .simulated: return "source_id IN (SELECT id FROM sources WHERE simulated != 0)"
    }
  }
}

/// Failures a test injects into a ``TrackStore`` (a full disk, an I/O error, a read-only
/// filesystem), so that what its users do can be checked without such a disk: while set, every
/// write throws the error before touching SQLite (reads go on, as on a full disk), and so does
/// opening a store given this set (``TrackStore/init(path:configuration:faults:onRejected:)``).
public final class TrackStoreFaults: Sendable {
  private let failure = Mutex<TrackStoreError?>(nil)

  /// No failure until ``fail(with:)`` sets one.
  public init() {}

  /// Every later operation throws `error` until this is called with `nil`.
  public func fail(with error: TrackStoreError?) { failure.withLock { $0 = error } }

  /// What SQLite reports for a full disk (`ENOSPC`), an I/O error (`EIO`) and a read-only
  /// filesystem (`EROFS`), as the store throws them.
  public static func diskFull(_ path: String) -> TrackStoreError {
    .diskFull(path: path, message: "database or disk is full")
  }
  /// `SQLITE_IOERR_WRITE` (`EIO`).
  public static let ioError = TrackStoreError.sqlite(code: 778, message: "disk I/O error", operation: "stepping a statement")
  /// `SQLITE_READONLY` (`EROFS`).
  public static let readOnly = TrackStoreError.sqlite(
    code: 8, message: "attempt to write a readonly database", operation: "stepping a statement")

  func check() throws(TrackStoreError) {
    if let error = failure.withLock({ $0 }) { throw error }
  }
}
