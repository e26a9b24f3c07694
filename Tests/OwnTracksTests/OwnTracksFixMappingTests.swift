import JSON
import LocationModel
import LocationProtocol
import OwnTracks
import Regions
import Testing

/// The MQTT front-end takes fixes typed from the hub (`OwnTracksLocation(fix:)`); the messages
/// must be those the TPV mapping (`OwnTracksLocation(tpv:)`) gives for the same fix, except that
/// coordinates are rounded once to 7 decimals from the fix, where the TPV's were rounded to 9
/// first (which moved about one message in a hundred by 1e-7 degrees).
@Suite("OwnTracks: a message from the typed fix")
struct OwnTracksFixMappingTests {
  /// A small deterministic generator (64-bit LCG, Knuth's constants), so failures reproduce.
  struct Generator {
    var state: UInt64
    mutating func unit() -> Double {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return Double(state >> 11) / Double(1 << 53)
    }
    mutating func value(_ range: ClosedRange<Double>) -> Double {
      range.lowerBound + unit() * (range.upperBound - range.lowerBound)
    }
  }

  static func fixes(count: Int) -> [Fix] {
    var generator = Generator(state: 0x5EED)
    var fixes: [Fix] = []
    for index in 0..<count {
      var fix = Fix(mode: [.unknown, .noFix, .fix2D, .fix3D, .fix3D][index % 5])
      fix.coordinate = Coordinate(
        latitude: generator.value(-90...90), longitude: generator.value(-180...180))
      if index % 7 != 0 { fix.time = Int64(generator.value(0...4e12)) }
      if index % 3 != 0 { fix.reportedEPH = generator.value(0...500) }
      if index % 4 != 0 { fix.altitudeMSL = generator.value(-400...9000) }
      if index % 5 != 1 { fix.speedOverGround = generator.value(0...90) }
      if index % 6 != 2 { fix.courseOverGround = generator.value(0...360) }
      fixes.append(fix)
    }
    return fixes
  }

  /// `value` as the message writes it: 7 decimals, rounded once.
  static func sevenDecimals(_ value: Double) -> Double { (value * 1e7).rounded() / 1e7 }

  @Test("600 fixes: the same message, or none, from the fix as from its TPV")
  func typedFixMatchesTPV() throws {
    var written = 0
    for fix in Self.fixes(count: 600) {
      let location = Location(
        fix: fix, provenance: Provenance(backend: "simulate", isSimulated: true))
      let tpv = try JSONValue.parse(EventEncoding.tpv(location).encoded)
      let fromTPV = OwnTracksLocation(tpv: tpv, trackerID: "AC", trigger: .timer)
      let fromFix = OwnTracksLocation(fix: fix, trackerID: "AC", trigger: .timer)
      #expect((fromFix == nil) == (fromTPV == nil), "\(fix)")
      guard let fromFix, var fromTPV, let coordinate = fix.coordinate else { continue }
      written += 1
      let message = try JSONValue.parse(fromFix.encoded)
      #expect(message["lat"]?.doubleValue == Self.sevenDecimals(coordinate.latitude), "\(fix)")
      #expect(message["lon"]?.doubleValue == Self.sevenDecimals(coordinate.longitude), "\(fix)")
      #expect(abs(fromTPV.latitude - fromFix.latitude) < 1.1e-9, "TPV latitude has 9 decimals")
      #expect(abs(fromTPV.longitude - fromFix.longitude) < 1.1e-9, "TPV longitude has 9 decimals")
      // Everything else is the same.
      fromTPV.latitude = fromFix.latitude
      fromTPV.longitude = fromFix.longitude
      #expect(fromFix.encoded == fromTPV.encoded, "\(fix)")
    }
    // Modes 2 and 3 with a time give a message: 3 in 5 modes, 6 in 7 times.
    #expect(written > 250 && written < 400, "\(written) messages")
  }

  @Test("no message without a position or a time")
  func refusesWhatOwnTracksCannotCarry() {
    var fix = Fix(mode: .fix3D)
    fix.coordinate = Coordinate(latitude: 48.1, longitude: 11.5)
    #expect(OwnTracksLocation(fix: fix, trackerID: nil) == nil, "no time")
    fix.time = 1_796_047_200_250
    let message = OwnTracksLocation(fix: fix, trackerID: nil)
    #expect(message?.timestamp == 1_796_047_200)
    fix.mode = .noFix
    #expect(OwnTracksLocation(fix: fix, trackerID: nil) == nil, "no position")
  }

  @Test(
    "300 region transitions: the same message, or none, from the typed transition as from its REGION event"
  )
  func typedTransitionMatchesRegionEvent() throws {
    var written = 0
    let kinds: [RegionEventKind] = [.enter, .exit, .dwell]
    for (index, fix) in Self.fixes(count: 300).enumerated() {
      guard let time = fix.time else { continue }
      let location = Location(
        fix: fix, provenance: Provenance(backend: "simulate", isSimulated: true))
      let transition = RegionTransition(
        id: "home", event: kinds[index % 3], time: time, location: location)
      let event = EncodedEvent(.region(transition))
      #expect(event.transition == transition)
      let fromEvent = OwnTracksTransition(
        regionEvent: try JSONValue.parse(event.body), title: "Home", trackerID: "AC")
      let fromTyped = OwnTracksTransition(
        regionID: transition.id, kind: transition.event.rawValue, time: transition.time, fix: fix,
        title: "Home", trackerID: "AC")
      #expect((fromTyped == nil) == (fromEvent == nil), "\(transition)")
      guard let fromTyped, var fromEvent else { continue }
      written += 1
      #expect(abs(fromEvent.latitude - fromTyped.latitude) < 1.1e-9)
      #expect(abs(fromEvent.longitude - fromTyped.longitude) < 1.1e-9)
      fromEvent.latitude = fromTyped.latitude
      fromEvent.longitude = fromTyped.longitude
      #expect(fromTyped.encoded == fromEvent.encoded, "\(transition)")
    }
    // enter and exit give a message, dwell none: two in three.
    #expect(written > 150 && written < 220, "\(written) messages")
  }
}
