#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import LocationModel

/// A validated shape prepared for the point-in-region test. Immutable, shared between copies of
/// a ``Region``.
///
/// A circle is its center and radius: the signed distance of a point is its geodesic distance
/// from the center minus the radius.
///
/// A polygon is prepared once: the center of its bounding cap C (the normalised mean of the
/// exterior vertices as unit vectors), the cap's radius (the largest geodesic distance from C to
/// an exterior vertex), and every vertex projected with the ellipsoidal gnomonic projection
/// centred on C, in which geodesic edges are nearly straight (see below). The edges are kept in a uniform grid (about one edge per cell) and in rows, so a query
/// looks at a few edges rather than all of them.
///
/// For a point P:
/// 1. far test: when P's geodesic distance from C exceeds the cap radius (plus 0.1% and 1 m of
///    slack) by more than 1 km, the answer is "outside, by at least that excess";
/// 2. inside or outside: the crossing number of a ray from P (in C's projection, the ray along
///    +x) with the edges of all rings (the exterior and the holes, so a point in a hole is
///    outside);
/// 3. distance to the boundary: the edges nearest P in C's projection are found on the grid (when
///    none is within 1 km, the answer is "1 km", a lower bound, and the search stops there); each
///    edge within 2% of the nearest is projected again with the gnomonic projection centred on P
///    itself (geodesics through P are exactly straight there and azimuths from P are kept), the
///    point of the edge nearest the origin is taken back with the inverse projection, and its
///    geodesic distance from P is the distance. The smallest is the answer.
/// The crossing number in C's projection can be wrong only within the deviation of a geodesic
/// from its chord there: measured (ProjectionTests) below 0.1 mm for 50 km edges within 100 km
/// of C, 6 cm for 200 km edges and 1 m for 1,000 km edges within 1,000 km of C. So within 5 m of
/// the boundary the side is taken instead from the nearest edge in P's own projection (the
/// interior lies left of an edge of a counterclockwise exterior or a clockwise hole; at a vertex
/// the two edges there decide together, both for a convex vertex, either for a reflex one).
final class PreparedShape: Sendable {
  /// Center of the bounding cap: the circle's center, or the polygon's center C.
  let capCenter: Coordinate
  /// Geodesic radius of the bounding cap, metres, slack included: every point of the region is
  /// within it.
  let capRadius: Double
  /// The circle radius, or `nil` for a polygon.
  let radius: Double?
  /// The polygon's prepared rings, or `nil` for a circle.
  let polygon: PlanarPolygon?

