import LocationModel
import Synchronization

/// Something that draws the map: fed the state after every change, in order.
///
/// Renderers are interchangeable the way a MapKit view and a Google Maps view can sit behind one
/// map protocol: each receives the same ``MapRenderState`` (viewport, annotations, track) and
/// decides how to show it. Contract, as the tests check it: after
/// ``MapStateService/attach(renderer:)`` a renderer is called once with ``MapChange/attached``
/// and the current state, then once per change event with the event's changes and the state
/// after them, in the order the changes happened. Calls come from the service's actor one at a
/// time and must return quickly (no blocking I/O).
public protocol MapRenderer: AnyObject, Sendable {
  /// Receives the map state after `changes`.
  func render(_ state: MapRenderState, changes: [MapChange])
}

/// A renderer for tests: records every call.
public final class InMemoryRenderer: MapRenderer {
  /// One recorded call.
  public struct Call: Sendable, Hashable {
    /// The changes the call reported.
    public var changes: [MapChange]
    /// The state it was given.
    public var state: MapRenderState
  }

  private let recorded = Mutex<[Call]>([])

  /// Creates a renderer with no calls recorded.
  public init() {}

  /// Records the call.
  public func render(_ state: MapRenderState, changes: [MapChange]) {
    recorded.withLock { $0.append(Call(changes: changes, state: state)) }
  }

  /// Every call so far, oldest first.
  public var calls: [Call] { recorded.withLock { $0 } }

  /// The state of the last call, `nil` before the first.
  public var latest: MapRenderState? { recorded.withLock { $0.last?.state } }
}

/// A renderer that keeps the latest GeoJSON document (see ``GeoJSON/document(for:)``).
public final class GeoJSONRenderer: MapRenderer {
  private let output = Mutex<String?>(nil)

  /// Creates a renderer with no output yet.
  public init() {}

  /// Renders the state to GeoJSON and keeps it.
  public func render(_ state: MapRenderState, changes: [MapChange]) {
    let document = GeoJSON.document(for: state)
    output.withLock { $0 = document }
  }

  /// The latest GeoJSON document, `nil` before the first render.
  public var latest: String? { output.withLock { $0 } }
}

/// A renderer that keeps the latest SVG snapshot (see ``SVGSnapshot/document(for:)``).
public final class SVGRenderer: MapRenderer {
  private let output = Mutex<String?>(nil)

  /// Creates a renderer with no output yet.
  public init() {}

  /// Renders the state to SVG and keeps it.
  public func render(_ state: MapRenderState, changes: [MapChange]) {
    let document = SVGSnapshot.document(for: state)
    output.withLock { $0 = document }
  }

  /// The latest SVG document, `nil` before the first render.
  public var latest: String? { output.withLock { $0 } }
}

/// Deterministic text helpers shared by the renderers.
enum TextFormat {
  /// `value` with exactly `digits` decimals, no exponent, no negative zero (``DecimalText``,
  /// halves away from zero); non-finite gives "0", a magnitude of 9e15 units or more Swift's
  /// shortest form.
  static func fixed(_ value: Double, _ digits: Int) -> String {
    DecimalText.fixed(value, places: digits) ?? (value.isFinite ? String(value) : "0")
  }

  /// Text escaped for XML 1.0 content and attribute values: `& < > " '` become entities and
  /// characters XML 1.0 forbids (C0 controls other than tab, LF, CR; U+FFFE, U+FFFF) become U+FFFD.
  static func xmlEscaped(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"": result += "&quot;"
      case "'": result += "&apos;"
      default:
        let v = scalar.value
        if (v < 0x20 && v != 0x09 && v != 0x0A && v != 0x0D) || v == 0xFFFE || v == 0xFFFF {
          result += "\u{FFFD}"
        } else {
          result.unicodeScalars.append(scalar)
        }
      }
    }
    return result
  }
}
