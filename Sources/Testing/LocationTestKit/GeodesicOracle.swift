import Foundation
import LocationCore
import LocationModel

/// GeographicLib's `GeodSolve` (Debian package `geographiclib-tools`) as the reference for
/// ``Geodesic``: one process solves every problem, read from an input file.
///
/// The executable is `$GEODSOLVE`, else `GeodSolve` on `PATH`. When it is missing, tests fail if
/// ``isRequired`` (`CI=true`) and are skipped with ``missingMessage`` otherwise.
public enum GeodSolve {
  /// Why GeodSolve gave no answer.
  public enum Failure: Error, CustomStringConvertible {
    /// No executable found.
    case notInstalled
    /// It exited with a non-zero status; its standard error.
    case failed(status: Int32, message: String)
    /// An output line that is not 12 numbers, with its 1-based number.
    case unreadableOutput(line: Int, text: String)
    /// Fewer or more output lines than problems.
    case lineCountMismatch(expected: Int, got: Int)

    /// A one-line explanation.
    public var description: String {
      switch self {
      case .notInstalled: return GeodSolve.missingMessage
      case .failed(let status, let message): return "GeodSolve exited \(status): \(message)"
      case .unreadableOutput(let line, let text):
        return "GeodSolve output line \(line) unreadable: \(text)"
      case .lineCountMismatch(let expected, let got):
        return "GeodSolve printed \(got) lines for \(expected) problems"
      }
    }
  }

  /// The full output (`-f`) of one problem: lat1 lon1 azi1 lat2 lon2 azi2 s12 a12 m12 M12 M21 S12
  /// (degrees, metres, dimensionless scales, square metres).
  public struct Solution: Sendable {
    /// Latitude and longitude of the end, degrees.
    public var lat2: Double, lon2: Double
    /// Azimuths at both ends, degrees.
    public var azi1: Double, azi2: Double
    /// Distance and reduced length, metres.
    public var s12: Double, m12: Double
    /// Geodesic scales.
    public var scale12: Double, scale21: Double
  }

  /// Path of the executable, or nil when it is not installed.
  public static let executable: String? = {
    let environment = ProcessInfo.processInfo.environment
    if let path = environment["GEODSOLVE"] {
      return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }
    let directories = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
    for directory in directories + ["/usr/bin"] {
      let path = "\(directory)/GeodSolve"
      if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return nil
  }()

  /// Whether a missing GeodSolve must fail the run (`CI=true`).
  public static var isRequired: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

  /// The message printed when the comparisons are skipped.
  public static let missingMessage =
    "GeodSolve not found (install geographiclib-tools, or set GEODSOLVE): geodesic comparisons skipped"

  /// Inverse problems: `lat1 lon1 lat2 lon2` lines, `GeodSolve -i -f -p 9`.
  public static func inverse(_ pairs: [(Coordinate, Coordinate)]) throws -> [Solution] {
    let lines = pairs.map {
      "\(plain($0.0.latitude)) \(plain($0.0.longitude)) \(plain($0.1.latitude)) \(plain($0.1.longitude))"
    }
    return try run(["-i", "-f", "-p", "9"], lines: lines)
  }

  /// Direct problems: `lat1 lon1 azi1 s12` lines, `GeodSolve -f -p 9`.
  public static func direct(_ problems: [DirectProblem]) throws -> [Solution] {
    let lines = problems.map {
      "\(plain($0.start.latitude)) \(plain($0.start.longitude)) \(plain($0.azimuth)) \(plain($0.distance))"
    }
    return try run(["-f", "-p", "9"], lines: lines)
  }

  /// Gnomonic projection centred on `center` (`GeodesicProj -g`, same package): x and y in metres
  /// for each point, NaN beyond the horizon.
  public static func gnomonicForward(center: Coordinate, _ points: [Coordinate]) throws -> [(
    x: Double, y: Double
  )] {
    let values = try numbers(
      tool: "GeodesicProj",
      ["-g", "\(plain(center.latitude))", "\(plain(center.longitude))", "-p", "9"],
      lines: points.map { "\(plain($0.latitude)) \(plain($0.longitude))" }, fields: 4)
    return values.map { ($0[0], $0[1]) }
  }

  /// The inverse gnomonic projection (`GeodesicProj -g -r`): the coordinate of each (x, y).
  public static func gnomonicReverse(center: Coordinate, _ points: [(x: Double, y: Double)]) throws
    -> [Coordinate]
  {
    let values = try numbers(
      tool: "GeodesicProj",
      ["-g", "\(plain(center.latitude))", "\(plain(center.longitude))", "-r", "-p", "9"],
      lines: points.map { "\(plain($0.x)) \(plain($0.y))" }, fields: 4)
    return values.map { Coordinate(latitude: $0[0], longitude: $0[1]) }
  }

  /// `x` as a plain decimal numeral with the digits of its shortest exact representation:
  /// GeographicLib's tools read the `e` of `1e-05` as "east", so exponents must not be written.
  public static func plain(_ x: Double) -> String {
    let text = "\(x)"
    guard x.isFinite, let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }),
      let exponent = Int(text[text.index(after: e)...])
    else { return text }
    var mantissa = String(text[..<e])
    let negative = mantissa.hasPrefix("-")
    if negative { mantissa.removeFirst() }
    let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
    let whole = String(parts.first ?? "")
    let fraction = parts.count > 1 ? String(parts[1]) : ""
    var digits = whole + fraction
    var point = whole.count + exponent  // digits before the decimal point
    if point <= 0 {
      digits = String(repeating: "0", count: 1 - point) + digits
      point = 1
    } else if point > digits.count {
      digits += String(repeating: "0", count: point - digits.count)
    }
    let integer = digits.prefix(point)
    let rest = digits.dropFirst(point)
    return (negative ? "-" : "") + integer + (rest.isEmpty ? "" : "." + rest)
  }

  private static func run(_ arguments: [String], lines: [String]) throws -> [Solution] {
    try numbers(tool: "GeodSolve", arguments, lines: lines, fields: 12).map { values in
      Solution(
        lat2: values[3], lon2: values[4], azi1: values[2], azi2: values[5], s12: values[6],
        m12: values[8], scale12: values[9], scale21: values[10])
    }
  }

  /// Runs a GeographicLib tool from the same directory as GeodSolve on `lines`; each output line
  /// must hold `fields` numbers.
  private static func numbers(tool: String, _ arguments: [String], lines: [String], fields: Int)
    throws -> [[Double]]
  {
    guard let geodSolve = GeodSolve.executable else { throw Failure.notInstalled }
    let executable = URL(fileURLWithPath: geodSolve).deletingLastPathComponent()
      .appendingPathComponent(tool).path
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent(
        "geodsolve-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let input = directory.appendingPathComponent("input")
    let output = directory.appendingPathComponent("output")
    try (lines.joined(separator: "\n") + "\n").write(to: input, atomically: false, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments + ["--input-file", input.path, "--output-file", output.path]
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let message = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw Failure.failed(
        status: process.terminationStatus, message: String(decoding: message, as: UTF8.self))
    }
    let text = try String(contentsOf: output, encoding: .utf8)
    let outputLines = text.split(separator: "\n", omittingEmptySubsequences: true)
    guard outputLines.count == lines.count else {
      throw Failure.lineCountMismatch(expected: lines.count, got: outputLines.count)
    }
    return try outputLines.enumerated().map { index, line in
      let values = line.split(separator: " ").compactMap { Double($0) }
      guard values.count == fields else {
        throw Failure.unreadableOutput(line: index + 1, text: String(line))
      }
      return values
    }
  }
}

