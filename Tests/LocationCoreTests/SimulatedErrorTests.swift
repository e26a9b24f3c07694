import GNSSSky
import LocationCore
import LocationModel
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// eph/epv of the simulated receiver against the error it actually draws.
extension SkyModelTests {
  /// Over 2,000 seeded epochs along the default loop, about 95% of the fixes lie within `eph` of
  /// the true position and within `epv` of the true altitude, whatever the range error; `eph` is
  /// the 95% circle of the ellipse GST states, `epv` 1.96 times GST's altitude sigma.
  @Test(arguments: [2.5, 30.0])
  func ephAndEpvHold95PercentOfTheSimulatedError(uere: Double) throws {
    let options = try SimulatedBackend.Options.parse("simulate?speed=10&uere=\(uere)&seed=7")
    var generator = SimulatedFixGenerator(parameters: try options.parameters(), startTime: Self.almanacWeek)
    var fixes = 0
    var withinEPH = 0
    var fixes3D = 0
    var withinEPV = 0
    for _ in 0..<2000 {
      let next = generator.next()
      let epoch = try #require(next)
      guard epoch.fix.mode.hasPosition, let coordinate = epoch.fix.coordinate else { continue }
      let eph = try #require(epoch.fix.eph)
      let gst = try #require(epoch.fix.errorEstimates)
      let major = try #require(gst.semiMajor)
      let minor = try #require(gst.semiMinor)
      // The 95% circle of GST's ellipse, and within its analytic bounds.
      let circle = ErrorCircle.radius(probability: 0.95, majorVariance: major * major, minorVariance: minor * minor)
      #expect(abs(eph - circle) <= 1e-9 * circle)
      #expect(eph >= 1.959_963 * major && eph <= 2.447_747 * major)
      fixes += 1
      if Geodesy.distance(coordinate, epoch.truePosition) <= eph { withinEPH += 1 }
      if epoch.fix.mode == .fix3D, let altitude = epoch.fix.altitudeMSL {
        let epv = try #require(epoch.fix.epv)
        #expect(abs(epv - 1.959_963_984_540_054 * (gst.altitude ?? .nan)) <= 1e-9 * epv)
        fixes3D += 1
        // The default loop has no elevations: the true altitude is the configured 60 m.
        if abs(altitude - 60) <= epv { withinEPV += 1 }
      }
    }
    #expect(fixes >= 1900 && fixes3D >= 1900)
    let horizontal = Double(withinEPH) / Double(fixes)
    let vertical = Double(withinEPV) / Double(fixes3D)
    #expect(horizontal >= 0.93 && horizontal <= 0.97, "share within eph: \(horizontal) of \(fixes)")
    #expect(vertical >= 0.93 && vertical <= 0.97, "share within epv: \(vertical) of \(fixes3D)")
  }

  /// The 95% circle's special cases: a circular error, a line, and a Monte Carlo check of an
  /// elongated ellipse with correlation.
  @Test func theErrorCircleMatchesItsClosedFormsAndASampledEllipse() {
    let sigma = 3.0
    let circular = ErrorCircle.radius(probability: 0.95, eastVariance: 9, northVariance: 9, covariance: 0)
    #expect(abs(circular - sigma * (-2 * log(0.05)).squareRoot()) < 1e-9)
    // Half of a circular error lies within CEP = 1.1774 sigma.
    let cep = ErrorCircle.radius(probability: 0.5, eastVariance: 9, northVariance: 9, covariance: 0)
    #expect(abs(cep - sigma * (2 * log(2.0)).squareRoot()) < 1e-9)
    // A line: the two-sided normal quantile.
    let line = ErrorCircle.radius(probability: 0.95, majorVariance: 4, minorVariance: 0)
    #expect(abs(line - 2 * 1.959_963_984_540_054) < 1e-6)
    // Correlated east/north: covariance [[4, 3], [3, 9]] has eigenvalues 10.6 and 2.4.
    let radius = ErrorCircle.radius(probability: 0.95, eastVariance: 4, northVariance: 9, covariance: 3)
    let byAxes = ErrorCircle.radius(
      probability: 0.95, majorVariance: 6.5 + (6.25 + 9.0).squareRoot(), minorVariance: 6.5 - (6.25 + 9.0).squareRoot())
    #expect(abs(radius - byAxes) < 1e-9)
    var random = SeededGenerator(seed: 11)
    var inside = 0
    let samples = 200_000
    for _ in 0..<samples {
      let (g1, g2) = random.nextGaussianPair()
      // Cholesky factor of [[4, 3], [3, 9]].
      let east = 2 * g1
      let north = 1.5 * g1 + (9 - 2.25).squareRoot() * g2
      if (east * east + north * north).squareRoot() <= radius { inside += 1 }
    }
    // Binomial standard deviation at 200,000 draws: 0.00049.
    #expect(abs(Double(inside) / Double(samples) - 0.95) < 0.0025)
    #expect(ErrorCircle.radius(probability: 0.95, eastVariance: 0, northVariance: 0, covariance: 0) == 0)
    #expect(ErrorCircle.radius(probability: 1, eastVariance: 1, northVariance: 1, covariance: 0).isNaN)
    #expect(ErrorCircle.radius(probability: 0.95, eastVariance: -1, northVariance: 1, covariance: 0).isNaN)
  }
}
