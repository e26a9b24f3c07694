import Foundation
import LocationCore
import LocationModel
import LocationTestKit
import Testing

/// Difference of two angles in degrees, reduced to [0, 180].
private func angleError(_ a: Double, _ b: Double) -> Double {
  abs((a - b).remainder(dividingBy: 360))
}

/// Karney's geodesics against GeographicLib's GeodSolve on the same problems.
@Suite(.timeLimit(.minutes(3)))
struct GeodesicAgainstGeodSolveTests {
  @Test(.enabled(if: GeodSolve.executable == nil, "GeodSolve is installed"))
  func geodSolveIsMissing() {
    if GeodSolve.isRequired {
      Issue.record("GeodSolve (geographiclib-tools) is missing and CI=true requires it")
    } else {
      print(GeodSolve.missingMessage)
    }
  }

  /// 10,000 random pairs and every hard family: distance and m12 within 1 mm, azimuths within
  /// 1e-6 degree where they are unique, M12 and M21 within 1e-9. Prints the largest errors.
  @Test(.enabled(if: GeodSolve.executable != nil))
  func inverseAgreesWithGeodSolve() throws {
    let cases = GeodesicCases.inverse()
    let reference = try GeodSolve.inverse(cases.map { ($0.referenceA, $0.referenceB) })
    var worst: [String: (distance: Double, azimuth: Double, m12: Double, scale: Double)] = [:]
    for (item, expected) in zip(cases, reference) {
      let got = Geodesic.inverse(item.a, item.b)
      let distance = abs(got.distance - expected.s12)
      let m12 = abs(got.reducedLength - expected.m12)
      let scale = max(
        abs(got.geodesicScale12 - expected.scale12), abs(got.geodesicScale21 - expected.scale21))
      let azimuth =
        item.azimuthsDefined
        ? max(
          angleError(got.initialAzimuth, expected.azi1), angleError(got.finalAzimuth, expected.azi2)
        ) : 0
      let problem = "\(item.kind): \(item.a) \(item.b) got \(got) expected \(expected)"
      #expect(distance <= 1e-3, "\(problem)")
      #expect(m12 <= 1e-3, "\(problem)")
      #expect(scale <= 1e-9, "\(problem)")
      #expect(azimuth <= 1e-6, "\(problem)")
      #expect(got.distance >= 0 && got.initialAzimuth > -180 - 1e-12 && got.initialAzimuth <= 180)
      let old = worst[item.kind] ?? (0, 0, 0, 0)
      worst[item.kind] = (
        max(old.0, distance), max(old.1, azimuth), max(old.2, m12), max(old.3, scale)
      )
    }
    for (kind, errors) in worst.sorted(by: { $0.key < $1.key }) {
      print(
        "geodesic inverse vs GeodSolve, \(kind): max |ds12| \(errors.distance) m, |dazi| \(errors.azimuth) deg, "
          + "|dm12| \(errors.m12) m, |dM| \(errors.scale)")
    }
  }

