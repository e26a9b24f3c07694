import NMEA
import LocationModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A closed route through waypoints, followed at constant speed: after the last waypoint it
/// returns to the first. Each leg is the great circle between its waypoints on a sphere of radius
/// ``Geodesy/earthRadius`` (the shorter way round, so a leg across the antimeridian stays short
/// and one over a pole goes over it); positions and courses are interpolated along it. Against the
/// WGS84 ellipsoid's geodesic this is within 0.5 % in length and a few tenths of a degree in
/// course.
public struct SimulatedRoute: Sendable, Hashable {
  /// The waypoints, WGS84 degrees, in order.
  public let waypoints: [Coordinate]
  /// Elevation of each waypoint in metres above MSL, when at least one waypoint has one: a
  /// waypoint without one takes the elevation interpolated (by distance along the route) between
  /// the nearest waypoints that have one.
  public let elevations: [Double]?
  /// Unit vectors (earth-centred) of the waypoints.
  private let vectors: [Vector]
  /// Cumulative distance at the start of each leg, metres; last element is the loop length.
  private let cumulative: [Double]

  /// An earth-centred unit vector.
  struct Vector: Sendable, Hashable {
    var x: Double
    var y: Double
    var z: Double

    init(x: Double, y: Double, z: Double) {
      self.x = x
      self.y = y
      self.z = z
    }

    init(_ coordinate: Coordinate) {
      let lat = coordinate.latitude * .pi / 180
      let lon = coordinate.longitude * .pi / 180
      self.init(x: cos(lat) * cos(lon), y: cos(lat) * sin(lon), z: sin(lat))
    }

    var coordinate: Coordinate {
      let horizontal = (x * x + y * y).squareRoot()
      let latitude = atan2(z, horizontal) * 180 / .pi
      // At a pole the longitude is undefined: 0.
      let longitude = horizontal < 1e-15 ? 0 : atan2(y, x) * 180 / .pi
      return Coordinate(latitude: latitude, longitude: longitude == -180 ? 180 : longitude)
    }

    static func + (a: Vector, b: Vector) -> Vector {
      Vector(x: a.x + b.x, y: a.y + b.y, z: a.z + b.z)
    }
    static func * (a: Vector, s: Double) -> Vector { Vector(x: a.x * s, y: a.y * s, z: a.z * s) }
    func dot(_ b: Vector) -> Double { x * b.x + y * b.y + z * b.z }
    func cross(_ b: Vector) -> Vector {
      Vector(x: y * b.z - z * b.y, y: z * b.x - x * b.z, z: x * b.y - y * b.x)
    }
    var norm: Double { dot(self).squareRoot() }

    /// Central angle to `b`, radians, `0...π` (atan2 form: exact for tiny and near-π angles).
    func angle(to b: Vector) -> Double { atan2(cross(b).norm, dot(b)) }
  }

  /// The default route: a closed loop of about 1.9 km around 3.1386 N, 101.6044 E.
  public static let defaultLoop = SimulatedRoute(waypoints: [
    Coordinate(latitude: 3.1406, longitude: 101.6024),
    Coordinate(latitude: 3.1406, longitude: 101.6064),
    Coordinate(latitude: 3.1386, longitude: 101.6074),
    Coordinate(latitude: 3.1366, longitude: 101.6064),
    Coordinate(latitude: 3.1366, longitude: 101.6024),
    Coordinate(latitude: 3.1386, longitude: 101.6014),
  ])

  /// Creates a route through `waypoints` (at least one; a single waypoint is a fixed position).
  /// `elevations`, when given, must have one value per waypoint (metres above MSL).
  public init(waypoints: [Coordinate], elevations: [Double]? = nil) {
    self.init(
      waypoints: waypoints,
      partialElevations: elevations?.count == waypoints.count ? elevations?.map { $0 } : nil)
  }

  /// Creates a route from GPX points, using the elevation of every point that has one (see
  /// ``elevations`` for points without).
  public init(gpx points: [GPXPoint]) {
    self.init(waypoints: points.map(\.coordinate), partialElevations: points.map(\.elevation))
  }

