import GPSDBackend
import LocationCore
import NMEA
import Testing
import LocationModel

@Suite struct GPSDEndpointTests {
  @Test(arguments: [
    ("gpsd://localhost:2947", "localhost", UInt16(2947), String?.none),
    ("gpsd://localhost", "localhost", 2947, nil),
    ("gpsd://", "localhost", 2947, nil),
    ("gpsd", "localhost", 2947, nil),
    ("gpsd://:3000", "localhost", 3000, nil),
    ("gpsd://192.0.2.7:40000/dev/ttyACM0", "192.0.2.7", 40000, "/dev/ttyACM0"),
    (
      "gpsd://gps.example/dev/serial/by-id/usb-u-blox", "gps.example", 2947,
      "/dev/serial/by-id/usb-u-blox"
    ),
    ("gpsd://[::1]:2948", "::1", 2948, nil),
    ("gpsd://[fe80::1]/dev/ttyUSB0", "fe80::1", 2947, "/dev/ttyUSB0"),
  ])
  func parses(_ uri: String, _ host: String, _ port: UInt16, _ device: String?) throws {
    let endpoint = try GPSDEndpoint(uri: uri)
    #expect(endpoint == GPSDEndpoint(host: host, port: port, device: device))
  }

  @Test(arguments: [
    ("http://localhost:2947", GPSDURIError.notGPSD("http://localhost:2947")),
    ("gpsd://localhost:0", .invalidPort("0")),
    ("gpsd://localhost:65536", .invalidPort("65536")),
    ("gpsd://localhost:port", .invalidPort("port")),
    ("gpsd://localhost:", .invalidPort("")),
    ("gpsd://[::1", .missingHost("gpsd://[::1")),
    // Found by fuzzing: hosts that are neither a name, an IPv4 address nor a bracketed IPv6
    // address were accepted, and their canonical URI did not parse back.
    ("gpsd://d::1]:2", .invalidHost("d::1]")),
    ("gpsd://::1", .invalidHost(":")),
    ("gpsd://a b:2947", .invalidHost("a b")),
    ("gpsd://user@host", .invalidHost("user@host")),
    ("gpsd://[::1%eth0 x]:2947", .invalidHost("::1%eth0 x")),
    ("gpsd://[gps.example]", .invalidHost("gps.example")),
    // All-digit last labels are IPv4 addresses or nothing: a resolver would take these as names.
    ("gpsd://1.2.3.4.5:2947", .invalidHost("1.2.3.4.5")),
    ("gpsd://10.0.0.256", .invalidHost("10.0.0.256")),
    ("gpsd://gps..example:2947", .invalidHost("gps..example")),
    ("gpsd://010.0.0.1:2947", .invalidHost("010.0.0.1")),
    ("gpsd://-gps.example:2947", .invalidHost("-gps.example")),
    // Longer than a DNS name can be; device paths that can name no device gpsd reports.
    ("gpsd://" + String(repeating: "a", count: 254) + ":2947", .invalidHost(String(repeating: "a", count: 64))),
    ("gpsd://localhost:2947/../../etc/passwd", .invalidDevice("/../../etc/passwd")),
    ("gpsd://localhost:2947/dev/tty\u{1B}[2J", .invalidDevice("/dev/tty\u{1B}[2J")),
  ])
  func rejects(_ uri: String, _ error: GPSDURIError) {
    #expect(throws: error) { try GPSDEndpoint(uri: uri) }
    #expect(throws: error) { try GPSDBackend(uri: uri) }
  }