  /// 5,000 direct problems (poles, equator, meridians, 1 mm to 40,000 km, backwards): end point
  /// within 1e-9 degree (0.1 mm), azimuth within 1e-6 degree, m12 within 1 mm, M12 and M21 1e-9.
  @Test(.enabled(if: GeodSolve.executable != nil))
  func directAgreesWithGeodSolve() throws {
    let problems = GeodesicCases.direct()
    let reference = try GeodSolve.direct(problems)
    var worstPosition = 0.0
    var worstAzimuth = 0.0
    for (problem, expected) in zip(problems, reference) {
      let got = Geodesic.direct(
        from: problem.start, azimuth: problem.azimuth, distance: problem.distance)
      let latitude = abs(got.coordinate.latitude - expected.lat2)
      // Longitude error as an angle on the parallel; at a pole any longitude is the same point.
      let longitude =
        angleError(got.coordinate.longitude, expected.lon2) * cos(expected.lat2 * .pi / 180)
      let position = max(latitude, abs(longitude))
      // At a pole the azimuth depends on the longitude, which is undefined there.
      let azimuth = abs(expected.lat2) == 90 ? 0 : angleError(got.finalAzimuth, expected.azi2)
      let text = "\(problem) got \(got) expected \(expected)"
      #expect(position <= 1e-9, "\(text)")
      #expect(azimuth <= 1e-6, "\(text)")
      #expect(abs(got.reducedLength - expected.m12) <= 1e-3, "\(text)")
      #expect(abs(got.geodesicScale12 - expected.scale12) <= 1e-9, "\(text)")
      #expect(abs(got.geodesicScale21 - expected.scale21) <= 1e-9, "\(text)")
      #expect(abs(got.coordinate.longitude) <= 180)
      worstPosition = max(worstPosition, position)
      worstAzimuth = max(worstAzimuth, azimuth)
    }
    print(
      "geodesic direct vs GeodSolve: max position error \(worstPosition) deg, azimuth \(worstAzimuth) deg"
    )
  }
}

/// Numbers reach GeodSolve without exponents (it reads the `e` of `1e-05` as "east"), digit for
/// digit.
@Test(arguments: [1e-05, -3.5e-20, 1.25e-300, 123.456, -0.0001, 1e16, 2.5e22, -7e-7, 0])
func plainDecimalsAreExact(value: Double) {
  let text = GeodSolve.plain(value)
  #expect(!text.contains("e"), "\(text)")
  #expect(Double(text) == value, "\(text)")
}

/// The gnomonic projection against GeographicLib's `GeodesicProj -g` (installed with GeodSolve).
@Suite(.timeLimit(.minutes(1)))
struct GnomonicAgainstGeodesicProjTests {
  /// Forward: x and y within 1 mm out to 5,000 km from five centers (a pole and the antimeridian
  /// included), nil exactly where GeodesicProj prints NaN (beyond the horizon); reverse: the
  /// point within 1e-9 degree.
  @Test(.enabled(if: GeodSolve.executable != nil), arguments: GnomonicTests.centers)
  func agreesWithGeodesicProj(center: Coordinate) throws {
    var random = SeededGenerator(seed: 8)
    let points = (0..<500).map { index in
      index % 5 == 0
        ? Coordinate(
          latitude: asin(2 * random.nextUnitInterval() - 1) * 180 / .pi,
          longitude: 360 * random.nextUnitInterval() - 180)
        : Geodesic.direct(
          from: center, azimuth: 360 * random.nextUnitInterval() - 180,
          distance: 5_000_000 * random.nextUnitInterval()
        ).coordinate
    }
    let projection = Gnomonic(center: center)
    let expected = try GeodSolve.gnomonicForward(center: center, points)
    var worst = 0.0
    var images: [(x: Double, y: Double)] = []
    for (point, reference) in zip(points, expected) {
      let got = projection.forward(point)
      #expect(
        (got == nil) == reference.x.isNaN,
        "\(center) \(point) got \(String(describing: got)) expected \(reference)")
      guard let got, !reference.x.isNaN else { continue }
      let error = max(abs(got.x - reference.x), abs(got.y - reference.y))
      #expect(error <= 1e-3, "\(center) \(point) got \(got) expected \(reference)")
      worst = max(worst, error)
      images.append(reference)
    }
    let back = try GeodSolve.gnomonicReverse(center: center, images)
    for (image, reference) in zip(images, back) {
      let got = try #require(projection.reverse(x: image.x, y: image.y))
      #expect(abs(got.latitude - reference.latitude) <= 1e-9, "\(center) \(image)")
      #expect(
        angleError(got.longitude, reference.longitude) * cos(reference.latitude * .pi / 180) <= 1e-9
      )
    }
    print(
      "gnomonic vs GeodesicProj centred at \(center): max |dx|, |dy| \(worst) m over \(images.count) points"
    )
  }
}

