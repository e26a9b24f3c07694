/// A JSON value (RFC 8259): the one way locationd writes and reads JSON.
///
/// Every producer builds a `JSONValue` and writes it with ``write(to:)``: protocol replies and
/// events, the `MAP` state, GeoJSON, the saved map state; every reader parses with
/// ``parse(_:)`` (a strict RFC 8259 parser). Only the gpsd TPV/SKY writer (`GPSDJSON`) writes
/// bytes directly, as the measured fast path for every fix, and its output is inserted here as
/// ``raw(_:)``. Strings are escaped in one place, ``writeString(_:to:)``.
///
/// Chosen over Foundation's `JSONEncoder`/`JSONDecoder` and `JSONSerialization` by measurement
/// (`swift build -c release --product json-bench && .build/release/json-bench`: 2-core x86_64,
/// Swift 6.3.1, microseconds per operation, medians of 5 runs; decode means into typed values,
/// for JSONValue the request through `Request.parse` with all its checks; "MAP" is a map state
/// with 100 annotations, 9.5 KB):
///
/// | operation                    | JSONValue | JSONEncoder/Decoder | JSONSerialization |
/// |------------------------------|-----------|---------------------|-------------------|
/// | request encode               |      1.27 |      8.74           |      50.0         |
/// | request decode               |      2.31 |      7.46           |      4.28         |
/// | MAP (100 annotations) encode |     130.7 |     409.1           |    2668.2         |
/// | MAP (100 annotations) decode |     183.6 |     433.7           |     573.5         |
/// | status reply encode          |      3.28 |      18.3           |     200.8         |
/// | status reply decode          |      9.33 |      25.6           |      23.8         |
///
/// `JSONValue` is 2-7 times faster than the Codable path in every row (and faster than
/// `JSONSerialization`, which also needs all of Foundation rather than FoundationEssentials).
/// Measured with nothing else running; with builds running beside it every column rises, up to
/// twice, and the order stays.
/// `JSONValue` is also the only one of the three that keeps members in the order written
/// (replies start with `"class"`; `locationctl --json` prints them as sent), keeps a numeric
/// request `"id"` byte for byte, bounds nesting depth, and needs no Foundation.
///
/// Objects keep their members in insertion order. ``raw(_:)`` carries a value that was already
/// encoded elsewhere (a gpsd TPV written by `GPSDJSON.appendTPV`, a number with fixed decimals)
/// and is copied verbatim.
public enum JSONValue: Sendable, Hashable {
  /// `null`.
  case null
  /// `true` or `false`.
  case bool(Bool)
  /// An integral number (written without a fraction).
  case int(Int64)
  /// A number; non-finite values are written as `null` (JSON has no NaN or infinity).
  case double(Double)
  /// A string.
  case string(String)
  /// An array.
  case array([JSONValue])
  /// An object, members in order; keys should be unique.
  case object([JSONMember])
  /// Already encoded JSON (UTF-8), inserted as is. Must be one complete JSON value.
  case raw([UInt8])

  /// The member named `key` of an object, or `nil` (also for non-objects).
  public subscript(key: String) -> JSONValue? {
    guard case .object(let members) = self else { return nil }
    return members.first { $0.key == key }?.value
  }

  /// The string, when this is a string.
  public var stringValue: String? {
    if case .string(let value) = self { return value }
    return nil
  }

  /// The number as a `Double`, when this is a number (`int` or `double`).
  public var doubleValue: Double? {
    switch self {
    case .int(let value): return Double(value)
    case .double(let value): return value
    default: return nil
    }
  }

  /// The number as an `Int`, when this is an integral number within `Int`'s range.
  public var intValue: Int? {
    switch self {
    case .int(let value): return Int(exactly: value)
    case .double(let value):
      guard value.isFinite, value.rounded() == value else { return nil }
      return Int(exactly: value)
    default: return nil
    }
  }

  /// The Boolean, when this is `true` or `false`.
  public var boolValue: Bool? {
    if case .bool(let value) = self { return value }
    return nil
  }

  /// The members, when this is an object.
  public var objectMembers: [JSONMember]? {
    if case .object(let members) = self { return members }
    return nil
  }

