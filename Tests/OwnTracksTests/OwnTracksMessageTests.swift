import JSON
import LocationModel
import OwnTracks
import Testing

/// What a refused `tid` is told.
let tidRule =
  "must be a string of 1...8 bytes of UTF-8 without control or format characters and at most 4 combining marks on a character"

/// A location whose `tid` is one character of 2,999 bytes: "e" and 1,499 accents.
let heavyTrackerID =
  #"{"_type":"location","lat":1,"lon":1,"tst":1,"tid":"e"# + String(repeating: "\u{0301}", count: 1499) + #""}"#

@Suite("OwnTracks messages")
struct OwnTracksMessageTests {
  static func tpv(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8)) }

  @Test("a 3D TPV maps to every location member in OwnTracks' units")
  func threeDimensional() throws {
    let tpv = try Self.tpv(
      #"{"class":"TPV","mode":3,"time":"2026-11-30T14:00:05.750Z","lat":3.13862345678,"lon":101.6044,"altHAE":67.4,"altMSL":60.6,"speed":10.2,"track":359.6,"eph":12.5,"backend":"simulate"}"#)
    let location = try #require(OwnTracksLocation(tpv: tpv, trackerID: "ld"))
    // 2026-11-30T14:00:05Z: 20,787 days after 1970-01-01, plus 50,405 s.
    #expect(location.timestamp == 20_787 * 86_400 + 14 * 3600 + 5)
    #expect(location.accuracy == 13)  // eph 12.5 rounds away from zero
    #expect(location.altitude == 61)  // altMSL, not altHAE
    #expect(location.velocity == 37)  // 10.2 m/s = 36.72 km/h
    #expect(location.course == 0)  // 359.6 rounds to 360, written as 0
    #expect(
      String(decoding: location.encoded, as: UTF8.self)
        == #"{"_type":"location","tid":"ld","tst":1796047205,"lat":3.1386235,"lon":101.6044,"acc":13,"alt":61,"vel":37,"cog":0,"t":"t"}"#)
  }

  @Test("a 2D TPV has no alt; unknown members are left out, never 0")
  func twoDimensional() throws {
    let tpv = try Self.tpv(#"{"class":"TPV","mode":2,"time":"2026-01-01T00:00:00Z","lat":-33.9,"lon":-0.5,"altMSL":12}"#)
    let location = try #require(OwnTracksLocation(tpv: tpv, trackerID: nil, trigger: nil))
    #expect(String(decoding: location.encoded, as: UTF8.self) == #"{"_type":"location","tst":1767225600,"lat":-33.9,"lon":-0.5}"#)
  }

  @Test(
    "TPVs without a position or a time are not published",
    arguments: [
      #"{"class":"TPV","mode":1,"time":"2026-01-01T00:00:00.000Z"}"#,
      #"{"class":"TPV","mode":3,"lat":1,"lon":2}"#,
      #"{"class":"TPV","mode":3,"time":"2026-02-30T00:00:00.000Z","lat":1,"lon":2}"#,
      #"{"class":"SKY","mode":3,"time":"2026-01-01T00:00:00.000Z","lat":1,"lon":2}"#,
      #"{"class":"TPV","mode":3,"time":"2026-01-01T00:00:00.000Z","lat":91,"lon":2}"#,
    ])
  func unpublishable(_ text: String) throws {
    #expect(OwnTracksLocation(tpv: try Self.tpv(text), trackerID: "ld") == nil)
  }

  @Test("the Last Will is OwnTracks' lwt with the connection time")
  func lastWill() {
    #expect(String(decoding: OwnTracksLastWill(timestamp: 1_796_047_205).encoded, as: UTF8.self) == #"{"_type":"lwt","tst":1796047205}"#)
  }

  @Test("another device's location parses with every member")
  func parsesLocation() throws {
    let payload = Array(
      #"{"_type":"location","acc":5,"alt":44,"batt":80,"cog":271.4,"lat":52.5,"lon":13.4,"tid":"JJ","tst":1700000000,"vel":12,"t":"u","conn":"w"}"#.utf8)
    guard case .location(let location) = try OwnTracksMessage.parse(payload) else {
      Issue.record("not a location")
      return
    }
    #expect(location == OwnTracksLocation(
      latitude: 52.5, longitude: 13.4, timestamp: 1_700_000_000, accuracy: 5, altitude: 44, velocity: 12, course: 271,
      trackerID: "JJ", trigger: .manual))
  }

  @Test(
    "malformed messages are refused naming the member",
    arguments: [
      (#"{"_type":"location","lat":52.5,"tst":1}"#, OwnTracksError.invalidMember("lon", reason: "must be a number within -180...180")),
      (#"{"_type":"location","lat":"52.5","lon":1,"tst":1}"#, .invalidMember("lat", reason: "must be a number within -90...90")),
      (#"{"_type":"location","lat":1,"lon":1}"#, .invalidMember("tst", reason: "must be a whole number of seconds since 1970")),
      (#"{"_type":"location","lat":1,"lon":1,"tst":1.5}"#, .invalidMember("tst", reason: "must be a whole number of seconds since 1970")),
      (#"{"_type":"location","lat":1,"lon":1,"tst":1,"tid":"TOOLONGID"}"#, .invalidMember("tid", reason: tidRule)),
      // One character of 2,999 bytes ("e" and 1,499 accents): bytes are counted, not characters.
      (heavyTrackerID, .invalidMember("tid", reason: tidRule)),
      (#"{"_type":"location","lat":1,"lon":1,"tst":1,"acc":-1}"#, .invalidMember("acc", reason: "must be a number within 0.0...1000000000.0")),
      (#"{"lat":1,"lon":1,"tst":1}"#, .missingType),
    ])
  func refuses(_ text: String, _ error: OwnTracksError) {
    #expect(throws: error) { try OwnTracksMessage.parse(Array(text.utf8)) }
  }

  @Test("not JSON, trailing data and oversized payloads are refused; empty clears; other types pass")
  func framing() throws {
    #expect(throws: OwnTracksError.self) { try OwnTracksMessage.parse(Array("{\"_type\":\"location\"} x".utf8)) }
    #expect(throws: OwnTracksError.self) { try OwnTracksMessage.parse(Array("[1]".utf8)) }
    let big = Array(repeating: UInt8(ascii: " "), count: 4097)
    #expect(throws: OwnTracksError.oversized(byteCount: 4097)) { try OwnTracksMessage.parse(big) }
    #expect(try OwnTracksMessage.parse([]) == .cleared)
    #expect(try OwnTracksMessage.parse(Array(#"{"_type":"card","name":"x"}"#.utf8)) == .other(type: "card"))
    #expect(try OwnTracksMessage.parse(Array(#"{"_type":"lwt","tst":5}"#.utf8)) == .lastWill(OwnTracksLastWill(timestamp: 5)))
  }

  @Test("duplicate member names and numbers that underflow to 0 are refused")
  func duplicatesAndUnderflow() throws {
    #expect(throws: OwnTracksError.invalidMember("_type", reason: "appears more than once")) {
      try OwnTracksMessage.parse(Array(#"{"_type":"location","_type":"lwt","tst":5}"#.utf8))
    }
    #expect(throws: OwnTracksError.invalidMember("lat", reason: "appears more than once")) {
      try OwnTracksMessage.parse(Array(#"{"_type":"location","lat":1,"lon":2,"tst":5,"lat":3}"#.utf8))
    }
    #expect(throws: OwnTracksError.self) {
      try OwnTracksMessage.parse(Array(#"{"_type":"location","lat":1e-400,"lon":2,"tst":5}"#.utf8))
    }
    #expect(throws: OwnTracksError.self) {
      try OwnTracksMessage.parse(Array(#"{"_type":"location","lat":1,"lon":2,"tst":5,"acc":-0.5e-999}"#.utf8))
    }
    // A written zero, in any form, is still 0.
    let zero = try OwnTracksMessage.parse(Array(#"{"_type":"location","lat":0.0e-400,"lon":-0,"tst":5}"#.utf8))
    #expect(zero == .location(OwnTracksLocation(latitude: 0, longitude: 0, timestamp: 5)))
  }

  @Test("the limiter keeps the minimum interval and the geodesic minimum distance")
  func limiter() {
    var limiter = PublishLimiter(minimumInterval: 10, minimumDistance: 100)
    func at(_ t: Int64, _ lat: Double) -> OwnTracksLocation { OwnTracksLocation(latitude: lat, longitude: 0, timestamp: t) }
    let admitted = [at(0, 0), at(5, 0.01), at(20, 0.0008), at(20, 0.001), at(29, 0.01)].map { limiter.admit($0) }
    // Too soon (5 s); 88.5 m on the ellipsoid at the equator: too near; 110.6 m; 9 s after the last one.
    #expect(admitted == [true, false, false, true, false])
  }
}

@Suite("OwnTracks parsing never traps")
struct OwnTracksRobustnessTests {
  @Test("every truncation and every single-byte corruption of a message parses or throws OwnTracksError")
  func truncatedAndCorrupted() {
    let message = Array(
      #"{"_type":"location","acc":5,"alt":44,"cog":271,"lat":52.5,"lon":13.4,"tid":"JJ","tst":1700000000,"vel":12,"t":"u"}"#.utf8)
    var outcomes = 0
    for end in 0...message.count {
      do { _ = try OwnTracksMessage.parse(Array(message[0..<end])) } catch { outcomes += 1 }
    }
    // Every proper prefix but the empty one is an unterminated object.
    #expect(outcomes == message.count - 1)
    for index in message.indices {
      for replacement: UInt8 in [0x00, 0x22, 0x2C, 0x7B, 0x7D, 0xFF, UInt8(ascii: "9")] {
        var corrupted = message
        corrupted[index] = replacement
        _ = try? OwnTracksMessage.parse(corrupted)
      }
    }
  }
}