  private init(waypoints: [Coordinate], partialElevations: [Double?]?) {
    let points = waypoints.isEmpty ? [Coordinate(latitude: 3.1386, longitude: 101.6044)] : waypoints
    self.waypoints = points
    let vectors = points.map(Vector.init)
    self.vectors = vectors
    var cumulative: [Double] = [0]
    for index in points.indices {
      let next = (index + 1) % points.count
      cumulative.append(
        cumulative[index] + vectors[index].angle(to: vectors[next]) * Geodesy.earthRadius)
    }
    self.cumulative = cumulative
    self.elevations = Self.fill(
      partialElevations?.count == points.count ? partialElevations ?? [] : [], cumulative)
  }

  /// Fills missing elevations by interpolating along the closed route between known ones;
  /// `nil` when none is known.
  private static func fill(_ partial: [Double?], _ cumulative: [Double]) -> [Double]? {
    let known = partial.indices.filter { partial[$0] != nil }
    guard !known.isEmpty else { return nil }
    let count = partial.count
    let length = cumulative[count]
    return partial.indices.map { index in
      if let value = partial[index] { return value }
      // The nearest known waypoints before and after, around the loop.
      let before = known.last { $0 < index } ?? known[known.count - 1]
      let after = known.first { $0 > index } ?? known[0]
      let valueBefore = partial[before] ?? 0
      let valueAfter = partial[after] ?? 0
      var span = cumulative[after] - cumulative[before]
      if span <= 0 { span += length }
      var along = cumulative[index] - cumulative[before]
      if along < 0 { along += length }
      guard span > 0 else { return valueBefore }
      return valueBefore + (valueAfter - valueBefore) * along / span
    }
  }

  /// The leg (`0..<waypoints.count`: leg `i` runs from waypoint `i` to the next, the last leg
  /// closes the loop) at `distance` metres along the route, wrapping at ``length``.
  public func leg(atDistance distance: Double) -> Int {
    guard length > 0, distance.isFinite else { return 0 }
    var d = distance.truncatingRemainder(dividingBy: length)
    if d < 0 { d += length }
    var leg = 0
    for index in waypoints.indices where cumulative[index] <= d { leg = index }
    return leg
  }

  /// Length of one lap (the closing leg included), metres.
  public var length: Double { cumulative[cumulative.count - 1] }

  /// Position, course (degrees true, `0..<360`, the direction of the great circle at that point;
  /// `nil` on a zero-length route or leg) and elevation (when the waypoints have elevations) at
  /// `distance` metres along the route, wrapping at ``length``.
  public func point(atDistance distance: Double) -> (
    coordinate: Coordinate, course: Double?, elevation: Double?
  ) {
    guard length > 0, distance.isFinite else {
      return (waypoints[0], nil, elevations?[0])
    }
    var d = distance.truncatingRemainder(dividingBy: length)
    if d < 0 { d += length }
    var leg = 0
    var low = 0
    var high = waypoints.count - 1
    while low <= high {
      let mid = (low + high) / 2
      if cumulative[mid] <= d {
        leg = mid
        low = mid + 1
      } else {
        high = mid - 1
      }
    }
    let next = (leg + 1) % waypoints.count
    let legLength = cumulative[leg + 1] - cumulative[leg]
    let t = legLength > 0 ? min(1, max(0, (d - cumulative[leg]) / legLength)) : 0
    let elevation = elevations.map { $0[leg] + ($0[next] - $0[leg]) * t }
    guard legLength > 0 else { return (waypoints[leg], nil, elevation) }
    let a = vectors[leg]
    let b = vectors[next]
    let angle = legLength / Geodesy.earthRadius
    // Spherical linear interpolation, and the direction of travel there (the derivative).
    let sinAngle = sin(angle)
    let position: Vector
    let tangent: Vector
    if Self.isAntipodal(a, b) {
      // Every great circle joins antipodal points: take the one along the meridian of `a`,
      // northwards (from a pole, along the meridian of 0), so the leg is travelled all the same.
      let direction = Self.northAxis(at: a)
      let travelled = t * angle
      position = a * cos(travelled) + direction * sin(travelled)
      tangent = a * -sin(travelled) + direction * cos(travelled)
    } else if sinAngle < 1e-12 {
      position = a
      tangent = b + a * -1
    } else {
      position =
        a * (sin((1 - t) * angle) / sinAngle) + b * (sin(t * angle) / sinAngle)
      tangent = a * (-cos((1 - t) * angle) / sinAngle) + b * (cos(t * angle) / sinAngle)
    }
    let coordinate = position.coordinate
    return (coordinate, Self.course(at: position, along: tangent), elevation)
  }

