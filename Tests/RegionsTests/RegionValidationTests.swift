import LocationModel
import Regions
import Testing

@Suite struct RegionValidationTests {
  @Test(arguments: [0.0, -1.0, Double.nan, 1_000_001.0, Double.infinity])
  func rejectsBadRadius(_ radius: Double) {
    #expect(throws: RegionError.self) {
      try Region(id: "r", shape: .circle(center: Coordinate(latitude: 1, longitude: 2), radius: radius))
    }
  }
}
