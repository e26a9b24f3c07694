import FoundationEssentials
import LocationCore
import LocationTestKit
import NMEA
import Testing
import LocationModel

struct LocationAccuracyTests {
  let provenance = Provenance(
    backend: "replay:x.nmea", source: "x.nmea", line: 12, isSimulated: true)

  @Test func dilutionOfPrecisionGivesGpsdsNinetyFivePercentFigures() throws {
    var fix = TestFixes.fix(latitude: 3.1, longitude: 101.6, time: 1_700_000_000_500, hdop: 1.2)
    fix.vdop = 2.0
    let location = Location(fix: fix, provenance: provenance)
    let horizontal = try #require(location.horizontalAccuracy)
    #expect(horizontal.confidence == .percent95 && horizontal.source == .dilutionOfPrecision)
    #expect(abs(horizontal.value - 22.8) < 1e-9 && horizontal.radius95 == horizontal.value)
    let vertical = try #require(location.verticalAccuracy)
    #expect(vertical.confidence == .percent95 && abs(vertical.radius95 - 46) < 1e-9)
    #expect(location.timestamp == Date(timeIntervalSince1970: 1_700_000_000.5))
    #expect(location.speedAccuracy == nil && location.courseAccuracy == nil)
  }

  @Test func gstSigmasAreOneSigmaWithADerivedNinetyFivePercentRadius() throws {
    var fix = TestFixes.fix(latitude: 3.1, longitude: 101.6, time: 0, hdop: 1.2)
    var estimates = ErrorEstimates()
    estimates.latitude = 1.5
    estimates.longitude = 2.0
    estimates.altitude = 3.0
    fix.errorEstimates = estimates
    let location = Location(fix: fix, provenance: provenance)
    let horizontal = try #require(location.horizontalAccuracy)
    #expect(
      horizontal.confidence == .oneSigma && horizontal.source == .gst && horizontal.value == 2.0)
    #expect(abs(horizontal.radius95 - 2.0 * 2.4477468) < 1e-6)
    let vertical = try #require(location.verticalAccuracy)
    #expect(vertical.confidence == .oneSigma && abs(vertical.radius95 - 3.0 * 1.959964) < 1e-5)
  }

  @Test func noFixHasNoPositionAltitudeOrAccuracy() {
    var fix = TestFixes.fix(latitude: 0, longitude: 0, time: 0, mode: .noFix)
    fix.coordinate = Coordinate(latitude: 0, longitude: 0)
    fix.hdop = 1
    let location = Location(fix: fix, provenance: provenance)
    #expect(location.coordinate == nil && !location.hasPosition)
    #expect(
      location.horizontalAccuracy == nil && location.altitudeMSL == nil && location.speed == nil)
    var twoD = TestFixes.fix(latitude: 3.1, longitude: 101.6, time: 0, mode: .fix2D)
    twoD.altitudeMSL = 40
    #expect(Location(fix: twoD, provenance: provenance).altitudeMSL == nil)
    #expect(Location(fix: twoD, provenance: provenance).hasPosition)
  }

  @Test func simulatedFixesStateExactSpeedAndCourse() throws {
    var generator = SimulatedFixGenerator(
      parameters: SimulationParameters(noiseSigma: 2), startTime: 0)
    let next = generator.next()
    let epoch = try #require(next)
    let location = Location(
      fix: epoch.fix, provenance: Provenance(backend: "simulate", isSimulated: true))
    #expect(location.speedAccuracy?.value == 0 && location.courseAccuracy?.value == 0)
    // The GST sigmas are the range error (2 m) times the geometry's per-axis DOPs.
    let gst = try #require(epoch.fix.errorEstimates)
    let sigma = max(try #require(gst.latitude), try #require(gst.longitude))
    let hdop = try #require(epoch.fix.hdop)
    #expect(sigma > 2 * 0.3 && sigma < 2 * hdop + 1e-9)
    #expect(
      location.horizontalAccuracy?.value == sigma
        && location.horizontalAccuracy?.confidence == .oneSigma)
    let sky = epoch.sky.filter(\.visible)
    #expect(location.satellitesVisible == sky.count && location.satellitesUsed == sky.filter(\.used).count)
    #expect((location.satellitesUsed ?? 0) >= 4)
  }

  /// Distances are on the WGS84 ellipsoid: along the equator, a circle of radius a, one degree is
  /// a pi / 180 (111,319.49 m; the haversine on the mean sphere says 111,195.08 m). Bearings are
  /// the geodesic's initial azimuth in `0..<360`.
  @Test func distanceAndBearingAreOnTheEllipsoid() {
    let a = Coordinate(latitude: 0, longitude: 0)
    let b = Coordinate(latitude: 0, longitude: 1)
    #expect(abs(Geodesy.distance(a, b) - 6_378_137 * .pi / 180) < 1e-6)
    #expect(abs(Geodesy.bearing(a, b) - 90) < 1e-9)
    #expect(abs(Geodesy.bearing(b, a) - 270) < 1e-9)
    // Due north and due south: 0, never 360, and 180. Coincident points have no direction: a
    // meridian is taken, southwards on the equator as GeodSolve does (`0 0 0 0` gives 180).
    let north = Coordinate(latitude: 1, longitude: 0)
    #expect(Geodesy.bearing(a, north) == 0 && Geodesy.bearing(north, a) == 180)
    #expect(Geodesy.bearing(a, a) == 180)
    // Along a meridian the geodesic is the meridian ellipse, shorter than the sphere's arc near
    // the equator: the meridian radius of curvature there is a (1 - e^2) = 6,335,439 m.
    let step = Coordinate(latitude: 0.001, longitude: 0)
    let meridianRadius = 6_378_137 * (1 - 0.006_694_379_990_14)
    #expect(abs(Geodesy.distance(a, step) - meridianRadius * 0.001 * .pi / 180) < 1e-4)
  }

  /// The test track moves by its step as the filter measures it: 10 m on the ellipsoid, not
  /// 10 m of the mean sphere (9.945 m near the equator).
  @Test func theTestTrackStepsAreMetresOnTheEllipsoid() throws {
    let track = TestFixes.track(count: 5, stepMetres: 10)
    for (a, b) in zip(track, track.dropFirst()) {
      let here = try #require(a.fix.coordinate)
      let there = try #require(b.fix.coordinate)
      #expect(abs(Geodesy.distance(here, there) - 10) < 1e-6)
      #expect(here.longitude == there.longitude && there.latitude > here.latitude)
    }
  }

  /// The distance filter measures on the ellipsoid: 0.0009 degrees north of the equator is
  /// 99.52 m there (100.08 m on the mean sphere), so a 100 m filter holds the fix back.
  @Test func theDistanceFilterUsesTheEllipsoid() throws {
    let first = Location(
      fix: TestFixes.fix(latitude: 0, longitude: 30, time: 0, hdop: 1), provenance: provenance)
    let next = Location(
      fix: TestFixes.fix(latitude: 0.0009, longitude: 30, time: 1000, hdop: 1),
      provenance: provenance)
    let metres = try #require(next.distance(from: first))
    let meridianRadius = 6_378_137 * (1 - 0.006_694_379_990_14)
    #expect(abs(metres - meridianRadius * 0.0009 * .pi / 180) < 1e-3)
    #expect(!LocationFilter(distanceFilter: 100).accepts(next, after: first))
    #expect(LocationFilter(distanceFilter: 99).accepts(next, after: first))
  }
}
