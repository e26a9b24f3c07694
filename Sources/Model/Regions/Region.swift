import LocationModel

/// The area a region covers on the WGS84 ellipsoid.
///
/// Distances and edges are geodesics on WGS84 (Karney's algorithms, `Geodesic` in
/// LocationModel), never straight lines in latitude/longitude: a polygon edge is the shortest
/// path between its two vertices, so an edge between longitudes 179.9 and -179.9 crosses the
/// antimeridian (0.2 degrees long), and a ring around a pole contains the pole.
///
/// How a point is tested (``Region/signedDistance(to:)``): a circle by the geodesic distance to
/// its center minus the radius. A polygon is projected once, when the region is created, with
/// the ellipsoidal gnomonic projection (Karney 2013, section 8) centred on its bounding cap's
/// center, where geodesic edges are nearly straight lines; a point far outside the cap (more than
/// 1 km beyond it) is answered from the cap alone. Otherwise inside/outside is the crossing number
/// of a ray from the point with the edges of every ring in that plane (so a point in a hole is
/// outside; within 5 m of the boundary the side of the nearest edge, judged in the projection
/// centred on the point, decides instead), and the distance to the boundary is found on the
/// nearest edges, each projected again
/// with the gnomonic projection centred on the point itself (where geodesics through the point
/// are exactly straight and azimuths from it are true), its nearest point taken back to the
/// ellipsoid and measured with the geodesic inverse problem. Edges are kept in a grid, so a test
/// looks at a few edges rather than all of them.
public enum RegionShape: Sendable, Hashable {
  /// A geodesic circle: every point whose geodesic distance from `center` is at most `radius`
  /// metres. `radius` is finite, in `(0, 1_000_000]` metres.
  case circle(center: Coordinate, radius: Double)
  /// A polygon: the `exterior` ring minus its `holes`. Each ring is a list of vertices
  /// (WGS84 degrees) without the repeated closing vertex; edges are geodesics from each vertex to
  /// the next and from the last back to the first. Either orientation is accepted. Rules
  /// (``RegionShape/validate()``): at least 3 vertices per ring, no two consecutive vertices
  /// equal, no edge crossing, touching or overlapping another (of any ring), every hole inside
  /// the exterior and outside the other holes, at most ``maxVertexCount`` vertices in all, and
  /// every vertex within ``maxExtentRadius`` metres of the polygon's center; and edges not so
  /// crowded along long edges that the self-intersection test would need more than 20 million
  /// comparisons (``RegionError/tooComplex(vertices:)``).
  case polygon(exterior: [Coordinate], holes: [[Coordinate]])

  /// Most vertices a polygon may have over all its rings: 100,000. The self-intersection test
  /// compares only edges that share a cell of a uniform grid of about one edge per cell, so it
  /// takes time roughly in proportion to the vertices (0.35 s for 100,000 in a release build on a
  /// 2-core machine, region-bench); the limit, with the complexity bound of
  /// ``RegionError/tooComplex(vertices:)``, keeps one region from taking the daemon's memory and
  /// time.
  public static let maxVertexCount = 100_000

  /// Largest distance, metres, from a polygon's center (the center of its bounding cap: the
  /// normalised mean of its exterior vertices as unit vectors) to any vertex: 1,000 km. Within
  /// this distance the ellipsoidal gnomonic projection the point-in-polygon test works in keeps
  /// a geodesic edge within 1 m of a straight line (6 cm for edges of 200 km), below the default
  /// minimum margin of the decision rule (``RegionMonitorConfiguration/minimumMargin``, 5 m), and
  /// every point near the polygon is less than a quarter meridian from its center, where the
  /// projection is defined.
  public static let maxExtentRadius = 1_000_000.0

  /// Largest circle radius, metres: 1,000 km.
  public static let maxRadius = 1_000_000.0

  /// Checks the shape against every rule above.
  ///
  /// - Throws: ``RegionError/invalidCoordinate(latitude:longitude:ring:index:)``,
  ///   ``RegionError/invalidRadius(_:)``, ``RegionError/tooFewVertices(ring:count:)``,
  ///   ``RegionError/repeatedVertex(ring:index:)``, ``RegionError/tooManyVertices(count:limit:)``,
  ///   ``RegionError/tooLarge(distance:limit:)``,
  ///   ``RegionError/selfIntersection(ring:edge:otherRing:otherEdge:)``,
  ///   ``RegionError/holeOutsideExterior(hole:)`` or ``RegionError/tooComplex(vertices:)``: the
  ///   first problem found.
  public func validate() throws(RegionError) {
    _ = try PreparedShape(self)
  }
}

/// A region to monitor: a shape with an identifier, a title and what to report.
///
/// Validated when created, so a `Region` value is always valid; its properties are read-only
/// (create a new region to change one: adding it with the same id replaces the old one).
public struct Region: Sendable, Hashable {
  /// The key: 1...256 bytes of UTF-8, not blank, without control, format or line-separator
  /// characters (Unicode Cc, Cf, Zl, Zp), as annotation identifiers.
  public let id: String
  /// A human-readable name, at most 1,024 bytes of UTF-8, plain text (no Cc, Cf, Zl, Zp
  /// characters); `nil` for none.
  public let title: String?
  /// The area.
  public let shape: RegionShape
  /// Whether entering the region is reported (an `enter` event). Default `true`.
  public let notifyOnEntry: Bool
  /// Whether leaving the region is reported (an `exit` event). Default `true`.
  public let notifyOnExit: Bool
  /// Loitering delay, seconds, finite in `(0, 604_800]` (one week): a `dwell` event is reported
  /// once the device has been inside this long without leaving. `nil`: no dwell event.
  public let dwell: Double?

