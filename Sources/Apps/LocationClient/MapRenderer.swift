/// A map view that ``MapViewModel`` drives (the seed app's `MapViewWrapper`): whatever draws the
/// map (a terminal, a GTK widget, a web view) conforms, and the model tells it what to show.
///
/// The model calls these on the main actor, only when something changed.
@MainActor
public protocol MapRenderer: AnyObject {
  /// Shows the map centred on `center` (WGS84 degrees) at `zoomLevel` (Web Mercator, `0...22`).
  func setCenter(_ center: Coordinate, zoomLevel: Double)
  /// Shows `annotation`, replacing the one shown with the same ``Annotation/id``.
  func addOrReplaceAnnotation(_ annotation: Annotation)
  /// Stops showing the annotation with this identifier.
  func removeAnnotation(identifier: String)
}

/// A ``MapRenderer`` that records every call, for applications' tests: attach it to a
/// ``MapViewModel`` and assert on ``calls``.
@MainActor
public final class RecordingMapRenderer: MapRenderer {
  /// One call, with its arguments.
  public enum Call: Sendable, Hashable {
    /// ``MapRenderer/setCenter(_:zoomLevel:)``.
    case setCenter(Coordinate, zoomLevel: Double)
    /// ``MapRenderer/addOrReplaceAnnotation(_:)``.
    case addOrReplaceAnnotation(Annotation)
    /// ``MapRenderer/removeAnnotation(identifier:)``.
    case removeAnnotation(identifier: String)
  }

  /// Every call so far, in order.
  public private(set) var calls: [Call] = []

  /// A renderer with no calls recorded.
  public init() {}

  /// The centres set so far, in order.
  public var centers: [Coordinate] {
    calls.compactMap {
      if case .setCenter(let center, _) = $0 { return center }
      return nil
    }
  }

  /// Forgets the calls recorded so far.
  public func reset() { calls.removeAll() }

  /// Records the call.
  public func setCenter(_ center: Coordinate, zoomLevel: Double) {
    calls.append(.setCenter(center, zoomLevel: zoomLevel))
  }

  /// Records the call.
  public func addOrReplaceAnnotation(_ annotation: Annotation) {
    calls.append(.addOrReplaceAnnotation(annotation))
  }

  /// Records the call.
  public func removeAnnotation(identifier: String) {
    calls.append(.removeAnnotation(identifier: identifier))
  }
}
