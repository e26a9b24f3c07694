import NMEA
import LocationModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A deterministic pseudo-random generator: xoshiro256** (Blackman and Vigna, 2018) seeded through
/// SplitMix64, so one 64-bit seed gives the same sequence on every platform and run.
public struct SeededGenerator: RandomNumberGenerator, Sendable, Hashable {
  private var state: (UInt64, UInt64, UInt64, UInt64)

  /// Creates a generator from `seed` (any value, zero included).
  public init(seed: UInt64) {
    var splitMix = seed
    func nextSplitMix() -> UInt64 {
      splitMix &+= 0x9E37_79B9_7F4A_7C15
      var z = splitMix
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    state = (nextSplitMix(), nextSplitMix(), nextSplitMix(), nextSplitMix())
  }

  /// The next 64 random bits.
  public mutating func next() -> UInt64 {
    let result = ((state.1 &* 5) << 7 | (state.1 &* 5) >> 57) &* 9
    let t = state.1 << 17
    state.2 ^= state.0
    state.3 ^= state.1
    state.1 ^= state.2
    state.0 ^= state.3
    state.2 ^= t
    state.3 = state.3 << 45 | state.3 >> 19
    return result
  }

  /// A uniform value in `(0, 1]` (53 bits).
  public mutating func nextUnitInterval() -> Double {
    Double((next() >> 11) + 1) * 0x1p-53
  }

  /// Two independent standard normal values (Box-Muller transform).
  public mutating func nextGaussianPair() -> (Double, Double) {
    let u1 = nextUnitInterval()
    let u2 = nextUnitInterval()
    let radius = (-2 * log(u1)).squareRoot()
    let angle = 2 * Double.pi * u2
    return (radius * cos(angle), radius * sin(angle))
  }

  /// Equality compares the internal state.
  public static func == (lhs: SeededGenerator, rhs: SeededGenerator) -> Bool {
    lhs.state == rhs.state
  }

  /// Hashes the internal state.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(state.0)
    hasher.combine(state.1)
    hasher.combine(state.2)
    hasher.combine(state.3)
  }
}

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

/// A time range, relative to the start of a simulation, with no fix at all (a tunnel).
public struct SimulationOutage: Sendable, Hashable {
  /// When the outage begins (inclusive), since the start.
  public var start: Duration
  /// When it ends (exclusive), since the start.
  public var end: Duration

  /// Creates an outage from `start` until `end`.
  public init(start: Duration, end: Duration) {
    self.start = start
    self.end = end
  }

  /// Whether `elapsed` falls inside the outage.
  public func contains(_ elapsed: Duration) -> Bool { elapsed >= start && elapsed < end }
}

/// A scheduled change of fix mode (3D, 2D or no fix) from a time since the start onwards.
public struct SimulationModeChange: Sendable, Hashable {
  /// When the change takes effect, since the start.
  public var at: Duration
  /// The fix mode from then on: ``FixMode/fix3D``, ``FixMode/fix2D`` or ``FixMode/noFix``.
  public var mode: FixMode

  /// Creates a change to `mode` at `at`.
  public init(at: Duration, mode: FixMode) {
    self.at = at
    self.mode = mode
  }
}

/// What the simulated GPS does.
public struct SimulationParameters: Sendable, Hashable {
  /// The route to follow.
  public var route: SimulatedRoute
  /// Speed along the route, m/s, `>= 0`.
  public var speed: Double
  /// Update rate, Hz, `1...10`.
  public var rate: Double
  /// Standard deviation of the Gaussian position noise, metres per axis (east, north), `>= 0`;
  /// altitude noise is 1.5 times this.
  public var noiseSigma: Double
  /// Seed of the pseudo-random generator: the same seed gives the same fixes.
  public var seed: UInt64
  /// Ranges with no fix at all.
  public var outages: [SimulationOutage]
  /// Fix mode degradations and recoveries; 3D until the first change.
  public var modeChanges: [SimulationModeChange]
  /// Altitude above MSL in metres when the route has no elevations.
  public var altitude: Double

  /// Creates parameters; the defaults follow the default loop at 10 m/s, 1 Hz, 2.5 m noise, seed 1.
  public init(
    route: SimulatedRoute = .defaultLoop, speed: Double = 10, rate: Double = 1,
    noiseSigma: Double = 2.5,
    seed: UInt64 = 1, outages: [SimulationOutage] = [], modeChanges: [SimulationModeChange] = [],
    altitude: Double = 60
  ) {
    self.route = route
    self.speed = speed
    self.rate = rate
    self.noiseSigma = noiseSigma
    self.seed = seed
    self.outages = outages
    self.modeChanges = modeChanges
    self.altitude = altitude
  }

  /// The fix mode scheduled at `elapsed` (ignoring outages).
  public func scheduledMode(at elapsed: Duration) -> FixMode {
    var mode = FixMode.fix3D
    for change in modeChanges.sorted(by: { $0.at < $1.at }) where change.at <= elapsed {
      mode = change.mode
    }
    return mode
  }
}

/// One epoch of the simulated GPS.
public struct SimulatedEpoch: Sendable, Hashable {
  /// 0-based epoch number.
  public var index: Int
  /// Time since the start of the simulation.
  public var elapsed: Duration
  /// The fix the receiver reports (noise, mode and outage applied).
  public var fix: Fix
  /// The exact position on the route before noise.
  public var truePosition: Coordinate
  /// Whether the epoch falls in an outage (the backend emits no fix then).
  public var inOutage: Bool
}

