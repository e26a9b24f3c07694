import CSDBus
import Glibc
import LocationModel
import Queues
import ServiceCore

/// A D-Bus error answered to a caller: name and text.
struct BusError: Error {
  var name: String
  var message: String

  static func accessDenied(_ message: String) -> BusError {
    BusError(name: "org.freedesktop.DBus.Error.AccessDenied", message: message)
  }
  static func invalidArgs(_ message: String) -> BusError {
    BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
  }
  static func limitsExceeded(_ message: String) -> BusError {
    BusError(name: "org.freedesktop.DBus.Error.LimitsExceeded", message: message)
  }
  static func failed(_ message: String) -> BusError {
    BusError(name: "org.freedesktop.DBus.Error.Failed", message: message)
  }
}

/// One Client object.
final class ClientObject {
  let id: UInt64
  let number: UInt32
  let path: String
  /// The owner's unique bus name (":1.42").
  let peer: String
  let context: ClientContext
  var slot: OpaquePointer?
  var desktopID: String?
  var distanceThreshold: UInt32 = 0
  var timeThreshold: UInt32 = 0
  /// GeoClue's default is city (4).
  var requestedAccuracy: UInt32 = GeoClueAccuracyLevel.city.rawValue
  var active = false
  var starting = false
  var current: UInt64?
  var previous: UInt64?
  var signalled: GeoClueLocationValues?
  var locationsUpdated: UInt32 = 0

  init(id: UInt64, number: UInt32, peer: String, context: ClientContext) {
    self.id = id
    self.number = number
    self.path = "/org/freedesktop/GeoClue2/Client/\(number)"
    self.peer = peer
    self.context = context
  }
}

/// One Location object.
final class LocationObject {
  let id: UInt64
  let path: String
  let client: UInt64
  var values: GeoClueLocationValues
  var slot: OpaquePointer?

  init(id: UInt64, path: String, client: UInt64, values: GeoClueLocationValues) {
    self.id = id
    self.path = path
    self.client = client
    self.values = values
  }
}

/// Everything on the bus, owned by the bus thread (never touched elsewhere: other threads post
/// jobs to it, see ``GeoClueFrontEnd/post(_:)``).
final class BusState {
  static let managerPath = "/org/freedesktop/GeoClue2/Manager"
  static let clientInterface = "org.freedesktop.GeoClue2.Client"
  static let locationInterface = "org.freedesktop.GeoClue2.Location"
  static let managerInterface = "org.freedesktop.GeoClue2.Manager"

  let bus: OpaquePointer
  let frontEnd: GeoClueFrontEnd
  var running = true
  var managerSlot: OpaquePointer?
  var matchSlot: OpaquePointer?
  var clients: [UInt64: ClientObject] = [:]
  var clientsByPeer: [String: [UInt64]] = [:]
  /// How many clients each uid holds (entries only for uids holding one or more).
  var clientsByUser: [UInt32: Int] = [:]
  /// Clients each uid has created since start, for throttling the `dbusClient` and
  /// `dbusClientVanished` lines (any local user may call CreateClient on the system bus).
  /// At most 1024 uids; cleared when full, as the service's refusal counts are.
  var clientsCreatedByUser: [UInt32: Int] = [:]
  /// Clients each uid lost by leaving the bus since start (the same throttle for
  /// `dbusClientVanished`); bounded as ``clientsCreatedByUser``.
  var clientsVanishedByUser: [UInt32: Int] = [:]