  /// Distance beyond the cap within which a polygon's distance is computed exactly, metres.
  static let exactBand = 1_000.0
  /// Largest band asked for: 100 km (a fix's margin is never realistically larger).
  static let maximumBand = 100_000.0

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
      polygon = nil
    case .polygon(let exterior, let holes):
      let rings = [exterior] + holes
      var total = 0
      for (ringIndex, ring) in rings.enumerated() {
        for (index, vertex) in ring.enumerated() where !vertex.isValid {
          throw .invalidCoordinate(
            latitude: vertex.latitude, longitude: vertex.longitude, ring: ringIndex, index: index)
        }
        total += ring.count
      }
      if total > RegionShape.maxVertexCount {
        throw .tooManyVertices(count: total, limit: RegionShape.maxVertexCount)
      }
      for (ringIndex, ring) in rings.enumerated() {
        if ring.count < 3 { throw .tooFewVertices(ring: ringIndex, count: ring.count) }
        for index in ring.indices {
          let next = ring[index + 1 == ring.count ? 0 : index + 1]
          if ring[index].latitude == next.latitude
            && (ring[index].longitude == next.longitude || abs(ring[index].latitude) == 90
              || abs(ring[index].longitude - next.longitude) == 360)
          {
            throw .repeatedVertex(ring: ringIndex, index: index)
          }
        }
      }
      let center = Self.meanCenter(exterior)
      guard let center else { throw .tooLarge(distance: .infinity, limit: RegionShape.maxExtentRadius) }
      var farthest = 0.0
      for vertex in exterior {
        let distance = Geodesic.distance(center, vertex)
        if !(distance <= RegionShape.maxExtentRadius) {
          throw .tooLarge(distance: distance, limit: RegionShape.maxExtentRadius)
        }
        farthest = max(farthest, distance)
      }
      let projection = Gnomonic(center: center)
      var planar: [[Point]] = []
      for ring in rings {
        var points: [Point] = []
        points.reserveCapacity(ring.count)
        for vertex in ring {
          guard let xy = projection.forward(vertex) else {
            throw .tooLarge(distance: Geodesic.distance(center, vertex), limit: RegionShape.maxExtentRadius)
          }
          points.append(Point(x: xy.x, y: xy.y))
        }
        planar.append(points)
      }
      let prepared = try PlanarPolygon(rings: planar, coordinates: rings)
      try prepared.validate()
      capCenter = center
      capRadius = farthest * 1.001 + 1
      radius = nil
      polygon = prepared
    }
  }

  /// Normalised mean of the vertices as unit vectors (geodetic latitude), or `nil` when the mean
  /// is (nearly) zero.
  static func meanCenter(_ vertices: [Coordinate]) -> Coordinate? {
    var sx = 0.0
    var sy = 0.0
    var sz = 0.0
    for vertex in vertices {
      let lat = vertex.latitude * .pi / 180
      let lon = vertex.longitude * .pi / 180
      sx += cos(lat) * cos(lon)
      sy += cos(lat) * sin(lon)
      sz += sin(lat)
    }
    let norm = (sx * sx + sy * sy + sz * sz).squareRoot()
    guard norm > 1e-9 * Double(vertices.count) else { return nil }
    let latitude = atan2(sz, (sx * sx + sy * sy).squareRoot()) * 180 / .pi
    let longitude = sx == 0 && sy == 0 ? 0 : atan2(sy, sx) * 180 / .pi
    return Coordinate(latitude: latitude, longitude: longitude)
  }

  /// Signed geodesic distance from `point` to the boundary, metres: negative inside, positive
  /// outside. For a polygon whose boundary is more than `band` from `point`, a lower bound of the
  /// magnitude, itself more than `band`; `band` is at least ``exactBand`` (1 km) and at most
  /// ``maximumBand`` (100 km).
  func signedDistance(to point: Coordinate, band requested: Double = exactBand) -> Double {
    let band = min(max(requested.isFinite ? requested : Self.exactBand, Self.exactBand), Self.maximumBand)
    let fromCenter = Geodesic.distance(point, capCenter)
    guard let polygon else { return fromCenter - capRadius }
    let beyondCap = fromCenter - capRadius
    if beyondCap > band { return beyondCap }
    guard let xy = Gnomonic(center: capCenter).forward(point) else { return max(beyondCap, 0) }
    let p = Point(x: xy.x, y: xy.y)
    let (distance, localInside) = polygon.boundaryDistance(
      from: p, at: point, projectionCenter: capCenter, band: band)
    let inside = localInside ?? polygon.contains(p)
    return inside ? -distance : distance
  }
}

/// A point in a gnomonic projection, metres.
struct Point: Sendable, Hashable {
  var x: Double
  var y: Double
}

/// A polygon's rings in the gnomonic projection centred on its cap center, with a uniform grid
/// of its edges.
final class PlanarPolygon: Sendable {
  /// Projected vertices of each ring (ring 0 the exterior).
  let rings: [[Point]]
  /// The original vertices (for the refinement around the query point).
  let coordinates: [[Coordinate]]
  /// Edges as (ring, index) packed: ring << 32 | index.
  let minX: Double, minY: Double, cellSize: Double
  let columns: Int, rowCount: Int
  /// Edges in each grid cell (row-major), packed.
  let cells: [[UInt64]]
  /// Edges overlapping each row's y-band, packed.
  let rows: [[UInt64]]
  /// Whether each ring runs counterclockwise (positive signed area in the projection, x east
  /// and y north), ring 0 the exterior.
  let counterclockwise: [Bool]

  /// Most grid cells an edge may be listed in, on average over the polygon: 64.
  static let maxCellsPerEdge = 64
  /// Most edge pairs the self-intersection test may compare: 20 million (about a second in a
  /// release build on a slow machine).
  static let maxPairTests = 20_000_000

