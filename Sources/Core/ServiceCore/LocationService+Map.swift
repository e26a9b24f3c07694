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

  /// See ``AnnotationBatchHandler/annotate(_:from:)``: one map change for the whole batch.
  public func annotate(_ batch: [Annotation], from client: ClientContext) async -> [(id: String, reason: String)]? {
    guard authorization(of: client.id) == .authorized else { return nil }
    return await map.addAnnotations(batch).map { ($0.annotation.id, $0.error.description) }
  }

  /// See ``AnnotationBatchHandler/removeAnnotations(_:from:)``: one map change for all of them.
  public func removeAnnotations(_ ids: [String], from client: ClientContext) async -> Int? {
    guard authorization(of: client.id) == .authorized else { return nil }
    return await map.removeAnnotations(ids)
  }

  func mapReply() async throws -> Reply {
    .object(class: "MAP", members: (await map.snapshot).json.objectMembers ?? [])
  }

  /// `{"class":"MAP",...}`: `class` followed by the members of ``MapSnapshot/json`` (center,
  /// zoom, mode, annotations, rotation, size, span, tracking), plus `"changes"` (each
  /// ``MapChange/json``) for events.
  static func mapJSON(_ snapshot: MapSnapshot, changes: [MapChange]?) -> JSONValue {
    var members = [JSONMember("class", "MAP")]
    members.append(contentsOf: snapshot.json.objectMembers ?? [])
    if let changes { members.append(JSONMember("changes", .array(changes.map(\.json)))) }
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
