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
      let (replaced, status) = await regions.add(region)
      Log.event("regionAdded", ["region": region.id, "replaced": String(replaced)])
      await map.setRegions(await regions.statuses)
      try await regionsSaved()
      return .region(status, replaced: replaced)
    case .remove(let id):
      guard let status = await regions.remove(id: id) else { throw Self.noSuchRegion(id) }
      Log.event("regionRemoved", ["region": id])
      await map.setRegions(await regions.statuses)
      try await regionsSaved()
      return .region(status, removed: true)
    case .list:
      return .regions(await regions.statuses)
    case .state(let id):
      guard let status = await regions.status(id: id) else { throw Self.noSuchRegion(id) }
      return .region(status)
    }
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
  /// map's renderers the new states.
  func regionsChanged(_ transitions: [RegionTransition]) async {
    for transition in transitions {
      Log.event("regionTransition", ["region": transition.id, "event": transition.event.rawValue])
      broadcastToWatchers(.region(transition))
    }
    await map.setRegions(await regions.statuses)
  }
}
