/// A JSON value (RFC 8259) as the socket protocol sends and receives it.
///
/// Objects keep their members in insertion order, so replies always start with `"class"` and
/// read the same every time. ``raw(_:)`` carries an object that was already encoded elsewhere
/// (a gpsd TPV written by `GPSDJSON.appendTPV`) and is copied verbatim.
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

extension JSONValue: Decodable {
  /// Decodes any JSON value (used with `JSONDecoder` to read requests and replies).
  ///
  /// - Throws: `DecodingError` when the input is not JSON.
  public init(from decoder: any Decoder) throws {
    if var array = try? decoder.unkeyedContainer() {
      var elements: [JSONValue] = []
      while !array.isAtEnd { elements.append(try array.decode(JSONValue.self)) }
      self = .array(elements)
      return
    }
    if let object = try? decoder.container(keyedBy: AnyKey.self) {
      var members: [JSONMember] = []
      for key in object.allKeys {
        members.append(JSONMember(key.stringValue, try object.decode(JSONValue.self, forKey: key)))
      }
      self = .object(members)
      return
    }
    let single = try decoder.singleValueContainer()
    if single.decodeNil() {
      self = .null
    } else if let value = try? single.decode(Bool.self) {
      self = .bool(value)
    } else if let value = try? single.decode(Int64.self) {
      self = .int(value)
    } else if let value = try? single.decode(Double.self) {
      self = .double(value)
    } else {
      self = .string(try single.decode(String.self))
    }
  }

  private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }
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

  /// The value as compact UTF-8 JSON bytes.
  public var encoded: [UInt8] {
    var buffer: [UInt8] = []
    write(to: &buffer)
    return buffer
  }

  /// The value as a compact JSON string.
  public var jsonString: String { String(decoding: encoded, as: UTF8.self) }

  /// Parses one JSON text.
  ///
  /// - Throws: `DecodingError` (from `JSONDecoder`) when `bytes` is not valid JSON.
  public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
    try JSONCoding.decode(bytes)
  }

  static func writeString(_ string: String, to buffer: inout [UInt8]) {
    buffer.append(UInt8(ascii: "\""))
    for byte in string.utf8 {
      switch byte {
      case UInt8(ascii: "\""): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
      case UInt8(ascii: "\\"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
      case UInt8(ascii: "\n"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
      case UInt8(ascii: "\r"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
      case UInt8(ascii: "\t"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
      case 0..<0x20:
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        buffer.append(contentsOf: [
          UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
          hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
        ])
      default: buffer.append(byte)
      }
    }
    buffer.append(UInt8(ascii: "\""))
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
