import JSON
import OwnTracks
import Testing

@Suite("OwnTracks transition messages")
struct OwnTracksTransitionTests {
  static func event(_ kind: String, eph: String = #","eph":16.5"#) throws -> JSONValue {
    try JSONValue.parse(
      Array(
        (#"{"class":"REGION","region":"home","event":""# + kind
          + #"","time":"2026-11-30T14:02:11.600Z","fix":{"class":"TPV","mode":3,"time":"2026-11-30T14:02:11.600Z","lat":48.13731049,"lon":11.57635"#
          + eph + "}}").utf8))
  }

  @Test("an enter event maps to every transition member in OwnTracks' units")
  func enter() throws {
    let message = try #require(
      OwnTracksTransition(regionEvent: try Self.event("enter"), title: "Home \"sweet\" home", trackerID: "ld"))
    // 2026-11-30T14:02:11Z: 20,787 days after 1970-01-01 plus 50,531 s; the fraction is dropped.
    #expect(message.timestamp == 20_787 * 86_400 + 14 * 3600 + 2 * 60 + 11)
    #expect(message.latitude == 48.13731049)
    #expect(message.longitude == 11.57635)
    #expect(message.accuracy == 17)  // eph 16.5 m rounds away from zero
    #expect(message.event == .enter)
    #expect(message.description == "Home \"sweet\" home")
    #expect(message.regionID == "home")
    #expect(message.regionCreated == 0)
    #expect(message.trigger == .circularRegion)
    #expect(
      String(decoding: message.encoded, as: UTF8.self)
        == #"{"_type":"transition","tid":"ld","wtst":0,"tst":1796047331,"lat":48.1373105,"lon":11.57635,"acc":17,"event":"enter","desc":"Home \"sweet\" home","t":"c","rid":"home"}"#
    )
  }

  @Test("exit is OwnTracks' leave; without a title desc is the region's id; unknown acc is left out")
  func leave() throws {
    let message = try #require(
      OwnTracksTransition(
        regionEvent: try Self.event("exit", eph: ""), title: nil, trackerID: nil, regionCreated: 1_700_000_000))
    #expect(message.event == .leave)
    #expect(message.accuracy == nil)
    #expect(
      String(decoding: message.encoded, as: UTF8.self)
        == #"{"_type":"transition","wtst":1700000000,"tst":1796047331,"lat":48.1373105,"lon":11.57635,"event":"leave","desc":"home","t":"c","rid":"home"}"#
    )
    let untitled = try #require(OwnTracksTransition(regionEvent: try Self.event("exit"), title: "", trackerID: "ld"))
    #expect(untitled.description == "home")
  }

  @Test("dwell has no OwnTracks event and is not published")
  func dwell() throws {
    #expect(OwnTracksTransition(regionEvent: try Self.event("dwell"), title: "Home", trackerID: "ld") == nil)
    #expect(OwnTracksTransitionEvent(regionEvent: "dwell") == nil)
    #expect(OwnTracksTransitionEvent(regionEvent: "exit") == .leave)
  }

  @Test(
    "objects that are not complete REGION events give no message",
    arguments: [
      #"{"class":"TPV","region":"home","event":"enter","time":"2026-11-30T14:02:11Z","fix":{"lat":1,"lon":2}}"#,
      #"{"class":"REGION","event":"enter","time":"2026-11-30T14:02:11Z","fix":{"lat":1,"lon":2}}"#,
      #"{"class":"REGION","region":"home","event":"enter","fix":{"lat":1,"lon":2}}"#,
      #"{"class":"REGION","region":"home","event":"enter","time":"2026-11-30T14:02:11Z"}"#,
      #"{"class":"REGION","region":"home","event":"enter","time":"2026-11-30T14:02:11Z","fix":{"lat":91,"lon":2}}"#,
      #"{"class":"REGION","region":"home","event":"arrive","time":"2026-11-30T14:02:11Z","fix":{"lat":1,"lon":2}}"#,
    ])
  func incomplete(_ text: String) throws {
    #expect(OwnTracksTransition(regionEvent: try JSONValue.parse(Array(text.utf8)), title: nil, trackerID: "ld") == nil)
  }
}