  /// Projects and indexes the rings.
  ///
  /// - Throws: ``RegionError/tooComplex(vertices:)`` when the edges would take more than
  ///   ``maxCellsPerEdge`` grid cells each on average: long edges crowded beside many short ones
  ///   (such as a comb of long thin teeth), for which the grid saves nothing and would take
  ///   memory in proportion to the vertices times the grid size.
  init(rings: [[Point]], coordinates: [[Coordinate]]) throws(RegionError) {
    self.rings = rings
    self.coordinates = coordinates
    var minX = Double.infinity
    var minY = Double.infinity
    var maxX = -Double.infinity
    var maxY = -Double.infinity
    var edgeCount = 0
    for ring in rings {
      edgeCount += ring.count
      for p in ring {
        minX = min(minX, p.x)
        minY = min(minY, p.y)
        maxX = max(maxX, p.x)
        maxY = max(maxY, p.y)
      }
    }
    let width = max(maxX - minX, 1e-3)
    let height = max(maxY - minY, 1e-3)
    // About one edge per cell on a square grid, at most 1024 x 1024.
    let side = max(1, min(1024, Int(Double(edgeCount).squareRoot().rounded(.up))))
    let cellSize = max(width, height) / Double(side) * 1.000_001
    let columns = max(1, min(side, Int((width / cellSize).rounded(.up))))
    let rowCount = max(1, min(side, Int((height / cellSize).rounded(.up))))
    self.minX = minX
    self.minY = minY
    self.cellSize = cellSize
    self.columns = columns
    self.rowCount = rowCount
    var cells = [[UInt64]](repeating: [], count: columns * rowCount)
    var rows = [[UInt64]](repeating: [], count: rowCount)
    var listed = 0
    let budget = Self.maxCellsPerEdge * edgeCount + 4_096
    for (r, ring) in rings.enumerated() {
      for i in ring.indices {
        let a = ring[i]
        let b = ring[i + 1 == ring.count ? 0 : i + 1]
        let key = UInt64(r) << 32 | UInt64(i)
        let rowLow = Self.clamp(Self.cell((min(a.y, b.y) - minY) / cellSize), rowCount)
        let rowHigh = Self.clamp(Self.cell((max(a.y, b.y) - minY) / cellSize), rowCount)
        for row in rowLow...rowHigh {
          rows[row].append(key)
          // The part of the edge within this row's band, widened by a hair for rounding.
          let bandLow = minY + Double(row) * cellSize
          let bandHigh = bandLow + cellSize
          let (x0, x1) = Self.xRange(a, b, bandLow, bandHigh)
          let columnLow = Self.clamp(Self.cell((x0 - minX) / cellSize), columns)
          let columnHigh = Self.clamp(Self.cell((x1 - minX) / cellSize), columns)
          listed += columnHigh - columnLow + 1
          if listed > budget { throw .tooComplex(vertices: edgeCount) }
          for column in columnLow...columnHigh { cells[row * columns + column].append(key) }
        }
      }
    }
    self.cells = cells
    self.rows = rows
    self.counterclockwise = rings.map { ring in
      var area = 0.0
      for i in ring.indices {
        let a = ring[i]
        let b = ring[i + 1 == ring.count ? 0 : i + 1]
        area += a.x * b.y - b.x * a.y
      }
      return area > 0
    }
  }

  static func clamp(_ value: Int, _ count: Int) -> Int { min(max(value, 0), count - 1) }

  /// The cell index of a coordinate given in cells, rounded down and kept within +-2^20 (far
  /// beyond any grid, which has at most 1,024 cells a side), so it converts to `Int` safely.
  static func cell(_ cells: Double) -> Int {
    guard cells.isFinite else { return cells < 0 ? -(1 << 20) : 1 << 20 }
    return Int(min(max(cells, -Double(1 << 20)), Double(1 << 20)).rounded(.down))
  }

  /// The x range of segment ab within the band `low...high` of y, widened by 1 mm.
  static func xRange(_ a: Point, _ b: Point, _ low: Double, _ high: Double) -> (Double, Double) {
    if a.y == b.y { return (min(a.x, b.x) - 1e-3, max(a.x, b.x) + 1e-3) }
    func x(at y: Double) -> Double { a.x + (b.x - a.x) * (y - a.y) / (b.y - a.y) }
    let y0 = max(min(a.y, b.y), low)
    let y1 = min(max(a.y, b.y), high)
    let xa = x(at: y0)
    let xb = x(at: y1)
    return (min(xa, xb) - 1e-3, max(xa, xb) + 1e-3)
  }