  /// Whether `a` and `b` are antipodal, or so close to it (within about 6 mm on the ground) that
  /// the great circle through them, and so the direction between them, is undefined.
  public static func isAntipodal(_ a: Coordinate, _ b: Coordinate) -> Bool {
    isAntipodal(Vector(a), Vector(b))
  }

  static func isAntipodal(_ a: Vector, _ b: Vector) -> Bool {
    a.dot(b) < 0 && a.cross(b).norm < 1e-9
  }

  /// The unit vector pointing north at `p` (at a pole, along the meridian of 0 away from it).
  static func northAxis(at p: Vector) -> Vector {
    let horizontal = (p.x * p.x + p.y * p.y).squareRoot()
    if horizontal < 1e-12 { return Vector(x: p.z > 0 ? -1 : 1, y: 0, z: 0) }
    return p.cross(Vector(x: -p.y / horizontal, y: p.x / horizontal, z: 0))
  }

  /// Unit vectors pointing east and north at `position` (a unit vector); at a pole, where both
  /// are undefined, those of the meridian of longitude 0.
  static func localAxes(at position: Vector) -> (east: Vector, north: Vector) {
    let horizontal = (position.x * position.x + position.y * position.y).squareRoot()
    guard horizontal >= 1e-12 else {
      return (Vector(x: 0, y: 1, z: 0), Vector(x: position.z > 0 ? -1 : 1, y: 0, z: 0))
    }
    let east = Vector(x: -position.y / horizontal, y: position.x / horizontal, z: 0)
    return (east, position.cross(east))
  }

  /// The direction of `tangent` at `position`, degrees true `0..<360`; at a pole, the direction
  /// relative to the meridian of longitude 0 (as a compass there would have to be).
  static func course(at position: Vector, along tangent: Vector) -> Double? {
    let (east, north) = localAxes(at: position)
    let e = tangent.dot(east)
    let n = tangent.dot(north)
    guard e != 0 || n != 0 else { return nil }
    var course = atan2(e, n) * 180 / .pi
    if course < 0 { course += 360 }
    if course >= 360 { course = 0 }
    return course
  }

  /// The coordinate `east` and `north` metres (small distances) from `coordinate`, on the sphere:
  /// valid across the antimeridian and at the poles, where longitude and latitude wrap.
  static func offset(_ coordinate: Coordinate, east: Double, north: Double) -> Coordinate {
    guard east != 0 || north != 0 else { return coordinate }
    let p = Vector(coordinate)
    let (eastAxis, northAxis) = localAxes(at: p)
    let distance = (east * east + north * north).squareRoot()
    let angle = distance / Geodesy.earthRadius
    let direction = (eastAxis * (east / distance)) + (northAxis * (north / distance))
    return (p * cos(angle) + direction * sin(angle)).coordinate
  }

  /// Shortest distance in metres from `coordinate` to the route (its great-circle legs, the
  /// closing leg included).
  public func distance(from coordinate: Coordinate) -> Double {
    let p = Vector(coordinate)
    var best = Double.infinity
    for leg in waypoints.indices {
      let a = vectors[leg]
      let b = vectors[(leg + 1) % waypoints.count]
      var angle = min(p.angle(to: a), p.angle(to: b))
      let normal = a.cross(b)
      let size = normal.norm
      if size > 1e-15 {
        let n = normal * (1 / size)
        let offPlane = p.dot(n)
        // The foot of the perpendicular on the great circle; inside the leg when it lies
        // between a and b.
        let foot = p + n * -offPlane
        if a.cross(foot).dot(n) >= 0 && foot.cross(b).dot(n) >= 0 && foot.norm > 1e-15 {
          angle = min(angle, abs(asin(max(-1, min(1, offPlane)))))
        }
      }
      best = min(best, angle * Geodesy.earthRadius)
    }
    return best
  }
}
