import CSDBus
import Glibc
import LocationModel
import Queues
import ServiceCore

/// The GeoClue2 Client objects' methods and properties (`org.freedesktop.GeoClue2.Client`).
extension BusState {
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

  func setActive(_ client: ClientObject, _ active: Bool) {
    guard client.active != active else { return }
    client.active = active
    emitChanged(client, client.id, Self.clientInterface, "Active")
    syncInUse()
  }

  func syncInUse() {
    let now = clients.values.contains { $0.active }
    guard now != inUse else { return }
    inUse = now
    emitChanged(Self.managerPath, Self.managerInterface, "InUse")
  }

  func owned(_ id: UInt64, _ message: OpaquePointer) throws(BusError) -> ClientObject {
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
}
