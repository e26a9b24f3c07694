import Foundation
import LocationModel
import LocationTestKit

// `core-bench geodesic`: speed of Geodesic.inverse and Geodesic.direct, and their largest
// differences from GeographicLib's GeodSolve on the seeded test problems (10,000 random pairs,
// then the hard families: antipodal, nearly antipodal, near-polar, equatorial, meridional, short,
// coincident). Build with -c release.

/// Runs the geodesic benchmark; returns the exit status.
func geodesicBenchmark() -> Int32 {
  let cases = GeodesicCases.inverse()
  let random = cases.filter { $0.kind == "random" }
  let problems = GeodesicCases.direct()
  let clock = ContinuousClock()

  var checksum = 0.0
  var rounds = 0
  var start = clock.now
  repeat {
    for item in random { checksum += Geodesic.inverse(item.a, item.b).distance }
    rounds += 1
  } while clock.now - start < .seconds(2)
  let inverseRate = Double(rounds * random.count) / seconds(clock.now - start)

  rounds = 0
  start = clock.now
  repeat {
    for problem in problems {
      checksum +=
        Geodesic.direct(from: problem.start, azimuth: problem.azimuth, distance: problem.distance)
        .coordinate.latitude
    }
    rounds += 1
  } while clock.now - start < .seconds(2)
  let directRate = Double(rounds * problems.count) / seconds(clock.now - start)
  print("geodesic inverse: \(Int(inverseRate)) solutions/s (\(random.count) random pairs)")
  print("geodesic direct: \(Int(directRate)) solutions/s (\(problems.count) problems)")
  if checksum.isNaN { print("(checksum NaN)") }

  guard GeodSolve.executable != nil else {
    print(GeodSolve.missingMessage)
    return 0
  }
  do {
    let reference = try GeodSolve.inverse(cases.map { ($0.referenceA, $0.referenceB) })
    var worst: [String: (distance: Double, azimuth: Double)] = [:]
    for (item, expected) in zip(cases, reference) {
      let got = Geodesic.inverse(item.a, item.b)
      var azimuth = 0.0
      if item.azimuthsDefined {
        azimuth = max(
          abs((got.initialAzimuth - expected.azi1).remainder(dividingBy: 360)),
          abs((got.finalAzimuth - expected.azi2).remainder(dividingBy: 360)))
      }
      let old = worst[item.kind] ?? (0, 0)
      worst[item.kind] = (
        max(old.distance, abs(got.distance - expected.s12)), max(old.azimuth, azimuth)
      )
    }
    for (kind, errors) in worst.sorted(by: { $0.key < $1.key }) {
      let count = cases.filter { $0.kind == kind }.count
      print(
        "inverse vs GeodSolve, \(kind) (\(count)): max |ds12| \(errors.distance) m, max |dazi| \(errors.azimuth) deg"
      )
    }
    let directReference = try GeodSolve.direct(problems)
    var worstPosition = 0.0
    for (problem, expected) in zip(problems, directReference) {
      let got = Geodesic.direct(
        from: problem.start, azimuth: problem.azimuth, distance: problem.distance)
      let longitude =
        abs((got.coordinate.longitude - expected.lon2).remainder(dividingBy: 360))
        * cos(expected.lat2 * .pi / 180)
      worstPosition = max(worstPosition, abs(got.coordinate.latitude - expected.lat2), longitude)
    }
    print("direct vs GeodSolve (\(problems.count)): max position error \(worstPosition) deg")
    print(
      "(GeodSolve -p 9 prints s12 to 1e-9 m and angles to 1e-14 deg: smaller differences are not resolved)"
    )
    return 0
  } catch {
    print("core-bench: \(error)")
    return 1
  }
}
