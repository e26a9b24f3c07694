import GeoClueFrontEnd
import Testing

/// What a client that asked for less than `EXACT` gets (``GeoClueCoarsening``).
@Suite("GeoClue2 accuracy levels: a fixed grid at each level's scale")
struct CoarseningTests {
  static func fix(_ latitude: Double, _ longitude: Double, accuracy: Double = 4.75)
    -> GeoClueLocationValues
  {
    GeoClueLocationValues(
      latitude: latitude, longitude: longitude, accuracy: accuracy, altitude: 12.5, speed: 1.5,
      heading: 54.7,
      description: "GPS fix from simulate", seconds: 1_700_000_000, microseconds: 250_000)
  }

  /// Positions where grids go wrong: the equator, the antimeridian both ways, near the poles,
  /// the prime meridian, and ordinary places on both hemispheres.
  static let places: [(Double, Double)] = [
    (49.27441, -123.18499), (-37.784788, 144.9632), (0.0000001, 0.0000001),
    (-0.0000001, -0.0000001),
    (12.5, 179.99999), (12.5, -179.99999), (12.5, 180), (89.9999, 10), (-89.9999, -170), (90, 0),
    (-90, 0),
    (51.4779, -0.0015), (35.6812, 139.7671),
  ]

  @Test("EXACT (8) is the fix unchanged; levels 1 to 6 are coarsened, NONE (0) as COUNTRY")
  func exactStaysExact() {
    let fix = Self.fix(49.27441, -123.18499)
    #expect(GeoClueCoarsening.values(fix, level: 8) == fix)
    #expect(GeoClueCoarsening.scale(for: 8) == nil)
    #expect(GeoClueCoarsening.scale(for: 6) == 1_000)
    #expect(GeoClueCoarsening.scale(for: 5) == 3_000)
    #expect(GeoClueCoarsening.scale(for: 4) == 15_000)
    #expect(GeoClueCoarsening.scale(for: 1) == 300_000)
    #expect(GeoClueCoarsening.scale(for: 0) == 300_000)
  }

  @Test(
    "a coarse position is its cell's centre: the fix lies in the cell, within Accuracy of it",
    arguments: [1, 4, 5, 6] as [UInt32])
  func cellHoldsTheFix(level: UInt32) throws {
    let scale = try #require(GeoClueCoarsening.scale(for: level))
    for (latitude, longitude) in Self.places {
      let fix = Self.fix(latitude, longitude)
      let coarse = GeoClueCoarsening.values(fix, level: level)
      let cell = GeoClueCoarsening.cell(latitude: latitude, longitude: longitude, scale: scale)
      #expect(coarse.latitude == cell.latitude && coarse.longitude == cell.longitude)
      #expect(abs(latitude - cell.latitude) <= cell.height / 2 + 1e-12, "\(latitude) \(longitude)")
      // 180 and -180 are one meridian: the difference is taken around the circle.
      let around = abs(longitude - cell.longitude).truncatingRemainder(dividingBy: 360)
      #expect(min(around, 360 - around) <= cell.width / 2 + 1e-9, "\(latitude) \(longitude)")
      #expect((-90...90).contains(coarse.latitude) && (-180...180).contains(coarse.longitude))
      // The true position is within Accuracy of the reported one (haversine on GeoClue's sphere).
      let distance = GeoClueThresholds.distance(from: coarse, to: fix)
      #expect(
        distance <= coarse.accuracy - fix.accuracy + 1e-6,
        "\(latitude) \(longitude): \(distance) > \(coarse.accuracy)")
      // Cells are about the level's scale: Accuracy is about half a cell's diagonal (0.71 of the
      // scale for a square cell), more only near the poles, where a band holds few cells.
      #expect(coarse.accuracy >= scale / 2, "\(coarse.accuracy)")
      if abs(latitude) < 80 {
        #expect(
          coarse.accuracy <= scale * 0.75 + fix.accuracy,
          "\(latitude) \(longitude): \(coarse.accuracy)")
      }
      // What the level would give away is unknown; the time and description stay.
      #expect(coarse.altitude == GeoClueLocationValues.unknownAltitude)
      #expect(coarse.speed == -1 && coarse.heading == -1)
      #expect(coarse.seconds == fix.seconds && coarse.microseconds == fix.microseconds)
      #expect(coarse.description == fix.description)
    }
  }

  @Test(
    "the grid is fixed: every fix in a cell gets the same position, and the centre maps to itself")
  func gridIsFixed() throws {
    let base = GeoClueCoarsening.values(Self.fix(49.27441, -123.18499), level: 4)
    // Centres are fixed points, whatever the fix's own accuracy.
    let again = GeoClueCoarsening.values(
      Self.fix(base.latitude, base.longitude, accuracy: -1), level: 4)
    #expect(again.latitude == base.latitude && again.longitude == base.longitude)
    // Moving a few hundred metres inside the cell changes nothing; crossing into the next cell
    // moves the position by a whole cell.
    let cell = GeoClueCoarsening.cell(latitude: 49.27441, longitude: -123.18499, scale: 15_000)
    let nearby = GeoClueCoarsening.values(
      Self.fix(cell.latitude + cell.height * 0.4, cell.longitude - cell.width * 0.4), level: 4)
    #expect(nearby.latitude == base.latitude && nearby.longitude == base.longitude)
    let next = GeoClueCoarsening.values(
      Self.fix(cell.latitude + cell.height * 0.6, cell.longitude), level: 4)
    #expect(abs(next.latitude - (base.latitude + cell.height)) < 1e-9)
    #expect(next.longitude != base.longitude || abs(next.latitude - base.latitude) > 0)
    // Accuracy with an unknown fix accuracy (-1) is the cell's alone.
    #expect(again.accuracy < base.accuracy)
  }
}
