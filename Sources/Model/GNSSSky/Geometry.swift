#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Receiver-side geometry on the WGS84 ellipsoid: geodetic to ECEF, ECEF to local east-north-up,
/// look angles.
public enum LookAngles {
  /// ECEF of a geodetic position: latitude and longitude in degrees (WGS84), `height` above the
  /// ellipsoid in metres (the standard closed form with the WGS84 ellipsoid of NIMA TR8350.2).
  public static func ecef(latitude: Double, longitude: Double, height: Double) -> ECEF {
    let a = OrbitConstants.wgs84A
    let f = OrbitConstants.wgs84F
    let e2 = f * (2 - f)
    let phi = latitude * .pi / 180
    let lambda = longitude * .pi / 180
    let n = a / (1 - e2 * sin(phi) * sin(phi)).squareRoot()
    return ECEF(
      x: (n + height) * cos(phi) * cos(lambda),
      y: (n + height) * cos(phi) * sin(lambda),
      z: (n * (1 - e2) + height) * sin(phi))
  }

  /// The unit line-of-sight vector from `receiver` to `satellite` in the receiver's local
  /// east-north-up frame (geodetic vertical at `latitude`, `longitude` in degrees).
  public static func lineOfSight(
    from receiver: ECEF, latitude: Double, longitude: Double, to satellite: ECEF
  ) -> (east: Double, north: Double, up: Double) {
    let dx = satellite.x - receiver.x
    let dy = satellite.y - receiver.y
    let dz = satellite.z - receiver.z
    let range = (dx * dx + dy * dy + dz * dz).squareRoot()
    guard range > 0 else { return (0, 0, 1) }
    let phi = latitude * .pi / 180
    let lambda = longitude * .pi / 180
    let east = -sin(lambda) * dx + cos(lambda) * dy
    let north = -sin(phi) * cos(lambda) * dx - sin(phi) * sin(lambda) * dy + cos(phi) * dz
    let up = cos(phi) * cos(lambda) * dx + cos(phi) * sin(lambda) * dy + sin(phi) * dz
    return (east / range, north / range, up / range)
  }

  /// Elevation (degrees, `-90...90`) and azimuth (degrees true, `0..<360`) of a unit ENU vector.
  public static func angles(east: Double, north: Double, up: Double) -> (elevation: Double, azimuth: Double) {
    let elevation = asin(max(-1, min(1, up))) * 180 / .pi
    var azimuth = atan2(east, north) * 180 / .pi
    if azimuth < 0 { azimuth += 360 }
    if azimuth >= 360 { azimuth -= 360 }
    return (elevation, azimuth)
  }
}

/// Dilutions of precision of one solution.
public struct DilutionOfPrecision: Sendable, Hashable {
  /// Horizontal DOP: `√(Q_EE + Q_NN)`.
  public var horizontal: Double
  /// Vertical DOP: `√Q_UU`; `nil` for a 2D solution (altitude held).
  public var vertical: Double?
  /// Position DOP: `√(Q_EE + Q_NN + Q_UU)`; `nil` for a 2D solution.
  public var position: Double?
  /// `Q_EE`, `Q_NN` and `Q_EN`: the horizontal block of `Q` (position error covariance per unit
  /// range variance), for drawing correlated east/north errors.
  public var eastVariance: Double = 0
  /// `Q_NN`.
  public var northVariance: Double = 0
  /// `Q_EN`.
  public var eastNorthCovariance: Double = 0

  /// Creates DOPs from their values (the horizontal covariance block stays 0).
  public init(horizontal: Double, vertical: Double?, position: Double?) {
    self.horizontal = horizontal
    self.vertical = vertical
    self.position = position
  }

  /// The DOPs of the line-of-sight unit vectors `directions` (ENU). The geometry matrix `G` has
  /// one row `[−e, −n, −u, 1]` per satellite: three position columns and a single receiver
  /// clock column (inter-system time offsets taken as known, as from the broadcast GPS-GNSS
  /// time offsets); `Q = (GᵀG)⁻¹`. With `twoDimensional` the up column is dropped (altitude
  /// held, as a receiver with three satellites does) and only HDOP is given. `nil` when there
  /// are fewer satellites than unknowns or `GᵀG` is singular (condition worse than 1e12).
  public static func compute(
    directions: [(east: Double, north: Double, up: Double)], twoDimensional: Bool = false
  ) -> DilutionOfPrecision? {
    let columns = twoDimensional ? 3 : 4
    guard directions.count >= columns else { return nil }
    var normal = [Double](repeating: 0, count: columns * columns)
    for d in directions {
      let row = twoDimensional ? [-d.east, -d.north, 1] : [-d.east, -d.north, -d.up, 1]
      for i in 0..<columns {
        for j in 0..<columns { normal[i * columns + j] += row[i] * row[j] }
      }
    }
    guard let q = invert(normal, size: columns) else { return nil }
    let ee = q[0]
    let nn = q[columns + 1]
    guard ee >= 0, nn >= 0 else { return nil }
    var result = DilutionOfPrecision(horizontal: (ee + nn).squareRoot(), vertical: nil, position: nil)
    result.eastVariance = ee
    result.northVariance = nn
    result.eastNorthCovariance = q[1]
    if twoDimensional { return result }
    let uu = q[2 * columns + 2]
    guard uu >= 0 else { return nil }
    result.vertical = uu.squareRoot()
    result.position = (ee + nn + uu).squareRoot()
    return result
  }

