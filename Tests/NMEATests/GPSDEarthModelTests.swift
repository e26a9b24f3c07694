import Foundation
import LocationModel
import LocationProtocol
import NMEA
import Testing

/// gpsd 3.22's geoid and magnetic-variation models (gpsd/geoid.c) and where the decoder fills a
/// fix from them (gpsd/libgpsd_core.c `gpsd_error_model`, drivers/driver_nmea0183.c `processGGA`,
/// `processRMC`).
@Suite("gpsd's geoid and variation models")
struct GPSDEarthModelTests {
  /// Positions on four continents and gpsd's own `geoidSep` and `magvar` for them, as its
  /// regression output prints them (`../shared/gpsd-regress/*.chk`; the receivers sent neither).
  static let gpsdValues:
    [(log: String, latitude: Double, longitude: Double, separation: Double, variation: Double)] = [
      ("rst39", 42.095565767, -88.03401395, -33.830, -3.8),
      ("ais-nmea", 52.842278167, 5.70582, 43.529, 1.7),
      ("bu353-glonass", 55.686591667, 37.621453333, 13.603, 11.3),
      ("garmin48", -45.457633333, 167.15275, 0.827, 24.6),
      ("gps-360", 50.489666667, -104.683983333, -20.418, 8.6),
      ("iTrek", 35.331746667, 136.671051667, 35.850, -7.8),
      ("triton400", 26.636213333, -80.189821667, -29.289, -7.0),
    ]

  @Test("the models give gpsd's printed geoidSep and magvar on four continents")
  func gpsdPrintedValues() {
    for p in Self.gpsdValues {
      let separation = GPSDEarthModel.geoidSeparation(latitude: p.latitude, longitude: p.longitude)
      let variation = GPSDEarthModel.magneticVariation(latitude: p.latitude, longitude: p.longitude)
      #expect(abs(separation - p.separation) <= 0.0005, "\(p.log): \(separation)")
      #expect(abs(variation - p.variation) <= 0.05, "\(p.log): \(variation)")
    }
  }

  @Test("grid nodes give the table's value; the edges and bad input follow gpsd")
  func gridAndEdges() {
    // geoid_delta[18][36] = 1723 cm, magvar[18][36] = -484 hundredths at 0 N 0 E.
    #expect(GPSDEarthModel.geoidSeparation(latitude: 0, longitude: 0) == 17.23)
    #expect(GPSDEarthModel.magneticVariation(latitude: 0, longitude: 0) == -4.84)
    // Midway between two nodes of a row: their mean (geoid_delta[18][36] 1723, [18][37] 1642).
    #expect(abs(GPSDEarthModel.geoidSeparation(latitude: 0, longitude: 2.5) - 16.825) < 1e-9)
    // The south pole row is constant; the last row and column use gpsd's corner cases.
    #expect(GPSDEarthModel.geoidSeparation(latitude: -90, longitude: -180) == -30.15)
    #expect(GPSDEarthModel.geoidSeparation(latitude: -90, longitude: 123.4) == -30.15)
    #expect(GPSDEarthModel.geoidSeparation(latitude: 90, longitude: 180) == 14.9)
    // gpsd's range check is on the cell index, so up to 5 degrees past the last row or column
    // repeat its edge; further out, or not finite, gpsd returns 0.
    #expect(GPSDEarthModel.geoidSeparation(latitude: 91, longitude: 180) == 14.9)
    #expect(GPSDEarthModel.geoidSeparation(latitude: 95, longitude: 0) == 0)
    #expect(GPSDEarthModel.geoidSeparation(latitude: 0, longitude: -180.5) == 0)
    #expect(GPSDEarthModel.geoidSeparation(latitude: .nan, longitude: 0) == 0)
    #expect(GPSDEarthModel.magneticVariation(latitude: 0, longitude: .infinity) == 0)
  }

  @Test("the model stays within the geoid's range everywhere, and is continuous across cells")
  func rangeAndContinuity() {
    var latitude = -90.0
    while latitude <= 90 {
      var longitude = -180.0
      while longitude <= 180 {
        let n = GPSDEarthModel.geoidSeparation(latitude: latitude, longitude: longitude)
        #expect(n > -110 && n < 90, "\(latitude) \(longitude): \(n)")
        let v = GPSDEarthModel.magneticVariation(latitude: latitude, longitude: longitude)
        #expect(v >= -180 && v <= 180, "\(latitude) \(longitude): \(v)")
        longitude += 1.25
      }
      latitude += 1.25
    }
    // Just either side of a cell boundary the values meet.
    let below = GPSDEarthModel.geoidSeparation(latitude: 44.999_999_9, longitude: 7.3)
    let above = GPSDEarthModel.geoidSeparation(latitude: 45, longitude: 7.3)
    #expect(abs(below - above) < 1e-4)
  }

