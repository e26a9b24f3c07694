import LocationModel
import LocationProtocol
import MapState
import Regions

extension LocationService {
  // MARK: - Regions

  /// Answers `region` (add, remove, list, state); see docs/PROTOCOL.md and docs/regions.md.
  func region(_ action: RegionAction) async throws -> Reply {
    switch action {
    case .add(let region):
      if let existing = await regions.status(id: region.id)?.region.id, !Self.sameSpelling(existing, region.id) {
        throw ServiceError(
          code: .invalidArgument,
          message:
            "region id \(JSONValue.quoted(region.id)) is the same Unicode text as the existing region \(JSONValue.quoted(existing)) written with other code points (canonically equivalent): use that spelling, or remove it first"
        )
      }
      let (replaced, status) = await regions.add(region)
      Log.event("regionAdded", ["region": region.id, "replaced": String(replaced)])
      await map.setRegions(await regions.statuses)
      try await regionsSaved()
      return .region(status, replaced: replaced)
    case .remove(let id):
      guard let existing = await regions.status(id: id)?.region.id, Self.sameSpelling(existing, id),
        let status = await regions.remove(id: id)
      else { throw Self.noSuchRegion(id) }
      Log.event("regionRemoved", ["region": id])
      await map.setRegions(await regions.statuses)
      try await regionsSaved()
      return .region(status, removed: true)
    case .list(let after, let limit):
      return try await regionList(after: after, limit: limit)
    case .state(let id):
      guard let status = await regions.status(id: id), Self.sameSpelling(status.region.id, id) else {
        throw Self.noSuchRegion(id)
      }
      return .region(status)
    }
  }

  /// The `REGIONS` reply, refused with `limitExceeded` before it is encoded when it would be
  /// longer than ``Reply/maximumBytes`` (first from a cheap lower bound per region, then while
  /// encoding), so a list of many regions costs no more than one reply's worth of work.
  private func regionList(after: String?, limit: Int?) async throws -> Reply {
    var statuses = await regions.statuses
    let paged = after != nil || limit != nil
    if let after {
      // Sorted by id in Unicode scalar order, as the monitor sorts: skip ids up to `after`.
      statuses = Array(
        statuses.drop { !after.unicodeScalars.lexicographicallyPrecedes($0.region.id.unicodeScalars) })
    }
    var more = false
    if let limit, statuses.count > limit {
      statuses = Array(statuses.prefix(limit))
      more = true
    }
    let budget = Reply.maximumBytes - 64
    func refused(_ bytes: Int) -> ServiceError {
      ServiceError(
        code: .limitExceeded,
        message:
          "the list of \(statuses.count) regions would be at least \(bytes) bytes, more than the \(Reply.maximumBytes) bytes a reply may have: ask for a page (locationctl region list --after ID --limit N; {\"cmd\":\"region\",\"action\":\"list\",\"after\":ID,\"limit\":N}) or remove regions"
      )
    }
    let estimate = statuses.reduce(40) { $0 + Reply.estimatedBytes($1) }
    if estimate > budget { throw refused(estimate) }
    var bytes = 40
    for status in statuses {
      bytes += RegionWire.json(status).encoded.count + 1
      if bytes > budget { throw refused(bytes) }
    }
    return .regions(statuses, more: paged ? more : nil)
  }

  /// Whether two ids are the same code points. Swift's `==` on strings is canonical
  /// equivalence (`"caf\u{E9}" == "cafe\u{301}"`); ids are compared literally, as CoreLocation
  /// compares region identifiers.
  static func sameSpelling(_ a: String, _ b: String) -> Bool {
    a.unicodeScalars.elementsEqual(b.unicodeScalars)
  }

  static func noSuchRegion(_ id: String) -> ServiceError {
    ServiceError(
      code: .notFound, message: "no region \(JSONValue.quoted(id)): see locationctl region list")
  }

  /// `notSaved` when the regions could not be saved (the change stays in effect; the next
  /// change, transition or shutdown retries the save).
  private func regionsSaved() async throws {
    if let failure = await regions.unsavedChanges {
      throw ServiceError(
        code: .notSaved,
        message:
          "the change is in effect but could not be saved, so a restart would lose it (\(failure)); it is saved with the next change or at shutdown once the disk works again"
      )
    }
  }

  /// Sends each transition to every watcher as a `REGION` event (never coalesced) and gives the
  /// map's renderers the new states (also when a state changed without an event, as for a region
  /// first confirmed outside).
  /// The transitions of one fix go as one burst (``ClientChannel/deliverBurst(_:)``): a watcher
  /// that keeps reading gets all of them, however many regions changed at once.
  func regionsChanged(_ transitions: [RegionTransition]) async {
    var events: [EncodedEvent] = []
    events.reserveCapacity(transitions.count)
    for transition in transitions {
      Log.event("regionTransition", ["region": transition.id, "event": transition.event.rawValue])
      events.append(EncodedEvent(.region(transition)))
    }
    if !events.isEmpty { broadcastBurstToWatchers(events) }
    await map.setRegions(await regions.statuses)
  }
}
