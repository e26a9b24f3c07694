/// Why a JSON text could not be parsed.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
  /// Byte offset of the problem.
  public var offset: Int
  /// What was expected.
  public var reason: String

  /// `invalid JSON at byte N: reason`.
  public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser that keeps object members in their order (JSONDecoder does not),
/// so `locationctl --json` prints replies as locationd wrote them.
///
/// Nesting deeper than ``maximumDepth`` is rejected rather than recursed into, so a hostile line
/// of a million `[` cannot exhaust the stack.
enum JSONParser {
  static let maximumDepth = 64

  static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
    try parse(bytes, textOfMember: nil).value
  }

  /// Parses `bytes`; when the value is an object whose first member named `key` is a number or
  /// a string, also returns that value's text exactly as written, a string with its quotes and
  /// escapes (for ids that must come back byte for byte: a `Double` cannot hold every integer
  /// above 2^53, and `"a\/b"` decodes to the same string as `"a/b"`).
  static func parse(_ bytes: [UInt8], textOfMember key: String?, refusingUnderflow: Bool = false)
    throws(JSONSyntaxError) -> (value: JSONValue, text: [UInt8]?)
  {
    try bytes.withUnsafeBufferPointer {
      (buffer) throws(JSONSyntaxError) -> (value: JSONValue, text: [UInt8]?) in
      var parser = Cursor(bytes: buffer)
      parser.capturedKey = key
      parser.refusingUnderflow = refusingUnderflow
      parser.skipWhitespace()
      let value = try parser.value(depth: 0)
      parser.skipWhitespace()
      guard parser.index == buffer.count else { throw parser.fail("unexpected text after the value") }
      return (value, parser.captured)
    }
  }

  private struct Cursor {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    /// The top-level member whose number or string text is kept, and that text.
    var capturedKey: String?
    var captured: [UInt8]?
    var capturedSeen = false
    /// Whether a non-zero number that reads as 0 is an error.
    var refusingUnderflow = false

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    func fail(_ reason: String) -> JSONSyntaxError { JSONSyntaxError(offset: index, reason: reason) }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
      while let c = current, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { index += 1 }
    }

    mutating func expect(_ literal: StaticString) throws(JSONSyntaxError) {
      var ok = true
      literal.withUTF8Buffer { text in
        if index + text.count > bytes.count {
          ok = false
          return
        }
        for (offset, byte) in text.enumerated() where bytes[index + offset] != byte { ok = false }
      }
      guard ok else { throw fail("expected \(literal)") }
      index += literal.utf8CodeUnitCount
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) -> JSONValue {
      guard depth < JSONParser.maximumDepth else { throw fail("nested more than \(JSONParser.maximumDepth) levels") }
      guard let c = current else { throw fail("expected a value") }
      switch c {
      case UInt8(ascii: "{"): return try object(depth: depth)
      case UInt8(ascii: "["): return try array(depth: depth)
      case UInt8(ascii: "\""): return .string(try string())
      case UInt8(ascii: "t"):
        try expect("true")
        return .bool(true)
      case UInt8(ascii: "f"):
        try expect("false")
        return .bool(false)
      case UInt8(ascii: "n"):
        try expect("null")
        return .null
      case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
      default: throw fail("expected a value")
      }
    }

    mutating func object(depth: Int) throws(JSONSyntaxError) -> JSONValue {
      index += 1
      var members: [JSONMember] = []
      skipWhitespace()
      if current == UInt8(ascii: "}") {
        index += 1
        return .object(members)
      }
      while true {
        skipWhitespace()
        guard current == UInt8(ascii: "\"") else { throw fail("expected a member name") }
        let key = try string()
        skipWhitespace()
        guard current == UInt8(ascii: ":") else { throw fail("expected :") }
        index += 1
        skipWhitespace()
        let start = index
        let member = try value(depth: depth + 1)
        if depth == 0, !capturedSeen, let capturedKey, key == capturedKey {
          capturedSeen = true
          switch member {
          case .int, .double, .string: captured = Array(bytes[start..<index])
          default: break
          }
        }
        members.append(JSONMember(key, member))
        skipWhitespace()
        switch current {
        case UInt8(ascii: ",")?: index += 1
        case UInt8(ascii: "}")?:
          index += 1
          return .object(members)
        default: throw fail("expected , or }")
        }
      }
    }

    mutating func array(depth: Int) throws(JSONSyntaxError) -> JSONValue {
      index += 1
      var elements: [JSONValue] = []
      skipWhitespace()
      if current == UInt8(ascii: "]") {
        index += 1
        return .array(elements)
      }
      while true {
        skipWhitespace()
        elements.append(try value(depth: depth + 1))
        skipWhitespace()
        switch current {
        case UInt8(ascii: ",")?: index += 1
        case UInt8(ascii: "]")?:
          index += 1
          return .array(elements)
        default: throw fail("expected , or ]")
        }
      }
    }

    mutating func string() throws(JSONSyntaxError) -> String {
      index += 1
      var utf8: [UInt8] = []
      while true {
        // A run of printable ASCII other than `"` and `\` is copied as it is, in one append.
        var runEnd = index
        while runEnd < bytes.count {
          let b = bytes[runEnd]
          guard b >= 0x20, b < 0x80, b != UInt8(ascii: "\""), b != UInt8(ascii: "\\") else { break }
          runEnd += 1
        }
        if runEnd > index {
          utf8.append(contentsOf: bytes[index..<runEnd])
          index = runEnd
        }
        guard let c = current else { throw fail("unterminated string") }
        index += 1
        switch c {
        case UInt8(ascii: "\""):
          // Well-formed: raw bytes were checked by `appendUTF8Sequence`, escapes encode scalars.
          return String(decoding: utf8, as: UTF8.self)
        case UInt8(ascii: "\\"):
          guard let e = current else { throw fail("unterminated escape") }
          index += 1
          switch e {
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(e)
          case UInt8(ascii: "b"): utf8.append(0x08)
          case UInt8(ascii: "f"): utf8.append(0x0C)
          case UInt8(ascii: "n"): utf8.append(0x0A)
          case UInt8(ascii: "r"): utf8.append(0x0D)
          case UInt8(ascii: "t"): utf8.append(0x09)
          case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800...0xDBFF).contains(scalar) {
              // A surrogate pair: the low half must follow as another \u escape.
              guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
              else { throw fail("lone surrogate in \\u escape") }
              index += 2
              let low = try hex4()
              guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair") }
              scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
              throw fail("lone surrogate in \\u escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
            UTF8.encode(unicode) { utf8.append($0) }
          default: throw fail("invalid escape")
          }
        case 0..<0x20:
          throw fail("control character in string")
        case 0x20..<0x80:
          utf8.append(c)
        default:
          try appendUTF8Sequence(lead: c, into: &utf8)
        }
      }
    }

    /// Checks the multi-byte UTF-8 sequence that starts with `lead` (already consumed, at
    /// `index - 1`) and appends it to `utf8`.
    ///
    /// JSON text is UTF-8 (RFC 8259 section 8.1), so a string holding anything else is refused
    /// rather than repaired: a replacement character would make two different strings equal and
    /// an id would not come back as sent. Well-formed sequences are those of RFC 3629 section 4
    /// (no overlong forms, no surrogates U+D800...U+DFFF, nothing above U+10FFFF).
    ///
    /// - Throws: ``JSONSyntaxError`` at the sequence's first byte.
    mutating func appendUTF8Sequence(lead: UInt8, into utf8: inout [UInt8])
      throws(JSONSyntaxError)
    {
      let start = index - 1
      let invalid = JSONSyntaxError(
        offset: start, reason: "invalid UTF-8 in string (JSON text must be UTF-8)")
      // The length the lead byte announces and the range of the second byte (RFC 3629 section 4).
      let length: Int
      var second: ClosedRange<UInt8> = 0x80...0xBF
      switch lead {
      case 0xC2...0xDF: length = 2
      case 0xE0:
        length = 3
        second = 0xA0...0xBF
      case 0xE1...0xEC, 0xEE...0xEF: length = 3
      case 0xED:
        length = 3
        second = 0x80...0x9F
      case 0xF0:
        length = 4
        second = 0x90...0xBF
      case 0xF1...0xF3: length = 4
      case 0xF4:
        length = 4
        second = 0x80...0x8F
      default: throw invalid
      }
      guard start + length <= bytes.count else { throw invalid }
      guard second.contains(bytes[start + 1]) else { throw invalid }
      for k in 2..<length where !(0x80...0xBF).contains(bytes[start + k]) { throw invalid }
      for k in 0..<length { utf8.append(bytes[start + k]) }
      index = start + length
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
      guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
      var value: UInt32 = 0
      for _ in 0..<4 {
        let c = bytes[index]
        let digit: UInt32
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
        default: throw fail("invalid hex digit in \\u escape")
        }
        value = value << 4 | digit
        index += 1
      }
      return value
    }

    mutating func number() throws(JSONSyntaxError) -> JSONValue {
      let start = index
      if current == UInt8(ascii: "-") { index += 1 }
      guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
        throw fail("expected a digit")
      }
      if first == UInt8(ascii: "0") {
        index += 1
      } else {
        while let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { index += 1 }
      }
      var integral = true
      if current == UInt8(ascii: ".") {
        integral = false
        index += 1
        guard let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) else { throw fail("expected a digit after .") }
        while let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { index += 1 }
      }
      if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
        integral = false
        index += 1
        if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
        guard let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) else { throw fail("expected an exponent") }
        while let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { index += 1 }
      }
      let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
      if integral, let value = Int64(text) { return .int(value) }
      // Syntax is valid JSON: a magnitude beyond Double's range (1e999) reads as ±infinity
      // (RFC 8259 section 6 lets a reader limit range), so that the request is still read and
      // its id answered; every member a command uses is range-checked, which refuses infinity.
      guard let value = Double(text) else { throw fail("number out of range") }
      if refusingUnderflow, value == 0,
        text.prefix(while: { $0 != "e" && $0 != "E" }).contains(where: { ("1"..."9").contains($0) })
      {
        throw fail("number \(text) underflows to 0")
      }
      return .double(value)
    }
  }
}