  /// The elements, when this is an array.
  public var arrayValue: [JSONValue]? {
    if case .array(let elements) = self { return elements }
    return nil
  }

  /// A number that is `.int` when `value` is integral and fits, `.double` otherwise.
  public static func number(_ value: Double) -> JSONValue {
    if value.isFinite, value.rounded() == value, abs(value) < 9.0e15,
      let exact = Int64(exactly: value)
    {
      return .int(exact)
    }
    return .double(value)
  }

  /// `.null` when `value` is `nil`, otherwise ``number(_:)``.
  public static func number(_ value: Double?) -> JSONValue {
    guard let value else { return .null }
    return number(value)
  }

  /// `.null` when `value` is `nil`, otherwise `.string`.
  public static func string(_ value: String?) -> JSONValue {
    guard let value else { return .null }
    return .string(value)
  }
}

/// One `"key": value` member of a JSON object.
public struct JSONMember: Sendable, Hashable {
  /// The member name.
  public var key: String
  /// The member value.
  public var value: JSONValue

  /// Creates a member.
  public init(_ key: String, _ value: JSONValue) {
    self.key = key
    self.value = value
  }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
  /// An object with the members in literal order.
  public init(dictionaryLiteral elements: (String, JSONValue)...) {
    self = .object(elements.map { JSONMember($0.0, $0.1) })
  }
}

extension JSONValue: ExpressibleByStringLiteral {
  /// A string value.
  public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
  /// An integral number.
  public init(integerLiteral value: Int64) { self = .int(value) }
}

