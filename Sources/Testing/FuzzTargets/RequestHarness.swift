import LocationProtocol
import ServiceCore
import SocketFrontEnd
import LocationDaemon
import NMEA
import LocationModel
import Regions

/// Socket-protocol target: the bytes after the first are what a client writes; the first byte
/// picks the chunk size (1-256 bytes) the server reads them in.
///
/// The server's path for each line is reproduced without a socket: ``LineReader`` splits the
/// stream, ``Request/parse(_:)-([UInt8])`` decodes each line, and the reply the server writes
/// before any handler runs (an `ERROR` for a bad line, `OK`/`TRACKING` shapes for a good one) is
/// encoded as the server encodes it.
///
/// Invariants:
/// - any chunking gives the same lines; every non-blank line and every over-long line gets
///   exactly one reply;
/// - every reply is one strict JSON object whose first member is `"class"` and which echoes the
///   request's `"id"` when the line had a usable one; the project's parser reads the reply back,
///   and what it writes then reads back unchanged (the byte checks run once per distinct reply
///   of an input, the id check for every line);
/// - every decoded command holds only values within its documented ranges.
enum RequestHarness {
  /// A small line limit, so that over-long lines are reached by small inputs too.
  static let smallLimit = 512

  static func check(_ input: [UInt8]) throws(FuzzFailure) {
    guard let first = input.first else { return }
    let chunkSize = Int(first) + 1
    let stream = Array(input.dropFirst())
    // Replies already checked for this input: the text checks are pure functions of the bytes,
    // so a reply written the same way again (the same error for another bad line) is checked
    // once; what depends on the line (its id) is checked every time.
    var checked = Set<ReplyText>()

    for limit in [Request.maximumLineLength, smallLimit] {
      var whole = LineReader(maximumLength: limit)
      var wholeItems = whole.feed(stream)
      wholeItems += whole.finish()
      var chunked = LineReader(maximumLength: limit)
      var chunkedItems: [LineReader.Item] = []
      var offset = 0
      while offset < stream.count {
        let end = min(offset + chunkSize, stream.count)
        chunkedItems += chunked.feed(stream[offset..<end])
        offset = end
      }
      chunkedItems += chunked.finish()
      try require(
        wholeItems == chunkedItems,
        "line limit \(limit), chunk size \(chunkSize): \(wholeItems.count) items whole, \(chunkedItems.count) chunked")
      try require(
        wholeItems.count <= expectedLineCount(stream),
        "\(wholeItems.count) items from \(expectedLineCount(stream)) lines")
      // Lines within the small limit are the same lines under both limits: answer each once.
      // Under the small limit only the over-long items are new (and their reply is one).
      if limit == Request.maximumLineLength {
        for item in wholeItems { try answer(item, checked: &checked) }
      } else if wholeItems.contains(.tooLong) {
        try answer(.tooLong, checked: &checked)
      }
    }
  }

  /// Lines in the stream: newline-terminated ones plus an unterminated last one.
  static func expectedLineCount(_ stream: [UInt8]) -> Int {
    let newlines = stream.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    return newlines + (stream.last == 0x0A || stream.isEmpty ? 0 : 1)
  }

  /// The one reply the server writes for `item` (before a handler runs), checked.
  static func answer(_ item: LineReader.Item, checked: inout Set<ReplyText>) throws(FuzzFailure) {
    switch item {
    case .tooLong:
      try checkReply(Reply.error(.lineTooLong, message: "request line too long").json(id: nil), id: nil, line: [], checked: &checked)
    case .line(let line):
      try require(!line.contains(0x0A), "a line holds a newline: \(line.escaped)")
      let parsed: Result<Request, ProtocolError>
      do throws(ProtocolError) { parsed = .success(try Request.parse(line)) } catch { parsed = .failure(error) }
      switch parsed {
      case .success(let request):
        try checkCommand(request.command, line: line)
        try checkReply(Reply.ok(request.command).json(id: request.id), id: request.id, line: line, checked: &checked)
        if case .start(let options) = request.command {
          try checkReply(Reply.tracking(true, options: options).json(id: request.id), id: request.id, line: line, checked: &checked)
        }
      case .failure(let error):
        try require(!error.message.isEmpty, "empty error message for \(line.escaped)")
        try checkReply(Reply.error(error.code, message: error.message).json(id: error.id), id: error.id, line: line, checked: &checked)
      }
    }
  }

  static func checkReply(
    _ reply: JSONValue, id: RequestID?, line: [UInt8], checked: inout Set<ReplyText>
  ) throws(FuzzFailure) {
    let encoded = reply.encoded
    guard case .object(let members) = reply, members.first?.key == "class" else {
      throw FuzzFailure("reply does not start with \"class\": \(encoded.escaped)")
    }
    if let id {
      try require(reply["id"] == id.json, "reply id \(String(describing: reply["id"])) differs from \(id) for \(line.escaped)")
    } else {
      try require(reply["id"] == nil, "reply carries an id the request did not have: \(encoded.escaped)")
    }
    if checked.contains(ReplyText(encoded)) { return }
    try checkReplyText(encoded, line: line)
    checked.insert(ReplyText(encoded))
  }

