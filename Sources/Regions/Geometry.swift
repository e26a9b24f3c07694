import LocationModel

/// A validated shape prepared for the point-in-region test: its bounding cap and, for a
/// polygon, its rings. Immutable, shared between copies of a ``Region``.
final class PreparedShape: Sendable {
  /// Center of the bounding cap: the circle's center, or the normalised mean of a polygon's
  /// exterior vertices as unit vectors.
  let capCenter: Coordinate
  /// Geodesic radius of the bounding cap, metres: every point of the region is within it.
  let capRadius: Double
  /// The circle radius, or `nil` for a polygon.
  let radius: Double?

  init(_ shape: RegionShape) throws(RegionError) {
    switch shape {
    case .circle(let center, let radius):
      guard center.isValid else {
        throw .invalidCoordinate(latitude: center.latitude, longitude: center.longitude, ring: nil, index: nil)
      }
      guard radius.isFinite, radius > 0, radius <= RegionShape.maxRadius else { throw .invalidRadius(radius) }
      capCenter = center
      capRadius = radius
      self.radius = radius
    case .polygon(let exterior, let holes):
      for (ringIndex, ring) in ([exterior] + holes).enumerated() {
        for (index, vertex) in ring.enumerated() where !vertex.isValid {
          throw .invalidCoordinate(
            latitude: vertex.latitude, longitude: vertex.longitude, ring: ringIndex, index: index)
        }
        if ring.count < 3 { throw .tooFewVertices(ring: ringIndex, count: ring.count) }
      }
      capCenter = exterior[0]
      capRadius = exterior.map { Geodesic.distance(exterior[0], $0) }.max() ?? 0
      radius = nil
    }
  }

  /// Signed geodesic distance from `point` to the boundary, metres: negative inside, positive
  /// outside.
  func signedDistance(to point: Coordinate) -> Double {
    let d = Geodesic.distance(point, capCenter)
    return d - capRadius
  }
}