  @inline(__always) func edge(_ key: UInt64) -> (Point, Point) {
    let ring = rings[Int(key >> 32)]
    let i = Int(key & 0xFFFF_FFFF)
    return (ring[i], ring[i + 1 == ring.count ? 0 : i + 1])
  }

  /// Crossing number of the ray from `p` along +x with every ring: odd is inside.
  func contains(_ p: Point) -> Bool {
    let rowIndex = Self.cell((p.y - minY) / cellSize)
    guard rowIndex >= 0, rowIndex < rowCount else { return false }
    var inside = false
    for key in rows[rowIndex] {
      let (a, b) = edge(key)
      if (a.y > p.y) != (b.y > p.y) {
        let x = a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y)
        if p.x < x { inside.toggle() }
      }
    }
    return inside
  }

  /// Squared distance from `p` to segment ab, and the nearest point.
  @inline(__always) static func nearest(_ p: Point, _ a: Point, _ b: Point) -> (Double, Point) {
    let dx = b.x - a.x
    let dy = b.y - a.y
    let length2 = dx * dx + dy * dy
    var t = length2 > 0 ? ((p.x - a.x) * dx + (p.y - a.y) * dy) / length2 : 0
    t = min(max(t, 0), 1)
    let q = Point(x: a.x + t * dx, y: a.y + t * dy)
    let ex = p.x - q.x
    let ey = p.y - q.y
    return (ex * ex + ey * ey, q)
  }

  /// The edges nearest `p` in the plane: every edge within 2% (plus 1 m) of the nearest, at most
  /// 8, found by searching grid rings outwards; or, when no edge is within `limit` (metres in the
  /// plane), no edges and a lower bound (> `limit`) of the planar distance to the nearest.
  func nearestEdges(_ p: Point, limit: Double) -> (edges: [(key: UInt64, distance: Double)], bound: Double?) {
    let column = Self.cell((p.x - minX) / cellSize)
    let row = Self.cell((p.y - minY) / cellSize)
    // Chebyshev distance (in cells) from p's cell to the grid.
    let outsideColumns = column < 0 ? -column : (column >= columns ? column - columns + 1 : 0)
    let outsideRows = row < 0 ? -row : (row >= rowCount ? row - rowCount + 1 : 0)
    var radius = max(outsideColumns, outsideRows)
    var best = Double.infinity
    var found: [(key: UInt64, distance: Double)] = []
    let maxRadius = max(columns, rowCount) + radius + 1
    while radius <= maxRadius {
      for r in (row - radius)...(row + radius) where r >= 0 && r < rowCount {
        let onEdgeRow = r == row - radius || r == row + radius
        var c = column - radius
        while c <= column + radius {
          if c >= 0, c < columns {
            for key in cells[r * columns + c] {
              let (a, b) = edge(key)
              let d = Self.nearest(p, a, b).0.squareRoot()
              if d <= best * 1.02 + 1 {
                found.append((key, d))
                best = min(best, d)
              }
            }
          }
          c += onEdgeRow ? 1 : 2 * radius
          if radius == 0 { break }
        }
      }
      // Cells at the next ring are at least `radius` cells away from p.
      let reach = Double(radius) * cellSize
      if best * 1.02 + 1 <= reach { break }
      if reach > limit, best > limit { return ([], min(best, reach)) }
      radius += 1
    }
    var unique: [(key: UInt64, distance: Double)] = []
    for candidate in found.sorted(by: { $0.distance < $1.distance })
    where candidate.distance <= best * 1.02 + 1 && !unique.contains(where: { $0.key == candidate.key }) {
      unique.append(candidate)
      if unique.count == 8 { break }
    }
    return (unique, nil)
  }

  /// Within this distance of the boundary, metres, the side is taken from the nearest edge in the
  /// projection centred on the point (where that edge is exact near the point) rather than from
  /// the crossing number in the cap's projection, where a long edge far from the center may bow
  /// up to about a metre from its chord.
  static let localSideBand = 5.0

  /// Geodesic distance, metres, from `point` (projected to `p`) to the boundary: the nearest
  /// edges found in the plane, refined in the gnomonic projection centred on `point`; when no
  /// edge is within `band`, a lower bound larger than `band` instead. Within
  /// ``localSideBand`` of the boundary also whether the point is inside, from the nearest edge.
  func boundaryDistance(from p: Point, at point: Coordinate, projectionCenter: Coordinate, band: Double)
    -> (Double, Bool?)
  {
    // The points concerned are within about 1,100 km of the projection's center (the extent
    // limit plus a band of at most 100 km), where the gnomonic projection stretches distances by
    // less than 1/cos^2(10 deg) < 1.04; with 1.11 to spare, no edge within 1.11 band in the plane
    // means none within the band on the ellipsoid.
    let stretch = 1.11
    let (edges, bound) = nearestEdges(p, limit: band * stretch)
    if let bound { return (bound / stretch, nil) }
    let local = Gnomonic(center: point)
    var best = Double.infinity
    var bestSide: Bool? = nil
    for candidate in edges {
      let ringIndex = Int(candidate.key >> 32)
      let ring = coordinates[ringIndex]
      let i = Int(candidate.key & 0xFFFF_FFFF)
      let a = ring[i]
      let b = ring[i + 1 == ring.count ? 0 : i + 1]
      var distance: Double? = nil
      var side: Bool? = nil
      if let pa = local.forward(a), let pb = local.forward(b) {
        let la = Point(x: pa.x, y: pa.y)
        let lb = Point(x: pb.x, y: pb.y)
        let (squared, q) = Self.nearest(Point(x: 0, y: 0), la, lb)
        if squared == 0 {
          distance = 0
        } else if let nearestPoint = local.reverse(x: q.x, y: q.y) {
          distance = Geodesic.distance(point, nearestPoint)
          if let distance, distance < Self.localSideBand {
            side = localSide(ringIndex: ringIndex, edge: i, a: la, b: lb, nearest: q, projection: local)
          }
        }
      }
      if distance == nil {
        // Fall back to the nearest point in the cap's projection.
        let (a2, b2) = edge(candidate.key)
        let q = Self.nearest(p, a2, b2).1
        if let nearestPoint = Gnomonic(center: projectionCenter).reverse(x: q.x, y: q.y) {
          distance = Geodesic.distance(point, nearestPoint)
        }
      }
      if let distance, distance.isFinite, distance < best {
        best = distance
        bestSide = side
      }
    }
    return best.isFinite ? (best, bestSide) : (0, nil)
  }

  /// Whether the origin of `projection` (the point) is inside, judged from edge `edge` of ring
  /// `ringIndex` (projected to `a`-`b`, nearest point `nearest`) and, when the nearest point is a
  /// vertex, the other edge at that vertex; `nil` when it cannot tell (on the edge).
  func localSide(ringIndex: Int, edge i: Int, a: Point, b: Point, nearest: Point, projection: Gnomonic) -> Bool? {
    let origin = Point(x: 0, y: 0)
    // The polygon's interior is on the left of an edge for a counterclockwise exterior or a
    // clockwise hole.
    let interiorLeft = (ringIndex == 0) == counterclockwise[ringIndex]
    func isInteriorSide(_ from: Point, _ to: Point) -> Bool? {
      let turn = Self.orient(from, to, origin)
      return turn == 0 ? nil : (turn > 0) == interiorLeft
    }
    let ring = coordinates[ringIndex]
    let count = ring.count
    let atStart = nearest == a
    let atEnd = nearest == b
    guard atStart || atEnd else { return isInteriorSide(a, b) }
    // Nearest at a vertex: the incoming and outgoing edges there decide together.
    let vertexIndex = atStart ? i : (i + 1) % count
    let previousIndex = (vertexIndex + count - 1) % count
    let nextIndex = (vertexIndex + 1) % count
    guard let previous = atStart ? projection.forward(ring[previousIndex]).map({ Point(x: $0.x, y: $0.y) }) : a,
      let next = atEnd ? projection.forward(ring[nextIndex]).map({ Point(x: $0.x, y: $0.y) }) : b
    else { return nil }
    let vertex = atStart ? a : b
    guard let incoming = isInteriorSide(previous, vertex), let outgoing = isInteriorSide(vertex, next) else {
      return nil
    }
    let turn = Self.orient(previous, vertex, next)
    let convex = (turn > 0) == interiorLeft
    return convex ? (incoming && outgoing) : (incoming || outgoing)
  }

  /// Orientation of c relative to ab: > 0 left, < 0 right, 0 collinear.
  @inline(__always) static func orient(_ a: Point, _ b: Point, _ c: Point) -> Double {
    (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x)
  }

  /// Whether c (collinear with ab) lies within ab's bounding box.
  @inline(__always) static func onSegment(_ a: Point, _ b: Point, _ c: Point) -> Bool {
    min(a.x, b.x) <= c.x && c.x <= max(a.x, b.x) && min(a.y, b.y) <= c.y && c.y <= max(a.y, b.y)
  }

  /// Whether segments ab and cd share any point.
  static func intersects(_ a: Point, _ b: Point, _ c: Point, _ d: Point) -> Bool {
    let d1 = orient(c, d, a)
    let d2 = orient(c, d, b)
    let d3 = orient(a, b, c)
    let d4 = orient(a, b, d)
    if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) {
      return true
    }
    if d1 == 0 && onSegment(c, d, a) { return true }
    if d2 == 0 && onSegment(c, d, b) { return true }
    if d3 == 0 && onSegment(a, b, c) { return true }
    if d4 == 0 && onSegment(a, b, d) { return true }
    return false
  }

  /// Checks that no two edges cross, touch or overlap (adjacent edges of a ring may share only
  /// their common vertex), that holes lie inside the exterior and outside each other.
  ///
  /// - Throws: ``RegionError/selfIntersection(ring:edge:otherRing:otherEdge:)``,
  ///   ``RegionError/holeOutsideExterior(hole:)``, or ``RegionError/tooComplex(vertices:)`` when
  ///   more than ``maxPairTests`` pairs would have to be compared.
  func validate() throws(RegionError) {
    // Count the comparisons first, so that a polygon that needs too many is refused at once.
    var pairs = 0
    for cell in cells where cell.count > 1 {
      pairs += cell.count * (cell.count - 1) / 2
      if pairs > Self.maxPairTests { throw .tooComplex(vertices: rings.reduce(0) { $0 + $1.count }) }
    }
    for cell in cells where cell.count > 1 {
      for first in 0..<(cell.count - 1) {
        for second in (first + 1)..<cell.count {
          let k1 = cell[first]
          let k2 = cell[second]
          let (a, b) = edge(k1)
          let (c, d) = edge(k2)
          let r1 = Int(k1 >> 32)
          let r2 = Int(k2 >> 32)
          let i1 = Int(k1 & 0xFFFF_FFFF)
          let i2 = Int(k2 & 0xFFFF_FFFF)
          if r1 == r2 {
            let n = rings[r1].count
            let next1 = i1 + 1 == n ? 0 : i1 + 1
            let next2 = i2 + 1 == n ? 0 : i2 + 1
            if next1 == i2 || next2 == i1 {
              // Adjacent edges: they share one vertex; they must not fold back over each other
              // (and a triangle's edges are all adjacent, each pair sharing exactly one vertex).
              let (shared, p, q) = next1 == i2 ? (b, a, d) : (a, b, c)
              if Self.orient(p, shared, q) == 0 {
                // Collinear: overlap when p and q are on the same side of `shared`.
                let dot = (p.x - shared.x) * (q.x - shared.x) + (p.y - shared.y) * (q.y - shared.y)
                if dot > 0 {
                  throw .selfIntersection(ring: r1, edge: min(i1, i2), otherRing: r2, otherEdge: max(i1, i2))
                }
              }
              continue
            }
          }
          if Self.intersects(a, b, c, d) {
            let swap = (r1, i1) > (r2, i2)
            throw .selfIntersection(
              ring: swap ? r2 : r1, edge: swap ? i2 : i1, otherRing: swap ? r1 : r2, otherEdge: swap ? i1 : i2)
          }
        }
      }
    }
    guard rings.count > 1 else { return }
    for hole in 1..<rings.count {
      let p = rings[hole][0]
      if !ringContains(0, p) { throw .holeOutsideExterior(hole: hole) }
      for other in 1..<rings.count where other != hole && ringContains(other, p) {
        throw .holeOutsideExterior(hole: hole)
      }
    }
  }

  /// Crossing-number test against one ring alone.
  func ringContains(_ ringIndex: Int, _ p: Point) -> Bool {
    let ring = rings[ringIndex]
    var inside = false
    for i in ring.indices {
      let a = ring[i]
      let b = ring[i + 1 == ring.count ? 0 : i + 1]
      if (a.y > p.y) != (b.y > p.y) {
        let x = a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y)
        if p.x < x { inside.toggle() }
      }
    }
    return inside
  }
}