/// Properties that hold without a reference.
struct GeodesicPropertyTests {
  /// The equator and a meridian quadrant have closed forms: a quarter of the equator is
  /// a pi / 2, and the meridian quadrant of WGS84 is 10,001,965.729 m (Rapp; GeodSolve agrees).
  @Test func equatorAndMeridianQuadrant() {
    let equator = Geodesic.inverse(
      Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 0, longitude: 90))
    #expect(abs(equator.distance - 6_378_137 * .pi / 2) < 1e-9)
    #expect(equator.initialAzimuth == 90 && equator.finalAzimuth == 90)
    let quadrant = Geodesic.inverse(
      Coordinate(latitude: 0, longitude: 10), Coordinate(latitude: 90, longitude: 10))
    #expect(abs(quadrant.distance - 10_001_965.729) < 1e-3)
    #expect(quadrant.initialAzimuth == 0)
  }

  /// Azimuths are in `(-180, 180]`: due south is 180 even where GeodSolve prints -180
  /// (`10 0 -10 -0.0`), and due north is 0, not -0 (GeodSolve: `-0.00000000` for `0 0 0 -180`).
  @Test func azimuthsAreInTheHalfOpenRange() {
    let south = Geodesic.inverse(
      Coordinate(latitude: 10, longitude: 0), Coordinate(latitude: -10, longitude: -0.0))
    #expect(south.initialAzimuth == 180 && south.finalAzimuth == 180)
    let overThePole = Geodesic.inverse(
      Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 0, longitude: -180))
    #expect(overThePole.initialAzimuth == 0 && overThePole.initialAzimuth.sign == .plus)
    #expect(overThePole.finalAzimuth == 180)
    let end = Geodesic.direct(
      from: Coordinate(latitude: 10, longitude: -0.0), azimuth: -180, distance: 1000)
    #expect(end.finalAzimuth == 180)
  }

  /// Coincident points are 0 m apart with unit scales; the same point written with longitude
  /// 190 or -170 is the same point.
  @Test func coincidentPointsAndLongitudeTurns() {
    let point = Coordinate(latitude: 48.8566, longitude: 2.3522)
    let same = Geodesic.inverse(point, point)
    #expect(same.distance == 0 && same.reducedLength == 0)
    #expect(same.geodesicScale12 == 1 && same.geodesicScale21 == 1)
    let wrapped = Geodesic.distance(
      Coordinate(latitude: 10, longitude: 190), Coordinate(latitude: 10, longitude: -170))
    #expect(wrapped == 0)
    // 151.25 - 720 is exact in binary, so both name exactly the same point.
    let far = Coordinate(latitude: -33.9, longitude: 151.25)
    #expect(
      Geodesic.distance(point, far)
        == Geodesic.distance(point, Coordinate(latitude: -33.9, longitude: 151.25 - 720)))
  }

  /// A longitude difference far below the series' resolution is none: the geodesic is the
  /// meridian, due north, exactly as GeodSolve prints for `10 0 20 1e-20`.
  @Test func aTinyLongitudeDifferenceIsAMeridian() {
    let a = Coordinate(latitude: 10, longitude: 0)
    let tiny = Geodesic.inverse(a, Coordinate(latitude: 20, longitude: 1e-20))
    let exact = Geodesic.inverse(a, Coordinate(latitude: 20, longitude: 0))
    #expect(tiny.initialAzimuth == 0 && tiny.finalAzimuth == 0)
    #expect(tiny.distance == exact.distance)
  }

  /// Extreme but valid values (poles, signed zeros, subnormals, longitudes and azimuths of 1e300,
  /// distances of 1e300) give results in range: no distance beyond the meridian from pole to pole
  /// (20,003,931.4586 m, the longest shortest path), latitudes in `[-90, 90]`, longitudes in
  /// `[-180, 180]`.
  @Test func extremeValidInputStaysInRange() {
    let latitudes = [90, -90, 0, -0.0, 5e-324, -5e-324, 89.999_999_999_999_99, -45]
    let longitudes = [0, -0.0, 180, -180, 540, -540, 1e300, -1e300, 5e-324, 179.999_999_999_999_97]
    let points = latitudes.flatMap { lat in
      longitudes.map { Coordinate(latitude: lat, longitude: $0) }
    }
    for a in points {
      for b in points {
        let solution = Geodesic.inverse(a, b)
        #expect(solution.distance >= 0 && solution.distance <= 20_003_931.4587, "\(a) \(b)")
        #expect(
          abs(solution.initialAzimuth) <= 180 && abs(solution.finalAzimuth) <= 180, "\(a) \(b)")
      }
      for azimuth in [0, 90, -180, 1e300, -0.0] {
        for distance in [0, 1e-300, 1, -1e7, 4e7, 1e300] {
          let end = Geodesic.direct(from: a, azimuth: azimuth, distance: distance).coordinate
          #expect(
            abs(end.latitude) <= 90 && abs(end.longitude) <= 180, "\(a) \(azimuth) \(distance)")
        }
      }
    }
  }

  /// NaN or out-of-range input gives NaN, never a trap or a hang.
  @Test(arguments: [
    (Double.nan, 0.0), (0.0, Double.nan), (91.0, 0.0), (-90.5, 0.0), (0.0, Double.infinity),
    (Double.infinity, 0.0),
  ])
  func invalidInputGivesNaN(latitude: Double, longitude: Double) {
    let bad = Coordinate(latitude: latitude, longitude: longitude)
    let good = Coordinate(latitude: 12, longitude: 34)
    for solution in [Geodesic.inverse(bad, good), Geodesic.inverse(good, bad)] {
      #expect(
        solution.distance.isNaN && solution.initialAzimuth.isNaN && solution.finalAzimuth.isNaN)
      #expect(
        solution.reducedLength.isNaN && solution.geodesicScale12.isNaN
          && solution.geodesicScale21.isNaN)
    }
    let direct = Geodesic.direct(from: bad, azimuth: 30, distance: 1000)
    #expect(direct.coordinate.latitude.isNaN && direct.coordinate.longitude.isNaN)
    #expect(direct.finalAzimuth.isNaN && direct.reducedLength.isNaN && direct.geodesicScale12.isNaN)
    #expect(Geodesic.direct(from: good, azimuth: .nan, distance: 1000).coordinate.latitude.isNaN)
    #expect(Geodesic.direct(from: good, azimuth: 10, distance: .infinity).coordinate.latitude.isNaN)
    #expect(Gnomonic(center: good).forward(bad) == nil)
    #expect(Gnomonic(center: bad).reverse(x: 1000, y: 1000) == nil)
    #expect(Gnomonic(center: good).reverse(x: .nan, y: 0) == nil)
  }

  /// Going out and back along the direct solution's final azimuth returns to the start, and the
  /// inverse of a direct solution is that solution (s12 within 1 um, azimuth within 1e-9 deg).
  @Test func directAndInverseAreConsistent() {
    var random = SeededGenerator(seed: 7)
    for _ in 0..<500 {
      let start = Coordinate(
        latitude: asin(2 * random.nextUnitInterval() - 1) * 180 / .pi,
        longitude: 360 * random.nextUnitInterval() - 180)
      let azimuth = 360 * random.nextUnitInterval() - 180
      let distance = 19_000_000 * random.nextUnitInterval()
      let end = Geodesic.direct(from: start, azimuth: azimuth, distance: distance)
      let inverse = Geodesic.inverse(start, end.coordinate)
      #expect(abs(inverse.distance - distance) < 1e-6, "\(start) \(azimuth) \(distance)")
      #expect(angleError(inverse.initialAzimuth, azimuth) < 1e-9, "\(start) \(azimuth) \(distance)")
      #expect(angleError(inverse.finalAzimuth, end.finalAzimuth) < 1e-9)
      #expect(abs(inverse.reducedLength - end.reducedLength) < 1e-6)
    }
  }
}

