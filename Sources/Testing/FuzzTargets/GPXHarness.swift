import GNSSSky
import LocationCore
import NMEA
import LocationModel

/// GPX target: the input is a GPX file, read as `simulate:ROUTE.gpx` reads it (libxml2).
///
/// Invariants:
/// - the reader returns at least one point or throws a ``GPXError`` (never an empty route);
/// - every point has a finite latitude in [-90, 90] and longitude in [-180, 180], and a finite
///   elevation when it has one;
/// - the points written back as a GPX route (elevations and obstructions included) read back to
///   exactly the same points.
enum GPXHarness {
  static func check(_ input: [UInt8]) throws(FuzzFailure) {
    let points: [GPXPoint]
    do {
      points = try GPXReader.points(from: input)
    } catch {
      if case .parserUnavailable(let reason) = error {
        throw FuzzFailure("libxml2 is not available: \(reason)")
      }
      try require(!error.description.isEmpty, "empty error description")
      return
    }
    try require(!points.isEmpty, "an empty route was returned instead of GPXError.noPoints")
    for point in points {
      let c = point.coordinate
      try require(
        c.latitude.isFinite && (-90...90).contains(c.latitude) && c.longitude.isFinite
          && (-180...180).contains(c.longitude),
        "point out of range: \(c.latitude), \(c.longitude)")
      if let e = point.elevation { try require(e.isFinite, "elevation \(e)") }
    }
    var document = "<?xml version=\"1.0\"?><gpx version=\"1.1\" creator=\"fuzz\"><rte>"
    for point in points {
      document += "<rtept lat=\"\(plainDecimal(point.coordinate.latitude))\" lon=\"\(plainDecimal(point.coordinate.longitude))\">"
      if let e = point.elevation { document += "<ele>\(plainDecimal(e))</ele>" }
      if let obstruction = point.obstruction {
        document += "<extensions><obstruction>\(obstructionText(obstruction))</obstruction></extensions>"
      }
      document += "</rtept>"
    }
    document += "</rte></gpx>"
    let reread: [GPXPoint]
    do { reread = try GPXReader.points(from: Array(document.utf8)) } catch {
      throw FuzzFailure("points written back do not read back: \(error)")
    }
    try require(reread == points, "points changed when written back and read again")
  }

  /// An obstruction as the route file names it (docs/simulator.md): `open`, `tunnel` or
  /// `canyon:DEG` (a point's canyon has street azimuth 0, the route fills it in later).
  static func obstructionText(_ obstruction: Obstruction) -> String {
    switch obstruction {
    case .openSky: return "open"
    case .tunnel: return "tunnel"
    case .urbanCanyon(_, let wallElevation): return "canyon:\(plainDecimal(wallElevation))"
    }
  }

  /// `value` as an `xsd:decimal` (the GPX schema's type for coordinates and elevations): the
  /// digits of Swift's shortest round-trip form with the exponent written out, so `1e-127`
  /// becomes `0.000...0001` and reads back to the same double.
  static func plainDecimal(_ value: Double) -> String {
    let text = "\(value)"
    guard let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }),
      let exponent = Int(text[text.index(after: e)...])
    else { return text }
    let mantissa = text[..<e]
    let negative = mantissa.hasPrefix("-")
    let unsigned = negative ? mantissa.dropFirst() : mantissa
    let point = unsigned.firstIndex(of: ".")
    let whole = point.map { unsigned[..<$0] } ?? unsigned
    let fraction = point.map { unsigned[unsigned.index(after: $0)...] } ?? ""
    let digits = Array(whole + fraction)
    let position = whole.count + exponent
    let plain: String
    if position <= 0 {
      plain = "0." + String(repeating: "0", count: -position) + String(digits)
    } else if position >= digits.count {
      plain = String(digits) + String(repeating: "0", count: position - digits.count)
    } else {
      plain = String(digits[..<position]) + "." + String(digits[position...])
    }
    return (negative ? "-" : "") + plain
  }
}