  /// Whether the `count`th event of a uid is logged: the 1st, 2nd, 4th, 8th... so a caller
  /// repeating CreateClient and DeleteClient (or connecting and leaving) cannot flood the log.
  static func logged(_ count: Int) -> Bool { count > 0 && count & (count - 1) == 0 }
  var locations: [UInt64: LocationObject] = [:]
  var credentials: [String: PeerCredentials] = [:]
  /// Calls answered later (`Start` waits for the service), by token: a reference on the message.
  var pending: [UInt64: OpaquePointer] = [:]
  var nextObject: UInt64 = 1
  var nextToken: UInt64 = 1
  var lastClientNumber: UInt32 = 0
  /// Replaced Location objects by removal time (CLOCK_MONOTONIC microseconds). The lifetime is
  /// one constant, so they are appended in order and the sweep only looks at the front.
  var expiring = FIFO<(expires: UInt64, id: UInt64)>()
  /// At most this many replaced Location objects wait out their lifetime at once; beyond it the
  /// oldest goes early, so a fast fix stream cannot pile up objects.
  static let maxWaitingLocations = 4096
  /// For each of the last 4096 fixes signalled to some client: milliseconds from when the fix
  /// entered the front-end (CLOCK_MONOTONIC) to the last client's `LocationUpdated` handed to the
  /// bus (logged at shutdown as `dbusDelivery`).
  var deliveries: [Double] = []
  /// The most jobs the bus thread found queued in one round (logged with `dbusDelivery`).
  var mostJobs = 0
  var deliveryCount = 0
  var widestDelivery = 0
  var inUse = false

  init(bus: OpaquePointer, frontEnd: GeoClueFrontEnd) {
    self.bus = bus
    self.frontEnd = frontEnd
  }

  private func countObjects() {
    frontEnd.objects.store(1 + clients.count + locations.count, ordering: .relaxed)
    frontEnd.clients.store(clients.count, ordering: .relaxed)
  }

  // MARK: - Manager

  func managerCall(_ member: String, _ message: OpaquePointer) throws(BusError) -> Int32 {
    guard let sender = Self.sender(message) else { throw .failed("no sender") }
    switch member {
    case "GetClient", "CreateClient":
      // GetClient hands back the newest client this connection has, as GeoClue does.
      if member == "GetClient", let id = clientsByPeer[sender]?.last, let client = clients[id] {
        return csdbus_reply_object_path(message, client.path)
      }
      let client = try createClient(sender: sender, message: message)
      return csdbus_reply_object_path(message, client.path)
    case "DeleteClient":
      // A path too long to be one of ours is not the caller's client: nothing to do, no error.
      guard let path = try Self.readString(message, type: "o", orNilWhenLonger: true) else {
        return csdbus_reply_empty(message)
      }
      // Only the caller's own client; an unknown path is no error (as GeoClue).
      if let id = clientsByPeer[sender]?.first(where: { clients[$0]?.path == path }) {
        deleteClient(id)
      }
      return csdbus_reply_empty(message)
    case "AddAgent":
      let id = try Self.readString(message, type: "s")
      // No agent is on locationd's list of allowed agents (it has none).
      throw .accessDenied("\(id) not allowed to act as agent")
    default:
      throw BusError(
        name: "org.freedesktop.DBus.Error.UnknownMethod", message: "unknown method \(member)")
    }
  }

  private func createClient(sender: String, message: OpaquePointer) throws(BusError) -> ClientObject
  {
    let limits = frontEnd.limits
    let own = clientsByPeer[sender]?.count ?? 0
    guard own < limits.clientsPerConnection else {
      throw .limitsExceeded(
        "at most \(limits.clientsPerConnection) clients per connection: delete one first (DeleteClient)"
      )
    }
    let peer = try credentials(of: sender, message: message)
    // Users the authority accepts are bounded by the global limit only (they may locate anyway,
    // and one application may well want many clients); the others per uid.
    let users = clientsByUser[peer.uid] ?? 0
    guard
      users < limits.clientsPerUser
        || frontEnd.authority.map({ $0.decide(for: peer).status == .authorized }) == true
    else {
      throw .limitsExceeded(
        "at most \(limits.clientsPerUser) clients per user (uid \(peer.uid)): delete one first (DeleteClient)"
      )
    }
    if clients.count >= limits.clients {
      // Full: an authorized caller takes the room of the oldest client of a refused user.
      // One decision per connection (a decision may ask NSS for the group).
      var refused: [String: Bool] = [:]
      guard let authority = frontEnd.authority, authority.decide(for: peer).status == .authorized,
        let victim = clients.keys.sorted().first(where: { id in
          guard let client = clients[id] else { return false }
          if let known = refused[client.peer] { return known }
          let verdict = authority.decide(for: client.context.peer).status != .authorized
          refused[client.peer] = verdict
          return verdict
        })
      else {
        throw .limitsExceeded("at most \(limits.clients) clients in all")
      }
      Log.event(
        "dbusClientEvicted",
        [
          "client": String(clients[victim]?.context.id ?? 0), "path": clients[victim]?.path ?? "",
          "uid": String(clients[victim]?.context.peer.uid ?? 0), "for": String(peer.uid),
        ])
      deleteClient(victim)
    }
    lastClientNumber &+= 1
    let id = nextObject
    nextObject += 1
    let channel = DBusClientChannel(
      id: ConnectionNumber.next(), fix: { [frontEnd] in frontEnd.received($0) }
    ) { [frontEnd] in
      frontEnd.post { $0.revoke(client: id) }
    }
    let client = ClientObject(
      id: id, number: lastClientNumber, peer: sender,
      context: ClientContext(connection: channel, peer: peer))
    let r = csdbus_add_object(bus, &client.slot, client.path, Int32(CSDBUS_CLIENT), id)
    guard r >= 0 else {
      throw .failed("cannot export \(client.path): \(GeoClueFrontEnd.errorText(r))")
    }
    clients[id] = client
    clientsByPeer[sender, default: []].append(id)
    clientsByUser[peer.uid, default: 0] += 1
    countObjects()
    if clientsCreatedByUser[peer.uid] == nil, clientsCreatedByUser.count >= 1024 { clientsCreatedByUser.removeAll() }
    let created = (clientsCreatedByUser[peer.uid] ?? 0) + 1
    clientsCreatedByUser[peer.uid] = created
    if Self.logged(created) {
      Log.event(
        "dbusClient",
        [
          "client": String(channel.id), "path": client.path, "peer": sender, "uid": String(peer.uid),
          "created": String(created),
        ])
    }
    return client
  }

