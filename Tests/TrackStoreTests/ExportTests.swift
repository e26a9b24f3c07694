import Foundation
import FoundationXML
import LocationModel
import LocationProtocol
import Testing
import TrackStore

@Suite struct ExportTests {
  static let schema = packageRoot + "/Tests/TrackStoreTests/Schema/gpx.xsd"

  /// A track with a 10-minute gap in the middle (two segments) and awkward values: a point on
  /// the antimeridian, negative altitudes, a fix without altitude or DOP.
  func awkwardTrack() -> [TrackPoint] {
    var points = syntheticTrack(count: 40, start: 1_556_712_000_000)
    points += syntheticTrack(count: 40, start: 1_556_712_000_000 + 40_000 + 600_000)
    points[5].coordinate = Coordinate(latitude: -0.000001, longitude: 179.999999999)
    points[6].altitudeMSL = -3.25
    points[7].altitudeMSL = nil
    points[7].hdop = nil
    points[7].satellitesUsed = nil
    points[8].time += 250  // milliseconds
    return points
  }

  func store(_ points: [TrackPoint]) throws -> (TrackStore, String) {
    let directory = try temporaryDirectory()
    let store = try TrackStore(path: directory + "/track.sqlite")
    try store.append(points)
    return (store, directory)
  }

  @Test func gpxValidatesAgainstTheGPX11Schema() throws {
    let (store, directory) = try store(awkwardTrack())
    let gpx = try exportText(store, TrackExportOptions(format: .gpx))
    try gpx.write(toFile: directory + "/track.gpx", atomically: false, encoding: .utf8)
    let result = try run(["/usr/bin/xmllint", "--noout", "--schema", Self.schema, directory + "/track.gpx"])
    #expect(result.status == 0, "\(result.error)")
    #expect(result.error.contains("validates"))
    #expect(gpx.components(separatedBy: "<trkseg>").count - 1 == 2)
    #expect(gpx.components(separatedBy: "<trkpt ").count - 1 == 80)
    #expect(gpx.contains(#"<trkpt lat="-0.000001" lon="-180">"#))
    #expect(gpx.contains("<ele>-3.25</ele>"))
    #expect(gpx.contains("<time>2019-05-01T12:00:08.250Z</time>"))
    #expect(gpx.contains("<geoidheight>-16.7</geoidheight>"))
    // An empty store is a valid GPX file too.
    let empty = try TrackStore(path: directory + "/empty.sqlite")
    try exportText(empty, TrackExportOptions(format: .gpx)).write(
      toFile: directory + "/empty.gpx", atomically: false, encoding: .utf8)
    #expect(try run(["/usr/bin/xmllint", "--noout", "--schema", Self.schema, directory + "/empty.gpx"]).status == 0)
  }

  /// Exact halves at the last decimal round as the TPV rounds them (gpsd's printf, half to
  /// even on the exact binary value), so a fix's export and its TPV give the same digits.
  @Test func halvesRoundAsTheTPVRoundsThem() throws {
    var points = syntheticTrack(count: 1, start: 1_556_712_000_000)
    points[0].altitudeMSL = 1.0625
    points[0].geoidSeparation = 20.5625
    let (store, _) = try store(points)
    let gpx = try exportText(store, TrackExportOptions(format: .gpx))
    #expect(gpx.contains("<ele>1.062</ele>"), "\(gpx)")
    #expect(gpx.contains("<geoidheight>20.562</geoidheight>"), "\(gpx)")
    let csv = try exportText(store, TrackExportOptions(format: .csv))
    #expect(csv.contains(",1.062,21.625,20.562,"), "\(csv)")
    var fix = Fix(mode: .fix3D)
    fix.coordinate = points[0].coordinate
    fix.altitudeMSL = 1.0625
    fix.geoidSeparation = 20.5625
    var bytes: [UInt8] = []
    GPSDJSON.appendTPV(fix, to: &bytes)
    let tpv = String(decoding: bytes, as: UTF8.self)
    #expect(tpv.contains("\"altMSL\":1.062") && tpv.contains("\"geoidSep\":20.562"), "\(tpv)")
  }

  /// A course that rounds to 360 is north, 0, in CSV as in GPX (0 up to, not including, 360).
  @Test func aCourseThatRoundsTo360IsWrittenAs0() throws {
    var points = syntheticTrack(count: 3, start: 1_556_712_000_000)
    for (index, course) in [359.996, 359.994, 360.0].enumerated() { points[index].course = course }
    let (store, _) = try store(points)
    let csv = try exportText(store, TrackExportOptions(format: .csv))
    let rows = csv.split(separator: "\n").dropFirst()
    let courseColumn = try #require(csv.split(separator: "\n").first?.split(separator: ",").firstIndex(of: "course"))
    let courses = rows.map { String($0.split(separator: ",", omittingEmptySubsequences: false)[courseColumn]) }
    #expect(courses == ["0", "359.99", "0"], "\(csv)")
    let gpx = try exportText(store, TrackExportOptions(format: .gpx))
    #expect(gpx.components(separatedBy: "<gpxtpx:course>0</gpxtpx:course>").count - 1 == 2)
    #expect(gpx.contains("<gpxtpx:course>359.99</gpxtpx:course>"))
  }

