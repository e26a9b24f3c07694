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
  static func logged(_ count: Int) -> Bool { LogThrottle.powersOfTwo.logs(count) }
  var locations: [UInt64: LocationObject] = [:]
  var credentials: [String: PeerCredentials] = [:]
  /// Calls answered later (`Start` and a `CreateClient` beyond a quota wait for the service), by
  /// token: a reference on the message.
  var pending: [UInt64: OpaquePointer] = [:]
  /// `CreateClient` calls of each connection waiting for the service (they count against its
  /// per-connection limit).
  var creating: [String: Int] = [:]
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

  func countObjects() {
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
      guard let client = try createClient(sender: sender, message: message) else { return 1 }
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

  /// `CreateClient` (and `GetClient` without a client): the caller's client object, made at once
  /// when the caller's user is under its quota and room is left; otherwise the service decides
  /// (``ServiceCommand/admit(_:others:sender:token:)``) and ``finishCreate(sender:peer:token:verdicts:)``
  /// answers. Returns the reply's result, or `nil` when the answer comes later.
  func createClient(sender: String, message: OpaquePointer) throws(BusError) -> ClientObject? {
    let limits = frontEnd.limits
    let own = (clientsByPeer[sender]?.count ?? 0) + (creating[sender] ?? 0)
    guard own < limits.clientsPerConnection else {
      throw .limitsExceeded(
        "at most \(limits.clientsPerConnection) clients per connection: delete one first (DeleteClient)"
      )
    }
    let peer = try credentials(of: sender, message: message)
    if (clientsByUser[peer.uid] ?? 0) < limits.clientsPerUser, clients.count < limits.clients {
      return try makeClient(sender: sender, peer: peer)
    }
    // Beyond the user's quota, or full: whether the caller's user (and the users it could
    // displace) are authorized is the service's decision, asked off this thread.
    var others: [UInt32: PeerCredentials] = [:]
    if clients.count >= limits.clients {
      for client in clients.values where others[client.context.peer.uid] == nil {
        others[client.context.peer.uid] = client.context.peer
      }
    }
    let token = nextToken
    nextToken += 1
    pending[token] = csdbus_message_ref(message)
    creating[sender, default: 0] += 1
    frontEnd.commands.yield(.admit(peer, others: Array(others.values), sender: sender, token: token))
    return nil
  }

  /// The service's verdicts for a `CreateClient` that waited for them (uid: authorized); the
  /// quotas are applied to the clients there are now.
  func finishCreate(sender: String, peer: PeerCredentials, token: UInt64, verdicts: [UInt32: Bool]) {
    guard let message = pending.removeValue(forKey: token) else { return }
    defer { csdbus_message_unref(message) }
    if let count = creating[sender] { creating[sender] = count > 1 ? count - 1 : nil }
    guard credentials[sender] != nil else {
      _ = csdbus_reply_error(message, "org.freedesktop.DBus.Error.Failed", "the caller left the bus")
      return
    }
    do throws(BusError) {
      try admit(peer, verdicts: verdicts)
      let client = try makeClient(sender: sender, peer: peer)
      _ = csdbus_reply_object_path(message, client.path)
    } catch {
      _ = csdbus_reply_error(message, error.name, error.message)
    }
  }

  /// The quotas with the service's verdicts: users it authorizes are bounded by the global limit
  /// only (they may locate anyway, and one application may well want many clients), the others
  /// per uid; when all clients are taken, an authorized caller takes the room of the oldest
  /// client of a refused user. A user without a verdict is not displaced.
  private func admit(_ peer: PeerCredentials, verdicts: [UInt32: Bool]) throws(BusError) {
    let limits = frontEnd.limits
    let authorized = verdicts[peer.uid] == true
    guard (clientsByUser[peer.uid] ?? 0) < limits.clientsPerUser || authorized else {
      throw .limitsExceeded(
        "at most \(limits.clientsPerUser) clients per user (uid \(peer.uid)): delete one first (DeleteClient)"
      )
    }
    guard clients.count >= limits.clients else { return }
    guard authorized,
      let victim = clients.keys.sorted().first(where: { id in
        guard let client = clients[id] else { return false }
        return verdicts[client.context.peer.uid] == false
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

  /// Exports a new client object for `sender`.
  private func makeClient(sender: String, peer: PeerCredentials) throws(BusError) -> ClientObject {
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
  func credentials(of sender: String, message: OpaquePointer) throws(BusError)
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
}