  @Test func rolloverFloorParameter() throws {
    let last = CivilDate.days(year: 2019, month: 4, day: 7)
    #expect(try GPSDEndpoint(uri: "gpsd://localhost:2947").rolloverFloor == last)
    #expect(try GPSDEndpoint(uri: "gpsd://localhost:2947?rollover-floor=none").rolloverFloor == nil)
    let endpoint = try GPSDEndpoint(uri: "gpsd://localhost:2947/dev/ttyUSB0?rollover-floor=2010-01-01")
    #expect(endpoint.rolloverFloor == CivilDate.days(year: 2010, month: 1, day: 1))
    #expect(endpoint.device == "/dev/ttyUSB0")
    #expect(throws: GPSDURIError.invalidParameter("rollover-floor=soon")) {
      try GPSDEndpoint(uri: "gpsd://localhost?rollover-floor=soon")
    }
    #expect(throws: GPSDURIError.invalidParameter("speed=1")) { try GPSDEndpoint(uri: "gpsd://localhost?speed=1") }
    // A live fix dated 1999-10-25 (firmware whose week counter wrapped) becomes 2019-06-10.
    var fix = Fix(mode: .fix2D)
    fix.time = Int64(CivilDate.days(year: 1999, month: 10, day: 25)) * 86_400_000 + 43_200_000
    let (moved, weeks) = GPSDMapping.applyingRolloverFloor(last, to: fix)
    #expect(moved.time == Int64(CivilDate.days(year: 2019, month: 6, day: 10)) * 86_400_000 + 43_200_000)
    #expect(weeks == 1024)
    #expect(GPSDMapping.applyingRolloverFloor(nil, to: fix).weeks == 0)
  }

  @Test func errorMessagesShowTheExpectedForm() {
    #expect(GPSDURIError.invalidPort("x").description.contains("gpsd://HOST[:PORT][/DEVICE]"))
  }

  @Test(arguments: [
    "gpsd://localhost:2947", "gpsd://[::1]:2948/dev/ttyS0", "gpsd://[fe80::1%eth0]", "gpsd://gps_1.example-2",
    "gpsd://192.0.2.7/dev/serial/by-id/usb-u-blox", "gpsd://[::ffff:192.0.2.7]:1",
  ])
  func canonicalURIParsesBack(_ uri: String) throws {
    let endpoint = try GPSDEndpoint(uri: uri)
    #expect(try GPSDEndpoint(uri: endpoint.uri) == endpoint)
  }

  @Test func canonicalURI() {
    #expect(
      GPSDEndpoint(host: "::1", port: 2947, device: "/dev/ttyS0").uri
        == "gpsd://[::1]:2947/dev/ttyS0")
    #expect(GPSDEndpoint(host: "localhost").uri == "gpsd://localhost:2947")
  }
}

private func fix(_ mode: FixMode, time: Int64?, latitude: Double = 1) -> Fix {
  var fix = Fix(mode: mode)
  fix.time = time
  fix.coordinate = Coordinate(latitude: latitude, longitude: 2)
  return fix
}

@Suite struct EpochDeduplicatorTests {
  private let settle: UInt64 = 150_000_000

  @Test func threeDimensionalFixIsEmittedAtOnceAndLaterReportsOfTheEpochDropped() {
    var deduplicator = EpochDeduplicator(settleNanoseconds: settle)
    #expect(deduplicator.add(fix(.fix3D, time: 1000), now: 0).map(\.mode) == [.fix3D])
    #expect(deduplicator.add(fix(.fix2D, time: 1000), now: 1).isEmpty)
    #expect(deduplicator.add(fix(.fix3D, time: 1000), now: 2).isEmpty)
    #expect(deduplicator.deadline == nil)
  }

  @Test func twoDimensionalReportIsReplacedByTheThreeDimensionalOneOfTheSameEpoch() {
    // gpsd's first epoch: mode 2 after RMC, then mode 3 after GGA.
    var deduplicator = EpochDeduplicator(settleNanoseconds: settle)
    #expect(deduplicator.add(fix(.fix2D, time: 1000, latitude: 1), now: 0).isEmpty)
    #expect(deduplicator.deadline == settle)
    let out = deduplicator.add(fix(.fix3D, time: 1000, latitude: 3), now: 5_000_000)
    #expect(out.map(\.mode) == [.fix3D])
    #expect(out.first?.coordinate?.latitude == 3)
    #expect(deduplicator.flush(now: 10 * settle).isEmpty)
  }

