#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An earth-centred, earth-fixed position (WGS84 frame), metres.
public struct ECEF: Sendable, Hashable {
  /// Metres towards latitude 0, longitude 0.
  public var x: Double
  /// Metres towards latitude 0, longitude 90° E.
  public var y: Double
  /// Metres towards the north pole.
  public var z: Double

  /// Creates a position from its components, metres.
  public init(x: Double, y: Double, z: Double) {
    self.x = x
    self.y = y
    self.z = z
  }
}

/// Constants and time scales of the orbit models.
public enum OrbitConstants {
  /// WGS84 earth gravitational constant μ used by GPS, m³/s² (IS-GPS-200 Table 20-IV).
  public static let gpsMu = 3.986005e14
  /// WGS84 earth rotation rate Ω̇e, rad/s (IS-GPS-200 Table 20-IV).
  public static let earthRotationRate = 7.2921151467e-5
  /// GPS time minus UTC, seconds, since 2017-01-01 (IERS Bulletin C: no leap second announced since).
  public static let gpsMinusUTC = 18.0
  /// Unix time (seconds since 1970-01-01 UTC) of the GPS epoch 1980-01-06 00:00:00.
  public static let gpsEpochUnix = 315_964_800.0
  /// Seconds in a GPS week.
  public static let secondsPerWeek = 604_800.0
  /// WGS84 semi-major axis, metres.
  public static let wgs84A = 6_378_137.0
  /// WGS84 flattening.
  public static let wgs84F = 1 / 298.257223563

  /// GPS seconds since the GPS epoch for a UTC time in milliseconds since 1970 (leap seconds:
  /// ``gpsMinusUTC``, valid from 2017 on).
  public static func gpsSeconds(utcMilliseconds: Int64) -> Double {
    Double(utcMilliseconds) / 1000 - gpsEpochUnix + gpsMinusUTC
  }
}

extension GPSAlmanac {
  /// The full GPS week of the almanac nearest to `gpsSeconds`: a week given modulo 1024 (NAVCEN)
  /// is placed in the 1024-week era that puts it closest to the simulated time.
  public func fullWeek(near gpsSeconds: Double) -> Int? {
    guard let week = records.first?.week else { return nil }
    if week >= 1024 { return week }
    let current = Int((gpsSeconds / OrbitConstants.secondsPerWeek).rounded(.down))
    var best = week
    var era = 0
    while era <= 8 {
      let candidate = week + era * 1024
      if abs(candidate - current) < abs(best - current) { best = candidate }
      era += 1
    }
    return best
  }
}

extension AlmanacRecord {
  /// The satellite's ECEF position at GPS time `gpsSeconds`, with the almanac's week resolved to
  /// `fullWeek`: the IS-GPS-200 §20.3.3.4.3 user algorithm (Table 20-IV) with the almanac's
  /// parameters (no harmonic corrections, which an almanac does not carry): mean motion
  /// `n = √(μ/A³)`, Kepler's equation `E − e·sin E = M` solved by Newton iteration, true anomaly,
  /// radius `A(1 − e·cos E)`, and the node corrected for the earth's rotation
  /// `Ω = Ω₀ + (Ω̇ − Ω̇e)·t_k − Ω̇e·t_oa`. `t_k` is not wrapped to ±302 400 s: the full time since
  /// `t_oa`, so an almanac weeks old still propagates (with its growing error).
  public func position(gpsSeconds: Double, fullWeek: Int) -> ECEF {
    let a = sqrtSemiMajorAxis * sqrtSemiMajorAxis
    let n = (OrbitConstants.gpsMu / (a * a * a)).squareRoot()
    let reference = Double(fullWeek) * OrbitConstants.secondsPerWeek + timeOfApplicability
    let tk = gpsSeconds - reference
    let m = meanAnomaly + n * tk
    var e = m
    for _ in 0..<12 {
      let delta = (e - eccentricity * sin(e) - m) / (1 - eccentricity * cos(e))
      e -= delta
      if abs(delta) < 1e-13 { break }
    }
    let trueAnomaly = atan2((1 - eccentricity * eccentricity).squareRoot() * sin(e), cos(e) - eccentricity)
    let latitudeArgument = trueAnomaly + argumentOfPerigee
    let radius = a * (1 - eccentricity * cos(e))
    let xOrbit = radius * cos(latitudeArgument)
    let yOrbit = radius * sin(latitudeArgument)
    let node =
      rightAscensionAtWeek + (rateOfRightAscension - OrbitConstants.earthRotationRate) * tk
      - OrbitConstants.earthRotationRate * timeOfApplicability
    return ECEF(
      x: xOrbit * cos(node) - yOrbit * cos(inclination) * sin(node),
      y: xOrbit * sin(node) + yOrbit * cos(inclination) * cos(node),
      z: yOrbit * sin(inclination))
  }
}