extension JSONValue: ExpressibleByBooleanLiteral {
  /// A Boolean.
  public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
  /// An array.
  public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue {
  /// Writes the value as compact UTF-8 JSON (no whitespace, no trailing newline) to `buffer`.
  public func write(to buffer: inout [UInt8]) {
    switch self {
    case .null: buffer.append(contentsOf: "null".utf8)
    case .bool(let value): buffer.append(contentsOf: (value ? "true" : "false").utf8)
    case .int(let value): buffer.append(contentsOf: String(value).utf8)
    case .double(let value):
      if value.isFinite {
        if value.rounded() == value, abs(value) < 9.0e15, let exact = Int64(exactly: value) {
          buffer.append(contentsOf: String(exact).utf8)
        } else {
          buffer.append(contentsOf: "\(value)".utf8)
        }
      } else {
        buffer.append(contentsOf: "null".utf8)
      }
    case .string(let value): JSONValue.writeString(value, to: &buffer)
    case .array(let elements):
      buffer.append(UInt8(ascii: "["))
      for (index, element) in elements.enumerated() {
        if index > 0 { buffer.append(UInt8(ascii: ",")) }
        element.write(to: &buffer)
      }
      buffer.append(UInt8(ascii: "]"))
    case .object(let members):
      buffer.append(UInt8(ascii: "{"))
      for (index, member) in members.enumerated() {
        if index > 0 { buffer.append(UInt8(ascii: ",")) }
        JSONValue.writeString(member.key, to: &buffer)
        buffer.append(UInt8(ascii: ":"))
        member.value.write(to: &buffer)
      }
      buffer.append(UInt8(ascii: "}"))
    case .raw(let bytes):
      if bytes.isEmpty {
        buffer.append(contentsOf: "null".utf8)
      } else {
        buffer.append(contentsOf: bytes)
      }
    }
  }

  /// A copy with the members of every object, at every depth, sorted by key (by UTF-8 bytes),
  /// for output that must not depend on the order members were added (golden files).
  public func sortingKeys() -> JSONValue {
    switch self {
    case .array(let elements): return .array(elements.map { $0.sortingKeys() })
    case .object(let members):
      return .object(
        members.map { JSONMember($0.key, $0.value.sortingKeys()) }
          .sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) })
    default: return self
    }
  }

  /// The value as UTF-8 JSON laid out for people: every member and element on its own line,
  /// indented by two spaces per level, `" : "` between a key and its value, empty arrays and
  /// objects as `[]` and `{}`; no trailing newline. Parses back to the same value.
  public var indentedEncoded: [UInt8] {
    var buffer: [UInt8] = []
    writeIndented(to: &buffer, level: 0)
    return buffer
  }

  private func writeIndented(to buffer: inout [UInt8], level: Int) {
    func newline(_ level: Int) {
      buffer.append(UInt8(ascii: "\n"))
      buffer.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * level))
    }
    switch self {
    case .array(let elements) where !elements.isEmpty:
      buffer.append(UInt8(ascii: "["))
      for (index, element) in elements.enumerated() {
        if index > 0 { buffer.append(UInt8(ascii: ",")) }
        newline(level + 1)
        element.writeIndented(to: &buffer, level: level + 1)
      }
      newline(level)
      buffer.append(UInt8(ascii: "]"))
    case .object(let members) where !members.isEmpty:
      buffer.append(UInt8(ascii: "{"))
      for (index, member) in members.enumerated() {
        if index > 0 { buffer.append(UInt8(ascii: ",")) }
        newline(level + 1)
        JSONValue.writeString(member.key, to: &buffer)
        buffer.append(contentsOf: " : ".utf8)
        member.value.writeIndented(to: &buffer, level: level + 1)
      }
      newline(level)
      buffer.append(UInt8(ascii: "}"))
    default:
      write(to: &buffer)
    }
  }

  /// Whether a ``double(_:)`` anywhere in the value is NaN or infinite (written as `null`).
  public var containsNonFiniteNumber: Bool {
    switch self {
    case .double(let value): return !value.isFinite
    case .array(let elements): return elements.contains { $0.containsNonFiniteNumber }
    case .object(let members): return members.contains { $0.value.containsNonFiniteNumber }
    default: return false
    }
  }

  /// The value as compact UTF-8 JSON bytes.
  public var encoded: [UInt8] {
    var buffer: [UInt8] = []
    write(to: &buffer)
    return buffer
  }

  /// The value as a compact JSON string.
  public var jsonString: String { String(decoding: encoded, as: UTF8.self) }

  /// `string` as a JSON string literal with its quotes (see ``writeString(_:to:)``).
  public static func quoted(_ string: String) -> String {
    var buffer: [UInt8] = []
    writeString(string, to: &buffer)
    return String(decoding: buffer, as: UTF8.self)
  }

  /// Parses one JSON text (RFC 8259, strict: no trailing commas, comments or leading zeros;
  /// whitespace around the value allowed; nesting at most 64 deep). Numbers without a fraction
  /// or exponent that fit in `Int64` become ``int(_:)``, others ``double(_:)``.
  ///
  /// - Throws: ``JSONSyntaxError`` with the byte offset of the first problem.
  public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
    try JSONParser.parse(bytes)
  }

  /// As ``parse(_:)``, also refusing a number whose digits are not all zero but whose value
  /// underflows to 0 (`1e-400`): for messages where such a number must not pass as 0.
  ///
  /// - Throws: ``JSONSyntaxError`` with the byte offset of the first problem.
  public static func parse(_ bytes: [UInt8], refusingUnderflow: Bool) throws(JSONSyntaxError) -> JSONValue {
    try JSONParser.parse(bytes, textOfMember: nil, refusingUnderflow: refusingUnderflow).value
  }

  /// As ``parse(_:)``; when the value is an object whose member `key` is a number or a string,
  /// also returns that value's text exactly as written, a string with its quotes and escapes (a
  /// request `"id"` must come back byte for byte: a `Double` cannot hold every integer above
  /// 2^53, and `"a\/b"` decodes to the same string as `"a/b"`).
  ///
  /// - Throws: ``JSONSyntaxError`` with the byte offset of the first problem.
  public static func parse(_ bytes: [UInt8], textOfMember key: String) throws(JSONSyntaxError)
    -> (value: JSONValue, text: [UInt8]?)
  {
    try JSONParser.parse(bytes, textOfMember: key)
  }

  /// `string` as a JSON string literal, quotes included: the one JSON string escaper.
  ///
  /// RFC 8259 section 7: `"` and `\` are escaped with a backslash; LF, CR and tab as `\n`,
  /// `\r`, `\t`; every other control character below U+0020 as `\u00hh` (lower-case hex).
  /// Everything else, `/` and non-ASCII included, is copied as UTF-8.
  public static func writeString(_ string: String, to buffer: inout [UInt8]) {
    var string = string
    // One pass over the contiguous UTF-8 (native strings are; others are made so once), not
    // over String.UTF8View, whose index arithmetic costs more than the copy itself.
    string.withUTF8 { bytes in
      buffer.append(UInt8(ascii: "\""))
      // Most strings need no escape: copy them whole (one memcpy).
      if !bytes.contains(where: needsEscape) {
        buffer.append(contentsOf: bytes)
        buffer.append(UInt8(ascii: "\""))
        return
      }
      buffer.reserveCapacity(buffer.count + bytes.count + 8)
      for byte in bytes {
        guard needsEscape(byte) else {
          buffer.append(byte)
          continue
        }
        buffer.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): buffer.append(byte)
        case UInt8(ascii: "\n"): buffer.append(UInt8(ascii: "n"))
        case UInt8(ascii: "\r"): buffer.append(UInt8(ascii: "r"))
        case UInt8(ascii: "\t"): buffer.append(UInt8(ascii: "t"))
        default:
          // The other control characters, U+0000 to U+001F, as \u00XX with lower-case hex digits.
          buffer.append(UInt8(ascii: "u"))
          buffer.append(UInt8(ascii: "0"))
          buffer.append(UInt8(ascii: "0"))
          buffer.append(hexDigit(byte >> 4))
          buffer.append(hexDigit(byte & 0xF))
        }
      }
      buffer.append(UInt8(ascii: "\""))
    }
  }

  /// Whether RFC 8259 requires `byte` (a UTF-8 code unit) to be escaped in a string: the
  /// quotation mark, the reverse solidus and the control characters U+0000 to U+001F.
  @inline(__always)
  private static func needsEscape(_ byte: UInt8) -> Bool {
    byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
  }

  /// The lower-case hexadecimal digit of `nibble` (0-15).
  @inline(__always)
  private static func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + (nibble - 10)
  }

  /// A copy of an encoded JSON object with `members` appended before its closing brace.
  ///
  /// Used to add `"missed"` to a coalesced event or `"id"` to a reply whose body was encoded
  /// elsewhere. Returns `object` unchanged when it does not end with `}`.
  package static func appending(_ members: [JSONMember], toEncodedObject object: [UInt8]) -> [UInt8] {
    guard !members.isEmpty else { return object }
    var end = object.count
    while end > 0,
      [UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")]
        .contains(object[end - 1])
    {
      end -= 1
    }
    guard end > 0, object[end - 1] == UInt8(ascii: "}") else { return object }
    var result = Array(object[0..<(end - 1)])
    // Is the object empty ("{" followed only by whitespace)?
    let isEmpty = result.reversed().first { ![32, 9, 10, 13].contains($0) } == UInt8(ascii: "{")
    for (index, member) in members.enumerated() {
      if index > 0 || !isEmpty { result.append(UInt8(ascii: ",")) }
      writeString(member.key, to: &result)
      result.append(UInt8(ascii: ":"))
      member.value.write(to: &result)
    }
    result.append(UInt8(ascii: "}"))
    return result
  }
}

extension JSONValue {
  /// Where the first object member whose name appears earlier in the same object is, or `nil`
  /// when every object (at any depth) has distinct member names. RFC 8259 section 4 leaves
  /// duplicate names undefined (parsers differ on which one wins), so input that has them is
  /// ambiguous and is refused rather than read one way.
  ///
  /// The path names the member as the request parser does: member names joined by `.`, array
  /// elements as `[INDEX]`, e.g. `type` at the top level, `features[0].geometry.coordinates`.
  /// Searched depth first, in document order, without recursion.
  public var firstDuplicateMemberPath: String? {
    var stack: [(value: JSONValue, path: String)] = [(self, "")]
    while let (value, path) = stack.popLast() {
      switch value {
      case .object(let members):
        var seen = Set<String>()
        var children: [(JSONValue, String)] = []
        for member in members {
          let memberPath = path.isEmpty ? member.key : path + "." + member.key
          if !seen.insert(member.key).inserted { return memberPath }
          children.append((member.value, memberPath))
        }
        stack.append(contentsOf: children.reversed())
      case .array(let elements):
        stack.append(contentsOf: elements.enumerated().reversed().map { ($0.element, path + "[\($0.offset)]") })
      default:
        continue
      }
    }
    return nil
  }
}