  @Test func lesserFixIsEmittedAfterTheSettleDelayOrWhenTheNextEpochStarts() {
    var deduplicator = EpochDeduplicator(settleNanoseconds: settle)
    #expect(deduplicator.add(fix(.fix2D, time: 1000), now: 0).isEmpty)
    #expect(deduplicator.flush(now: settle - 1).isEmpty)
    #expect(deduplicator.flush(now: settle).map(\.time) == [1000])
    // A late report of the emitted epoch is dropped.
    #expect(deduplicator.add(fix(.fix3D, time: 1000), now: settle + 1).isEmpty)
    // Next epoch: a 2D fix is held, then flushed when epoch 3000 starts.
    #expect(deduplicator.add(fix(.fix2D, time: 2000), now: settle + 2).isEmpty)
    #expect(deduplicator.add(fix(.fix2D, time: 3000), now: settle + 3).map(\.time) == [2000])
    // And a 3D fix of a new epoch flushes the held one first, then itself.
    #expect(deduplicator.add(fix(.fix3D, time: 4000), now: settle + 4).map(\.time) == [3000, 4000])
  }

  @Test func fixWithoutTimeIsPassedThrough() {
    var deduplicator = EpochDeduplicator(settleNanoseconds: settle)
    #expect(deduplicator.add(fix(.fix2D, time: 1000), now: 0).isEmpty)
    #expect(deduplicator.add(fix(.fix2D, time: nil), now: 1).map(\.time) == [1000, nil])
  }
}

@Suite struct GPSDMappingTests {
  @Test func tpvWithoutAltitudeSpeedOrClimbGivesUnknownNotZero() {
    var tpv = GPSDTPV(mode: 3)
    tpv.time = 1_773_489_600_100
    tpv.latitude = 48.1
    tpv.longitude = 11.5
    tpv.status = 1
    let fix = GPSDMapping.fix(from: tpv, sky: nil, gst: nil)
    #expect(fix.mode == .fix3D)
    #expect(fix.coordinate == Coordinate(latitude: 48.1, longitude: 11.5))
    #expect(fix.altitudeMSL == nil)
    #expect(fix.altitudeHAE == nil)
    #expect(fix.speedOverGround == nil)
    #expect(fix.courseOverGround == nil)
    #expect(fix.climb == nil)
    #expect(fix.hdop == nil)
    #expect(fix.satellitesUsed == nil)
    #expect(fix.satellites.isEmpty)
    #expect(fix.time == 1_773_489_600_100)
    #expect(fix.timeOfDay == 43_200_100, "12:00:00.100 UTC")
    #expect(fix.quality == .gps)
  }

  /// gpsd prints `altHAE` and `altMSL` to 4 decimals and `geoidSep` to 3: its height above the
  /// ellipsoid is passed on as it is, not rebuilt from the rounded parts.
  @Test func gpsdsOwnHeightAboveTheEllipsoidIsKept() {
    var tpv = GPSDTPV(mode: 3)
    tpv.latitude = 52.1
    tpv.longitude = 5.2
    tpv.altitudeMSL = 12.3456
    tpv.geoidSeparation = 43.123
    tpv.altitudeHAE = 55.4690
    let fix = GPSDMapping.fix(from: tpv, sky: nil, gst: nil)
    #expect(fix.altitudeMSL == 12.3456)
    #expect(fix.geoidSeparation == 43.123)
    #expect(fix.altitudeHAE == 55.4690)
    // Without gpsd's figure, the sum of the parts.
    tpv.altitudeHAE = nil
    let summed = GPSDMapping.fix(from: tpv, sky: nil, gst: nil)
    #expect(summed.altitudeHAE == 12.3456 + 43.123)
    // A 2D fix has no height.
    tpv.mode = 2
    tpv.altitudeHAE = 55.4690
    #expect(GPSDMapping.fix(from: tpv, sky: nil, gst: nil).altitudeHAE == nil)
  }

