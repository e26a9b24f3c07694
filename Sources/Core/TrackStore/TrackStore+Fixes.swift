#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import CSQLite
import LocationModel
import Synchronization
import SystemIO

/// The recorded fixes: appending, retention, reading back by time and source, statistics.
extension TrackStore {
  // MARK: - Fixes

  static let insertFix = """
    INSERT INTO fixes(time_ms, lat, lon, alt_msl, geoid_sep, speed, course, climb, eph, epv, hdop, vdop, pdop,
      satellites_used, mode, quality, source_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
    """

  /// A replayed or simulated fix is stored unless the store has a replayed or simulated fix of
  /// the same source file at its time, whatever the backend URI's options (`speed`, their
  /// order): replaying a log again after a restart records nothing twice (a live receiver's
  /// fixes are all kept, whatever their times do).
  static let insertSimulatedFix = """
    INSERT INTO fixes(time_ms, lat, lon, alt_msl, geoid_sep, speed, course, climb, eph, epv, hdop, vdop, pdop,
      satellites_used, mode, quality, source_id) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17
      WHERE NOT EXISTS (
        SELECT 1 FROM fixes JOIN sources ON sources.id = fixes.source_id
        WHERE fixes.time_ms = ?1 AND sources.simulated = 1
          AND sources.source = (SELECT source FROM sources WHERE id = ?17))
    """

  /// Stores `points` in one transaction: all of them or, on error, none. A replayed or simulated
  /// point (``TrackPoint/isSimulated``) whose source already has a fix at its time is left out.
  ///
  /// - Returns: the number stored (`points.count` less the simulated points left out).
  /// - Throws: ``TrackStoreError/diskFull(path:message:)`` when the disk or the page cap is full
  ///   (nothing of the batch is kept), other ``TrackStoreError`` cases for other failures.
  @discardableResult
  public func append(_ points: [TrackPoint]) throws(TrackStoreError) -> Int {
    guard !points.isEmpty else { return 0 }
    return try writing { (state: inout State) throws(TrackStoreError) -> Int in
      let connection = state.connection
      try connection.beginImmediate()
      do throws(TrackStoreError) {
        let insertLive = try connection.statement(Self.insertFix)
        let insertSimulated = try connection.statement(Self.insertSimulatedFix)
        var stored = 0
        for point in points {
          let source = try Self.sourceID(for: point, &state)
          let insert = point.isSimulated ? insertSimulated : insertLive
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
          stored += connection.changes
        }
        try connection.execute("COMMIT")
        return stored
      } catch {
        try? connection.execute("ROLLBACK")
        // Source ids created in the rolled-back transaction are gone too.
        state.sources.removeAll()
        throw error
      }
    }
  }

  static func sourceID(for point: TrackPoint, _ state: inout State) throws(TrackStoreError) -> Int64 {
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
  static func clockNow() -> Int64 { WallClock.milliseconds() }

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

  static func fileSize(_ path: String) -> Int64 {
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
}
