import CSDBus
import Glibc
import LocationModel
import Queues
import ServiceCore
import SystemIO

/// Fixes to the clients' Location objects, their lifetimes, and the helpers for messages.
extension BusState {
  // MARK: - Locations

  /// A new fix for every active client (GeoClue's `on_locator_location_changed`).
  ///
  /// Every client's `LocationUpdated` goes out first, the `PropertiesChanged` they imply after
  /// them: GeoClue emits the signal at once and GDBus sends property changes from an idle
  /// callback, so clients see the same order, and the signal of the hundredth client does not
  /// wait behind ninety-nine property messages.
  /// Notes how many jobs one round of the bus thread found queued.
  func noteJobs(_ count: Int) {
    mostJobs = max(mostJobs, count)
  }

  func deliver(_ values: GeoClueLocationValues, entered: UInt64 = MonotonicClock.microseconds()) {
    var changes: [(client: ClientObject, object: UInt64, interface: String, names: String)] = []
    defer {
      for change in changes {
        emitChanged(change.client, change.object, change.interface, change.names)
      }
    }
    let now = MonotonicClock.microseconds()
    let lifetime = UInt64(frontEnd.limits.previousLocationLifetime * 1_000_000)
    var signalled = 0
    defer { recordDelivery(entered: entered, signalled: signalled) }
    // Each client gets the accuracy it asked for (GeoClueCoarsening): computed once per level.
    var byLevel: [UInt32: GeoClueLocationValues] = [:]
    let exact = values
    for id in clients.keys.sorted() {
      guard let client = clients[id], client.active else { continue }
      let level = client.requestedAccuracy
      let values = byLevel[level] ?? GeoClueCoarsening.values(exact, level: level)
      byLevel[level] = values
      if let current = client.current, let object = locations[current],
        GeoClueThresholds.suppresses(
          values, after: client.signalled, distance: client.distanceThreshold,
          time: client.timeThreshold)
      {
        // Below a threshold: the current object takes the new values, no LocationUpdated.
        let changed = Self.changedProperties(object.values, values)
        object.values = values
        if !changed.isEmpty {
          let names = changed.joined(separator: " ")
          changes.append((client, object.id, Self.locationInterface, names))
        }
        continue
      }
      if let previous = client.previous { expiring.append((now + lifetime, previous)) }
      client.previous = client.current
      let objectID = nextObject
      nextObject += 1
      let path = "\(client.path)/Location/\(client.locationsUpdated)"
      client.locationsUpdated &+= 1
      let object = LocationObject(id: objectID, path: path, client: id, values: values)
      let r = csdbus_add_object(bus, &object.slot, path, Int32(CSDBUS_LOCATION), objectID)
      guard r >= 0 else {
        Log.event("dbusLocationFailed", ["path": path, "reason": GeoClueFrontEnd.errorText(r)])
        continue
      }
      locations[objectID] = object
      let oldPath = client.current.flatMap { locations[$0]?.path } ?? "/"
      client.current = objectID
      client.signalled = values
      let e = csdbus_emit_location_updated(bus, client.peer, client.path, oldPath, path)
      if e < 0 {
        Log.event(
          "dbusSignalFailed", ["path": client.path, "reason": GeoClueFrontEnd.errorText(e)])
      }
      changes.append((client, client.id, Self.clientInterface, "Location"))
      signalled += 1
    }
    while expiring.count > Self.maxWaitingLocations, let (_, id) = expiring.popFirst() {
      if let object = locations.removeValue(forKey: id) { csdbus_slot_free(object.slot) }
    }
    countObjects()
  }

  func recordDelivery(entered: UInt64, signalled: Int) {
    guard signalled > 0 else { return }
    let now = MonotonicClock.microseconds()
    if deliveries.count == 4096 { deliveries.removeFirst(2048) }
    deliveries.append(Double(now >= entered ? now - entered : 0) / 1000)
    deliveryCount += 1
    widestDelivery = max(widestDelivery, signalled)
  }

  /// The `dbusDelivery` log line's figures: fixes signalled, most clients for one fix, the
  /// median, p99 and maximum of ``deliveries`` (ms, from the fix entering the front-end to the
  /// last client's signal handed to the bus), fixes replaced in the slot before the bus thread
  /// took them (`missed`) and the most jobs queued in one round (`mostJobs`).
  func deliverySummary() -> KeyValuePairs<String, String>? {
    guard !deliveries.isEmpty else { return nil }
    let sorted = deliveries.sorted()
    func at(_ percent: Int) -> String {
      String((sorted[min(sorted.count - 1, sorted.count * percent / 100)] * 1000).rounded() / 1000)
    }
    let missed = frontEnd.newestFix.withLock { $0.missed }
    return [
      "fixes": String(deliveryCount), "clients": String(widestDelivery), "medianMs": at(50),
      "p99Ms": at(99), "maxMs": at(100), "missed": String(missed), "mostJobs": String(mostJobs),
    ]
  }