  @Test func fullTPVAndSkyMapIntoTheFix() {
    var tpv = GPSDTPV(mode: 3)
    tpv.time = 1_773_489_600_000
    tpv.latitude = -33.85
    tpv.longitude = 151.2
    tpv.altitudeHAE = 80
    tpv.geoidSeparation = 22.5
    tpv.speed = 0
    tpv.track = 359.5
    tpv.climb = -0.25
    tpv.magneticVariation = 12.7
    tpv.status = 2
    tpv.dgpsAge = 3
    tpv.dgpsStation = 17
    var sky = GPSDSky(satellites: [
      GPSDSatellite(prn: 5, gnssID: 0, elevation: 40, azimuth: 100, snr: 41, used: true),
      GPSDSatellite(prn: 70, gnssID: 6, elevation: nil, azimuth: nil, snr: nil, used: false),
    ])
    sky.hdop = 0.8
    sky.vdop = 1.1
    sky.pdop = 1.4
    var estimates = ErrorEstimates()
    estimates.latitude = 1.5
    let fix = GPSDMapping.fix(
      from: tpv, sky: sky, gst: GPSDGST(time: tpv.time, estimates: estimates))
    #expect(fix.altitudeMSL == 57.5, "altMSL derived from altHAE - geoidSep when absent")
    #expect(fix.altitudeHAE == 80)
    #expect(fix.speedOverGround == 0, "a real zero stays zero")
    #expect(fix.courseOverGround == 359.5)
    #expect(fix.climb == -0.25)
    #expect(fix.magneticVariation == 12.7)
    #expect(fix.quality == .dgps)
    #expect(fix.dgpsAge == 3 && fix.dgpsStation == 17)
    #expect(fix.hdop == 0.8 && fix.vdop == 1.1 && fix.pdop == 1.4)
    #expect(fix.satellitesUsed == 1)
    #expect(fix.satellites.map(\.constellation) == [.gps, .glonass])
    #expect(fix.satellites[1].elevation == nil && fix.satellites[1].snr == nil)
    #expect(fix.errorEstimates?.latitude == 1.5)
    #expect(fix.eph.map { abs($0 - 0.8 * 4.75) < 1e-9 } == true)
  }

  @Test func twoDimensionalFixHasNoAltitudeOrClimbEvenIfSent() {
    var tpv = GPSDTPV(mode: 2)
    tpv.time = 0
    tpv.latitude = 1
    tpv.longitude = 2
    tpv.altitudeMSL = 100
    tpv.climb = 1
    let fix = GPSDMapping.fix(from: tpv, sky: nil, gst: nil)
    #expect(fix.mode == .fix2D)
    #expect(fix.altitudeMSL == nil && fix.climb == nil)
    #expect(fix.quality == nil, "no status sent")
  }

  @Test func noFixHasNoCoordinateEvenWhenGpsdRepeatsTheLastOne() {
    var tpv = GPSDTPV(mode: 1)
    tpv.latitude = 1
    tpv.longitude = 2
    tpv.status = 0
    let fix = GPSDMapping.fix(from: tpv, sky: nil, gst: nil)
    #expect(fix.mode == .noFix && fix.coordinate == nil && fix.quality == .invalid)
    // A "3D" report without a valid position is not a fix.
    var broken = GPSDTPV(mode: 3)
    broken.latitude = 91
    broken.longitude = 0
    #expect(GPSDMapping.fix(from: broken, sky: nil, gst: nil).mode == .noFix)
  }

  @Test(arguments: [
    (0, FixQuality.gps), (1, .gps), (2, .dgps), (3, .rtkFixed), (4, .rtkFloat), (5, .deadReckoning),
    (6, .deadReckoning), (7, .manual), (8, .simulator), (9, .pps),
  ])
  func statusBecomesQuality(_ status: Int, _ quality: FixQuality) {
    #expect(GPSDMapping.quality(status: status, mode: .fix3D) == quality)
  }
}
