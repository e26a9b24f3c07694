#if canImport(Glibc)
  import Glibc
#endif
import LocationModel
import Testing

@testable import Regions

/// The point-in-region test and the signed distance to the boundary.
@Suite struct GeometryTests {
  let origin = Coordinate(latitude: 48.8566, longitude: 2.3522)

  @Test func circleDistanceIsGeodesicDistanceMinusRadius() throws {
    let region = try Region(id: "c", shape: .circle(center: origin, radius: 250))
    for (azimuth, distance) in [(0.0, 0.0), (45.0, 100.0), (90.0, 249.0), (180.0, 251.0), (270.0, 5_000.0)] {
      let point = offset(origin, azimuth, distance)
      let expected = Geodesic.distance(origin, point) - 250
      #expect(abs(region.signedDistance(to: point) - expected) < 1e-6)
    }
  }

  @Test func circleOfOneMetreAndOfHundredKilometres() throws {
    let small = try Region(id: "small", shape: .circle(center: origin, radius: 1))
    #expect(small.signedDistance(to: offset(origin, 10, 0.5)) < 0)
    #expect(small.signedDistance(to: offset(origin, 10, 1.5)) > 0)
    let large = try Region(id: "large", shape: .circle(center: origin, radius: 100_000))
    #expect(abs(large.signedDistance(to: offset(origin, 200, 99_990)) + 10) < 0.01)
    #expect(abs(large.signedDistance(to: offset(origin, 200, 100_010)) - 10) < 0.01)
  }

  /// A square 2 km on a side (geodesic edges): inside and outside, distance to the nearest edge.
  @Test func squareDistanceToNearestEdge() throws {
    let corners = [45.0, 135, 225, 315].map { offset(origin, $0, 1_000 * 2.0.squareRoot()) }
    let region = try Region(id: "sq", shape: .polygon(exterior: corners, holes: []))
    #expect(region.signedDistance(to: origin) < -990)
    #expect(region.signedDistance(to: origin) > -1_010)
    // 30 m inside the north edge and 30 m outside it (midpoint of the edge).
    let north = offset(origin, 0, 1_000)
    let inside = region.signedDistance(to: offset(north, 180, 30))
    let outside = region.signedDistance(to: offset(north, 0, 30))
    #expect(abs(inside + 30) < 1, "\(inside)")
    #expect(abs(outside - 30) < 1, "\(outside)")
    // Near a corner, outside: the distance is to the corner vertex.
    let corner = corners[0]
    let beyond = offset(corner, 45, 50)
    #expect(abs(region.signedDistance(to: beyond) - Geodesic.distance(beyond, corner)) < 0.5)
    // Far away: a lower bound, and positive.
    let far = offset(origin, 90, 50_000)
    let farDistance = region.signedDistance(to: far)
    #expect(farDistance > 45_000 && farDistance <= 49_000)
  }

  /// A polygon across the antimeridian: edges are geodesics, so the short way across.
  @Test func polygonAcrossTheAntimeridian() throws {
    let exterior = [
      Coordinate(latitude: -17.0, longitude: 179.9), Coordinate(latitude: -17.0, longitude: -179.9),
      Coordinate(latitude: -16.8, longitude: -179.9), Coordinate(latitude: -16.8, longitude: 179.9),
    ]
    let region = try Region(id: "fiji", shape: .polygon(exterior: exterior, holes: []))
    #expect(region.signedDistance(to: Coordinate(latitude: -16.9, longitude: 180)) < -10_000)
    #expect(region.signedDistance(to: Coordinate(latitude: -16.9, longitude: -180)) < -10_000)
    #expect(region.signedDistance(to: Coordinate(latitude: -16.9, longitude: 179.95)) < -5_000)
    #expect(region.signedDistance(to: Coordinate(latitude: -16.9, longitude: -179.95)) < -5_000)
    // 0.1 degrees (10.6 km) west of the west edge: beyond the cap's 1 km band, a lower bound.
    let west = region.signedDistance(to: Coordinate(latitude: -16.9, longitude: 179.8))
    #expect(west > 5_000 && west <= 10_700)
    #expect(region.signedDistance(to: Coordinate(latitude: -16.9, longitude: 0)) > 1_000_000)
    // The east edge is the meridian -179.9: 100 m east of it is 100 m outside.
    let edgePoint = Coordinate(latitude: -16.9, longitude: -179.9)
    let east = offset(edgePoint, 90, 100)
    #expect(abs(region.signedDistance(to: east) - 100) < 0.5)
  }

  /// A ring at 85 degrees north around the pole contains the pole.
  @Test func ringAroundTheNorthPoleContainsThePole() throws {
    let exterior = stride(from: 0.0, to: 360.0, by: 10.0).map {
      Coordinate(latitude: 85, longitude: $0 > 180 ? $0 - 360 : $0)
    }
    let region = try Region(id: "arctic", shape: .polygon(exterior: exterior, holes: []))
    // Deep inside and far outside the distance is a bound beyond 1 km.
    #expect(region.signedDistance(to: Coordinate(latitude: 90, longitude: 0)) < -1_000)
    #expect(region.signedDistance(to: Coordinate(latitude: 89, longitude: -123)) < -1_000)
    #expect(region.signedDistance(to: Coordinate(latitude: 86, longitude: 95)) < -1_000)
    #expect(region.signedDistance(to: Coordinate(latitude: 84, longitude: 5)) > 1_000)
    // Near the boundary it is exact: 200 m north and south of a vertex, along the meridian (the
    // edges leave the vertex almost east and west, bulging poleward, so the vertex is nearest
    // to the south and an edge slightly nearer than the vertex to the north).
    let vertex = Coordinate(latitude: 85, longitude: 40)
    let southOfVertex = offset(vertex, 180, 200)
    #expect(abs(region.signedDistance(to: southOfVertex) - 200) < 0.01)
    let northOfVertex = region.signedDistance(to: offset(vertex, 0, 200))
    #expect(northOfVertex < 0 && northOfVertex > -200)
    // The same ring clockwise and for the south pole.
    let south = try Region(
      id: "antarctic", shape: .polygon(exterior: exterior.reversed().map { Coordinate(latitude: -85, longitude: $0.longitude) }, holes: []))
    #expect(south.signedDistance(to: Coordinate(latitude: -90, longitude: 0)) < -1_000)
    #expect(south.signedDistance(to: Coordinate(latitude: 90, longitude: 0)) > 10_000_000)
  }