  /// Removes Location objects whose lifetime ended; returns microseconds until the next one ends
  /// (`UInt64.max`: none waiting). Objects already removed with their client are skipped.
  func sweepLocations() -> UInt64 {
    let now = MonotonicClock.microseconds()
    var removed = false
    while let (expires, id) = expiring.first, expires <= now {
      _ = expiring.popFirst()
      guard let object = locations.removeValue(forKey: id) else { continue }
      csdbus_slot_free(object.slot)
      removed = true
    }
    if removed { countObjects() }
    return expiring.first.map { $0.expires - now } ?? UInt64.max
  }

  /// Shutdown: every client goes (its tracking ends), every object is removed.
  func teardown() {
    if let summary = deliverySummary() { Log.event("dbusDelivery", summary) }
    for id in clients.keys.sorted() { deleteClient(id) }
    for (_, message) in pending { csdbus_message_unref(message) }
    pending.removeAll()
    csdbus_slot_free(matchSlot)
    csdbus_slot_free(managerSlot)
    matchSlot = nil
    managerSlot = nil
    frontEnd.objects.store(0, ordering: .relaxed)
    frontEnd.clients.store(0, ordering: .relaxed)
  }

  // MARK: - Helpers

  /// PropertiesChanged of a Client (`object` = its id) or of one of its Location objects (the
  /// Location's id), sent to the client's own connection only: locations are the owner's alone,
  /// and a broadcast would hand them to every listener on the bus.
  func emitChanged(
    _ client: ClientObject, _ object: UInt64, _ interface: String, _ names: String
  ) {
    let isLocation = interface == Self.locationInterface
    let path = isLocation ? locations[object]?.path ?? client.path : client.path
    let r = csdbus_emit_properties_changed_to(
      bus, client.peer, path, interface, names,
      Int32(isLocation ? CSDBUS_LOCATION : CSDBUS_CLIENT), object)
    if r < 0 {
      Log.event(
        "dbusSignalFailed",
        ["path": path, "properties": names, "reason": GeoClueFrontEnd.errorText(r)])
    }
  }

  func emitChanged(_ path: String, _ interface: String, _ names: String) {
    let r = csdbus_emit_properties_changed(bus, path, interface, names)
    if r < 0 {
      Log.event(
        "dbusSignalFailed",
        ["path": path, "properties": names, "reason": GeoClueFrontEnd.errorText(r)])
    }
  }

  static func changedProperties(_ old: GeoClueLocationValues, _ new: GeoClueLocationValues)
    -> [String]
  {
    var names: [String] = []
    if old.latitude != new.latitude { names.append("Latitude") }
    if old.longitude != new.longitude { names.append("Longitude") }
    if old.accuracy != new.accuracy { names.append("Accuracy") }
    if old.altitude != new.altitude { names.append("Altitude") }
    if old.speed != new.speed { names.append("Speed") }
    if old.heading != new.heading { names.append("Heading") }
    if old.description != new.description { names.append("Description") }
    if old.seconds != new.seconds || old.microseconds != new.microseconds {
      names.append("Timestamp")
    }
    return names
  }

  static func sender(_ message: OpaquePointer) -> String? {
    guard let text = csdbus_message_sender(message) else { return nil }
    return String(cString: text)
  }

  /// Reads a string argument of type `s` or `o`, at most 255 bytes.
  static func readString(_ message: OpaquePointer, type: Character) throws(BusError) -> String {
    guard let text = try readString(message, type: type, orNilWhenLonger: false) else {
      throw .invalidArgs("the argument is longer than 255 bytes")
    }
    return text
  }

  /// Reads a string argument of type `s` or `o`; one longer than 255 bytes gives nil when
  /// `orNilWhenLonger`, else InvalidArgs.
  static func readString(_ message: OpaquePointer, type: Character, orNilWhenLonger: Bool)
    throws(BusError) -> String?
  {
    var buffer = [CChar](repeating: 0, count: 256)
    let code: CChar = type == "o" ? CChar(UInt8(ascii: "o")) : CChar(UInt8(ascii: "s"))
    let r = csdbus_read_string(message, code, &buffer, buffer.count)
    if r == -ENAMETOOLONG {
      if orNilWhenLonger { return nil }
      throw .invalidArgs("the argument is longer than 255 bytes")
    }
    guard r >= 0 else { throw .invalidArgs("expected an argument of type \(type)") }
    return string(buffer)
  }

  /// The text before the first NUL of a buffer a C helper filled.
  static func string(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}
