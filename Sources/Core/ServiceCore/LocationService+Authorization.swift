import LocationCore
import LocationModel
import LocationProtocol

extension LocationService {
  // MARK: - Authorization

  /// `request`: asks the authority about the peer and records the decision for the connection
  /// (and tells the manager); asked again, it decides again.
  func requestAuthorization(_ client: ClientContext) async -> Reply {
    let (status, reason) = authority.decide(for: client.peer)
    decided[client.id] = Decided(connection: client.connection, peer: client.peer, status: status)
    if status == .authorized {
      Log.event(
        "authorization",
        [
          "client": String(client.id), "uid": String(client.peer.uid), "status": status.rawValue,
          "reason": reason,
        ])
    } else if let count = noteRefusal(uid: client.peer.uid) {
      // Refusals are logged at counts 1, 2, 4, 8... per uid (`refusals` = count so far).
      Log.event(
        "authorization",
        [
          "client": String(client.id), "uid": String(client.peer.uid), "status": status.rawValue,
          "reason": reason, "refusals": String(count),
        ])
    }
    await manager.setAuthorization(status, for: Self.connectionClient(client.id))
    if status != .authorized {
      // A denied connection keeps nothing it got while authorized.
      watchers[client.id] = nil
      await trackingChanged()
      return notAuthorizedReply(client)
    }
    return .authorization(.authorized)
  }

  /// Counts a refused `request` of `uid`; returns the count when it is a power of two (the
  /// refusal to log), nil otherwise.
  func noteRefusal(uid: UInt32) -> Int? {
    if refusals[uid] == nil, refusals.count >= 1024 { refusals.removeAll() }
    let count = (refusals[uid] ?? 0) + 1
    refusals[uid] = count
    return LogThrottle.powersOfTwo.logs(count) ? count : nil
  }

  /// The connection's authorization as decided by its last `request` or the last reload.
  func authorization(of id: UInt64) -> AuthorizationStatus {
    decided[id]?.status ?? .notDetermined
  }

  /// Replaces the rule (on reload) and re-decides every connection that asked for authorization
  /// and every user whose `start` tracking is on, so that one client never gets two answers.
  ///
  /// A connection whose status changes is told with the event `{"class":"AUTHORIZATION",
  /// "authorization":STATUS}` (whether it watches or not) and through its channel's
  /// ``ClientChannel/authorizationChanged(_:)``; one no longer authorized loses its
  /// watch and its connection's tracking at once, and its later commands get `notAuthorized`.
  /// A user no longer authorized loses its `start` tracking. Connections that never asked stay
  /// `notDetermined`.
  ///
  /// - Returns: how many connections were granted and how many revoked, and how many users'
  ///   tracking was stopped (for the log).
  @discardableResult
  public func reloadAuthorization(_ authorizer: Authorizer) async
    -> (granted: Int, revoked: Int, usersStopped: Int)
  {
    authority.replace(with: authorizer)
    // Every state change happens before the first await, so that no fix is sent to a client
    // after it was told it lost its authorization.
    var changed: [(id: UInt64, status: AuthorizationStatus)] = []
    for (id, entry) in decided.sorted(by: { $0.key < $1.key }) {
      let (status, reason) = authority.decide(for: entry.peer)
      guard status != entry.status else { continue }
      decided[id]?.status = status
      if status != .authorized { watchers[id] = nil }
      changed.append((id, status))
      Log.event(
        "authorizationChanged",
        [
          "client": String(id), "uid": String(entry.peer.uid), "status": status.rawValue,
          "reason": reason,
        ])
      // The `request` reply's shape, without `id`. A revocation goes after the reply being
      // answered for the connection now, which may have been computed with the old decision; a
      // grant goes at once, ahead of replies computed with the new one.
      let event = Event(
        body: .object([
          JSONMember("class", "AUTHORIZATION"), JSONMember("authorization", .string(status.rawValue)),
        ]))
      if status == .authorized {
        entry.connection.send(event)
      } else {
        entry.connection.sendAfterReply(event)
      }
      entry.connection.authorizationChanged(status)
    }
    var stoppedUsers: [UInt32] = []
    for (uid, peer) in trackingUsers.sorted(by: { $0.key < $1.key })
    where authority.decide(for: peer).status != .authorized {
      trackingUsers[uid] = nil
      stoppedUsers.append(uid)
      Log.event("trackingRevoked", ["uid": String(uid)])
    }
    for (id, status) in changed {
      await manager.setAuthorization(status, for: Self.connectionClient(id))
    }
    for uid in stoppedUsers {
      await manager.setAuthorization(.denied, for: Self.userClient(uid))
    }
    await trackingChanged()
    let revoked = changed.filter { $0.status != .authorized }.count
    return (changed.count - revoked, revoked, stoppedUsers.count)
  }

  /// The error for a failed `startUpdating`: `notAuthorized` when a reload revoked the client
  /// meanwhile, `unavailable` when the backend could not start.
  static func trackingError(_ error: LocationManagerError) -> ServiceError {
    if case .notAuthorized = error {
      return ServiceError(code: .notAuthorized, message: "not authorized: the service's group changed")
    }
    return ServiceError(code: .unavailable, message: error.description)
  }

  /// The manager client for a connection (connection-scoped tracking).
  static func connectionClient(_ id: UInt64) -> ClientID { ClientID(id & 0x3FFF_FFFF_FFFF_FFFF) }

  /// The manager client for a user (tracking that outlives connections).
  static func userClient(_ uid: UInt32) -> ClientID { ClientID(0x4000_0000_0000_0000 | UInt64(uid)) }
}
