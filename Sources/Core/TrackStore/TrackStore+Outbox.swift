#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import CSQLite
import LocationModel
import Synchronization

/// The store-and-forward outbox of `mqtt-outbox.sqlite`: queueing, bounds, acknowledgement.
extension TrackStore {
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