  /// The caller's credentials from the bus driver (GetConnectionCredentials), once per
  /// connection: unique names are never reused.
  private func credentials(of sender: String, message: OpaquePointer) throws(BusError)
    -> PeerCredentials
  {
    if let known = credentials[sender] { return known }
    var uid: UInt32 = 0
    var pid: Int32 = 0
    var groups = [UInt32](repeating: 0, count: 64)
    var count = 0
    var known: Int32 = 0
    var r = csdbus_sender_credentials(message, &uid, &pid, &groups, groups.count, &count, &known)
    if r >= 0, count > groups.count {
      // More groups than the first guess: once more with room for all (Linux allows 65536).
      groups = [UInt32](repeating: 0, count: min(count, 65_536))
      r = csdbus_sender_credentials(message, &uid, &pid, &groups, groups.count, &count, &known)
    }
    guard r >= 0, known & 1 != 0 else {
      throw .accessDenied(
        "the bus did not report the caller's user id (\(GeoClueFrontEnd.errorText(r)))")
    }
    // The bus reports no primary gid: it is among UnixGroupIDs for a login process. An
    // invalid gid ((gid_t)-1) stands for "not reported"; no group has it.
    let peer = PeerCredentials(
      pid: known & 2 != 0 ? pid : 0, uid: uid, gid: UInt32.max,
      groups: Array(groups.prefix(min(count, groups.count))))
    credentials[sender] = peer
    return peer
  }

  /// Removes a client and its Location objects, and tells the service it is gone.
  func deleteClient(_ id: UInt64) {
    guard let client = clients.removeValue(forKey: id) else { return }
    csdbus_slot_free(client.slot)
    client.slot = nil
    for (locationID, location) in locations where location.client == id {
      csdbus_slot_free(location.slot)
      locations[locationID] = nil
    }
    let uid = client.context.peer.uid
    clientsByUser[uid] = (clientsByUser[uid] ?? 1) > 1 ? (clientsByUser[uid] ?? 1) - 1 : nil
    clientsByPeer[client.peer]?.removeAll { $0 == id }
    if clientsByPeer[client.peer]?.isEmpty == true { clientsByPeer[client.peer] = nil }
    client.context.connection.close()
    frontEnd.commands.yield(.gone(client.context))
    countObjects()
    syncInUse()
  }

