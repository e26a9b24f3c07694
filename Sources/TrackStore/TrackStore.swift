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
  private let onRejected: @Sendable (TrackStoreRejection) -> Void
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
  private static func prepareFile(_ path: String) throws(TrackStoreError) {
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
  private func recover(from error: TrackStoreError, _ state: inout State) -> Bool {
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
  private func writing<T: Sendable>(
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

  private static func validate(_ configuration: TrackStoreConfiguration) throws(TrackStoreError) {
    guard configuration.maxAge >= 0 else { throw .invalidArgument("maxAge", reason: "must be 0 or more") }
    guard configuration.maxBytes >= 0 else { throw .invalidArgument("maxBytes", reason: "must be 0 or more") }
    guard configuration.retentionBatch > 0 else { throw .invalidArgument("retentionBatch", reason: "must be positive") }
    guard configuration.outboxLimit > 0 else { throw .invalidArgument("outboxLimit", reason: "must be positive") }
    guard configuration.outboxMaxBytes > 0 else { throw .invalidArgument("outboxMaxBytes", reason: "must be positive") }
    if let pages = configuration.maxPageCount, pages <= 0 {
      throw .invalidArgument("maxPageCount", reason: "must be positive")
    }
  }

  private static func checkVersion(_ connection: SQLiteConnection) throws(TrackStoreError) {
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

  private static func prepareWriter(_ connection: SQLiteConnection, _ configuration: TrackStoreConfiguration)
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

  // MARK: - Fixes

  static let insertFix = """
    INSERT INTO fixes(time_ms, lat, lon, alt_msl, geoid_sep, speed, course, climb, eph, epv, hdop, vdop, pdop,
      satellites_used, mode, quality, source_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
    """

  /// Stores `points` in one transaction: all of them or, on error, none.
  ///
  /// - Returns: the number stored (`points.count`).
  /// - Throws: ``TrackStoreError/diskFull(path:message:)`` when the disk or the page cap is full
  ///   (nothing of the batch is kept), other ``TrackStoreError`` cases for other failures.
  @discardableResult
  public func append(_ points: [TrackPoint]) throws(TrackStoreError) -> Int {
    guard !points.isEmpty else { return 0 }
    return try writing { (state: inout State) throws(TrackStoreError) -> Int in
      let connection = state.connection
      try connection.beginImmediate()
      do throws(TrackStoreError) {
        let insert = try connection.statement(Self.insertFix)
        for point in points {
          let source = try Self.sourceID(for: point, &state)
          try insert.bind(1, point.time)
          try insert.bind(2, point.coordinate.latitude)
          try insert.bind(3, point.coordinate.longitude)
          try insert.bind(4, point.altitudeMSL)
          try insert.bind(5, point.geoidSeparation)
          try insert.bind(6, point.speed)
          try insert.bind(7, point.course)
          try insert.bind(8, point.climb)
          try insert.bind(9, point.eph)
          try insert.bind(10, point.epv)
          try insert.bind(11, point.hdop)
          try insert.bind(12, point.vdop)
          try insert.bind(13, point.pdop)
          try insert.bind(14, point.satellitesUsed.map(Int64.init))
          try insert.bind(15, Int64(point.mode.rawValue))
          try insert.bind(16, point.quality.map { Int64($0.rawValue) })
          try insert.bind(17, source)
          try insert.run()
        }
        try connection.execute("COMMIT")
      } catch {
        try? connection.execute("ROLLBACK")
        // Source ids created in the rolled-back transaction are gone too.
        state.sources.removeAll()
        throw error
      }
      return points.count
    }
  }

  private static func sourceID(for point: TrackPoint, _ state: inout State) throws(TrackStoreError) -> Int64 {
    let key = SourceKey(backend: point.backend, source: point.source ?? "", simulated: point.isSimulated)
    if let id = state.sources[key] { return id }
    let connection = state.connection
    let insert = try connection.statement(
      "INSERT OR IGNORE INTO sources(backend, source, simulated) VALUES (?1, ?2, ?3)")
    try insert.bind(1, key.backend)
    try insert.bind(2, key.source)
    try insert.bind(3, Int64(key.simulated ? 1 : 0))
    try insert.run()
    let select = try connection.statement("SELECT id FROM sources WHERE backend = ?1 AND source = ?2 AND simulated = ?3")
    defer { select.reset() }
    try select.bind(1, key.backend)
    try select.bind(2, key.source)
    try select.bind(3, Int64(key.simulated ? 1 : 0))
    guard try select.step() else {
      throw .sqlite(code: 0, message: "source row missing after insert", operation: "recording a source")
    }
    let id = select.int64(0)
    state.sources[key] = id
    return id
  }

  /// One retention step: deletes at most ``TrackStoreConfiguration/retentionBatch`` of the oldest
  /// fixes that are too old (``TrackStoreConfiguration/maxAge``) or beyond the size cap
  /// (``TrackStoreConfiguration/maxBytes``).
  ///
  /// Age is measured from the newest fix no later than `now` plus ``futureTolerance``, or from
  /// `now` when that fix is later than `now`: a fix newer than `now - maxAge` is never deleted by
  /// age, and fixes dated beyond the clock do not age the others.
  ///
  /// - Parameter now: the clock, milliseconds since the Unix epoch; `nil` reads the system's.
  /// - Returns: the number of fixes deleted (0 when the store is within its limits).
  /// - Throws: ``TrackStoreError`` when the delete fails (a full disk included: deleting writes).
  @discardableResult
  public func enforceRetention(now: Int64? = nil) throws(TrackStoreError) -> Int {
    let configuration = configuration
    let now = now ?? Self.clockNow()
    return try writing { (state: inout State) throws(TrackStoreError) -> Int in
      let connection = state.connection
      var deleted = 0
      var newest: Int64?
      if configuration.maxAge > 0 {
        let query = try connection.statement("SELECT max(time_ms) FROM fixes WHERE time_ms <= ?1")
        // Reset when done: a statement left on its row keeps a read transaction open, and once
        // another process commits (`track clear`) this connection could never write again.
        defer { query.reset() }
        let (latest, overflow) = now.addingReportingOverflow(Self.futureTolerance)
        try query.bind(1, overflow ? Int64.max : latest)
        if try query.step(), !query.isNull(0) { newest = query.int64(0) }
      }
      if let newest {
        let delete = try connection.statement(
          "DELETE FROM fixes WHERE id IN (SELECT id FROM fixes WHERE time_ms < ?1 ORDER BY time_ms LIMIT ?2)")
        try delete.bind(1, TrackPoint.milliseconds(from: configuration.maxAge, to: min(newest, now)))
        try delete.bind(2, Int64(configuration.retentionBatch))
        try delete.run()
        deleted += connection.changes
      }
      if configuration.maxBytes > 0, deleted < configuration.retentionBatch {
        let used = try Self.usedBytes(connection)
        if used > configuration.maxBytes {
          // Delete about the excess, at Self.bytesPerFix a row (no count(*) over the table at
          // every commit once the store sits at its cap), plus 1% of the batch, oldest first.
          let wanted = (used - configuration.maxBytes) / Self.bytesPerFix + Int64(configuration.retentionBatch / 100)
          let limit = min(wanted, Int64(configuration.retentionBatch - deleted))
          let delete = try connection.statement(
            "DELETE FROM fixes WHERE id IN (SELECT id FROM fixes ORDER BY time_ms LIMIT ?1)")
          try delete.bind(1, limit)
          try delete.run()
          deleted += connection.changes
        }
      }
      return deleted
    }
  }

  /// How far after the clock a fix may be dated and still be the reference of retention by age,
  /// milliseconds (5 minutes: receiver and system clocks disagree by seconds, not minutes).
  public static let futureTolerance: Int64 = 300_000

  /// The system's clock, milliseconds since the Unix epoch.
  static func clockNow() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
  }

  /// What a fix costs in the database with its index entry, bytes (measured: 133 for 1,000,000
  /// fixes; a little under, so retention deletes a little more than the excess rather than less).
  static let bytesPerFix: Int64 = 120

  /// Bytes of the database's pages in use (free pages excluded).
  static func usedBytes(_ connection: SQLiteConnection) throws(TrackStoreError) -> Int64 {
    let pages = try connection.integer("PRAGMA page_count") ?? 0
    let free = try connection.integer("PRAGMA freelist_count") ?? 0
    let size = try connection.integer("PRAGMA page_size") ?? 4096
    return (pages - free) * size
  }

  /// Deletes every stored fix (`locationctl track clear`); the outbox and the small table of
  /// sources are kept (a recorder holding source ids keeps writing valid rows).
  ///
  /// - Returns: the number of fixes deleted.
  @discardableResult
  public func clear() throws(TrackStoreError) -> Int {
    try state.withLock { (state: inout State) throws(TrackStoreError) -> Int in
      try state.connection.execute("DELETE FROM fixes")
      let deleted = state.connection.changes
      state.sources.removeAll()
      return deleted
    }
  }

  /// The SQL condition a row of `fixes` must meet to be read back as a fix: numeric latitude
  /// `-90...90` and longitude `-180...180`, mode 2D or 3D, and a time in the years 0001...9999
  /// (what ISO 8601 and GPX's `xsd:dateTime` write with four digits). The daemon writes only such
  /// rows; a store edited by hand, damaged, or handed over from elsewhere may hold others, which
  /// readers skip (``invalidRowCount(since:until:)`` counts them) rather than write as 0,0.
  static let validFix = """
    typeof(lat) IN ('real', 'integer') AND typeof(lon) IN ('real', 'integer') \
    AND lat BETWEEN -90 AND 90 AND lon BETWEEN -180 AND 180 AND mode IN (2, 3) \
    AND time_ms BETWEEN \(TrackPoint.earliestTime) AND \(TrackPoint.latestTime)
    """

  /// Rows with a time in `since..<until` that are not fixes (see ``validFix``): skipped by
  /// ``forEachPoint(since:until:_:)``, the export and the statistics.
  ///
  /// - Throws: ``TrackStoreError`` when the store cannot be read.
  public func invalidRowCount(since: Int64? = nil, until: Int64? = nil) throws(TrackStoreError) -> Int {
    try state.withLock { (state: inout State) throws(TrackStoreError) -> Int in
      let query = try state.connection.statement(
        "SELECT count(*) FROM fixes WHERE time_ms >= ?1 AND time_ms < ?2 AND NOT (\(Self.validFix))")
      defer { query.reset() }
      try query.bind(1, since ?? Int64.min)
      try query.bind(2, until ?? Int64.max)
      return try query.step() ? Int(query.int64(0)) : 0
    }
  }

  /// Calls `body` with every stored fix whose time is in `since..<until` (milliseconds since the
  /// Unix epoch; `nil` for no bound), in time order, reading through a cursor: memory stays flat
  /// whatever the number of fixes. The store's lock is held throughout.
  ///
  /// - Throws: a ``TrackStoreError`` from reading, or whatever `body` throws (which ends the walk).
  public func forEachPoint<E: Error>(
    since: Int64? = nil, until: Int64? = nil, sources: TrackSourceFilter = .all, _ body: (TrackPoint) throws(E) -> Void
  ) throws(TrackCursorError<E>) {
    try forEachPoint(since: since, until: until, sources: sources, provenance: true, body)
  }

  /// ``forEachPoint(since:until:_:)``; with `provenance` false the points' `backend` is empty and
  /// `source` nil (GPX and GeoJSON do not write them: no string per fix).
  func forEachPoint<E: Error>(
    since: Int64?, until: Int64?, sources filter: TrackSourceFilter = .all, provenance: Bool,
    _ body: (TrackPoint) throws(E) -> Void
  ) throws(TrackCursorError<E>) {
    try state.withLock { (state: inout State) throws(TrackCursorError<E>) -> Void in
      let connection = state.connection
      let cursor: SQLiteStatement
      var sources: [Int64: (String, String?, Bool)] = [:]
      do throws(TrackStoreError) {
        let list = try connection.prepare("SELECT id, backend, source, simulated FROM sources")
        defer { list.finalize() }
        while try list.step() {
          let source = list.text(2)
          sources[list.int64(0)] = (list.text(1), source.isEmpty ? nil : source, list.int64(3) != 0)
        }
        cursor = try connection.prepare(
          """
          SELECT time_ms, lat, lon, alt_msl, geoid_sep, speed, course, climb, eph, epv, hdop, vdop, pdop,
            satellites_used, mode, quality, source_id FROM fixes
          WHERE time_ms >= ?1 AND time_ms < ?2 AND \(Self.validFix) AND \(filter.condition) ORDER BY time_ms, id
          """)
        try cursor.bind(1, since ?? Int64.min)
        try cursor.bind(2, until ?? Int64.max)
      } catch {
        throw .store(error)
      }
      defer { cursor.finalize() }
      while true {
        let more: Bool
        do throws(TrackStoreError) { more = try cursor.step() } catch { throw .store(error) }
        guard more else { return }
        let source = provenance ? sources[cursor.int64(16)] : nil
        var point = TrackPoint(
          time: cursor.int64(0), coordinate: Coordinate(latitude: cursor.double(1), longitude: cursor.double(2)),
          mode: FixMode(rawValue: Int(truncatingIfNeeded: cursor.int64(14))) ?? .fix2D,
          backend: source?.0 ?? "", source: source?.1, isSimulated: source?.2 ?? false)
        point.altitudeMSL = cursor.optionalDouble(3)
        point.geoidSeparation = cursor.optionalDouble(4)
        point.speed = cursor.optionalDouble(5)
        point.course = cursor.optionalDouble(6)
        point.climb = cursor.optionalDouble(7)
        point.eph = cursor.optionalDouble(8)
        point.epv = cursor.optionalDouble(9)
        point.hdop = cursor.optionalDouble(10)
        point.vdop = cursor.optionalDouble(11)
        point.pdop = cursor.optionalDouble(12)
        point.satellitesUsed = cursor.optionalInt(13).flatMap { (0...1000).contains($0) ? $0 : nil }
        point.quality = cursor.optionalInt(15).flatMap(FixQuality.init(rawValue:))
        do throws(E) { try body(point) } catch { throw .body(error) }
      }
    }
  }

  /// Whether two consecutive fixes in `since..<until` (time order) lie more than `gap`
  /// milliseconds apart, so a streaming export can choose its GeoJSON geometry before writing
  /// it. Reads only the time index (no table rows) and stops at the first such gap.
  public func hasGap(
    since: Int64?, until: Int64?, sources: TrackSourceFilter = .all, longerThan gap: Int64
  ) throws(TrackStoreError) -> Bool {
    try state.withLock { (state: inout State) throws(TrackStoreError) -> Bool in
      let query = try state.connection.statement(
        "SELECT time_ms FROM fixes WHERE time_ms >= ?1 AND time_ms < ?2 AND \(Self.validFix) AND \(sources.condition) ORDER BY time_ms")
      defer { query.reset() }
      try query.bind(1, since ?? Int64.min)
      try query.bind(2, until ?? Int64.max)
      var previous: Int64?
      while try query.step() {
        let time = query.int64(0)
        if let previous, TrackPoint.milliseconds(from: previous, to: time) > gap { return true }
        previous = time
      }
      return false
    }
  }

  /// Points, distance and times of the fixes in `since..<until` (see ``forEachPoint(since:until:_:)``).
  ///
  /// - Parameter sources: which fixes count, by their source (default all).
  public func statistics(
    since: Int64? = nil, until: Int64? = nil, sources: TrackSourceFilter = .all
  ) throws(TrackStoreError) -> TrackStatistics {
    var statistics = TrackStatistics(points: 0, distance: 0, firstTime: nil, lastTime: nil, bytes: 0, outgoing: 0)
    var previous: Coordinate?
    do {
      try forEachPoint(since: since, until: until, sources: sources) { (point: TrackPoint) throws(Never) in
        statistics.points += 1
        if statistics.firstTime == nil { statistics.firstTime = point.time }
        statistics.lastTime = point.time
        if let previous {
          statistics.distance += WGS84Geodesic.distance(previous, point.coordinate) ?? 0
        }
        previous = point.coordinate
      }
    } catch {
      switch error {
      case .store(let error): throw error
      case .body(let never): switch never {}
      }
    }
    try state.withLock { (state: inout State) throws(TrackStoreError) in
      let pages = try state.connection.integer("PRAGMA page_count") ?? 0
      let size = try state.connection.integer("PRAGMA page_size") ?? 4096
      statistics.bytes = pages * size + Self.fileSize(path + "-wal")
      statistics.outgoing = Int(try state.connection.integer("SELECT count(*) FROM outbox") ?? 0)
      statistics.outgoingDropped = Int(
        try state.connection.integer("SELECT value FROM meta WHERE key = 'outbox_dropped'") ?? 0)
    }
    return statistics
  }

  private static func fileSize(_ path: String) -> Int64 {
    var info = stat()
    guard stat(path, &info) == 0 else { return 0 }
    return Int64(info.st_size)
  }

  /// Runs `PRAGMA integrity_check`: `"ok"` for a sound database, otherwise SQLite's findings.
  public func integrityCheck() throws(TrackStoreError) -> String {
    try state.withLock { (state: inout State) throws(TrackStoreError) -> String in
      try state.connection.text("PRAGMA integrity_check") ?? ""
    }
  }

  // MARK: - Outbox

  /// Messages waiting in the outbox.
  public var outgoingCount: Int { state.withLock { $0.outgoingCount } }

  /// ``outgoingCount`` and ``outgoingDropped`` when no operation holds the store now, `nil` while
  /// one does (a write the disk has not finished): never waits, for a status answered at once.
  public var outgoingCountsIfAvailable: (waiting: Int, dropped: Int)? {
    state.withLockIfAvailable { ($0.outgoingCount, $0.outgoingDropped) }
  }

  /// Bytes of the waiting messages' topics and payloads (bounded by
  /// ``TrackStoreConfiguration/outboxMaxBytes``).
  public var outgoingBytes: Int64 { state.withLock { $0.outgoingBytes } }

  /// The bytes ``outgoingBytes`` counts, over the whole outbox.
  static let outboxBytesQuery = "SELECT coalesce(sum(length(CAST(topic AS BLOB)) + length(payload)), 0) FROM outbox"
  /// The oldest waiting messages' ids and sizes, oldest first.
  static let oldestSizesQuery = "SELECT id, length(CAST(topic AS BLOB)) + length(payload) FROM outbox ORDER BY id"

  /// Messages deleted unsent because the outbox was at its bound, since the store was created
  /// (kept in the store, so it survives restarts).
  public var outgoingDropped: Int { state.withLock { $0.outgoingDropped } }

  /// Queues a message durably (committed before this returns), after every message already queued.
  ///
  /// At either bound (``TrackStoreConfiguration/outboxLimit`` messages,
  /// ``TrackStoreConfiguration/outboxMaxBytes`` bytes of topics and payloads) the oldest waiting
  /// messages are deleted in the same transaction, until this one fits, and counted in
  /// ``outgoingDropped``. The outbox never deletes fixes, and retention never deletes messages.
  ///
  /// - Parameters:
  ///   - topic: the MQTT topic name, non-empty.
  ///   - payload: the message body, at most 256 MiB (MQTT's own limit).
  ///   - qos: MQTT quality of service, `0...2`.
  ///   - retain: whether the broker should retain the message.
  ///   - enqueuedAt: the caller's clock, milliseconds since the Unix epoch (kept, not interpreted).
  ///   - id: the id to give it, above every id given so far (a message kept in memory while the
  ///     store failed keeps its sequence); `nil` for the next one.
  /// - Returns: the message's outbox id (strictly increasing).
  /// - Throws: ``TrackStoreError/invalidArgument(_:reason:)`` for an empty topic, a bad QoS or an
  ///   oversized payload (beyond MQTT's limit or the outbox's byte bound);
  ///   ``TrackStoreError/diskFull(path:message:)``; other ``TrackStoreError`` cases.
  @discardableResult
  public func enqueueOutgoing(
    topic: String, payload: [UInt8], qos: Int = 1, retain: Bool = false, enqueuedAt: Int64? = nil, id explicitID: Int64? = nil
  ) throws(TrackStoreError) -> Int64 {
    guard !topic.isEmpty else { throw .invalidArgument("topic", reason: "empty") }
    guard (0...2).contains(qos) else { throw .invalidArgument("qos", reason: "\(qos) is not 0, 1 or 2") }
    guard payload.count <= 268_435_455 else {
      throw .invalidArgument("payload", reason: "\(payload.count) bytes exceed MQTT's 268,435,455")
    }
    let limit = configuration.outboxLimit
    let maxBytes = configuration.outboxMaxBytes
    let size = Int64(topic.utf8.count + payload.count)
    guard size <= maxBytes else {
      throw .invalidArgument("payload", reason: "\(size) bytes with its topic exceed the outbox's bound of \(maxBytes)")
    }
    return try writing { (state: inout State) throws(TrackStoreError) -> Int64 in
      let connection = state.connection
      try connection.beginImmediate()
      var dropped = 0
      var droppedBytes: Int64 = 0
      let id: Int64
      do throws(TrackStoreError) {
        // The oldest messages go until one more fits both bounds.
        var excessCount = state.outgoingCount - limit + 1
        var excessBytes = state.outgoingBytes + size - maxBytes
        var through: Int64?
        if excessCount > 0 || excessBytes > 0 {
          let oldest = try connection.statement(Self.oldestSizesQuery)
          defer { oldest.reset() }
          while excessCount > 0 || excessBytes > 0, try oldest.step() {
            through = oldest.int64(0)
            excessCount -= 1
            excessBytes -= oldest.int64(1)
            droppedBytes += oldest.int64(1)
          }
        }
        if let through {
          let delete = try connection.statement("DELETE FROM outbox WHERE id <= ?1")
          try delete.bind(1, through)
          try delete.run()
          dropped = connection.changes
          let count = try connection.statement(
            """
            INSERT INTO meta(key, value) VALUES ('outbox_dropped', ?1)
            ON CONFLICT(key) DO UPDATE SET value = value + ?1
            """)
          try count.bind(1, Int64(dropped))
          try count.run()
        }
        if let explicitID {
          let last = try connection.integer("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'") ?? 0
          guard explicitID > last else {
            throw .invalidArgument("id", reason: "\(explicitID) is not above the last id \(last)")
          }
        }
        let insert = try connection.statement(
          "INSERT INTO outbox(topic, payload, qos, retain, enqueued_ms, id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        try insert.bind(6, explicitID)
        try insert.bind(1, topic)
        try insert.bind(2, payload)
        try insert.bind(3, Int64(qos))
        try insert.bind(4, Int64(retain ? 1 : 0))
        try insert.bind(5, enqueuedAt)
        try insert.run()
        id = connection.lastInsertRowID
        try connection.execute("COMMIT")
      } catch {
        try? connection.execute("ROLLBACK")
        throw error
      }
      state.outgoingCount += 1 - dropped
      state.outgoingBytes += size - droppedBytes
      state.lastOutgoingID = max(state.lastOutgoingID, id)
      state.outgoingDropped += dropped
      return id
    }
  }

  /// The oldest waiting messages with an id above `after` (all when `nil`), at most `limit`
  /// (`1...10_000`), in queue order; they stay queued until ``acknowledgeOutgoing(upTo:)``.
  ///
  /// - Throws: ``TrackStoreError/invalidArgument(_:reason:)`` for a limit out of range.
  public func peekOutgoing(after: Int64? = nil, limit: Int) throws(TrackStoreError) -> [OutgoingMessage] {
    guard (1...10_000).contains(limit) else { throw .invalidArgument("limit", reason: "\(limit) is not in 1...10000") }
    return try writing(reading: true) { (state: inout State) throws(TrackStoreError) -> [OutgoingMessage] in
      let select = try state.connection.statement(
        "SELECT id, topic, payload, qos, retain, enqueued_ms FROM outbox WHERE id > ?2 ORDER BY id LIMIT ?1")
      defer { select.reset() }
      try select.bind(1, Int64(limit))
      try select.bind(2, after ?? Int64.min)
      var messages: [OutgoingMessage] = []
      while try select.step() {
        messages.append(
          OutgoingMessage(
            id: select.int64(0), topic: select.text(1), payload: select.bytes(2), qos: Int(select.int64(3)),
            retain: select.int64(4) != 0, enqueuedAt: select.isNull(5) ? nil : select.int64(5)))
      }
      return messages
    }
  }

  /// The highest id the outbox has given (0 when none): later messages get higher ones.
  public func lastOutgoingID() throws(TrackStoreError) -> Int64 {
    try writing(reading: true) { (state: inout State) throws(TrackStoreError) -> Int64 in
      try state.connection.integer("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'") ?? 0
    }
  }

  /// Makes every later message's id higher than `id` (ids handed out elsewhere, by a queue kept
  /// in memory while the store failed, are never reused).
  public func reserveOutgoingIDs(through id: Int64) throws(TrackStoreError) {
    try writing { (state: inout State) throws(TrackStoreError) in
      let connection = state.connection
      let last = try connection.integer("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'")
      guard id > (last ?? 0) else { return }
      let statement = try connection.statement(
        last == nil
          ? "INSERT INTO sqlite_sequence(name, seq) VALUES ('outbox', ?1)"
          : "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'outbox'")
      try statement.bind(1, id)
      try statement.run()
      state.lastOutgoingID = max(state.lastOutgoingID, id)
    }
  }

  /// Puts messages a queue kept in memory before this store could be opened (`messages`, their
  /// ids handed out already, all `1...through`) ahead of the messages waiting here, in one
  /// transaction: waiting messages whose ids are not above `through` are renumbered after it,
  /// keeping their order, so that no id the memory queue gave out is reused and every message
  /// waiting here stays after everything the memory queue may have published.
  ///
  /// - Parameters:
  ///   - messages: the memory queue's waiting messages, ids increasing, each at most `through`,
  ///     QoS `0...2`.
  ///   - through: the highest id the memory queue gave out, `>= 0`.
  /// - Returns: how many waiting messages were renumbered.
  /// - Throws: ``TrackStoreError/invalidArgument(_:reason:)`` for an id above `through` or not
  ///   increasing, or a bad QoS; ``TrackStoreError/diskFull(path:message:)``; other
  ///   ``TrackStoreError`` cases. Nothing changes when it throws.
  @discardableResult
  public func adoptOutgoing(_ messages: [OutgoingMessage], through: Int64) throws(TrackStoreError) -> Int {
    guard through >= 0 else { throw .invalidArgument("through", reason: "\(through) is negative") }
    var previous: Int64 = 0
    for message in messages {
      guard (0...2).contains(message.qos) else {
        throw .invalidArgument("qos", reason: "\(message.qos) is not 0, 1 or 2")
      }
      guard message.id > previous, message.id <= through else {
        throw .invalidArgument("id", reason: "\(message.id) is not increasing within 1...\(through)")
      }
      previous = message.id
    }
    return try writing { (state: inout State) throws(TrackStoreError) -> Int in
      let connection = state.connection
      try connection.beginImmediate()
      var renumbered = 0
      var bytes: Int64 = 0
      do throws(TrackStoreError) {
        if let lowest = try connection.integer("SELECT min(id) FROM outbox"), lowest <= through {
          // Through negative ids, so that no two rows ever share an id on the way.
          let shift = through - lowest + 1
          try connection.execute("UPDATE outbox SET id = -(id + \(shift))")
          renumbered = connection.changes
          try connection.execute("UPDATE outbox SET id = -id")
        }
        let insert = try connection.statement(
          "INSERT INTO outbox(topic, payload, qos, retain, enqueued_ms, id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        for message in messages {
          try insert.bind(1, message.topic)
          try insert.bind(2, message.payload)
          try insert.bind(3, Int64(message.qos))
          try insert.bind(4, Int64(message.retain ? 1 : 0))
          try insert.bind(5, message.enqueuedAt)
          try insert.bind(6, message.id)
          try insert.run()
          bytes += Int64(message.topic.utf8.count + message.payload.count)
        }
        let highest = max(through, try connection.integer("SELECT max(id) FROM outbox") ?? 0)
        let last = try connection.integer("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'")
        if highest > (last ?? 0) {
          let sequence = try connection.statement(
            last == nil
              ? "INSERT INTO sqlite_sequence(name, seq) VALUES ('outbox', ?1)"
              : "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'outbox'")
          try sequence.bind(1, highest)
          try sequence.run()
        }
        try connection.execute("COMMIT")
        state.lastOutgoingID = max(state.lastOutgoingID, highest)
      } catch {
        try? connection.execute("ROLLBACK")
        throw error
      }
      state.outgoingCount += messages.count
      state.outgoingBytes += bytes
      return renumbered
    }
  }

  /// Waiting messages with an id up to and including `id`.
  public func countOutgoing(through id: Int64) throws(TrackStoreError) -> Int {
    try writing(reading: true) { (state: inout State) throws(TrackStoreError) -> Int in
      let query = try state.connection.statement("SELECT count(*) FROM outbox WHERE id <= ?1")
      defer { query.reset() }
      try query.bind(1, id)
      return try query.step() ? Int(query.int64(0)) : 0
    }
  }

  /// Moves every waiting message to `other`'s outbox, in order, in batches of 1,000 (each batch
  /// queued there before it is removed here: a crash between the two queues it twice, never
  /// loses it). Used once to move the outbox of an earlier version's `track.sqlite` to
  /// ``outboxFileName``.
  ///
  /// - Returns: the number of messages moved.
  /// - Throws: ``TrackStoreError`` from either store; what was moved stays moved.
  @discardableResult
  public func moveOutgoing(to other: TrackStore) throws(TrackStoreError) -> Int {
    var moved = 0
    while true {
      let batch = try peekOutgoing(limit: 1_000)
      guard let last = batch.last else { return moved }
      for message in batch {
        try other.enqueueOutgoing(
          topic: message.topic, payload: message.payload, qos: message.qos, retain: message.retain,
          enqueuedAt: message.enqueuedAt)
      }
      try acknowledgeOutgoing(upTo: last.id)
      moved += batch.count
    }
  }

  /// Removes every waiting message with an id up to and including `id` (the broker has them).
  ///
  /// - Returns: the number of messages removed (0 when none was waiting at or below `id`).
  @discardableResult
  public func acknowledgeOutgoing(upTo id: Int64) throws(TrackStoreError) -> Int {
    try writing { (state: inout State) throws(TrackStoreError) -> Int in
      let sizes = try state.connection.statement(
        "SELECT coalesce(sum(length(CAST(topic AS BLOB)) + length(payload)), 0) FROM outbox WHERE id <= ?1")
      try sizes.bind(1, id)
      let bytes = try sizes.step() ? sizes.int64(0) : 0
      sizes.reset()
      let delete = try state.connection.statement("DELETE FROM outbox WHERE id <= ?1")
      try delete.bind(1, id)
      try delete.run()
      let removed = state.connection.changes
      state.outgoingCount -= removed
      state.outgoingBytes = max(0, state.outgoingBytes - bytes)
      return removed
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
