import NMEA
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel

@Suite("Request parsing")
struct ProtocolTests {
  private func parse(_ text: String) throws(ProtocolError) -> Request {
    try Request.parse(Array(text.utf8))
  }

  @Test(
    "every command parses",
    arguments: [
      (#"{"cmd":"request"}"#, Command.requestAuthorization),
      (#"{"cmd":"start"}"#, .start(LocationFilter())),
      (
        #"{"cmd":"start","distanceFilter":10,"minInterval":0.5,"desiredAccuracy":25}"#,
        .start(LocationFilter(distanceFilter: 10, minimumInterval: 0.5, desiredAccuracy: 25))
      ),
      (#"{"cmd":"stop"}"#, .stop),
      (#"{"cmd":"status"}"#, .status),
      (#"{"cmd":"location"}"#, .location),
      (#"{"cmd":"watch"}"#, .watch(enable: true)),
      (#"{"cmd":"watch","enable":false}"#, .watch(enable: false)),
      (#"{"cmd":"center"}"#, .centerOnLocation),
      (
        #"{"cmd":"setCenter","lat":49.27,"lon":-123.18}"#,
        .setCenter(Coordinate(latitude: 49.27, longitude: -123.18))
      ),
      (#"{"cmd":"zoom","zoom":15}"#, .zoom(15)),
      (#"{"cmd":"mode","mode":"followWithHeading"}"#, .mode(.followWithHeading)),
      (
        #"{"cmd":"annotate","annotation":{"id":"home","lat":1.5,"lon":2,"title":"Home","subtitle":"s","kind":"poi"}}"#,
        .annotate(
          Annotation(
            id: "home", coordinate: Coordinate(latitude: 1.5, longitude: 2), title: "Home",
            subtitle: "s", kind: "poi"))
      ),
      (
        #"{"cmd":"annotate","id":9,"annotation":{"id":"a","lat":0,"lon":0}}"#,
        .annotate(Annotation(id: "a", coordinate: Coordinate(latitude: 0, longitude: 0)))
      ),
      (#"{"cmd":"remove","annotation":"home"}"#, .removeAnnotation(id: "home")),
      (#"{"cmd":"map"}"#, .map(.json)),
      (#"{"cmd":"map","format":"svg"}"#, .map(.svg)),
      (#"{"cmd":"replay","action":"pause"}"#, .replay(.pause)),
      (#"{"cmd":"replay","action":"resume"}"#, .replay(.resume)),
      (#"{"cmd":"replay","action":"seek","value":120}"#, .replay(.seek(seconds: 120))),
      (#"{"cmd":"replay","action":"speed","value":10}"#, .replay(.speed(10))),
      (#"{"cmd":"replay","action":"speed","value":0}"#, .replay(.speed(0))),
      (#"{"cmd":"replay","action":"step"}"#, .replay(.step(epochs: 1))),
      (#"{"cmd":"replay","action":"step","value":5}"#, .replay(.step(epochs: 5))),
    ])
  func parses(_ text: String, _ command: Command) throws {
    #expect(try parse(text).command == command)
    #expect(try parse(text + "\r").command == command)
  }

  @Test("ids are strings or numbers and echo unchanged")
  func ids() throws {
    #expect(try parse(#"{"cmd":"status","id":"abc"}"#).id == .stringText(#""abc""#))
    // A string id comes back with the escapes the client wrote, not re-encoded.
    for written in [#""a\/b""#, #""\u0041\u00e9""#, #""tab\there""#, #""\ud83d\ude00""#] {
      let request = try parse(#"{"cmd":"status","id":"# + written + "}")
      #expect(request.id == .stringText(written))
      #expect(
        Reply.ok(.stop).json(id: request.id).jsonString == #"{"class":"OK","id":"# + written + #","cmd":"stop"}"#)
    }
    // 256 bytes as written: 256 plain letters pass, 256 letters written as \u0041 do not.
    #expect(try parse(#"{"cmd":"status","id":""# + String(repeating: "A", count: 256) + #""}"#).id != nil)
    do {
      _ = try parse(#"{"cmd":"status","id":""# + String(repeating: #"\u0041"#, count: 256) + #""}"#)
      Issue.record("a 1,536-byte id accepted")
    } catch {
      #expect(error.message == "\"id\" must be a string or a number, at most 256 bytes as written")
    }
    #expect(try parse(#"{"cmd":"status","id":12}"#).id == .numberText("12"))
    #expect(try parse(#"{"cmd":"status"}"#).id == nil)
    // null is no id (docs/PROTOCOL.md); other kinds of value are refused.
    #expect(try parse(#"{"cmd":"status","id":null}"#).id == nil)
    #expect(throws: ProtocolError.self) { try parse(#"{"cmd":"status","id":true}"#) }
    // Beyond Double's range the request is still read and its id answered as written; a
    // member that must be a number in range refuses it with the id.
    #expect(try parse(#"{"cmd":"status","id":1e999}"#).id == .numberText("1e999"))
    #expect(try parse(#"{"cmd":"status","id":-1E+400}"#).id == .numberText("-1E+400"))
    do {
      _ = try parse(#"{"cmd":"zoom","zoom":1e999,"id":7}"#)
      Issue.record("zoom 1e999 accepted")
    } catch {
      #expect(error.code == .invalidArgument)
      #expect(error.id == .numberText("7"))
    }
    #expect(throws: ProtocolError.self) { try Request.parse(JSONValue.object([JSONMember("cmd", .string("status")), JSONMember("id", .double(.infinity))])) }
    #expect(
      Reply.ok(.stop).json(id: .number(12)).jsonString == #"{"class":"OK","id":12,"cmd":"stop"}"#)
    #expect(
      Reply.ok(.stop).json(id: .number(1.5)).jsonString == #"{"class":"OK","id":1.5,"cmd":"stop"}"#)
    #expect(
      Reply.error(.noFix, message: "no fix yet").json(id: .string("q")).jsonString
        == #"{"class":"ERROR","id":"q","code":"noFix","message":"no fix yet"}"#)
  }

  @Test(
    "bad requests give stable codes",
    arguments: [
      ("not json", ErrorCode.malformedJSON),
      ("[1]", .malformedJSON),
      ("\"status\"", .malformedJSON),
      (#"{"id":1}"#, .unknownCommand),
      (#"{"cmd":5}"#, .unknownCommand),
      (#"{"cmd":"fly"}"#, .unknownCommand),
      (#"{"cmd":"status","extra":1}"#, .invalidArgument),
      (#"{"cmd":"status","id":[1]}"#, .invalidArgument),
      (#"{"cmd":"start","distanceFilter":-1}"#, .invalidArgument),
      (#"{"cmd":"start","minInterval":"1"}"#, .invalidArgument),
      (#"{"cmd":"setCenter","lat":10}"#, .invalidArgument),
      (#"{"cmd":"setCenter","lat":10,"lon":181}"#, .invalidArgument),
      (#"{"cmd":"zoom","zoom":23}"#, .invalidArgument),
      (#"{"cmd":"zoom"}"#, .invalidArgument),
      (#"{"cmd":"mode","mode":"spin"}"#, .invalidArgument),
      (#"{"cmd":"annotate","id":"a","lat":0,"lon":0}"#, .invalidArgument),
      (#"{"cmd":"annotate","annotation":"a"}"#, .invalidArgument),
      (#"{"cmd":"annotate","annotation":{"id":"","lat":0,"lon":0}}"#, .invalidArgument),
      (#"{"cmd":"annotate","annotation":{"id":"a","lat":0,"lon":0,"title":3}}"#, .invalidArgument),
      (
        #"{"cmd":"annotate","annotation":{"id":"a","lat":0,"lon":0,"color":"red"}}"#,
        .invalidArgument
      ),
      (#"{"cmd":"annotate","annotation":{"id":"a","lat":-91,"lon":0}}"#, .invalidArgument),
      (#"{"cmd":"remove"}"#, .invalidArgument),
      (#"{"cmd":"remove","annotation":7}"#, .invalidArgument),
      (#"{"cmd":"map","format":"png"}"#, .invalidArgument),
      (#"{"cmd":"replay"}"#, .invalidArgument),
      (#"{"cmd":"replay","action":"rewind"}"#, .invalidArgument),
      (#"{"cmd":"replay","action":"speed","value":-1}"#, .invalidArgument),
      (#"{"cmd":"replay","action":"step","value":1.5}"#, .invalidArgument),
      (#"{"cmd":"watch","enable":"yes"}"#, .invalidArgument),
    ])
  func rejects(_ text: String, _ code: ErrorCode) {
    do {
      _ = try parse(text)
      Issue.record("\(text) parsed")
    } catch {
      #expect(error.code == code, "\(text): \(error.message)")
      #expect(!error.message.isEmpty)
    }
  }

  @Test("range errors write numbers as people do (no \".0\" on whole numbers, no exponent below 1e15); an empty string is called empty")
  func rangeErrorsReadPlainly() {
    let cases = [
      (#"{"cmd":"replay","action":"seek","value":-5}"#, #""value" must be within 0...1000000000 seconds (got -5)"#),
      (#"{"cmd":"replay","action":"step","value":0}"#, #""value" must be within 1...10000 epochs (got 0)"#),
      (#"{"cmd":"zoom","zoom":30.5}"#, #""zoom" must be within 0...22 zoom level (got 30.5)"#),
    ]
      // An empty id is said to be empty, not missing.
      + [
        (#"{"cmd":"remove","annotation":""}"#, #""annotation" is empty: give a non-empty string (annotation id)"#),
        (#"{"cmd":"remove"}"#, #"missing "annotation": a non-empty string (annotation id)"#),
      ]
    for (text, message) in cases {
      do {
        _ = try parse(text)
        Issue.record("\(text) parsed")
      } catch {
        #expect(error.message == message)
      }
    }
  }

  @Test(
    "a repeated member is called a duplicate, not unknown",
    arguments: [
      (#"{"cmd":"status","cmd":"status"}"#, "cmd"),
      (#"{"cmd":"status","id":1,"id":2}"#, "id"),
      (#"{"id":"a","cmd":"zoom","zoom":1,"zoom":2}"#, "zoom"),
      (#"{"cmd":"annotate","annotation":{"id":"a","lat":0,"lat":1,"lon":0}}"#, "annotation.lat"),
    ])
  func duplicateMembers(_ text: String, _ name: String) {
    do {
      _ = try parse(text)
      Issue.record("\(text) parsed")
    } catch {
      #expect(error.code == .invalidArgument, "\(text): \(error.message)")
      #expect(error.message.hasPrefix("duplicate member \"\(name)\""), "\(text): \(error.message)")
    }
  }

  /// RFC 8259 section 8.1: JSON text is UTF-8. Each line has a string that is not: a stray
  /// continuation byte, a byte never in UTF-8, an overlong encoding, a UTF-16 surrogate, a
  /// sequence cut short, one above U+10FFFF.
  @Test(
    "a string that is not UTF-8 is refused, never replaced",
    arguments: [
      [0x80], [0xFF], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82],
      [0xF4, 0x90, 0x80, 0x80], [0xC3],
    ] as [[UInt8]])
  func invalidUTF8(_ bad: [UInt8]) {
    let line = Array(#"{"cmd":"status","id":""#.utf8) + bad + Array(#""}"#.utf8)
    do {
      let request = try Request.parse(line)
      Issue.record("\(bad) parsed as id \(String(describing: request.id))")
    } catch {
      #expect(error.code == .malformedJSON)
      #expect(error.message.contains("at byte 22: invalid UTF-8 in string"), "\(error.message)")
    }
    do {
      let value = try JSONValue.parse(line)
      Issue.record("\(bad) parsed as \(value)")
    } catch {
      #expect(error.offset == 22)
      #expect(error.reason == "invalid UTF-8 in string (JSON text must be UTF-8)")
    }
  }

  @Test("well-formed UTF-8 of every length reads back byte for byte")
  func validUTF8() throws {
    let text = "é€😀\u{10FFFF}\u{E000}\u{D7FF}"
    let line = Array(#"{"cmd":"status","id":""#.utf8) + Array(text.utf8) + Array(#""}"#.utf8)
    #expect(try JSONValue.parse(line)["id"] == .string(text))
    #expect(try Request.parse(line).id == .stringText("\"" + text + "\""))
  }

  @Test("the error carries the id of an otherwise bad request")
  func errorKeepsID() {
    do {
      _ = try parse(#"{"cmd":"fly","id":"r1"}"#)
      Issue.record("parsed")
    } catch {
      #expect(error.code == .unknownCommand)
      #expect(error.id == .stringText(#""r1""#))
    }
  }
}

@Suite("JSON encoding")
struct JSONTests {
  @Test("strings are escaped; non-finite numbers are null; integral doubles have no fraction")
  func encoding() {
    let value: JSONValue = [
      "s": .string("a\"b\\c\nd\u{1}"), "n": .double(.nan), "i": .double(3), "f": .double(0.25),
    ]
    #expect(value.jsonString == #"{"s":"a\"b\\c\nd\u0001","n":null,"i":3,"f":0.25}"#)
  }

  @Test("members are appended to encoded objects")
  func appending() {
    let missed = [JSONMember("missed", 3)]
    #expect(
      String(
        decoding: JSONValue.appending(missed, toEncodedObject: Array(#"{"a":1}"#.utf8)),
        as: UTF8.self) == #"{"a":1,"missed":3}"#)
    #expect(
      String(
        decoding: JSONValue.appending(missed, toEncodedObject: Array("{ }".utf8)), as: UTF8.self)
        == #"{ "missed":3}"#)
  }

  @Test("decoding round-trips nested values")
  func decoding() throws {
    let text = #"{"a":[1,2.5,true,null,"x"],"b":{"c":-7}}"#
    let value = try JSONValue.parse(Array(text.utf8))
    #expect(value["a"] == [1, .double(2.5), true, .null, "x"])
    #expect(value["b"]?["c"] == .int(-7))
  }

  @Test("one escaper: RFC 8259 escapes, lower-case \\u00hh, slash and non-ASCII as they are; every ASCII character reads back")
  func escaper() throws {
    #expect(JSONValue.quoted("q\"b\\s/\r\t\u{0}\u{1f}\u{7f}é€") == #""q\"b\\s/\r\t\u0000\u001f\#u{7f}é€""#)
    let every = String(String.UnicodeScalarView((0..<0x80).compactMap(Unicode.Scalar.init))) + "é€\u{1F600}"
    var bytes: [UInt8] = []
    JSONValue.writeString(every, to: &bytes)
    #expect(try JSONValue.parse(bytes) == .string(every))
    #expect(!bytes.contains { $0 < 0x20 })
  }

  @Test("sorted and indented forms keep the value")
  func sortedAndIndented() throws {
    let value: JSONValue = ["b": [1, ["z": true, "a": .null]], "a": "x", "e": [], "o": .object([])]
    #expect(value.sortingKeys().jsonString == #"{"a":"x","b":[1,{"a":null,"z":true}],"e":[],"o":{}}"#)
    let indented = String(decoding: value.sortingKeys().indentedEncoded, as: UTF8.self)
    #expect(
      indented == """
        {
          "a" : "x",
          "b" : [
            1,
            {
              "a" : null,
              "z" : true
            }
          ],
          "e" : [],
          "o" : {}
        }
        """)
    #expect(try JSONValue.parse(Array(indented.utf8)) == value.sortingKeys())
  }

  @Test("status replies have the documented shape")
  func shapes() throws {
    let status = Reply.status(
      authorization: .authorized, tracking: true, backendActive: true, backendURI: "simulate",
      backendState: .connected,
      detail: nil,
      initial: .raw(Array(#"{"class":"TPV","mode":3}"#.utf8)), current: nil, clients: 2
    ).json(id: nil)
    #expect(
      status.jsonString
        == #"{"class":"STATUS","authorization":"authorized","tracking":true,"backendActive":true,"backend":{"uri":"simulate","state":"connected","detail":null},"initial":{"class":"TPV","mode":3},"current":null,"age":null,"stale":false,"clients":2}"#
    )
  }
}

@Suite("Line reader")
struct LineReaderTests {
  private static let input = Array(
    "{\"cmd\":\"status\"}\n\r\n   \n{\"cmd\":\"stop\"}\r\n\(String(repeating: "x", count: 300))\n{\"cmd\":\"start\"}\n"
      .utf8)

  @Test(
    "any chunking gives the same lines; a long line is reported once and skipped",
    arguments: [1, 2, 7, 82, 4096])
  func chunking(size: Int) {
    var reader = LineReader(maximumLength: 100)
    var items: [LineReader.Item] = []
    var index = 0
    while index < Self.input.count {
      let end = min(index + size, Self.input.count)
      items += reader.feed(Self.input[index..<end])
      index = end
    }
    #expect(
      items == [
        .line(Array("{\"cmd\":\"status\"}".utf8)), .line(Array("{\"cmd\":\"stop\"}".utf8)),
        .tooLong,
        .line(Array("{\"cmd\":\"start\"}".utf8)),
      ])
    #expect(reader.bufferedCount == 0)
  }

  @Test("a line of exactly the maximum is accepted, with or without CR")
  func boundary() {
    var reader = LineReader(maximumLength: 10)
    let ten = Array(repeating: UInt8(ascii: "a"), count: 10)
    #expect(reader.feed(ten + [10]) == [.line(ten)])
    #expect(reader.feed(ten + [13, 10]) == [.line(ten)])
    #expect(reader.feed(ten + [UInt8(ascii: "a"), 10]) == [.tooLong])
  }
}
