import LocationModel
import Testing

@testable import Regions

/// Every rule of region validation gives its own error.
@Suite struct ValidationTests {
  let origin = Coordinate(latitude: 52.52, longitude: 13.405)

  @Test(arguments: [0.0, -1.0, -.infinity, .infinity, 1_000_000.5, .nan])
  func badRadiusIsRefused(_ radius: Double) {
    #expect {
      try Region(id: "r", shape: .circle(center: origin, radius: radius))
    } throws: { error in
      guard case .invalidRadius(let value) = error as? RegionError else { return false }
      return value == radius || (value.isNaN && radius.isNaN)
    }
  }

  @Test func largestRadiusIsAccepted() throws {
    _ = try Region(id: "r", shape: .circle(center: origin, radius: 1_000_000))
  }

  @Test(arguments: [
    Coordinate(latitude: .nan, longitude: 0), Coordinate(latitude: 0, longitude: .nan),
    Coordinate(latitude: 90.000_001, longitude: 0), Coordinate(latitude: 0, longitude: -180.5),
    Coordinate(latitude: .infinity, longitude: 0),
  ])
  func badCoordinatesAreRefused(_ bad: Coordinate) {
    #expect {
      try Region(id: "c", shape: .circle(center: bad, radius: 10))
    } throws: { error in
      guard case .invalidCoordinate(_, _, nil, nil) = error as? RegionError else { return false }
      return true
    }
    var exterior = ring(around: origin, radius: 100, count: 5)
    exterior[3] = bad
    #expect {
      try Region(id: "p", shape: .polygon(exterior: exterior, holes: []))
    } throws: { error in
      guard case .invalidCoordinate(_, _, 0, 3) = error as? RegionError else { return false }
      return true
    }
  }

  @Test func bowTieIsRefused() {
    let a = offset(origin, 0, 0)
    let b = offset(origin, 90, 1_000)
    let c = offset(b, 0, 1_000)
    let d = offset(origin, 0, 1_000)
    // a -> c -> b -> d crosses itself.
    #expect(throws: RegionError.selfIntersection(ring: 0, edge: 0, otherRing: 0, otherEdge: 2)) {
      try Region(id: "bow", shape: .polygon(exterior: [a, c, b, d], holes: []))
    }
    // The same four points in order are a fine quadrilateral.
    #expect(throws: Never.self) { try Region(id: "quad", shape: .polygon(exterior: [a, b, c, d], holes: [])) }
  }

  @Test func spikeFoldingBackIsRefused() {
    let a = origin
    let b = offset(origin, 90, 1_000)
    let c = offset(origin, 0, 1_000)
    let mid = offset(origin, 90, 500)
    // a -> b -> mid goes back along the same edge.
    #expect(throws: RegionError.self) {
      try Region(id: "spike", shape: .polygon(exterior: [a, b, mid, c], holes: []))
    }
  }

  @Test func tooFewAndRepeatedVertices() {
    let a = origin
    let b = offset(origin, 90, 100)
    let c = offset(origin, 0, 100)
    #expect(throws: RegionError.tooFewVertices(ring: 0, count: 2)) {
      try Region(id: "p", shape: .polygon(exterior: [a, b], holes: []))
    }
    #expect(throws: RegionError.repeatedVertex(ring: 0, index: 1)) {
      try Region(id: "p", shape: .polygon(exterior: [a, b, b, c], holes: []))
    }
    // The closing vertex repeated.
    #expect(throws: RegionError.repeatedVertex(ring: 0, index: 3)) {
      try Region(id: "p", shape: .polygon(exterior: [a, b, c, a], holes: []))
    }
  }

  @Test func holeRules() {
    let exterior = ring(around: origin, radius: 1_000, count: 16)
    let outside = ring(around: offset(origin, 90, 5_000), radius: 100, count: 8)
    #expect(throws: RegionError.holeOutsideExterior(hole: 1)) {
      try Region(id: "h", shape: .polygon(exterior: exterior, holes: [outside]))
    }
    let crossing = ring(around: offset(origin, 90, 1_000), radius: 200, count: 8)
    #expect {
      try Region(id: "h", shape: .polygon(exterior: exterior, holes: [crossing]))
    } throws: { error in
      guard case .selfIntersection(0, _, 1, _) = error as? RegionError else { return false }
      return true
    }
    let inner = ring(around: origin, radius: 300, count: 8)
    let nested = ring(around: origin, radius: 100, count: 8)
    #expect(throws: RegionError.holeOutsideExterior(hole: 2)) {
      try Region(id: "h", shape: .polygon(exterior: exterior, holes: [inner, nested]))
    }
  }

  @Test func extentLimit() throws {
    _ = try Region(id: "big", shape: .polygon(exterior: ring(around: origin, radius: 990_000, count: 12), holes: []))
    #expect {
      try Region(id: "huge", shape: .polygon(exterior: ring(around: origin, radius: 1_100_000, count: 12), holes: []))
    } throws: { error in
      guard case .tooLarge = error as? RegionError else { return false }
      return true
    }
  }

  @Test func identifierTitleAndDwellRules() {
    let shape = RegionShape.circle(center: origin, radius: 10)
    for bad in ["", "   ", "a\nb", "x\u{202E}y", String(repeating: "é", count: 129)] {
      #expect {
        try Region(id: bad, shape: shape)
      } throws: { error in
        guard case .invalidIdentifier = error as? RegionError else { return false }
        return true
      }
    }
    #expect(throws: Never.self) { try Region(id: String(repeating: "é", count: 128), shape: shape) }
    #expect(throws: RegionError.titleTooLong(bytes: 1025, limit: 1024)) {
      try Region(id: "t", title: String(repeating: "a", count: 1025), shape: shape)
    }
    #expect(throws: RegionError.titleControlCharacters) {
      try Region(id: "t", title: "a\u{1B}[31m", shape: shape)
    }
    // Combining marks: at most 4 on one character, in ids and titles (TextRules), as for annotations.
    let column = "e" + String(repeating: "\u{0301}", count: 1499)
    #expect(throws: RegionError.titleTooLong(bytes: 2999, limit: 1024)) {
      try Region(id: "t", title: column, shape: shape)
    }
    #expect(throws: RegionError.titleCombiningMarks(count: 5, limit: 4)) {
      try Region(id: "t", title: "e" + String(repeating: "\u{0301}", count: 5), shape: shape)
    }
    #expect {
      try Region(id: "e" + String(repeating: "\u{0301}", count: 5), shape: shape)
    } throws: { error in
      guard case .invalidIdentifier(_, let reason) = error as? RegionError else { return false }
      return reason.contains("combining marks")
    }
    #expect(throws: Never.self) { try Region(id: "Vi\u{1EC7}t", title: "e\u{0301}\u{0302}\u{0303}\u{0304}", shape: shape) }
    for dwell in [0.0, -5, 604_801, .infinity] {
      #expect(throws: RegionError.invalidDwell(dwell)) { try Region(id: "d", shape: shape, dwell: dwell) }
    }
  }

  /// A 100,000-vertex ring (a circle of 100 km drawn finely) validates; one more vertex is refused.
  @Test func largeRingValidates() throws {
    let exterior = ring(around: origin, radius: 100_000, count: 100_000)
    let region = try Region(id: "fine", shape: .polygon(exterior: exterior, holes: []))
    #expect(region.signedDistance(to: origin) < -1_000)
    let nearEdge = region.signedDistance(to: offset(origin, 10, 99_950))
    #expect(abs(nearEdge + 50) < 0.01, "\(nearEdge)")
    #expect(throws: RegionError.tooManyVertices(count: 100_002, limit: 100_000)) {
      try Region(id: "fine", shape: .polygon(exterior: exterior, holes: [[origin, offset(origin, 0, 1)]]))
    }
  }
}