  /// NameOwnerChanged: a connection that left the bus loses its clients.
  func nameOwnerChanged(_ message: OpaquePointer) {
    var name = [CChar](repeating: 0, count: 256)
    var old = [CChar](repeating: 0, count: 256)
    var new = [CChar](repeating: 0, count: 256)
    guard csdbus_read_name_owner_changed(message, &name, &old, &new, 256) >= 0 else { return }
    let gone = Self.string(name)
    guard Self.string(new).isEmpty, gone.hasPrefix(":") else { return }
    credentials[gone] = nil
    for id in clientsByPeer[gone] ?? [] {
      if let client = clients[id] {
        let uid = client.context.peer.uid
        if clientsVanishedByUser[uid] == nil, clientsVanishedByUser.count >= 1024 { clientsVanishedByUser.removeAll() }
        let vanished = (clientsVanishedByUser[uid] ?? 0) + 1
        clientsVanishedByUser[uid] = vanished
        if Self.logged(vanished) {
          Log.event(
            "dbusClientVanished",
            ["peer": gone, "client": String(client.context.id), "uid": String(uid), "vanished": String(vanished)])
        }
      }
      deleteClient(id)
    }
  }

  // MARK: - Client

  func clientCall(_ id: UInt64, _ member: String, _ message: OpaquePointer) throws(BusError)
    -> Int32
  {
    let client = try owned(id, message)
    switch member {
    case "Start":
      if client.active { return csdbus_reply_empty(message) }
      guard client.desktopID != nil else { throw .accessDenied("'DesktopId' property must be set") }
      guard !client.starting else {
        throw .accessDenied("An authorization request is already pending")
      }
      client.starting = true
      let token = nextToken
      nextToken += 1
      pending[token] = csdbus_message_ref(message)
      frontEnd.commands.yield(.start(client.context, client: id, token: token))
      return 1
    case "Stop":
      if client.active || client.starting {
        client.starting = false
        frontEnd.commands.yield(.stop(client.context))
      }
      setActive(client, false)
      return csdbus_reply_empty(message)
    default:
      throw BusError(
        name: "org.freedesktop.DBus.Error.UnknownMethod", message: "unknown method \(member)")
    }
  }

  /// The service's answer to a `Start`.
  func finishStart(client id: UInt64, token: UInt64, failure: (name: String, message: String)?) {
    guard let message = pending.removeValue(forKey: token) else { return }
    defer { csdbus_message_unref(message) }
    guard let client = clients[id] else {
      _ = csdbus_reply_error(message, "org.freedesktop.DBus.Error.Failed", "the client was deleted")
      return
    }
    let wasStarting = client.starting
    client.starting = false
    if let failure {
      _ = csdbus_reply_error(message, failure.name, failure.message)
      return
    }
    if !wasStarting {
      // Stopped while the service was starting it: the stop is queued after the start.
      _ = csdbus_reply_empty(message)
      return
    }
    setActive(client, true)
    _ = csdbus_reply_empty(message)
  }

  /// A reload revoked the client's authorization: it stops, as an agent's revocation stops it
  /// in GeoClue.
  func revoke(client id: UInt64) {
    guard let client = clients[id] else { return }
    client.starting = false
    setActive(client, false)
  }

  private func setActive(_ client: ClientObject, _ active: Bool) {
    guard client.active != active else { return }
    client.active = active
    emitChanged(client, client.id, Self.clientInterface, "Active")
    syncInUse()
  }

  private func syncInUse() {
    let now = clients.values.contains { $0.active }
    guard now != inUse else { return }
    inUse = now
    emitChanged(Self.managerPath, Self.managerInterface, "InUse")
  }

  private func owned(_ id: UInt64, _ message: OpaquePointer) throws(BusError) -> ClientObject {
    guard let client = clients[id] else { throw .failed("no such client") }
    guard Self.sender(message) == client.peer else { throw .accessDenied("Access denied") }
    return client
  }