  /// The validated geometry, prepared for the point-in-region test (not part of equality).
  let prepared: PreparedShape

  /// Most bytes of UTF-8 in an identifier: 256 (``TextRules/maxIdentifierBytes``, as for annotations).
  public static let maxIdentifierBytes = TextRules.maxIdentifierBytes
  /// Most bytes of UTF-8 in a title: 1,024 (``TextRules/maxTitleBytes``, as for annotations).
  public static let maxTitleBytes = TextRules.maxTitleBytes
  /// Longest dwell time, seconds: one week.
  public static let maxDwell = 604_800.0

  /// Creates a region after checking everything: the identifier and title rules above, the
  /// dwell range, and the shape (``RegionShape/validate()``).
  ///
  /// - Throws: ``RegionError/invalidIdentifier(_:reason:)``,
  ///   ``RegionError/titleTooLong(bytes:limit:)``, ``RegionError/titleControlCharacters``,
  ///   ``RegionError/invalidDwell(_:)`` or any error of ``RegionShape/validate()``.
  public init(
    id: String, title: String? = nil, shape: RegionShape, notifyOnEntry: Bool = true,
    notifyOnExit: Bool = true, dwell: Double? = nil
  ) throws(RegionError) {
    try Self.validateIdentifier(id)
    if let title {
      if title.utf8.count > Self.maxTitleBytes {
        throw .titleTooLong(bytes: title.utf8.count, limit: Self.maxTitleBytes)
      }
      if title.unicodeScalars.contains(where: Self.isRefused) { throw .titleControlCharacters }
      let marks = TextRules.mostCombiningMarks(in: title)
      if marks > TextRules.maxCombiningMarks {
        throw .titleCombiningMarks(count: marks, limit: TextRules.maxCombiningMarks)
      }
      let longest = TextRules.longestCharacter(in: title)
      if longest > TextRules.maxScalarsPerCharacter {
        throw .titleCharacterTooLong(count: longest, limit: TextRules.maxScalarsPerCharacter)
      }
    }
    if let dwell, !(dwell.isFinite && dwell > 0 && dwell <= Self.maxDwell) {
      throw .invalidDwell(dwell)
    }
    self.prepared = try PreparedShape(shape)
    self.id = id
    self.title = title
    self.shape = shape
    self.notifyOnEntry = notifyOnEntry
    self.notifyOnExit = notifyOnExit
    self.dwell = dwell
  }

  /// Checks an identifier: 1...256 bytes of UTF-8 with at most ``TextRules/maxCombiningMarks``
  /// combining marks on a character (``TextRules``), not only white space, no Cc, Cf, Zl or Zp
  /// characters.
  ///
  /// - Throws: ``RegionError/invalidIdentifier(_:reason:)``; the message shows refused
  ///   characters as `\u{...}` so that it cannot reorder or hide text.
  public static func validateIdentifier(_ id: String) throws(RegionError) {
    if id.isEmpty { throw .invalidIdentifier(id, reason: "empty") }
    if id.unicodeScalars.allSatisfy({ $0.properties.isWhitespace }) {
      throw .invalidIdentifier(id, reason: "blank (only white space)")
    }
    if id.unicodeScalars.contains(where: isRefused) {
      let visible = id.unicodeScalars.map { scalar in
        isRefused(scalar) ? "\\u{" + String(scalar.value, radix: 16) + "}" : String(scalar)
      }
      throw .invalidIdentifier(
        String(visible.joined().prefix(64)),
        reason: "contains control, format or line-separator characters (Unicode Cc, Cf, Zl, Zp)")
    }
    if let reason = TextRules.problem(id, maxBytes: maxIdentifierBytes) {
      throw .invalidIdentifier(String(id.unicodeScalars.prefix(32).map(Character.init)) + "...", reason: reason)
    }
  }

  /// Whether `scalar` is of a category refused in identifiers and titles.
  static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.properties.generalCategory {
    case .format: return !TextRules.isAllowedJoiner(scalar)
    case .control, .lineSeparator, .paragraphSeparator: return true
    default: return false
    }
  }

  /// Regions are equal when every public property is equal.
  public static func == (lhs: Region, rhs: Region) -> Bool {
    lhs.id == rhs.id && lhs.title == rhs.title && lhs.shape == rhs.shape
      && lhs.notifyOnEntry == rhs.notifyOnEntry && lhs.notifyOnExit == rhs.notifyOnExit
      && lhs.dwell == rhs.dwell
  }

  /// Hashes the public properties.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(id)
    hasher.combine(title)
    hasher.combine(shape)
    hasher.combine(notifyOnEntry)
    hasher.combine(notifyOnExit)
    hasher.combine(dwell)
  }
}

extension Region {
  /// Signed geodesic distance, metres, from `coordinate` to the region's boundary: negative
  /// inside, positive outside (a point in a hole is outside). For a circle always exact (the
  /// geodesic distance to the center minus the radius). For a polygon exact (the geodesic
  /// distance to the nearest point of the nearest edge) when the boundary is within 1 km of the
  /// point; otherwise a lower bound of the magnitude that is itself more than 1 km (far outside,
  /// the distance to the polygon's bounding cap), which is all the decision rule needs.
  /// `coordinate` must be valid (``LocationModel/Coordinate/isValid``); otherwise the result is
  /// NaN.
  public func signedDistance(to coordinate: Coordinate) -> Double {
    guard coordinate.isValid else { return .nan }
    return prepared.signedDistance(to: coordinate)
  }
}