  /// Inverse of a symmetric positive-definite `size`×`size` matrix (row-major) by Gauss-Jordan
  /// elimination with partial pivoting; `nil` when singular or ill-conditioned.
  static func invert(_ matrix: [Double], size n: Int) -> [Double]? {
    guard matrix.count == n * n, n > 0 else { return nil }
    var a = matrix
    var inverse = [Double](repeating: 0, count: n * n)
    for i in 0..<n { inverse[i * n + i] = 1 }
    var scale = 0.0
    for value in a { scale = max(scale, abs(value)) }
    guard scale > 0 else { return nil }
    for column in 0..<n {
      var pivot = column
      for row in column..<n where abs(a[row * n + column]) > abs(a[pivot * n + column]) { pivot = row }
      let value = a[pivot * n + column]
      guard abs(value) > scale * 1e-12 else { return nil }
      if pivot != column {
        for k in 0..<n {
          a.swapAt(pivot * n + k, column * n + k)
          inverse.swapAt(pivot * n + k, column * n + k)
        }
      }
      for k in 0..<n {
        a[column * n + k] /= value
        inverse[column * n + k] /= value
      }
      for row in 0..<n where row != column {
        let factor = a[row * n + column]
        if factor == 0 { continue }
        for k in 0..<n {
          a[row * n + k] -= factor * a[column * n + k]
          inverse[row * n + k] -= factor * inverse[column * n + k]
        }
      }
    }
    return inverse
  }
}

/// What hides the sky around the receiver.
public enum Obstruction: Sendable, Hashable {
  /// Nothing above the elevation mask is hidden.
  case openSky
  /// A street between buildings: walls parallel to `streetAzimuth` (degrees true) that rise to
  /// `wallElevation` degrees seen straight across the street. A satellite at azimuth `a` is
  /// hidden below `atan(tan(wallElevation)·|sin(a − streetAzimuth)|)`: the walls of an infinitely
  /// long street seen from its middle (full height across, nothing along the street axis).
  case urbanCanyon(streetAzimuth: Double, wallElevation: Double)
  /// No satellite is received (a tunnel, an underground car park).
  case tunnel

  /// The lowest elevation, degrees, at which a satellite at `azimuth` is seen; `nil` when none is.
  public func maskElevation(azimuth: Double) -> Double? {
    switch self {
    case .openSky: return -90
    case .tunnel: return nil
    case .urbanCanyon(let street, let wall):
      let across = abs(sin((azimuth - street) * .pi / 180))
      return atan(tan(max(0, min(89.9, wall)) * .pi / 180) * across) * 180 / .pi
    }
  }
}

/// One satellite of the modelled sky at one instant.
public struct SkySatellite: Sendable, Hashable {
  /// The system.
  public var system: GNSSSystem
  /// The satellite number within its system: GPS PRN 1-32, GLONASS slot 1-24, Galileo and
  /// BeiDou 1-24 (nominal slot numbers).
  public var number: Int
  /// Elevation, degrees, exact (not rounded).
  public var elevation: Double
  /// Azimuth, degrees true, `0..<360`, exact.
  public var azimuth: Double
  /// Carrier-to-noise density, dB-Hz (``SkyModel/carrierToNoise(elevation:noise:)``).
  public var carrierToNoise: Double
  /// Whether the receiver tracks it: above the horizon and not hidden by the obstruction. Only
  /// tracked satellites are reported in view (GSV).
  public var visible: Bool
  /// Whether it is used in the solution: tracked, at or above the elevation mask, among the 12
  /// highest of its system.
  public var used: Bool
  /// Unit line of sight, ENU.
  public var lineOfSight: (east: Double, north: Double, up: Double)

  /// Equality of everything but the derived line of sight.
  public static func == (lhs: SkySatellite, rhs: SkySatellite) -> Bool {
    lhs.system == rhs.system && lhs.number == rhs.number && lhs.elevation == rhs.elevation
      && lhs.azimuth == rhs.azimuth && lhs.carrierToNoise == rhs.carrierToNoise
      && lhs.visible == rhs.visible && lhs.used == rhs.used
  }