  /// The checks of a reply's bytes alone: strict JSON on one line, read back by the project's
  /// parser and written the same from then on.
  static func checkReplyText(_ encoded: [UInt8], line: [UInt8]) throws(FuzzFailure) {
    do { try StrictJSON.validate(encoded) } catch {
      throw FuzzFailure("reply is not JSON (\(error)): \(encoded.escaped) for \(line.escaped)")
    }
    try require(!encoded.contains(0x0A), "reply holds a raw newline: \(encoded.escaped)")
    let reread: JSONValue
    do { reread = try JSONValue.parse(encoded) } catch {
      throw FuzzFailure("the project's parser rejects its own reply (\(error)): \(encoded.escaped)")
    }
    // Numeric ids are echoed as the client wrote them (1e3 stays 1e3), so the text read back
    // may be written differently once; from then on it must be stable. When it is written the
    // same at once, reading it again would only parse the same bytes again: stable already.
    let rewritten = reread.encoded
    if rewritten == encoded { return }
    let again: JSONValue
    do { again = try JSONValue.parse(rewritten) } catch {
      throw FuzzFailure("the project's parser rejects its own output (\(error)): \(rewritten.escaped)")
    }
    try require(
      again.encoded == rewritten,
      "reply changes when read back twice: \(rewritten.escaped) -> \(again.encoded.escaped)")
  }

  static func checkCommand(_ command: Command, line: [UInt8]) throws(FuzzFailure) {
    func inRange(_ value: Double?, _ range: ClosedRange<Double>, _ name: String) throws(FuzzFailure) {
      guard let value else { return }
      try require(value.isFinite && range.contains(value), "\(name) \(value) outside \(range) from \(line.escaped)")
    }
    func coordinate(_ c: Coordinate) throws(FuzzFailure) {
      try inRange(c.latitude, -90...90, "lat")
      try inRange(c.longitude, -180...180, "lon")
    }
    func options(_ o: LocationFilter) throws(FuzzFailure) {
      try inRange(o.distanceFilter, 0...1.0e7, "distanceFilter")
      try inRange(o.minimumInterval, 0...86_400, "minInterval")
      try inRange(o.desiredAccuracy, 0.001...1.0e7, "desiredAccuracy")
    }
    switch command {
    case .start(let o): try options(o)
    case .watch(_, _, let o): try options(o)
    case .setCenter(let c): try coordinate(c)
    case .zoom(let z): try inRange(z, 0...22, "zoom")
    case .annotate(let a):
      try coordinate(a.coordinate)
      try require((1...256).contains(a.id.utf8.count), "annotation id of \(a.id.utf8.count) bytes")
      try require(a.title.utf8.count <= 1024, "title of \(a.title.utf8.count) bytes")
      try require((a.subtitle?.utf8.count ?? 0) <= 1024, "subtitle too long")
      try require((a.kind?.utf8.count ?? 0) <= 64, "kind too long")
    case .removeAnnotation(let id):
      try require((1...256).contains(id.utf8.count), "annotation id of \(id.utf8.count) bytes")
    case .replay(.seek(let s)): try inRange(s, 0...1.0e9, "seek")
    case .replay(.speed(let s)): try inRange(s, 0...1.0e6, "speed")
    case .replay(.step(let n)): try require((1...10_000).contains(n), "step \(n)")
    case .region(.add(let r)):
      try require((1...256).contains(r.id.utf8.count), "region id of \(r.id.utf8.count) bytes")
      try require((r.title?.utf8.count ?? 0) <= 1024, "region title too long")
      try inRange(r.dwell, .leastNonzeroMagnitude...604_800, "dwell")
      switch r.shape {
      case .circle(let center, let radius):
        try coordinate(center)
        try inRange(radius, .leastNonzeroMagnitude...1_000_000, "radius")
      case .polygon(let exterior, let holes):
        try require(exterior.count >= 3, "exterior ring of \(exterior.count) vertices")
        for vertex in exterior + holes.joined() { try coordinate(vertex) }
      }
    case .region(.remove(let id)), .region(.state(let id)):
      try require((1...256).contains(id.utf8.count), "region id of \(id.utf8.count) bytes")
    default: break
    }
  }
}

/// A reply's bytes as a member of the set of replies checked for one input: hashed by its length
/// and its last 32 bytes (where the replies of one input differ: the message's end and the id),
/// not byte by byte; compared whole.
struct ReplyText: Hashable {
  let bytes: [UInt8]

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  static func == (a: ReplyText, b: ReplyText) -> Bool { a.bytes == b.bytes }

  func hash(into hasher: inout Hasher) {
    hasher.combine(bytes.count)
    var tail: UInt64 = 0
    for (index, byte) in bytes.suffix(32).enumerated() {
      tail = tail &* 31 &+ UInt64(byte)
      if index % 8 == 7 { hasher.combine(tail); tail = 0 }
    }
    hasher.combine(tail)
  }
}