  /// GPX with Garmin's TrackPointExtension v2 known, so that xmllint checks speed and course too.
  static let garminSchema = packageRoot + "/Tests/TrackStoreTests/Schema/gpx-garmin.xsd"

  /// Each track point's `gpxtpx:speed` and `gpxtpx:course` read back with an XML parser, in order
  /// (`nil` where the point has none).
  final class ExtensionReader: NSObject, XMLParserDelegate {
    var points: [(speed: Double?, course: Double?)] = []
    private var text = ""
    func parser(
      _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
      attributes: [String: String] = [:]
    ) {
      if name == "trkpt" { points.append((nil, nil)) }
      text = ""
    }
    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
      guard namespaceURI == "http://www.garmin.com/xmlschemas/TrackPointExtension/v2", !points.isEmpty else { return }
      if name == "speed" { points[points.count - 1].speed = Double(text) }
      if name == "course" { points[points.count - 1].course = Double(text) }
    }
  }

  @Test func gpxCarriesSpeedAndCourseInGarminsTrackPointExtension() throws {
    var points = awkwardTrack()
    points[10].speed = nil
    points[11].course = nil
    points[12].course = 359.999  // rounds to 360.00: written as 0 (DegreesTrue_t is below 360)
    points[13].speed = -1  // not a speed: left out
    points[14].course = .nan
    let (written, directory) = try store(points)
    let gpx = try exportText(written, TrackExportOptions(format: .gpx))
    try gpx.write(toFile: directory + "/track.gpx", atomically: false, encoding: .utf8)
    let result = try run(["/usr/bin/xmllint", "--noout", "--schema", Self.garminSchema, directory + "/track.gpx"])
    #expect(result.status == 0, "\(result.error)")
    #expect(result.error.contains("validates"))
    #expect(gpx.contains(#"xmlns:gpxtpx="http://www.garmin.com/xmlschemas/TrackPointExtension/v2""#))
    let parser = XMLParser(data: Data(gpx.utf8))
    parser.shouldProcessNamespaces = true
    let reader = ExtensionReader()
    parser.delegate = reader
    #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
    #expect(reader.points.count == points.count)
    for (index, (read, point)) in zip(reader.points, points).enumerated() {
      let speed = point.speed.flatMap { $0 >= 0 ? $0 : nil }
      #expect((read.speed == nil) == (speed == nil), "point \(index)")
      if let speed, let value = read.speed { #expect(abs(value - speed) < 0.0005, "point \(index)") }
      let course = point.course.flatMap { $0.isFinite ? $0 : nil }
      #expect((read.course == nil) == (course == nil), "point \(index)")
      if let course, let value = read.course {
        #expect(abs(value - (course >= 359.995 ? 0 : course)) < 0.005, "point \(index)")
      }
    }
    #expect(reader.points[12].course == 0)
    // A point without either has no extensions element.
    points[15].speed = nil
    points[15].course = nil
    let (bare, _) = try self.store([points[15]])
    #expect(!(try exportText(bare, TrackExportOptions(format: .gpx))).contains("<extensions>"))
  }

  @Test func gpxRoundTripsThroughGPSBabelWithTheSamePoints() throws {
    let points = awkwardTrack()
    let (store, directory) = try store(points)
    try exportText(store, TrackExportOptions(format: .gpx)).write(
      toFile: directory + "/track.gpx", atomically: false, encoding: .utf8)
    let result = try run([
      "/usr/bin/gpsbabel", "-t", "-i", "gpx", "-f", directory + "/track.gpx", "-o", "unicsv,utc=0", "-F", "-",
    ])
    #expect(result.status == 0, "\(result.error)")
    let lines = result.output.split(whereSeparator: \.isNewline).map(String.init)
    let header = lines.first?.split(separator: ",").map(String.init) ?? []
    let latitude = try #require(header.firstIndex(of: "Latitude"))
    let longitude = try #require(header.firstIndex(of: "Longitude"))
    let altitude = try #require(header.firstIndex(of: "Altitude"))
    let date = try #require(header.firstIndex(of: "Date"))
    let time = try #require(header.firstIndex(of: "Time"))
    let rows = lines.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
    #expect(rows.count == points.count)
    for (row, point) in zip(rows, points) {
      let lat = try #require(Double(row[latitude]))
      let lon = try #require(Double(row[longitude]))
      #expect(abs(lat - point.coordinate.latitude) < 1e-6)
      let expectedLongitude = point.coordinate.longitude >= 179.99999999 ? point.coordinate.longitude - 360 : point.coordinate.longitude
      #expect(abs(lon - expectedLongitude) < 1e-6)
      if let msl = point.altitudeMSL {
        #expect(abs((Double(row[altitude]) ?? .nan) - msl) <= 0.05 + 1e-9)  // unicsv prints 0.1 m
      }
      // unicsv writes seconds: compare with the fix time truncated to the second.
      let day = try #require(TrackTime.parse(row[date].replacingOccurrences(of: "/", with: "-")))
      let clock = row[time].split(separator: ":").compactMap { Double($0) }
      #expect(clock.count == 3)
      let seconds = Int64(clock[0] * 3600 + clock[1] * 60 + clock[2].rounded(.down))
      #expect(day + seconds * 1000 == point.time / 1000 * 1000)
    }
  }

  @Test func geojsonIsOneFeatureWithALineStringOrAMultiLineString() throws {
    let points = awkwardTrack()
    let (store, _) = try store(points)
    let text = try exportText(store, TrackExportOptions(format: .geojson))
    let feature = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    #expect(feature["type"] as? String == "Feature")
    let geometry = try #require(feature["geometry"] as? [String: Any])
    #expect(geometry["type"] as? String == "MultiLineString")
    let lines = try #require(geometry["coordinates"] as? [[[Double]]])
    #expect(lines.map(\.count) == [40, 40])
    // [lon, lat, height above the ellipsoid]
    let first = lines[0][0]
    #expect(abs(first[0] - points[0].coordinate.longitude) < 1e-8)
    #expect(abs(first[1] - points[0].coordinate.latitude) < 1e-8)
    #expect(abs(first[2] - (points[0].altitudeHAE ?? .nan)) < 1e-3)
    #expect(lines[0][7].count == 2)  // no altitude, no third coordinate
    let properties = try #require(feature["properties"] as? [String: Any])
    #expect(properties["points"] as? Int == 80)
    #expect(properties["start"] as? String == "2019-05-01T12:00:00Z")

    // Without a gap longer than --gap: one LineString.
    let joined = try exportText(store, TrackExportOptions(format: .geojson, gap: 3_600_000))
    let single = try #require(try JSONSerialization.jsonObject(with: Data(joined.utf8)) as? [String: Any])
    let singleGeometry = try #require(single["geometry"] as? [String: Any])
    #expect(singleGeometry["type"] as? String == "LineString")
    #expect((singleGeometry["coordinates"] as? [[Double]])?.count == 80)
  }

  @Test func csvHasAHeaderAndOneLinePerFix() throws {
    var points = syntheticTrack(count: 3, backend: "replay:/logs/a,b \"quoted\".nmea")
    points[1].altitudeMSL = nil
    let (store, _) = try store(points)
    let text = try exportText(store, TrackExportOptions(format: .csv))
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    #expect(
      lines[0]
        == "time,latitude,longitude,altitude_msl,altitude_hae,geoid_separation,speed,course,climb,eph,epv,hdop,vdop,pdop,satellites_used,mode,quality,backend,source,simulated"
    )
    #expect(lines.count == 5)  // header, three fixes, and the empty rest after the last newline
    #expect(lines[1].hasPrefix("2019-05-01T12:00:00Z,"))
    #expect(lines[1].hasSuffix(#","replay:/logs/a,b ""quoted"".nmea",/dev/ttyUSB0,true"#))
    #expect(lines[2].contains(",,,-16.7,"))  // no MSL altitude, hence no HAE either
  }

  @Test func sinceAndUntilLimitEveryFormat() throws {
    let points = syntheticTrack(count: 100, start: 1_556_712_000_000)
    let (store, _) = try store(points)
    let options = TrackExportOptions(
      since: TrackTime.parse("2019-05-01T12:00:10Z"), until: TrackTime.parse("1556712020"), format: .csv)
    let csv = try exportText(store, options)
    let lines = csv.split(separator: "\n").dropFirst()
    #expect(lines.count == 10)
    #expect(lines.first?.hasPrefix("2019-05-01T12:00:10Z") == true)
    #expect(lines.last?.hasPrefix("2019-05-01T12:00:19Z") == true)
    var gpxOptions = options
    gpxOptions.format = .gpx
    #expect(try exportText(store, gpxOptions).components(separatedBy: "<trkpt ").count - 1 == 10)
    #expect(throws: TrackExportError.invalidOption("--until must be later than --since")) {
      try exportText(store, TrackExportOptions(since: 5, until: 5))
    }
  }
}