/// The ellipsoidal gnomonic projection (Karney 2013, section 8).
struct GnomonicTests {
  static let centers = [
    Coordinate(latitude: 48.8566, longitude: 2.3522), Coordinate(latitude: -33.9, longitude: 151.2),
    Coordinate(latitude: 89.5, longitude: 30), Coordinate(latitude: 0, longitude: 179.9),
    Coordinate(latitude: 90, longitude: 0),
  ]

  /// Forward then reverse returns the point within 1 mm, out to 5,000 km; the azimuth of (x, y)
  /// is the geodesic azimuth from the center and rho = m12 / M12.
  @Test(arguments: centers)
  func roundTripAndAzimuthFromTheCenter(center: Coordinate) throws {
    let projection = Gnomonic(center: center)
    var random = SeededGenerator(seed: 57)
    for _ in 0..<300 {
      let azimuth = 360 * random.nextUnitInterval() - 180
      let distance = 5_000_000 * random.nextUnitInterval()
      let point = Geodesic.direct(from: center, azimuth: azimuth, distance: distance).coordinate
      let (x, y) = try #require(projection.forward(point))
      let inverse = Geodesic.inverse(center, point)
      #expect(angleError(atan2(x, y) * 180 / .pi, inverse.initialAzimuth) < 1e-9)
      #expect(
        abs(hypot(x, y) - inverse.reducedLength / inverse.geodesicScale12) < 1e-6
          * max(1, hypot(x, y)))
      let back = try #require(projection.reverse(x: x, y: y))
      #expect(Geodesic.distance(back, point) < 1e-3, "\(center) \(azimuth) \(distance)")
    }
  }

  /// Points a quarter turn or more from the center have no image.
  @Test func pointsBeyondTheHorizonHaveNoImage() {
    let projection = Gnomonic(center: Coordinate(latitude: 10, longitude: 20))
    #expect(projection.forward(Coordinate(latitude: -10, longitude: -160)) == nil)
    #expect(projection.forward(Coordinate(latitude: 10, longitude: 120)) == nil)
    #expect(projection.forward(Coordinate(latitude: 10, longitude: 100)) != nil)
  }

  /// Within 150 km of the center (chords up to 300 km) a geodesic's image is nearly straight: its
  /// midpoint's image lies within 1e-8 of the chord's length (3 mm on 300 km) of the chord between
  /// the ends' images. Measured: at most 3.2e-9 (mid-latitudes), 1e-10 near the poles and equator.
  @Test(arguments: centers)
  func geodesicsProjectNearlyStraight(center: Coordinate) throws {
    let projection = Gnomonic(center: center)
    var random = SeededGenerator(seed: 300)
    var worst = 0.0
    for _ in 0..<200 {
      let a = Geodesic.direct(
        from: center, azimuth: 360 * random.nextUnitInterval(),
        distance: 150_000 * random.nextUnitInterval()
      ).coordinate
      let b = Geodesic.direct(
        from: center, azimuth: 360 * random.nextUnitInterval(),
        distance: 150_000 * random.nextUnitInterval()
      ).coordinate
      let line = Geodesic.inverse(a, b)
      let middle = Geodesic.direct(
        from: a, azimuth: line.initialAzimuth, distance: line.distance / 2
      ).coordinate
      let pa = try #require(projection.forward(a))
      let pb = try #require(projection.forward(b))
      let pm = try #require(projection.forward(middle))
      let dx: Double = pb.x - pa.x
      let dy: Double = pb.y - pa.y
      let chord: Double = (dx * dx + dy * dy).squareRoot()
      guard chord > 1 else { continue }
      let cross: Double = dx * (pm.y - pa.y) - dy * (pm.x - pa.x)
      let offset = abs(cross) / chord
      worst = max(worst, offset / chord)
    }
    #expect(worst < 1e-8, "largest midpoint offset \(worst) of the chord")
    print(
      "gnomonic centred at \(center): largest midpoint offset from the chord \(worst) of its length"
    )
  }
}
