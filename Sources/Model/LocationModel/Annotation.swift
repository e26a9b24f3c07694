/// A labelled point on the map, keyed by ``id``, as MapKit's `MKPointAnnotation`: what the
/// `annotate` request carries and what the map holds.
///
/// JSON shape (requests, `MAP` replies, snapshots and the state file):
/// `{"id": String, "lat": degrees, "lon": degrees, "title": String, "subtitle"?: String, "kind"?: String}`.
/// The map state validates it (`validate()` in MapState: lengths, coordinate range, no control
/// or format characters) before it is stored.
public struct Annotation: Sendable, Hashable {
  /// Identifier, unique on the map: 1...256 bytes of UTF-8 (``TextRules``), no control (Cc) or
  /// format (Cf) characters. Ids starting with ``fleetPrefix`` belong to the MQTT fleet view.
  public var id: String
  /// Position, WGS84 degrees.
  public var coordinate: Coordinate
  /// Label shown next to the point, at most 1,024 bytes of UTF-8 (``TextRules``).
  public var title: String
  /// Second line of the label, at most 1,024 bytes of UTF-8; `nil` when absent.
  public var subtitle: String?
  /// Free-form category a renderer may style by (e.g. `"poi"`, `"waypoint"`), at most 64
  /// bytes of UTF-8; `nil` when absent. The mirrored current location has kind `"location"`.
  public var kind: String?

  /// Identifier reserved for the annotation that mirrors the current location.
  public static let locationID = "location"
  /// The namespace of the MQTT fleet view's annotations: each device's id is this prefix
  /// followed by its topic (`fleet:owntracks/bob/phone`). Clients cannot add ids that start with
  /// it (``TextRules``' bytes, compared byte by byte), so a fleet device never replaces or
  /// deletes a user's annotation, whatever its id.
  public static let fleetPrefix = "fleet:"
  /// Whether `id` is in the fleet's namespace: its UTF-8 starts with ``fleetPrefix``'s.
  public static func isFleetIdentifier(_ id: String) -> Bool {
    id.utf8.starts(with: fleetPrefix.utf8)
  }
  /// Longest accepted identifier, bytes of UTF-8 (``TextRules/maxIdentifierBytes``).
  public static let maxIdentifierBytes = TextRules.maxIdentifierBytes
  /// Longest accepted title or subtitle, bytes of UTF-8 (``TextRules/maxTitleBytes``).
  public static let maxTextBytes = TextRules.maxTitleBytes
  /// Longest accepted kind, bytes of UTF-8.
  public static let maxKindBytes = 64

  /// Creates an annotation; not validated (the map state validates it).
  public init(
    id: String, coordinate: Coordinate, title: String = "", subtitle: String? = nil, kind: String? = nil
  ) {
    self.id = id
    self.coordinate = coordinate
    self.title = title
    self.subtitle = subtitle
    self.kind = kind
  }

  /// The bytes this annotation counts towards the map's limit on annotation text
  /// (`AnnotationLimits.maxTotalBytes`): the UTF-8 lengths of ``id``, ``title``, ``subtitle``
  /// and ``kind`` together.
  public var textByteCount: Int {
    id.utf8.count + title.utf8.count + (subtitle?.utf8.count ?? 0) + (kind?.utf8.count ?? 0)
  }
}
