import CSQLite

/// Why the track store failed, with SQLite's own code and message where there is one.
///
/// `SQLITE_FULL` (a full disk, or the configured size cap reached) is its own case so that the
/// recorder can report it clearly and keep going; everything else carries the extended result
/// code (sqlite.org/rescode.html) and `sqlite3_errmsg`.
public enum TrackStoreError: Error, Hashable, Sendable, CustomStringConvertible {
  /// libsqlite3 could not be loaded (not installed, or too old): the loader's explanation.
  case libraryUnavailable(String)
  /// The store file could not be opened or created at `path`: `code` is SQLite's result code,
  /// or `errno` when creating the file failed (`message` says which).
  case openFailed(path: String, code: Int32, message: String)
  /// The disk (or the database's page cap) is full: nothing of the failed transaction was kept.
  case diskFull(path: String, message: String)
  /// Any other SQLite error: extended result code, SQLite's message and what was being done.
  case sqlite(code: Int32, message: String, operation: String)
  /// The file is not a track store this version can use (a newer schema version, or not SQLite).
  case incompatible(path: String, reason: String)
  /// A value given to the store is out of its documented range (argument name and reason).
  case invalidArgument(String, reason: String)
  /// The store was closed.
  case closed

  /// What the file at `path` is to the operator: the MQTT queue (`mqtt-outbox.sqlite`) or the
  /// track store (any other file).
  static func role(of path: String) -> String {
    path.hasSuffix("mqtt-outbox.sqlite") ? "MQTT queue" : "track store"
  }

  /// One line for logs and `locationctl`: what failed and SQLite's words for it.
  public var description: String {
    switch self {
    case .libraryUnavailable(let reason): return "track store unavailable: \(reason)"
    case .openFailed(let path, let code, let message):
      return "cannot open \(Self.role(of: path)) \(path): \(message)"
    case .diskFull(let path, let message):
      return "\(Self.role(of: path)) \(path) is full (disk or size cap): \(message)"
        + (Self.role(of: path) == "track store" ? "; fixes are not being recorded" : "")
    case .sqlite(let code, let message, let operation):
      return "track store error while \(operation): \(message) (SQLite code \(code))"
    case .incompatible(let path, let reason): return "\(path) is not a usable \(Self.role(of: path)): \(reason)"
    case .invalidArgument(let name, let reason): return "invalid \(name): \(reason)"
    case .closed: return "track store is closed"
    }
  }
}

/// One SQLite connection. Not thread-safe by itself: ``TrackStore`` confines it to its own serial
/// queue, and locationctl's readers use it from one thread.
final class SQLiteConnection {
  let path: String
  private var handle: OpaquePointer?
  private var cache: [String: SQLiteStatement] = [:]

