import GNSSSky
import NMEA
import LocationModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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
  /// The modelled sky at the true position: every satellite above the horizon, exact angles,
  /// tracked and used flags.
  public var sky: [SkySatellite] = []
  /// What hid the sky at this epoch.
  public var obstruction: Obstruction = .openSky
}

/// Produces the simulated GPS's epochs synchronously, one per call, without any clock: the
/// backend paces it; other producers (an NMEA writer) can use it directly and get the same fixes.
///
/// Each epoch: the position on the route, the sky over it from orbits (``SkyModel``) with the
/// leg's obstruction, the satellites used (above the mask, not hidden, at most 12 per system),
/// the DOPs of their geometry, the fix mode from their count (4 or more: 3D; 3: 2D; fewer: no
/// fix), and a position error drawn with covariance UERE² · Q. Before the time to first fix of a
/// cold, warm or hot start, and while reacquiring after every satellite was lost (a tunnel),
/// the receiver reports no fix: mode 1, empty position fields, status V.
public struct SimulatedFixGenerator: Sendable, IteratorProtocol {
  /// The parameters in use.
  public let parameters: SimulatedParametersBox
  private var random: SeededGenerator
  private var index = 0
  private let startTime: Int64
  /// Seconds since the start before which no fix is reported (start-up or reacquisition).
  private var acquiredAt: Double
  /// Whether the receiver has had a fix (or was running from the start).
  private var hadFix: Bool
  /// Whether every satellite was lost at the previous epoch.
  private var signalLost = false

  /// Creates a generator whose epoch 0 is at UTC `startTime` (milliseconds since 1970).
  public init(parameters: SimulationParameters, startTime: Int64) {
    self.parameters = SimulatedParametersBox(parameters)
    var random = SeededGenerator(seed: parameters.seed)
    let range = parameters.timeToFirstFix ?? parameters.start.defaultTimeToFirstFix
    self.acquiredAt = parameters.start == .running ? 0 : Self.draw(range, &random)
    self.hadFix = parameters.start == .running
    self.random = random
    self.startTime = startTime
  }

  /// A uniform draw from `range` (its lower bound when empty or not finite).
  static func draw(_ range: ClosedRange<Double>, _ random: inout SeededGenerator) -> Double {
    guard range.lowerBound.isFinite, range.upperBound.isFinite else { return 0 }
    return range.lowerBound + (range.upperBound - range.lowerBound) * random.nextUnitInterval()
  }

  /// The interval between epochs.
  public var period: Duration { .milliseconds(1000 / max(1, min(10, parameters.value.rate))) }