  func clientSet(_ id: UInt64, _ property: String, _ value: OpaquePointer) throws(BusError) -> Int32
  {
    guard let client = clients[id] else { throw .failed("no such client") }
    if let message = csdbus_current_message(bus), Self.sender(message) != client.peer {
      throw .accessDenied("Access denied")
    }
    switch property {
    case "DistanceThreshold", "TimeThreshold", "RequestedAccuracyLevel":
      var number: UInt32 = 0
      let r = csdbus_read_u32(value, &number)
      guard r >= 0 else { throw .invalidArgs("\(property) is a uint32 (type u)") }
      if property == "DistanceThreshold" {
        guard client.distanceThreshold != number else { return 1 }
        client.distanceThreshold = number
      } else if property == "TimeThreshold" {
        guard client.timeThreshold != number else { return 1 }
        client.timeThreshold = number
      } else {
        guard GeoClueAccuracyLevel(rawValue: number) != nil else {
          throw .invalidArgs(
            "RequestedAccuracyLevel \(number) is not an accuracy level: use 0 (none), 1 (country), 4 (city), "
              + "5 (neighborhood), 6 (street) or 8 (exact)")
        }
        guard client.requestedAccuracy != number else { return 1 }
        client.requestedAccuracy = number
      }
    case "DesktopId":
      let text = try Self.readString(value, type: "s")
      guard client.desktopID != text else { return 1 }
      client.desktopID = text
    default:
      throw .invalidArgs("\(property) is read-only")
    }
    emitChanged(client, client.id, Self.clientInterface, property)
    return 1
  }

  func clientGet(_ id: UInt64, _ property: String, _ reply: OpaquePointer) throws(BusError) -> Int32
  {
    guard let client = clients[id] else { throw .failed("no such client") }
    switch property {
    case "Location":
      return csdbus_append_object_path(reply, client.current.flatMap { locations[$0]?.path } ?? "/")
    case "DistanceThreshold": return csdbus_append_u32(reply, client.distanceThreshold)
    case "TimeThreshold": return csdbus_append_u32(reply, client.timeThreshold)
    case "DesktopId": return csdbus_append_string(reply, client.desktopID ?? "")
    case "RequestedAccuracyLevel": return csdbus_append_u32(reply, client.requestedAccuracy)
    case "Active": return csdbus_append_bool(reply, client.active ? 1 : 0)
    default: throw .invalidArgs("unknown property \(property)")
    }
  }

  func managerGet(_ property: String, _ reply: OpaquePointer) throws(BusError) -> Int32 {
    switch property {
    case "InUse": return csdbus_append_bool(reply, inUse ? 1 : 0)
    case "AvailableAccuracyLevel":
      return csdbus_append_u32(reply, GeoClueAccuracyLevel.exact.rawValue)
    default: throw .invalidArgs("unknown property \(property)")
    }
  }

  func locationGet(_ id: UInt64, _ property: String, _ reply: OpaquePointer) throws(BusError)
    -> Int32
  {
    guard let location = locations[id] else { throw .failed("no such location") }
    // Only the owning connection reads a location (GeoClue's gclue-service-location.c refuses
    // Get, GetAll and Set from any other sender). No current message: the front-end itself
    // (a unicast PropertiesChanged to the owner).
    if let message = csdbus_current_message(bus),
      Self.sender(message) != clients[location.client]?.peer
    {
      throw .accessDenied("Access denied")
    }
    let values = location.values
    switch property {
    case "Latitude": return csdbus_append_double(reply, values.latitude)
    case "Longitude": return csdbus_append_double(reply, values.longitude)
    case "Accuracy": return csdbus_append_double(reply, values.accuracy)
    case "Altitude": return csdbus_append_double(reply, values.altitude)
    case "Speed": return csdbus_append_double(reply, values.speed)
    case "Heading": return csdbus_append_double(reply, values.heading)
    case "Description": return csdbus_append_string(reply, values.description)
    case "Timestamp": return csdbus_append_timestamp(reply, values.seconds, values.microseconds)
    default: throw .invalidArgs("unknown property \(property)")
    }
  }

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

  func deliver(_ values: GeoClueLocationValues, entered: UInt64 = monotonicMicroseconds()) {
    var changes: [(client: ClientObject, object: UInt64, interface: String, names: String)] = []
    defer {
      for change in changes {
        emitChanged(change.client, change.object, change.interface, change.names)
      }
    }
    let now = Self.monotonicMicroseconds()
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

  private func recordDelivery(entered: UInt64, signalled: Int) {
    guard signalled > 0 else { return }
    let now = Self.monotonicMicroseconds()
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
    let now = Self.monotonicMicroseconds()
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
  private func emitChanged(
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

  private func emitChanged(_ path: String, _ interface: String, _ names: String) {
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

  static func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec / 1000)
  }
}