  /// Opens (`readOnly`) or opens and creates the database at `path`.
  init(path: String, readOnly: Bool) throws(TrackStoreError) {
    if let failure = locationd_sqlite_load() {
      throw .libraryUnavailable(String(cString: failure))
    }
    self.path = path
    var database: OpaquePointer?
    let flags =
      (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_NOMUTEX
    let code = locationd_sqlite_open(path, flags, &database)
    guard code == SQLITE_OK, let database else {
      let message = database.map { String(cString: locationd_sqlite_errmsg($0)) } ?? String(cString: locationd_sqlite_errstr(code))
      if let database { _ = locationd_sqlite_close(database) }
      throw .openFailed(path: path, code: code, message: "\(message) (SQLite code \(code))")
    }
    handle = database
    _ = locationd_sqlite_busy_timeout(database, 5_000)
  }

  deinit { close() }

  /// Finalizes every cached statement and closes the connection (idempotent).
  func close() {
    for statement in cache.values { statement.finalize() }
    cache.removeAll()
    if let handle { _ = locationd_sqlite_close(handle) }
    handle = nil
  }

  var isOpen: Bool { handle != nil }

  /// Finalizes the cached statements (a change of journal mode wants none pending).
  func clearCache() {
    for statement in cache.values { statement.finalize() }
    cache.removeAll()
  }

  private func database() throws(TrackStoreError) -> OpaquePointer {
    guard let handle else { throw .closed }
    return handle
  }

  /// The error for a failed call: ``TrackStoreError/diskFull(path:message:)`` for SQLITE_FULL.
  func error(_ code: Int32, _ operation: String) -> TrackStoreError {
    let message = handle.map { String(cString: locationd_sqlite_errmsg($0)) } ?? String(cString: locationd_sqlite_errstr(code))
    let extended = handle.map { locationd_sqlite_extended_errcode($0) } ?? code
    if code & 0xff == SQLITE_FULL || extended & 0xff == SQLITE_FULL {
      return .diskFull(path: path, message: message)
    }
    return .sqlite(code: extended, message: message, operation: operation)
  }

  /// Runs statements that return no rows.
  func execute(_ sql: String) throws(TrackStoreError) {
    let code = locationd_sqlite_exec(try database(), sql)
    guard code == SQLITE_OK else { throw error(code, sql) }
  }

  /// `BEGIN IMMEDIATE`, after resetting every cached statement: a statement left on a row would
  /// hold a read transaction whose snapshot predates another process's commit, and SQLite then
  /// refuses every write of this connection (`SQLITE_BUSY_SNAPSHOT`) for good.
  func beginImmediate() throws(TrackStoreError) {
    for statement in cache.values { statement.reset() }
    try execute("BEGIN IMMEDIATE")
  }

  /// A prepared statement for `sql`, cached by its text; reset and unbound before it is returned.
  func statement(_ sql: String) throws(TrackStoreError) -> SQLiteStatement {
    if let cached = cache[sql] {
      cached.reset()
      return cached
    }
    let statement = try prepare(sql)
    cache[sql] = statement
    return statement
  }

  /// A new prepared statement the caller finalizes (for one-off or long-running cursors).
  func prepare(_ sql: String) throws(TrackStoreError) -> SQLiteStatement {
    var pointer: OpaquePointer?
    let code = locationd_sqlite_prepare(try database(), sql, &pointer)
    guard code == SQLITE_OK, let pointer else { throw error(code, "preparing \(sql)") }
    return SQLiteStatement(pointer, connection: self)
  }

  /// Rows changed by the last INSERT, UPDATE or DELETE.
  var changes: Int { handle.map { Int(locationd_sqlite_changes($0)) } ?? 0 }
  /// The rowid of the last INSERT.
  var lastInsertRowID: Int64 { handle.map { locationd_sqlite_last_insert_rowid($0) } ?? 0 }

  /// The first column of the first row of `sql`, as an integer (`nil` for no row or NULL).
  func integer(_ sql: String) throws(TrackStoreError) -> Int64? {
    let statement = try statement(sql)
    defer { statement.reset() }
    guard try statement.step() else { return nil }
    return statement.isNull(0) ? nil : statement.int64(0)
  }

  /// The first column of the first row of `sql`, as text (`nil` for no row or NULL).
  func text(_ sql: String) throws(TrackStoreError) -> String? {
    let statement = try prepare(sql)
    defer { statement.finalize() }
    guard try statement.step() else { return nil }
    return statement.isNull(0) ? nil : statement.text(0)
  }
}

/// A prepared statement. Bind indices are 1-based and column indices 0-based, as in SQLite; the C
/// seam refuses out-of-range indices (bind: SQLITE_RANGE; columns read as NULL).
final class SQLiteStatement {
  private var pointer: OpaquePointer?
  private unowned let connection: SQLiteConnection

  init(_ pointer: OpaquePointer, connection: SQLiteConnection) {
    self.pointer = pointer
    self.connection = connection
  }

  func finalize() {
    if let pointer { _ = locationd_sqlite_finalize(pointer) }
    pointer = nil
  }

  func reset() {
    guard let pointer else { return }
    _ = locationd_sqlite_reset(pointer)
    _ = locationd_sqlite_clear_bindings(pointer)
  }