  /// Hashes the identity and angles.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(system)
    hasher.combine(number)
    hasher.combine(elevation)
    hasher.combine(azimuth)
  }
}

/// The sky over a receiver from orbits: the GPS almanac and the nominal constellations.
public struct SkyModel: Sendable, Hashable {
  /// The GPS almanac.
  public var almanac: GPSAlmanac
  /// The systems in the sky (GPS from the almanac, the others nominal).
  public var systems: [GNSSSystem]
  /// Elevation mask, degrees, `0...90`: satellites below it are tracked and listed in view but not
  /// used in the solution.
  public var elevationMask: Double
  /// Most satellites of one system used in a solution: 12, what one NMEA GSA sentence lists.
  public static let maximumUsedPerSystem = 12

  /// Creates a sky; defaults: the bundled almanac, GPS + GLONASS + Galileo + BeiDou, 5° mask.
  public init(
    almanac: GPSAlmanac = .bundled, systems: [GNSSSystem] = GNSSSystem.allCases, elevationMask: Double = 5
  ) {
    self.almanac = almanac
    self.systems = systems
    self.elevationMask = elevationMask
  }

  /// The C/N0 model, dB-Hz: `30 + 20·sin(elevation) + noise`, clamped to `0...99`. About 30 dB-Hz at
  /// the horizon and 50 at the zenith, the span of a patch antenna's gain pattern on a
  /// consumer receiver; `noise` is a seeded Gaussian value (one sigma 1 dB).
  public static func carrierToNoise(elevation: Double, noise: Double) -> Double {
    max(0, min(99, 30 + 20 * sin(max(0, elevation) * .pi / 180) + noise))
  }

  /// Satellite positions (ECEF) of every modelled satellite at GPS time `gpsSeconds`; unhealthy
  /// GPS satellites are left out.
  public func positions(gpsSeconds: Double) -> [(system: GNSSSystem, number: Int, position: ECEF)] {
    var result: [(GNSSSystem, Int, ECEF)] = []
    for system in systems {
      switch system {
      case .gps:
        guard let week = almanac.fullWeek(near: gpsSeconds) else { continue }
        for record in almanac.records where record.health == 0 {
          result.append((.gps, record.prn, record.position(gpsSeconds: gpsSeconds, fullWeek: week)))
        }
      case .glonass, .galileo, .beidou:
        let constellation: NominalConstellation =
          system == .glonass ? .glonass : system == .galileo ? .galileo : .beidou
        for index in 0..<constellation.count {
          result.append((system, index + 1, constellation.position(index: index, gpsSeconds: gpsSeconds)))
        }
      }
    }
    return result
  }

  /// The satellites above the horizon for a receiver at `latitude`, `longitude` (degrees, WGS84)
  /// and `height` above the ellipsoid (metres) at UTC `utcMilliseconds` (ms since 1970), in
  /// system order then number order, with the obstruction applied and the used ones chosen.
  /// `noise` gives one standard normal value per satellite for its C/N0 (called in output order).
  public func satellites(
    latitude: Double, longitude: Double, height: Double, utcMilliseconds: Int64,
    obstruction: Obstruction = .openSky, noise: () -> Double = { 0 }
  ) -> [SkySatellite] {
    let receiver = LookAngles.ecef(latitude: latitude, longitude: longitude, height: height)
    let gps = OrbitConstants.gpsSeconds(utcMilliseconds: utcMilliseconds)
    var result: [SkySatellite] = []
    for (system, number, position) in positions(gpsSeconds: gps) {
      let los = LookAngles.lineOfSight(from: receiver, latitude: latitude, longitude: longitude, to: position)
      let (elevation, azimuth) = LookAngles.angles(east: los.east, north: los.north, up: los.up)
      guard elevation > 0 else { continue }
      let visible = obstruction.maskElevation(azimuth: azimuth).map { elevation >= $0 } ?? false
      result.append(
        SkySatellite(
          system: system, number: number, elevation: elevation, azimuth: azimuth,
          carrierToNoise: Self.carrierToNoise(elevation: elevation, noise: noise()), visible: visible,
          used: false, lineOfSight: los))
    }
    for system in systems {
      let candidates = result.indices.filter { result[$0].system == system && result[$0].visible && result[$0].elevation >= elevationMask
      }
        .sorted { result[$0].elevation > result[$1].elevation }
      for index in candidates.prefix(Self.maximumUsedPerSystem) { result[index].used = true }
    }
    return result
  }
}
