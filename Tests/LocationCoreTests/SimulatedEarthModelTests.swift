import Foundation
import LocationCore
import LocationModel
import LocationProtocol
import NMEA
import Testing

/// The simulated receiver's geoid separation and magnetic variation are gpsd 3.22's models at its
/// position, and survive its own NMEA output into a decoded TPV unchanged.
@Suite("simulated receiver: geoid separation and variation")
struct SimulatedEarthModelTests {
  @Test(
    "the simulated fix, its NMEA and the decode of that NMEA carry one geoidSep, altHAE and magvar")
  func sameValuesEverywhere() throws {
    // The default route (Kuala Lumpur): gpsd's model gives about -4.8 m and -0.06 degrees
    // there (RMC writes 0.1 W), where the simulator used to send a constant 7 m and no variation.
    for uri in ["simulate?noise=0&seed=1", "simulate?noise=2&seed=7&speed=30"] {
      let options = try SimulatedBackend.Options.parse(uri)
      var generator = SimulatedFixGenerator(
        parameters: try options.parameters(), startTime: 1_744_804_800_000)
      var checked = 0
      for _ in 0..<60 {
        let epoch = generator.next()
        let fix = try #require(epoch).fix
        guard fix.mode == .fix3D, let coordinate = fix.coordinate else { continue }
        let separation = try #require(fix.geoidSeparation)
        let model = GPSDEarthModel.geoidSeparation(at: coordinate)
        #expect(abs(separation - model) <= 0.05 + 1e-6, "\(uri): \(separation) vs \(model)")
        #expect(fix.magneticVariation == GPSDEarthModel.magneticVariation(at: coordinate))
        var decoder = NMEADecoder()
        var decoded: [Fix] = []
        for line in NMEAEncoder(version: .v4_11).encode(fix) {
          Array(line.utf8).withUnsafeBytes { decoder.feed($0) { decoded.append($0.fix) } }
        }
        decoder.finish { decoded.append($0.fix) }
        let back = try #require(decoded.last)
        #expect(back.geoidSeparation == separation)
        #expect(abs((back.altitudeHAE ?? .nan) - (fix.altitudeHAE ?? .nan)) <= 0.006)
        #expect(
          abs((back.magneticVariation ?? .nan) - (fix.magneticVariation ?? .nan)) <= 0.05 + 1e-9)
        checked += 1
      }
      #expect(checked > 30, "\(uri): 3D epochs checked")
    }
  }
}
