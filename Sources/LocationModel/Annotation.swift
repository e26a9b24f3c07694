/// A labelled point on the map, keyed by ``id``, as MapKit's `MKPointAnnotation`: what the
/// `annotate` request carries and what the map holds.
///
/// JSON shape (requests, `MAP` replies, snapshots and the state file):
/// `{"id": String, "lat": degrees, "lon": degrees, "title": String, "subtitle"?: String, "kind"?: String}`.
/// The map state validates it (`validate()` in MapState: lengths, coordinate range, no control
/// or format characters) before it is stored.
public struct Annotation: Sendable, Hashable {
  /// Identifier, unique on the map: 1...128 characters, no control (Cc) or format (Cf)
  /// characters.
  public var id: String
  /// Position, WGS84 degrees.
  public var coordinate: Coordinate
  /// Label shown next to the point, at most 256 characters.
  public var title: String
  /// Second line of the label, at most 256 characters; `nil` when absent.
  public var subtitle: String?
  /// Free-form category a renderer may style by (e.g. `"poi"`, `"waypoint"`), at most 64
  /// characters; `nil` when absent. The mirrored current location has kind `"location"`.
  public var kind: String?

  /// Identifier reserved for the annotation that mirrors the current location.
  public static let locationID = "location"
  /// Longest accepted identifier, characters.
  public static let maxIdentifierLength = 128
  /// Longest accepted title or subtitle, characters.
  public static let maxTextLength = 256
  /// Longest accepted kind, characters.
  public static let maxKindLength = 64

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
