/// Why a region, a GeoJSON file or a saved region document was refused. Every case has a
/// one-line ``description`` that names what is wrong and what would be accepted.
///
/// Rings are numbered 0 for the exterior ring and 1, 2, ... for the holes in the order given;
/// vertices and edges are numbered from 0 within their ring (edge `i` runs from vertex `i` to
/// vertex `i + 1`, the last edge back to vertex 0).
public enum RegionError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The identifier is empty, blank, longer than ``Region/maxIdentifierBytes`` bytes of UTF-8 or
  /// contains control, format or line-separator characters (Unicode Cc, Cf, Zl, Zp).
  case invalidIdentifier(String, reason: String)
  /// The title is longer than ``Region/maxTitleBytes`` bytes of UTF-8.
  case titleTooLong(bytes: Int, limit: Int)
  /// The title contains control, format or line-separator characters (Unicode Cc, Cf, Zl, Zp).
  case titleControlCharacters
  /// The title has more than ``TextRules/maxCombiningMarks`` combining marks on one character.
  case titleCombiningMarks(count: Int, limit: Int)
  /// The title has a character (extended grapheme cluster) of more than
  /// ``TextRules/maxScalarsPerCharacter`` code points.
  case titleCharacterTooLong(count: Int, limit: Int)
  /// A coordinate is not finite or outside latitude `-90...90` / longitude `-180...180` degrees.
  /// `ring` and `index` locate a polygon vertex (`nil` for a circle's center).
  case invalidCoordinate(latitude: Double, longitude: Double, ring: Int?, index: Int?)
  /// A circle's radius is not finite or outside `(0, 1_000_000]` metres.
  case invalidRadius(Double)
  /// A dwell time is not finite or outside `(0, 604_800]` seconds.
  case invalidDwell(Double)
  /// A ring has fewer than 3 distinct vertices.
  case tooFewVertices(ring: Int, count: Int)
  /// Two consecutive vertices of a ring are the same point (a ring is given without its
  /// repeated closing vertex, so the last vertex must also differ from the first).
  case repeatedVertex(ring: Int, index: Int)
  /// The polygon has more than ``RegionShape/maxVertexCount`` vertices over all its rings.
  case tooManyVertices(count: Int, limit: Int)
  /// A vertex lies farther than ``RegionShape/maxExtentRadius`` metres from the polygon's
  /// center (the center of its bounding cap), or more than a quarter meridian away.
  case tooLarge(distance: Double, limit: Double)
  /// Two edges cross, touch or overlap: edge `edge` of ring `ring` and edge `otherEdge` of ring
  /// `otherRing` (the same ring for a self-intersection such as a bow tie, different rings when a
  /// hole crosses or touches the exterior or another hole).
  case selfIntersection(ring: Int, edge: Int, otherRing: Int, otherEdge: Int)
  /// The polygon's `vertices` vertices crowd along long edges (such as a comb of many long thin
  /// teeth) so that the self-intersection test would need more than 20 million edge
  /// comparisons, or its edge grid more than 64 cells per edge on average.
  case tooComplex(vertices: Int)
  /// A hole is not inside the exterior ring, or lies inside another hole.
  case holeOutsideExterior(hole: Int)
  /// A GeoJSON text is not acceptable; `reason` says where and why.
  case invalidGeoJSON(reason: String)
  /// A file is larger than the limit, bytes.
  case fileTooLarge(bytes: Int, limit: Int)
  /// A monitor configuration value `name` is not finite or outside `range`.
  case invalidConfiguration(name: String, value: Double, range: String)
  /// A saved region document is not acceptable; `reason` says where and why (the region's own
  /// error when a region in it is invalid).
  case invalidDocument(reason: String)

  /// A one-line explanation for clients and logs.
  public var description: String {
    switch self {
    case .invalidIdentifier(let id, let reason):
      return "invalid region id \"\(id)\": \(reason)"
    case .titleTooLong(let bytes, let limit):
      return "region title too long: \(bytes) bytes of UTF-8, limit \(limit)"
    case .titleCombiningMarks(let count, let limit):
      return "region title has \(count) combining marks on one character, limit \(limit)"
    case .titleCharacterTooLong(let count, let limit):
      return "region title has a character of \(count) code points, limit \(limit)"
    case .titleControlCharacters:
      return
        "region title contains control, format or line-separator characters (Unicode Cc, Cf, Zl, Zp): use plain text"
    case .invalidCoordinate(let latitude, let longitude, let ring, let index):
      let place: String
      if let ring, let index {
        place = ring == 0 ? "exterior ring vertex \(index)" : "hole \(ring) vertex \(index)"
      } else {
        place = "circle center"
      }
      return
        "invalid coordinate at \(place): lat=\(latitude) lon=\(longitude): need finite latitude -90...90 and longitude -180...180 degrees"
    case .invalidRadius(let radius):
      return "invalid radius \(radius) m: need a finite radius in (0, 1000000] metres"
    case .invalidDwell(let dwell):
      return "invalid dwell time \(dwell) s: need a finite time in (0, 604800] seconds (one week)"
    case .tooFewVertices(let ring, let count):
      return "\(Self.ringName(ring)) has \(count) distinct vertices: a ring needs at least 3"
    case .repeatedVertex(let ring, let index):
      return
        "\(Self.ringName(ring)) repeats vertex \(index) as the next vertex: give each vertex once and leave the ring open (no repeated closing vertex)"
    case .tooManyVertices(let count, let limit):
      return "polygon has \(count) vertices, limit \(limit)"
    case .tooLarge(let distance, let limit):
      return
        "polygon too large: a vertex is \(Int(distance.rounded())) m from the polygon's center, limit \(Int(limit)) m"
    case .selfIntersection(let ring, let edge, let otherRing, let otherEdge):
      if ring == otherRing {
        return "\(Self.ringName(ring)) intersects itself: edges \(edge) and \(otherEdge) cross, touch or overlap"
      }
      return
        "\(Self.ringName(ring)) edge \(edge) crosses, touches or overlaps \(Self.ringName(otherRing)) edge \(otherEdge)"
    case .tooComplex(let vertices):
      return
        "polygon too complex to check: its \(vertices) vertices crowd along long edges (like a comb of long thin teeth), which would need more than 20 million edge comparisons; simplify it or split it into several regions"
    case .holeOutsideExterior(let hole):
      return "hole \(hole) is not inside the exterior ring, or lies inside another hole"
    case .invalidGeoJSON(let reason):
      return "invalid GeoJSON: \(reason)"
    case .fileTooLarge(let bytes, let limit):
      return "file too large: \(bytes) bytes, limit \(limit)"
    case .invalidConfiguration(let name, let value, let range):
      return "invalid region monitor setting \(name) = \(value): need a finite value in \(range)"
    case .invalidDocument(let reason):
      return "invalid region document: \(reason)"
    }
  }

  static func ringName(_ ring: Int) -> String { ring == 0 ? "exterior ring" : "hole \(ring)" }
}