  /// A point in a hole is outside, at its distance from the hole's ring.
  @Test func pointInHoleIsOutside() throws {
    let exterior = ring(around: origin, radius: 2_000, count: 24)
    let hole = ring(around: origin, radius: 500, count: 24, clockwise: true)
    let region = try Region(id: "donut", shape: .polygon(exterior: exterior, holes: [hole]))
    let center = region.signedDistance(to: origin)
    #expect(center > 490 && center < 500.5, "\(center)")
    let inRing = region.signedDistance(to: offset(origin, 33, 1_200))
    #expect(inRing < -600 && inRing > -800, "\(inRing)")
    // 20 m inside the hole's ring towards a vertex: outside the polygon, nearest to the two
    // edges at the vertex, which meet at 165 degrees (a 24-gon): 20 sin(82.5 deg) = 19.83 m.
    let nearHole = region.signedDistance(to: offset(origin, 0, 480))
    #expect(abs(nearHole - 20 * sin(82.5 * .pi / 180)) < 0.02, "\(nearHole)")
    #expect(region.signedDistance(to: offset(origin, 33, 2_100)) > 50)
  }
}

/// Points a fraction of a metre from a long edge far from the polygon's center, where the
/// geodesic bows about a metre from its chord in the center's projection: the sign comes from
/// the edge itself.
@Suite struct LongEdgeSignTests {
  @Test(arguments: [0, 1, 2])
  func signIsRightBesideALongEdge(edgeIndex: Int) throws {
    // A triangle 1,900 km across at 45 N: edges of about 1,650 km, their middles 480 km from the
    // center and their ends 950 km.
    let center = Coordinate(latitude: 45, longitude: 10)
    let exterior = [30.0, 150, 270].map { Geodesic.direct(from: center, azimuth: $0, distance: 950_000).coordinate }
    let region = try Region(id: "t", shape: .polygon(exterior: exterior, holes: []))
    let a = exterior[edgeIndex]
    let b = exterior[(edgeIndex + 1) % 3]
    let line = Geodesic.inverse(a, b)
    for fraction in [0.1, 0.25, 0.5, 0.75, 0.9] {
      let onEdge = Geodesic.direct(from: a, azimuth: line.initialAzimuth, distance: line.distance * fraction)
      // The ring runs clockwise seen from above (azimuths increase), so the interior is on the
      // right of each edge: azimuth + 90.
      let inside = Geodesic.direct(from: onEdge.coordinate, azimuth: onEdge.finalAzimuth + 90, distance: 0.3).coordinate
      let outside = Geodesic.direct(from: onEdge.coordinate, azimuth: onEdge.finalAzimuth - 90, distance: 0.3).coordinate
      let dIn = region.signedDistance(to: inside)
      let dOut = region.signedDistance(to: outside)
      #expect(abs(dIn + 0.3) < 0.001, "edge \(edgeIndex) at \(fraction): \(dIn)")
      #expect(abs(dOut - 0.3) < 0.001, "edge \(edgeIndex) at \(fraction): \(dOut)")
    }
  }
}

/// Points a fraction of a metre from a convex and a reflex corner of an L-shaped polygon.
@Suite struct CornerSignTests {
  @Test func signNearConvexAndReflexCorners() throws {
    let sw = Coordinate(latitude: 10, longitude: 20)
    let se = offset(sw, 90, 2_000)
    let ne = offset(se, 0, 1_000)
    let mid = offset(ne, 270, 1_000)
    let top = offset(mid, 0, 1_000)
    let nw = offset(sw, 0, 2_000)
    let region = try Region(id: "L", shape: .polygon(exterior: [sw, se, ne, mid, top, nw], holes: []))
    // Convex corner se (interior to the north-west): outward along the bisector the corner is
    // nearest; inward both edges are at 0.3 sin 45 degrees.
    #expect(abs(region.signedDistance(to: offset(se, 135, 0.3)) - 0.3) < 0.002)
    #expect(abs(region.signedDistance(to: offset(se, 315, 0.3)) + 0.3 * 0.5.squareRoot()) < 0.002)
    // Reflex corner mid (the notch is to the north-east): into the notch it is outside with both
    // edges at 0.3 sin 45; the other way inside with the corner nearest.
    #expect(abs(region.signedDistance(to: offset(mid, 45, 0.3)) - 0.3 * 0.5.squareRoot()) < 0.002)
    #expect(abs(region.signedDistance(to: offset(mid, 225, 0.3)) + 0.3) < 0.002)
    // Beside the reflex corner, just inside each edge and just outside.
    #expect(region.signedDistance(to: offset(offset(mid, 0, 0.2), 270, 0.1)) < 0)
    #expect(region.signedDistance(to: offset(offset(mid, 0, 0.2), 90, 0.1)) > 0)
    #expect(region.signedDistance(to: offset(offset(mid, 90, 0.2), 180, 0.1)) < 0)
    #expect(region.signedDistance(to: offset(offset(mid, 90, 0.2), 0, 0.1)) > 0)
  }
}