/// One direct problem: start (degrees), azimuth (degrees), distance (metres).
public struct DirectProblem: Sendable {
  /// The start.
  public var start: Coordinate
  /// Azimuth at the start, degrees true.
  public var azimuth: Double
  /// Distance along the geodesic, metres (negative: backwards).
  public var distance: Double

  /// A problem from its parts.
  public init(start: Coordinate, azimuth: Double, distance: Double) {
    self.start = start
    self.azimuth = azimuth
    self.distance = distance
  }
}

/// One inverse problem with what the reference is given and what is being tested.
public struct InverseCase: Sendable {
  /// Which family the case belongs to ("random", "antipodal", ...).
  public var kind: String
  /// The points given to ``Geodesic`` (longitudes may lie outside `[-180, 180]`).
  public var a: Coordinate, b: Coordinate
  /// The same points with longitudes reduced exactly, given to GeodSolve.
  public var referenceA: Coordinate, referenceB: Coordinate
  /// Whether the azimuths are unique (false for coincident and exactly antipodal points).
  public var azimuthsDefined: Bool
}

/// Seeded geodesic problems: 10,000 random pairs plus the hard families.
public enum GeodesicCases {
  /// Random pairs uniform on the sphere (a tenth with longitudes shifted by whole turns) followed
  /// by antipodal, nearly antipodal, near-polar, equatorial, meridional, short (1 mm to 1 m) and
  /// coincident pairs.
  public static func inverse(seed: UInt64 = 2013, randomPairs: Int = 10_000) -> [InverseCase] {
    var random = SeededGenerator(seed: seed)
    var cases: [InverseCase] = []
    func uniform(_ range: ClosedRange<Double>) -> Double {
      range.lowerBound + (range.upperBound - range.lowerBound) * random.nextUnitInterval()
    }
    func latitude() -> Double { asin(uniform(-1...1)) * 180 / .pi }
    func add(_ kind: String, _ a: Coordinate, _ b: Coordinate, azimuths: Bool = true) {
      let ra = Coordinate(latitude: a.latitude, longitude: a.longitude.remainder(dividingBy: 360))
      let rb = Coordinate(latitude: b.latitude, longitude: b.longitude.remainder(dividingBy: 360))
      cases.append(
        InverseCase(
          kind: kind, a: a, b: b, referenceA: ra, referenceB: rb, azimuthsDefined: azimuths))
    }
    for index in 0..<randomPairs {
      var lon1 = uniform(-180...180)
      var lon2 = uniform(-180...180)
      if index % 10 == 0 {
        lon1 += 360 * Double(Int(uniform(-3...3)))
        lon2 += 720
      }
      add(
        "random", Coordinate(latitude: latitude(), longitude: lon1),
        Coordinate(latitude: latitude(), longitude: lon2))
    }
    for index in 0..<100 {
      let lat = index < 4 ? [0, 90, -90, 45][index] : latitude()
      let lon = uniform(-180...180)
      add(
        "antipodal", Coordinate(latitude: lat, longitude: lon),
        Coordinate(latitude: -lat, longitude: lon + 180), azimuths: false)
    }
    for _ in 0..<400 {
      let lat = latitude()
      let lon = uniform(-180...180)
      let dLat = pow(10, uniform(-12 ... -1)) * (random.next() & 1 == 0 ? 1 : -1)
      let dLon = pow(10, uniform(-12 ... -1)) * (random.next() & 1 == 0 ? 1 : -1)
      add(
        "nearly antipodal", Coordinate(latitude: lat, longitude: lon),
        Coordinate(latitude: max(-90, min(90, -lat + dLat)), longitude: lon + 180 + dLon))
    }
    for index in 0..<300 {
      let sign: Double = index % 2 == 0 ? 1 : -1
      let lat1 = index < 20 ? 90 * sign : sign * (90 - pow(10, uniform(-12...0)))
      let lat2 = index % 3 == 0 ? -sign * (90 - pow(10, uniform(-12...0))) : latitude()
      add(
        "near-polar", Coordinate(latitude: lat1, longitude: uniform(-180...180)),
        Coordinate(latitude: lat2, longitude: uniform(-180...180)))
    }
    for index in 0..<200 {
      let lon1 = uniform(-180...180)
      let lon12 = index < 100 ? uniform(0...180) : uniform(179...180)
      add(
        "equatorial", Coordinate(latitude: 0, longitude: lon1),
        Coordinate(latitude: 0, longitude: lon1 + lon12))
    }
    for index in 0..<200 {
      let lon = uniform(-180...180)
      add(
        "meridional", Coordinate(latitude: latitude(), longitude: lon),
        Coordinate(latitude: latitude(), longitude: index % 2 == 0 ? lon : lon + 180))
    }
    for _ in 0..<300 {
      let lat = latitude()
      let lon = uniform(-180...180)
      let metres = pow(10, uniform(-3...0))
      let bearing = uniform(0...(2 * .pi))
      let dLat = metres * cos(bearing) / 111_000
      let dLon = metres * sin(bearing) / (111_000 * max(cos(lat * .pi / 180), 1e-6))
      add(
        "short", Coordinate(latitude: lat, longitude: lon),
        Coordinate(latitude: max(-90, min(90, lat + dLat)), longitude: lon + dLon))
    }
    // Values Swift writes with an exponent, and longitude differences below the series'
    // resolution.
    for index in 0..<50 {
      let tiny = pow(10, uniform(-30 ... -5)) * (index % 2 == 0 ? 1 : -1)
      let lat = index % 3 == 0 ? tiny : latitude()
      add(
        "tiny values", Coordinate(latitude: lat, longitude: 0),
        Coordinate(
          latitude: index % 5 == 0 ? -tiny : latitude(), longitude: index % 4 == 0 ? 0 : tiny))
    }
    for index in 0..<50 {
      let point = Coordinate(
        latitude: index < 2 ? [90, -90][index] : latitude(), longitude: uniform(-180...180))
      add("coincident", point, point, azimuths: false)
    }
    return cases
  }

  /// Random direct problems: starts uniform on the sphere (a few at the poles and on the
  /// equator), any azimuth (meridional and equatorial ones included), distances from 1 mm to
  /// 40,000 km, a tenth of them negative.
  public static func direct(seed: UInt64 = 87, count: Int = 5_000) -> [DirectProblem] {
    var random = SeededGenerator(seed: seed)
    func uniform(_ range: ClosedRange<Double>) -> Double {
      range.lowerBound + (range.upperBound - range.lowerBound) * random.nextUnitInterval()
    }
    return (0..<count).map { index in
      let lat = index % 50 == 0 ? [90, -90, 0][index / 50 % 3] : asin(uniform(-1...1)) * 180 / .pi
      let azimuth = index % 20 == 1 ? [0, 90, 180, -90][index / 20 % 4] : uniform(-180...180)
      var distance = index % 4 == 0 ? pow(10, uniform(-3...7)) : uniform(0...40_000_000)
      if index % 10 == 3 { distance = -distance }
      return DirectProblem(
        start: Coordinate(latitude: lat, longitude: uniform(-180...180)), azimuth: azimuth,
        distance: distance)
    }
  }
}