/// A nominal Walker-delta constellation of circular orbits (`T/P/F`: `T` satellites in `P`
/// equally spaced planes, phasing `F`), as the systems' operators publish their reference
/// constellations; see docs/simulator.md for the figures and their sources.
public struct NominalConstellation: Sendable, Hashable {
  /// The system (GLONASS, Galileo, BeiDou).
  public var system: GNSSSystem
  /// Number of orbital planes `P`.
  public var planes: Int
  /// Satellites per plane (`T / P`).
  public var slotsPerPlane: Int
  /// Walker phasing factor `F`, `0..<P`.
  public var phasing: Int
  /// Inclination, degrees.
  public var inclination: Double
  /// Altitude above the WGS84 equatorial radius, metres (the orbit radius is this plus
  /// ``OrbitConstants/wgs84A``).
  public var altitude: Double
  /// Longitude of the first plane's ascending node at ``referenceGPSSeconds``, degrees (ECEF).
  public var firstNodeLongitude: Double
  /// GPS time of the reference epoch, seconds since the GPS epoch.
  public var referenceGPSSeconds: Double

  /// Creates a constellation; units as the properties state.
  public init(
    system: GNSSSystem, planes: Int, slotsPerPlane: Int, phasing: Int, inclination: Double,
    altitude: Double, firstNodeLongitude: Double = 0, referenceGPSSeconds: Double = 1_261_872_018
  ) {
    self.system = system
    self.planes = planes
    self.slotsPerPlane = slotsPerPlane
    self.phasing = phasing
    self.inclination = inclination
    self.altitude = altitude
    self.firstNodeLongitude = firstNodeLongitude
    self.referenceGPSSeconds = referenceGPSSeconds
  }

  /// GLONASS: 24 slots in 3 planes of 8, 64.8°, 19 100 km (GLONASS interface control
  /// document, edition 5.1, 2008; Walker 24/3/1).
  public static let glonass = NominalConstellation(
    system: .glonass, planes: 3, slotsPerPlane: 8, phasing: 1, inclination: 64.8, altitude: 19_100_000,
    firstNodeLongitude: 15)
  /// Galileo: the 24/3/1 Walker reference constellation, 56°, 23 222 km (European GNSS Service
  /// Centre, Galileo constellation information: semi-major axis 29 600 km; spares not modelled).
  public static let galileo = NominalConstellation(
    system: .galileo, planes: 3, slotsPerPlane: 8, phasing: 1, inclination: 56, altitude: 23_222_000,
    firstNodeLongitude: 40)
  /// BeiDou-3 MEO: 24/3/1 Walker, 55°, 21 528 km (BeiDou signal-in-space ICDs,
  /// China Satellite Navigation Office; GEO and IGSO satellites not modelled).
  public static let beidou = NominalConstellation(
    system: .beidou, planes: 3, slotsPerPlane: 8, phasing: 1, inclination: 55, altitude: 21_528_000,
    firstNodeLongitude: 70)

  /// Number of satellites `T`.
  public var count: Int { planes * slotsPerPlane }

  /// The ECEF position of satellite `index` (`0..<count`; plane `index / slotsPerPlane`, slot
  /// `index % slotsPerPlane`) at GPS time `gpsSeconds`. A circular Keplerian orbit: argument of
  /// latitude `u = 2π·slot/S + 2π·F·plane/T + n·Δt`, node `Ω = Ω₁ + 2π·plane/P − Ω̇e·Δt` (node
  /// precession from J2 ignored).
  public func position(index: Int, gpsSeconds: Double) -> ECEF {
    let plane = index / max(1, slotsPerPlane)
    let slot = index % max(1, slotsPerPlane)
    let radius = OrbitConstants.wgs84A + altitude
    let n = (OrbitConstants.gpsMu / (radius * radius * radius)).squareRoot()
    let dt = gpsSeconds - referenceGPSSeconds
    let u =
      2 * Double.pi * Double(slot) / Double(slotsPerPlane)
      + 2 * Double.pi * Double(phasing * plane) / Double(count) + n * dt
    let node =
      firstNodeLongitude * .pi / 180 + 2 * Double.pi * Double(plane) / Double(planes)
      - OrbitConstants.earthRotationRate * dt
    let inclinationRadians = inclination * .pi / 180
    let xOrbit = radius * cos(u)
    let yOrbit = radius * sin(u)
    return ECEF(
      x: xOrbit * cos(node) - yOrbit * cos(inclinationRadians) * sin(node),
      y: xOrbit * sin(node) + yOrbit * cos(inclinationRadians) * cos(node),
      z: yOrbit * sin(inclinationRadians))
  }
}

/// The GNSS systems the simulator models.
public enum GNSSSystem: String, Sendable, Hashable, CaseIterable {
  /// GPS, from the almanac.
  case gps
  /// GLONASS, nominal constellation.
  case glonass
  /// Galileo, nominal constellation.
  case galileo
  /// BeiDou (MEO), nominal constellation.
  case beidou
}