/// A comb of long thin teeth defeats the edge grid (every cell crossed by many long edges): it
/// is refused quickly as too complex rather than compared pair by pair; a small comb passes.
@Suite struct ComplexityTests {
  func comb(teeth: Int) -> [Coordinate] {
    let origin = Coordinate(latitude: 40, longitude: 0)
    let width = 100_000.0
    let step = width / Double(teeth)
    var ring: [Coordinate] = []
    for k in 0..<teeth {
      let base0 = offset(origin, 90, Double(k) * step)
      let base1 = offset(origin, 90, (Double(k) + 0.5) * step)
      ring += [offset(base0, 0, 10_000), base0, base1, offset(base1, 0, 10_000)]
    }
    ring += [offset(offset(origin, 90, width), 0, 10_000), offset(offset(origin, 90, width), 0, 11_000), offset(origin, 0, 11_000)]
    return ring
  }

  @Test func largeCombIsRefusedAsTooComplex() {
    let ring = comb(teeth: 24_000)
    #expect(throws: RegionError.tooComplex(vertices: ring.count)) {
      try Region(id: "comb", shape: .polygon(exterior: ring, holes: []))
    }
  }

  @Test func smallCombIsAccepted() throws {
    let region = try Region(id: "comb", shape: .polygon(exterior: comb(teeth: 200), holes: []))
    // Inside a tooth and between two teeth.
    let origin = Coordinate(latitude: 40, longitude: 0)
    let step = 100_000.0 / 200
    #expect(region.signedDistance(to: offset(offset(origin, 90, 0.25 * step), 0, 5_000)) < 0)
    #expect(region.signedDistance(to: offset(offset(origin, 90, 0.75 * step), 0, 5_000)) > 0)
  }
}