  private func check(_ code: Int32, _ what: String) throws(TrackStoreError) {
    guard code == SQLITE_OK else { throw connection.error(code, what) }
  }

  private func live() throws(TrackStoreError) -> OpaquePointer {
    guard let pointer else { throw .closed }
    return pointer
  }

  func bind(_ index: Int32, _ value: Double?) throws(TrackStoreError) {
    let statement = try live()
    if let value, value.isFinite {
      try check(locationd_sqlite_bind_double(statement, index, value), "binding a number")
    } else {
      try check(locationd_sqlite_bind_null(statement, index), "binding NULL")
    }
  }

  func bind(_ index: Int32, _ value: Int64?) throws(TrackStoreError) {
    let statement = try live()
    if let value {
      try check(locationd_sqlite_bind_int64(statement, index, value), "binding an integer")
    } else {
      try check(locationd_sqlite_bind_null(statement, index), "binding NULL")
    }
  }

  func bind(_ index: Int32, _ value: String) throws(TrackStoreError) {
    let statement = try live()
    var text = value
    let code = text.withUTF8 { utf8 -> Int32 in
      guard utf8.count <= Int(Int32.max) else { return SQLITE_TOOBIG }
      return utf8.withMemoryRebound(to: CChar.self) { chars in
        locationd_sqlite_bind_text(statement, index, chars.baseAddress, Int32(chars.count))
      }
    }
    try check(code, "binding text")
  }

  func bind(_ index: Int32, _ bytes: [UInt8]) throws(TrackStoreError) {
    let statement = try live()
    guard bytes.count <= Int(Int32.max) else { throw connection.error(SQLITE_TOOBIG, "binding a blob") }
    let code = bytes.withUnsafeBytes { raw in
      locationd_sqlite_bind_blob(statement, index, raw.baseAddress, Int32(raw.count))
    }
    try check(code, "binding a blob")
  }

  /// Steps once: `true` when a row is ready, `false` when done.
  func step() throws(TrackStoreError) -> Bool {
    let code = locationd_sqlite_step(try live())
    if code == SQLITE_ROW { return true }
    if code == SQLITE_DONE { return false }
    throw connection.error(code, "stepping a statement")
  }

  /// Runs a statement that returns no rows, then resets it.
  func run() throws(TrackStoreError) {
    defer { reset() }
    while try step() {}
  }

  func isNull(_ column: Int32) -> Bool {
    guard let pointer else { return true }
    return locationd_sqlite_column_type(pointer, column) == SQLITE_NULL
  }
  func int64(_ column: Int32) -> Int64 {
    guard let pointer else { return 0 }
    return locationd_sqlite_column_int64(pointer, column)
  }
  func double(_ column: Int32) -> Double {
    guard let pointer else { return 0 }
    return locationd_sqlite_column_double(pointer, column)
  }
  /// The column as a measurement: `nil` for NULL, text or a blob (SQLite would read those as
  /// 0), and for values beyond ±1e9, which no fix field takes (a damaged or foreign store).
  func optionalDouble(_ column: Int32) -> Double? {
    guard let pointer else { return nil }
    let type = locationd_sqlite_column_type(pointer, column)
    guard type == SQLITE_INTEGER || type == SQLITE_FLOAT else { return nil }
    let value = locationd_sqlite_column_double_or_nan(pointer, column)
    return value.isFinite && abs(value) <= 1e9 ? value : nil
  }
  func optionalInt(_ column: Int32) -> Int? { isNull(column) ? nil : Int(truncatingIfNeeded: int64(column)) }

  /// The column's bytes, copied (text without a terminator, or a blob); empty for NULL.
  func bytes(_ column: Int32) -> [UInt8] {
    guard let pointer else { return [] }
    var length: Int32 = 0
    guard let base = locationd_sqlite_column_bytes(pointer, column, &length), length > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: base, count: Int(length)))
  }

  func text(_ column: Int32) -> String { String(decoding: bytes(column), as: UTF8.self) }
}
