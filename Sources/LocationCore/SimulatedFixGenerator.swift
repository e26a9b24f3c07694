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