  /// The next epoch (never ends).
  public mutating func next() -> SimulatedEpoch? {
    let p = parameters.value
    let rate = max(1, min(10, p.rate.isFinite ? p.rate : 1))
    let elapsedMs = Int64((Double(index) * 1000 / rate).rounded())
    let elapsed = Duration.milliseconds(elapsedMs)
    let seconds = Double(elapsedMs) / 1000
    let speed = p.speed.isFinite && p.speed >= 0 ? p.speed : 0
    let uere = p.noiseSigma.isFinite && p.noiseSigma >= 0 ? p.noiseSigma : 0
    let distance = speed * seconds
    let onRoute = p.route.point(atDistance: distance)
    let obstruction = p.obstructions[p.route.leg(atDistance: distance)] ?? .openSky
    let inOutage = p.outages.contains { $0.contains(elapsed) }
    let time = startTime + elapsedMs
    // The geoid separation a receiver would send for the true position: gpsd 3.22's own model
    // (gpsd/geoid.c), to 0.1 m as GGA's `x.x`, so that the fix, the NMEA written from it and gpsd
    // decoding that NMEA all carry one value.
    let geoidSeparation = (GPSDEarthModel.geoidSeparation(at: onRoute.coordinate) * 10).rounded() / 10
    let altitudeMSL = onRoute.elevation ?? p.altitude

    // The sky over the true position.
    var sky = p.sky.satellites(
      latitude: onRoute.coordinate.latitude, longitude: onRoute.coordinate.longitude,
      height: altitudeMSL + geoidSeparation, utcMilliseconds: time, obstruction: obstruction,
      noise: { random.nextGaussianPair().0 })
    let tracked = sky.contains { $0.visible }
    if !tracked {
      signalLost = true
    } else if signalLost {
      // Every satellite was lost (a tunnel): reacquire after a hot-start delay.
      signalLost = false
      acquiredAt = seconds + Self.draw(p.reacquisition, &random)
    }
    let acquiring = seconds < acquiredAt || !tracked
    if acquiring { for i in sky.indices { sky[i].used = false } }

    // Mode from the count of satellites used, then the scheduled degradations.
    let used = sky.filter(\.used)
    var mode: FixMode = used.count >= 4 ? .fix3D : used.count == 3 ? .fix2D : .noFix
    if inOutage { mode = .noFix }
    mode = min(mode, p.scheduledMode(at: elapsed))
    var dop: DilutionOfPrecision?
    if mode.hasPosition {
      dop = DilutionOfPrecision.compute(
        directions: used.map(\.lineOfSight), twoDimensional: mode == .fix2D)
      if dop == nil { mode = .noFix }
    }
    if !mode.hasPosition { for i in sky.indices { sky[i].used = false } }
    if mode.hasPosition { hadFix = true }

    var fix = Fix(mode: mode)
    // A cold start has no time until its first fix; warm and hot starts keep it (RTC).
    if hadFix || p.start != .cold {
      fix.time = time
      fix.timeOfDay = Int32(((time % 86_400_000) + 86_400_000) % 86_400_000)
    }
    fix.satellites = Self.satellites(sky, reportSignal: !acquiring, knowsSky: hadFix || p.start != .cold)
    let (g1, g2) = random.nextGaussianPair()
    let (g3, _) = random.nextGaussianPair()
    if mode.hasPosition, let dop {
      fix.quality = .gps
      // Correlated east/north error: Cholesky factor of UERE² · [[Q_EE, Q_EN], [Q_EN, Q_NN]].
      let l11 = dop.eastVariance.squareRoot()
      let l21 = l11 > 0 ? dop.eastNorthCovariance / l11 : 0
      let l22 = max(0, dop.northVariance - l21 * l21).squareRoot()
      let east = uere * l11 * g1
      let north = uere * (l21 * g1 + l22 * g2)
      fix.coordinate = SimulatedRoute.offset(onRoute.coordinate, east: east, north: north)
      // A route of one point (or of repeated points) is a fixed position: no motion to report.
      let moving = speed > 0 && p.route.length > 0
      fix.speedOverGround = moving ? speed : 0
      fix.courseOverGround = moving ? onRoute.course : nil
      // The variation gpsd's model gives for the reported position (gpsd 3.22 mag_var), so the
      // RMC written from the fix and gpsd's own fill agree.
      fix.magneticVariation = fix.coordinate.map(GPSDEarthModel.magneticVariation(at:))
      fix.hdop = dop.horizontal
      fix.vdop = dop.vertical
      fix.pdop = dop.position
      fix.satellitesUsed = used.count
      fix.geoidSeparation = geoidSeparation
      if mode == .fix3D, let vdop = dop.vertical {
        fix.altitudeMSL = altitudeMSL + uere * vdop * g3
        // 95% of a normal error of sigma UERE·VDOP lies within 1.96 sigma.
        fix.reportedEPV = 1.959_963_984_540_054 * uere * vdop
      }
      // The radius of the circle holding 95% of the east/north error drawn above (covariance
      // UERE²·Q_EN): what eph means, computed from the error ellipse rather than gpsd's HDOP × 19 m.
      fix.reportedEPH = ErrorCircle.radius(
        probability: 0.95, eastVariance: uere * uere * dop.eastVariance,
        northVariance: uere * uere * dop.northVariance, covariance: uere * uere * dop.eastNorthCovariance)
      if uere > 0 {
        var estimates = ErrorEstimates()
        estimates.rangeRMS = uere
        estimates.latitude = uere * dop.northVariance.squareRoot()
        estimates.longitude = uere * dop.eastVariance.squareRoot()
        // The error ellipse: eigenvalues and orientation of the horizontal covariance block.
        let a = dop.eastVariance
        let b = dop.northVariance
        let c = dop.eastNorthCovariance
        let mean = (a + b) / 2
        let spread = (((a - b) / 2) * ((a - b) / 2) + c * c).squareRoot()
        estimates.semiMajor = uere * (mean + spread).squareRoot()
        estimates.semiMinor = uere * max(0, mean - spread).squareRoot()
        // Direction of the major axis, degrees true (from north towards east).
        var orientation = atan2(2 * c, b - a) / 2 * 180 / .pi
        if orientation < 0 { orientation += 180 }
        estimates.orientation = orientation
        if let vdop = dop.vertical { estimates.altitude = uere * vdop }
        fix.errorEstimates = estimates
      }
    } else {
      fix.quality = .invalid
      fix.satellitesUsed = 0
    }
    let epoch = SimulatedEpoch(
      index: index, elapsed: elapsed, fix: fix, truePosition: onRoute.coordinate, inOutage: inOutage,
      sky: sky, obstruction: obstruction)
    index += 1
    return epoch
  }

  /// The sky as the receiver reports it (GSV/GSA): the tracked satellites, NMEA numbering (GPS
  /// 1-32, GLONASS 65-88, Galileo and BeiDou their slot numbers 1-24 as NMEA 4.11 numbers them),
  /// elevation and azimuth in whole degrees as GSV carries them, C/N0 when the signal is reported. A cold start before its
  /// first fix reports nothing (it knows no satellite yet).
  static func satellites(_ sky: [SkySatellite], reportSignal: Bool, knowsSky: Bool) -> [Satellite] {
    guard knowsSky else { return [] }
    return sky.filter(\.visible).map { satellite in
      let constellation: Constellation
      var prn = satellite.number
      switch satellite.system {
      case .gps: constellation = .gps
      case .glonass:
        constellation = .glonass
        prn += 64
      case .galileo: constellation = .galileo
      case .beidou: constellation = .beidou
      }
      // Whole degrees, as GSV carries them (azimuth 359.6 becomes 0).
      let azimuth = satellite.azimuth.rounded()
      return Satellite(
        constellation: constellation, prn: prn, elevation: satellite.elevation.rounded(),
        azimuth: azimuth >= 360 ? 0 : azimuth, snr: reportSignal ? satellite.carrierToNoise.rounded() : nil,
        used: satellite.used)
    }
  }
}

/// Holds ``SimulationParameters`` by reference so that copying a generator stays cheap.
public final class SimulatedParametersBox: Sendable {
  /// The parameters.
  public let value: SimulationParameters
  init(_ value: SimulationParameters) { self.value = value }
}
