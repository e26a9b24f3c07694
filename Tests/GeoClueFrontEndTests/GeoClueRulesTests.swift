import GeoClueFrontEnd
import LocationModel
import Testing

/// GeoClue 2.6's client-side rules, without a bus: thresholds and Location values.
@Suite("GeoClue2 thresholds and Location values")
struct GeoClueRulesTests {
  static func at(_ latitude: Double, _ longitude: Double, seconds: UInt64) -> GeoClueLocationValues
  {
    GeoClueLocationValues(latitude: latitude, longitude: longitude, seconds: seconds)
  }

  @Test func theFirstLocationIsAlwaysSignalled() {
    #expect(
      !GeoClueThresholds.suppresses(
        Self.at(1, 1, seconds: 5), after: nil, distance: 1_000_000, time: 1000))
  }

  @Test func zeroThresholdsSuppressNothing() {
    let a = Self.at(10, 10, seconds: 100)
    #expect(!GeoClueThresholds.suppresses(a, after: a, distance: 0, time: 0))
  }

  /// One degree of latitude on GeoClue's sphere: 6,372,795 m x pi / 180 = 111,226.3 m.
  @Test func distanceIsHaversineOnGeoCluesSphere() {
    let d = GeoClueThresholds.distance(
      from: Self.at(0, 0, seconds: 0), to: Self.at(1, 0, seconds: 0))
    #expect(abs(d - 111_226.3) < 0.1)
    let across = GeoClueThresholds.distance(
      from: Self.at(0, 179.9995, seconds: 0), to: Self.at(0, -179.9995, seconds: 0))
    #expect(abs(across - 111.2263) < 0.001)
  }

  @Test(arguments: [
    // (metres north of the signalled one, seconds later, distance threshold, time threshold, suppressed)
    (5.0, 10 as UInt64, 10 as UInt32, 0 as UInt32, true),  // closer than 10 m
    (15.0, 10, 10, 0, false),  // farther
    (15.0, 2, 10, 3, true),  // far enough, but less than 3 s later: either suppresses
    (15.0, 3, 10, 3, false),  // 3 s is not less than 3 s
    (5.0, 100, 0, 3, false),  // distance off, time passed
  ])
  func eitherThresholdSuppresses(
    metres: Double, seconds: UInt64, distance: UInt32, time: UInt32, suppressed: Bool
  ) {
    let signalled = Self.at(45, 7, seconds: 1000)
    let degrees = metres / (GeoClueThresholds.earthRadiusMetres * Double.pi / 180)
    let new = Self.at(45 + degrees, 7, seconds: 1000 + seconds)
    #expect(
      GeoClueThresholds.suppresses(new, after: signalled, distance: distance, time: time)
        == suppressed)
  }

  /// GeoClue takes the absolute difference: a location from before the signalled one (a log
  /// replayed from its start) counts by its distance in time too.
  @Test func anEarlierTimestampCountsByItsDistanceInTime() {
    let signalled = Self.at(45, 7, seconds: 1000)
    #expect(
      GeoClueThresholds.suppresses(
        Self.at(46, 7, seconds: 998), after: signalled, distance: 0, time: 3))
    #expect(
      !GeoClueThresholds.suppresses(
        Self.at(46, 7, seconds: 900), after: signalled, distance: 0, time: 3))
  }

  static func location(_ configure: (inout Fix) -> Void) -> Location {
    var fix = Fix(mode: .fix3D)
    fix.coordinate = Coordinate(latitude: -37.5, longitude: 175.25)
    configure(&fix)
    return Location(
      fix: fix, provenance: Provenance(backend: "gpsd://localhost:2947", isSimulated: false))
  }

  @Test func unknownValuesUseGeoCluesMarkers() throws {
    let values = try #require(
      GeoClueLocationValues(Self.location { _ in }, receivedAt: 1_700_000_000_123))
    #expect(values.latitude == -37.5 && values.longitude == 175.25)
    #expect(values.accuracy == -1)
    #expect(values.altitude == -1.7976931348623157e308)
    #expect(values.speed == -1 && values.heading == -1)
    // No date in the fix: the time it was received.
    #expect(values.seconds == 1_700_000_000 && values.microseconds == 123_000)
    #expect(values.description == "GPS fix from gpsd://localhost:2947")
  }

  @Test(arguments: [
    ("replay:/var/log/drive.nmea?speed=10", true, "replayed GPS fix from replay:/var/log/drive.nmea?speed=10"),
    ("simulate?rate=1", true, "simulated GPS fix from simulate?rate=1"),
    ("serial:/dev/ttyACM0", false, "GPS fix from serial:/dev/ttyACM0"),
  ])
  func theDescriptionNamesWhereTheFixCameFrom(_ backend: String, _ simulated: Bool, _ expected: String) throws {
    var location = Self.location { _ in }
    location.provenance = Provenance(backend: backend, isSimulated: simulated)
    let values = try #require(GeoClueLocationValues(location, receivedAt: 0))
    #expect(values.description == expected)
  }

  @Test func knownValuesComeFromTheFix() throws {
    let location = Self.location { fix in
      fix.time = 1_419_995_239_250
      fix.hdop = 1.1
      fix.altitudeMSL = 59.9
      fix.speedOverGround = 0.35
      fix.courseOverGround = 181.39
    }
    let values = try #require(GeoClueLocationValues(location, receivedAt: 0))
    #expect(abs(values.accuracy - 20.9) < 1e-9)  // HDOP 1.1 x 19 m (gpsd's eph)
    #expect(values.altitude == 59.9 && values.speed == 0.35 && values.heading == 181.39)
    #expect(values.seconds == 1_419_995_239 && values.microseconds == 250_000)
  }

  @Test func aFixWithoutPositionIsNoLocation() {
    var fix = Fix(mode: .noFix)
    fix.time = 1000
    #expect(
      GeoClueLocationValues(
        Location(fix: fix, provenance: Provenance(backend: "x", isSimulated: true)), receivedAt: 0)
        == nil)
  }

  /// The lifetime becomes microseconds for the bus thread's timer: it must stay a finite,
  /// non-negative number of seconds whatever is given.
  @Test func limitsAreClamped() {
    #expect(GeoClueLimits(previousLocationLifetime: .infinity).previousLocationLifetime == 5)
    #expect(GeoClueLimits(previousLocationLifetime: .nan).previousLocationLifetime == 5)
    #expect(GeoClueLimits(previousLocationLifetime: -1).previousLocationLifetime == 0)
    #expect(GeoClueLimits(previousLocationLifetime: 1e12).previousLocationLifetime == 3600)
    #expect(GeoClueLimits(clientsPerConnection: 0, clients: -5).clientsPerConnection == 1)
    #expect(GeoClueLimits(clientsPerConnection: 0, clients: -5).clients == 1)
  }
}