/// Produces the simulated GPS's epochs synchronously, one per call, without any clock: the
/// backend paces it; other producers (an NMEA writer) can use it directly and get the same fixes.
public struct SimulatedFixGenerator: Sendable, IteratorProtocol {
  /// The parameters in use.
  public let parameters: SimulatedParametersBox
  private var random: SeededGenerator
  private var index = 0
  private let startTime: Int64

  /// Creates a generator whose epoch 0 is at UTC `startTime` (milliseconds since 1970).
  public init(parameters: SimulationParameters, startTime: Int64) {
    self.parameters = SimulatedParametersBox(parameters)
    self.random = SeededGenerator(seed: parameters.seed)
    self.startTime = startTime
  }

  /// The interval between epochs.
  public var period: Duration { .milliseconds(1000 / max(1, min(10, parameters.value.rate))) }

  /// The next epoch (never ends).
  public mutating func next() -> SimulatedEpoch? {
    let p = parameters.value
    let rate = max(1, min(10, p.rate.isFinite ? p.rate : 1))
    let elapsedMs = Int64((Double(index) * 1000 / rate).rounded())
    let elapsed = Duration.milliseconds(elapsedMs)
    let speed = p.speed.isFinite && p.speed >= 0 ? p.speed : 0
    let sigma = p.noiseSigma.isFinite && p.noiseSigma >= 0 ? p.noiseSigma : 0
    let onRoute = p.route.point(atDistance: speed * Double(elapsedMs) / 1000)
    let (noiseEast, noiseNorth) = random.nextGaussianPair()
    let (noiseUp, _) = random.nextGaussianPair()
    let inOutage = p.outages.contains { $0.contains(elapsed) }
    let mode = inOutage ? FixMode.noFix : p.scheduledMode(at: elapsed)

    var fix = Fix(mode: mode)
    let time = startTime + elapsedMs
    fix.time = time
    fix.timeOfDay = Int32(((time % 86_400_000) + 86_400_000) % 86_400_000)
    let seconds = Double(elapsedMs) / 1000
    fix.satellites =
      inOutage ? [] : Self.sky(at: seconds, used: mode == .fix3D ? 9 : mode == .fix2D ? 4 : 0)
    switch mode {
    case .fix3D, .fix2D:
      fix.quality = .gps
      let base = onRoute.coordinate
      let east = noiseEast * sigma
      let north = noiseNorth * sigma
      fix.coordinate = SimulatedRoute.offset(base, east: east, north: north)
      // A route of one point (or of repeated points) is a fixed position: no motion to report.
      let moving = speed > 0 && p.route.length > 0
      fix.speedOverGround = moving ? speed : 0
      fix.courseOverGround = moving ? onRoute.course : nil
      fix.magneticVariation = nil
      if mode == .fix3D {
        fix.altitudeMSL = (onRoute.elevation ?? p.altitude) + noiseUp * sigma * 1.5
        fix.geoidSeparation = 7.0
        fix.hdop = 0.9
        fix.vdop = 1.3
        fix.pdop = 1.6
        fix.satellitesUsed = 9
      } else {
        fix.hdop = 1.9
        fix.satellitesUsed = 4
      }
      if sigma > 0 {
        var estimates = ErrorEstimates()
        estimates.latitude = sigma
        estimates.longitude = sigma
        estimates.semiMajor = sigma
        estimates.semiMinor = sigma
        estimates.orientation = 0
        estimates.rangeRMS = sigma
        if mode == .fix3D { estimates.altitude = sigma * 1.5 }
        fix.errorEstimates = estimates
      }
    default:
      fix.quality = .invalid
      fix.satellitesUsed = 0
    }
    let epoch = SimulatedEpoch(
      index: index, elapsed: elapsed, fix: fix, truePosition: onRoute.coordinate, inOutage: inOutage
    )
    index += 1
    return epoch
  }

  /// A plausible, slowly turning GPS sky: twelve satellites, the first `used` in the solution.
  static func sky(at seconds: Double, used: Int) -> [Satellite] {
    let prns = [2, 5, 7, 9, 13, 15, 18, 20, 24, 27, 29, 30]
    var satellites: [Satellite] = []
    satellites.reserveCapacity(prns.count)
    for (index, prn) in prns.enumerated() {
      let baseElevation = 75 - Double(index) * 6
      let elevation = (baseElevation + 5 * sin(seconds / 3600 + Double(index))).rounded()
      var azimuth = (Double(index) * 30 + seconds / 240).truncatingRemainder(dividingBy: 360)
        .rounded()
      if azimuth >= 360 { azimuth = 0 }
      let snr = (44 - Double(index) * 1.5).rounded()
      satellites.append(
        Satellite(
          constellation: .gps, prn: prn, elevation: elevation, azimuth: azimuth, snr: snr,
          used: index < used))
    }
    return satellites
  }
}

/// Holds ``SimulationParameters`` by reference so that copying a generator stays cheap.
public final class SimulatedParametersBox: Sendable {
  /// The parameters.
  public let value: SimulationParameters
  init(_ value: SimulationParameters) { self.value = value }
}
