import FoundationEssentials
import LocationCore
import LocationModel
import LocationProtocol
import MapState

extension LocationService {
  // MARK: - Map

  static func mapError(_ error: MapStateError) -> ServiceError {
    switch error {
    case .noCurrentLocation: return ServiceError(code: .noFix, message: error.description)
    case .noSuchAnnotation: return ServiceError(code: .notFound, message: error.description)
    case .limitExceeded: return ServiceError(code: .limitExceeded, message: error.description)
    default: return ServiceError(code: .invalidArgument, message: error.description)
    }
  }

  /// The reply to a request that changed the map: `MAP`, or `notSaved` when the state could not
  /// be saved (the change stays in effect; the next change or shutdown retries the save).
  func changedMapReply() async throws -> Reply {
    if let failure = await map.unsavedChanges {
      throw ServiceError(
        code: .notSaved,
        message:
          "the change is in effect but could not be saved, so a restart would lose it (\(failure)); it is saved with the next change or at shutdown once the disk works again"
      )
    }
    return try await mapReply()
  }

  func mapReply() async throws -> Reply {
    let snapshot = await map.snapshot
    guard case .object(let members) = try Self.mapJSON(snapshot, changes: nil) else {
      throw ServiceError(code: .internal, message: "map state could not be encoded")
    }
    return .object(class: "MAP", members: members.filter { $0.key != "class" })
  }

  /// `{"class":"MAP","center":{"lat","lon"},"zoom","mode","annotations":[{"id","lat","lon","title"}],
  /// "rotation","size":{"width","height"},"span":{"lat","lon"},"tracking"}` in this key order, plus
  /// `"changes":[{"what","reason"}]` for events.
  static func mapJSON(_ snapshot: MapSnapshot, changes: [MapChange]?) throws -> JSONValue {
    var members: [JSONMember] = [
      JSONMember("class", "MAP"),
      JSONMember("center", .object([JSONMember("lat", .number(snapshot.center.lat)), JSONMember("lon", .number(snapshot.center.lon))])),
      JSONMember("zoom", .number(snapshot.zoom)),
      JSONMember("mode", .string(snapshot.mode.rawValue)),
      JSONMember(
        "annotations",
        .array(
          snapshot.annotations.map { annotation in
            var fields = [
              JSONMember("id", .string(annotation.id)),
              JSONMember("lat", .number(annotation.coordinate.latitude)),
              JSONMember("lon", .number(annotation.coordinate.longitude)),
              JSONMember("title", .string(annotation.title)),
            ]
            if let subtitle = annotation.subtitle { fields.append(JSONMember("subtitle", .string(subtitle))) }
            if let kind = annotation.kind { fields.append(JSONMember("kind", .string(kind))) }
            return .object(fields)
          })),
      JSONMember("rotation", .number(snapshot.rotation)),
      JSONMember("size", .object([JSONMember("width", .number(snapshot.size.width)), JSONMember("height", .number(snapshot.size.height))])),
      JSONMember("span", .object([JSONMember("lat", .number(snapshot.span.lat)), JSONMember("lon", .number(snapshot.span.lon))])),
      JSONMember("tracking", .bool(snapshot.tracking)),
    ]
    if let changes {
      let encoded = try MapEvent(changes: changes, map: snapshot).jsonData()
      if let value = try JSONValue.parse(Array(encoded))["changes"] {
        members.append(JSONMember("changes", value))
      }
    }
    return .object(members)
  }

  // MARK: - Replay

  /// Applies a replay control and answers with where the replay stands after it.
  func replay(_ action: ReplayAction) async throws -> Reply {
    guard let replay = backend as? ReplayBackend else {
      throw ServiceError(code: .notReplay, message: "the backend \(backend.uri) is not a replay: start locationd with --backend replay:PATH")
    }
    let control: ReplayControl
    switch action {
    case .pause: control = .pause
    case .resume: control = .resume
    case .step(let epochs): control = .step(epochs: max(1, epochs))
    case .speed(let speed): control = .speed(speed)
    case .seek(let seconds):
      guard seconds.isFinite, seconds >= 0, seconds < 1e12 else {
        throw ServiceError(code: .invalidArgument, message: "seek takes seconds >= 0, got \(seconds)")
      }
      control = .seek(.offset(.milliseconds(Int64(seconds * 1000))))
    }
    let progress: ReplayProgress
    do {
      progress = try await replay.perform(control)
    } catch .notRunning {
      throw ServiceError(code: .unavailable, message: ReplayError.notRunning.description)
    } catch {
      throw ServiceError(code: .invalidArgument, message: "\(error)")
    }
    let state = progress.isAtEnd ? "endOfData" : progress.isPaused ? "paused" : "playing"
    return .replay(
      state: state, speed: progress.speed, position: progress.logOffsetMilliseconds.map { Double($0) / 1000 })
  }
}