  /// rst39.log (gpsd's regression log): RMC, then GGAs with an empty geoid separation field.
  static let rst39 =
    "$GPRMC,204132.00,A,4205.733476,N,08802.041110,W,9.415,21.404,190214,,,D*7C\r\n"
    + "$GPGGA,204132.10,4205.733715,N,08802.040978,W,2,08,1.0,221.921,M,,,3,0138*15\r\n"
    + "$GPGGA,204132.20,4205.733946,N,08802.040837,W,2,08,1.0,221.912,M,,,3,0138*14\r\n"
    + "$GPGGA,204132.30,4205.734170,N,08802.040688,W,2,08,1.0,221.903,M,,,3,0138*15\r\n"

  @Test(
    "a GGA without a separation gets gpsd's geoidSep and altHAE, an RMC without variation its magvar"
  )
  func emptyFieldsFilled() throws {
    let (fixes, stats) = decode(Self.rst39)
    #expect(stats.rejectedTotal == 0)
    let fix = try #require(fixes.first { $0.timeOfDay == 74_492_200 })
    // gpsd's TPV of 20:41:32.200 (rst39.log.chk): altHAE 188.0825, geoidSep -33.830, magvar -3.8.
    #expect(fix.mode == .fix3D)
    #expect(abs((fix.altitudeHAE ?? 0) - 188.0825) < 0.0005)
    #expect(abs((fix.geoidSeparation ?? 0) + 33.8295) < 0.0005)
    #expect(abs((fix.magneticVariation ?? 0) + 3.784) < 0.001)
    var json: [UInt8] = []
    GPSDJSON.appendTPV(fix, to: &json)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
    #expect(object["altHAE"] as? Double == 188.082)
    #expect(object["geoidSep"] as? Double == -33.83)
    #expect(object["magvar"] as? Double == -3.8)
    // The RMC-only first epoch is 2D: magvar, but no geoidSep (gpsd prints that in 3D only).
    let first = try #require(fixes.first)
    #expect(first.mode == .fix2D)
    json = []
    GPSDJSON.appendTPV(first, to: &json)
    let rmcObject = try #require(
      try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
    #expect(rmcObject["magvar"] as? Double == -3.8)
    #expect(rmcObject["geoidSep"] == nil && rmcObject["altHAE"] == nil)
  }

  @Test("the receiver's separation and variation win; 0.0 variation counts as empty (processRMC)")
  func receiverValuesWin() throws {
    let text =
      sentence("GPGGA,101500.00,4807.038,N,01131.000,E,1,07,1.1,545.4,M,46.9,M,,")
      + sentence("GPRMC,101500.00,A,4807.038,N,01131.000,E,0.0,301.9,071020,18.3,E,A")
      + sentence("GPGGA,101501.00,4807.038,N,01131.000,E,1,07,1.1,545.4,M,46.9,M,,")
      + sentence("GPRMC,101501.00,A,4807.038,N,01131.000,E,0.0,301.9,071020,0.0,E,A")
      + sentence("GPGGA,101502.00,4807.038,N,01131.000,E,1,07,1.1,545.4,M,46.9,M,,")
      + sentence("GPRMC,101502.00,A,4807.038,N,01131.000,E,0.0,301.9,071020,0.1,W,A")
    let fixes = decode(text).0
    #expect(fixes.count == 3)
    #expect(fixes.map(\.geoidSeparation) == [46.9, 46.9, 46.9])
    #expect(fixes.map(\.altitudeHAE) == [592.3, 592.3, 592.3])
    let model = GPSDEarthModel.magneticVariation(
      latitude: 48 + 7.038 / 60, longitude: 11 + 31.0 / 60)
    #expect(fixes.map(\.magneticVariation) == [18.3, model, -0.1])
    #expect(abs(model - 3.2) < 0.5)
  }

  @Test("without a position there is nothing to fill")
  func noPositionNoFill() throws {
    let text =
      sentence("GPGGA,101500.00,,,,,0,00,,,M,,M,,") + sentence("GPRMC,101500.00,V,,,,,,,071020,,,N")
    let fix = try #require(decode(text).0.first)
    #expect(fix.mode < .fix2D)
    #expect(fix.geoidSeparation == nil && fix.magneticVariation == nil)
  }
}
