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
    #expect(
      location.horizontalAccuracy?.value == 2
        && location.horizontalAccuracy?.confidence == .oneSigma)
    #expect(location.satellitesVisible == 12 && location.satellitesUsed == 9)
  }

  @Test func haversineDistanceAndBearing() {
    let a = Coordinate(latitude: 0, longitude: 0)
    let b = Coordinate(latitude: 0, longitude: 1)
    #expect(abs(Geodesy.distance(a, b) - 111_195.08) < 0.1)
    #expect(abs(Geodesy.bearing(a, b) - 90) < 1e-9)
    #expect(abs(Geodesy.bearing(b, a) - 270) < 1e-9)
  }
}
