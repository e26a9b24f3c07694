#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import LocationModel

/// A box in latitude/longitude degrees that contains a region (or a fix's neighbourhood).
/// Longitudes run east from `west` by `width` degrees (`0...360`), so a box may cross the
/// antimeridian; `width == 360` is every longitude.
struct GeoBox: Sendable, Equatable {
  var south: Double
  var north: Double
  var west: Double
  var width: Double

  /// Fewest metres in one degree of latitude on WGS84 (at the equator), a little rounded down.
  static let metresPerDegreeLatitude = 110_574.0
  /// Metres in one degree of longitude on the equator of WGS84 (`pi a / 180`), rounded down;
  /// at latitude phi a degree of longitude is at least this times cos(phi).
  static let metresPerDegreeLongitude = 111_319.0

  /// A box containing every point within `radius` metres (geodesic) of `center`, with 1% to
  /// spare: latitude `radius / 110,574 m`, longitude `radius / (111,319 m cos phi)` at the most
  /// poleward latitude phi of the box; every longitude when the box reaches a pole or would
  /// span 180 degrees or more.
  init(center: Coordinate, radius: Double) {
    let dLat = radius / Self.metresPerDegreeLatitude * 1.01
    south = max(-90, center.latitude - dLat)
    north = min(90, center.latitude + dLat)
    let poleward = max(abs(south), abs(north))
    let cosine = cos(poleward * .pi / 180)
    let dLon = cosine > 1e-6 ? radius / (Self.metresPerDegreeLongitude * cosine) * 1.01 : .infinity
    if north >= 90 || south <= -90 || !(dLon < 90) {
      if north >= 90 { north = 90 }
      if south <= -90 { south = -90 }
      west = -180
      width = 360
    } else {
      west = center.longitude - dLon
      width = 2 * dLon
    }
  }
}

/// A grid of latitude/longitude cells at three levels: regions whose box covers at most 64 fine
/// cells (1/32 degree, about 3.5 km) are listed in those; larger ones in coarse cells (1 degree)
/// when they cover at most 64 of them; the rest in a list every query returns. A query for a box
/// returns every region whose box may intersect it (and some that do not).
struct RegionIndex: Sendable {
  static let fineCellsPerDegree = 32.0
  static let coarseCellsPerDegree = 1.0
  static let maxCellsPerRegion = 64

  var fine: [Int64: [Int32]] = [:]
  var coarse: [Int64: [Int32]] = [:]
  var global: [Int32] = []

  /// Cell keys of `box` at `cellsPerDegree`, or `nil` when there are more than `limit`.
  static func keys(of box: GeoBox, cellsPerDegree: Double, limit: Int) -> [Int64]? {
    let latCells = Int(180 * cellsPerDegree)
    let lonCells = Int(360 * cellsPerDegree)
    let rowLow = min(max(Int(((box.south + 90) * cellsPerDegree).rounded(.down)), 0), latCells - 1)
    let rowHigh = min(max(Int(((box.north + 90) * cellsPerDegree).rounded(.down)), 0), latCells - 1)
    let columnLow = Int(((box.west + 180) * cellsPerDegree).rounded(.down))
    let columnCount =
      box.width >= 360
      ? lonCells : min(lonCells, Int(((box.west + box.width + 180) * cellsPerDegree).rounded(.down)) - columnLow + 1)
    let total = (rowHigh - rowLow + 1) * columnCount
    if total > limit { return nil }
    var keys: [Int64] = []
    keys.reserveCapacity(total)
    for row in rowLow...rowHigh {
      for offset in 0..<columnCount {
        var column = (columnLow + offset) % lonCells
        if column < 0 { column += lonCells }
        keys.append(Int64(row) * Int64(lonCells) + Int64(column))
      }
    }
    return keys
  }

  mutating func insert(_ slot: Int32, box: GeoBox) {
    if let keys = Self.keys(of: box, cellsPerDegree: Self.fineCellsPerDegree, limit: Self.maxCellsPerRegion) {
      for key in keys { fine[key, default: []].append(slot) }
    } else if let keys = Self.keys(of: box, cellsPerDegree: Self.coarseCellsPerDegree, limit: Self.maxCellsPerRegion) {
      for key in keys { coarse[key, default: []].append(slot) }
    } else {
      global.append(slot)
    }
  }

  mutating func remove(_ slot: Int32, box: GeoBox) {
    func drop(_ key: Int64, from table: inout [Int64: [Int32]]) {
      guard var list = table[key], let index = list.firstIndex(of: slot) else { return }
      list.swapAt(index, list.count - 1)
      list.removeLast()
      table[key] = list.isEmpty ? nil : list
    }
    if let keys = Self.keys(of: box, cellsPerDegree: Self.fineCellsPerDegree, limit: Self.maxCellsPerRegion) {
      for key in keys { drop(key, from: &fine) }
    } else if let keys = Self.keys(of: box, cellsPerDegree: Self.coarseCellsPerDegree, limit: Self.maxCellsPerRegion) {
      for key in keys { drop(key, from: &coarse) }
    } else if let index = global.firstIndex(of: slot) {
      global.remove(at: index)
    }
  }

  /// Calls `body` with every slot listed in a cell `box` touches (a slot may come more than once).
  func forEachCandidate(in box: GeoBox, _ body: (Int32) -> Void) {
    for (table, perDegree) in [(fine, Self.fineCellsPerDegree), (coarse, Self.coarseCellsPerDegree)]
    where !table.isEmpty {
      if let keys = Self.keys(of: box, cellsPerDegree: perDegree, limit: 4096) {
        for key in keys {
          if let list = table[key] { for slot in list { body(slot) } }
        }
      } else {
        // A box near a pole spans every longitude: every listed region is a candidate.
        for list in table.values { for slot in list { body(slot) } }
      }
    }
    for slot in global { body(slot) }
  }
}
