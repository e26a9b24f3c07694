/// A strict RFC 8259 JSON validator, independent of the project's own parser, so that the
/// writers (TPV/SKY, replies) are checked by code that did not produce them.
///
/// Accepts exactly one value with optional surrounding whitespace; strings must be valid UTF-8
/// with every control character escaped; numbers follow the RFC grammar (no leading zeros, no
/// `NaN`, no `inf`). Nesting is limited to 512 levels.
public enum StrictJSON {
  /// Why a text is not JSON: byte offset and reason.
  public struct Invalid: Error, Sendable, CustomStringConvertible {
    /// Byte offset of the first bad byte.
    public var offset: Int
    /// What was wrong there.
    public var reason: String
    /// One line.
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
  }

  /// Checks that `bytes` are one JSON value.
  ///
  /// - Throws: ``Invalid``.
  public static func validate(_ bytes: [UInt8]) throws(Invalid) {
    var v = Validator(bytes: bytes)
    v.skipWhitespace()
    try v.value(depth: 0)
    v.skipWhitespace()
    guard v.index == bytes.count else { throw v.fail("text after the value") }
  }

  /// Whether `bytes` are one JSON object (`{...}`), validated as ``validate(_:)`` does.
  public static func isObject(_ bytes: [UInt8]) -> Bool {
    guard (try? validate(bytes)) != nil else { return false }
    return bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) == 0x7B
  }

  private struct Validator {
    let bytes: [UInt8]
    var index = 0

    func fail(_ reason: String) -> Invalid { Invalid(offset: index, reason: reason) }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
      while let b = current, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { index += 1 }
    }

    mutating func literal(_ text: StaticString) throws(Invalid) {
      let count = text.utf8CodeUnitCount
      var i = 0
      while i < count {
        guard current == text.utf8Start[i] else { throw fail("bad literal") }
        index += 1
        i += 1
      }
    }

    /// An object's members (`members`: a name and ':' before each value) or an array's elements,
    /// from its opening bracket through `close`.
    mutating func container(closingWith close: UInt8, members: Bool, depth: Int) throws(Invalid) {
      index += 1
      skipWhitespace()
      if current == close {
        index += 1
        return
      }
      while true {
        skipWhitespace()
        if members {
          guard current == 0x22 else { throw fail("member name expected") }
          try string()
          skipWhitespace()
          guard current == 0x3A else { throw fail("':' expected") }
          index += 1
          skipWhitespace()
        }
        try value(depth: depth + 1)
        skipWhitespace()
        if current == 0x2C {
          index += 1
          continue
        }
        guard current == close else { throw fail(members ? "',' or '}' expected" : "',' or ']' expected") }
        index += 1
        return
      }
    }

    mutating func value(depth: Int) throws(Invalid) {
      guard depth < 512 else { throw fail("nested too deeply") }
      guard let b = current else { throw fail("value expected") }
      switch b {
      case 0x7B: try container(closingWith: 0x7D, members: true, depth: depth)  // {
      case 0x5B: try container(closingWith: 0x5D, members: false, depth: depth)  // [
      case 0x22: try string()
      case 0x74: try literal("true")
      case 0x66: try literal("false")
      case 0x6E: try literal("null")
      default: try number()
      }
    }

    mutating func digits() -> Int {
      var n = 0
      while let b = current, b >= 0x30 && b <= 0x39 {
        index += 1
        n += 1
      }
      return n
    }

    mutating func number() throws(Invalid) {
      if current == 0x2D { index += 1 }
      if current == 0x30 {
        index += 1
      } else {
        guard let b = current, b >= 0x31 && b <= 0x39 else { throw fail("number expected") }
        _ = digits()
      }
      if current == 0x2E {
        index += 1
        guard digits() > 0 else { throw fail("digit expected after '.'") }
      }
      if current == 0x65 || current == 0x45 {
        index += 1
        if current == 0x2B || current == 0x2D { index += 1 }
        guard digits() > 0 else { throw fail("digit expected in exponent") }
      }
    }

    mutating func string() throws(Invalid) {
      index += 1  // opening quote
      while true {
        guard let b = current else { throw fail("unterminated string") }
        switch b {
        case 0x22:
          index += 1
          return
        case 0x5C:
          index += 1
          guard let e = current else { throw fail("unterminated escape") }
          switch e {
          case 0x22, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74: index += 1
          case 0x75:
            index += 1
            for _ in 0..<4 {
              guard let h = current, (h >= 0x30 && h <= 0x39) || (h | 0x20 >= 0x61 && h | 0x20 <= 0x66) else {
                throw fail("bad \\u escape")
              }
              index += 1
            }
          default: throw fail("bad escape")
          }
        case 0..<0x20: throw fail("unescaped control character")
        case 0x20..<0x80: index += 1
        default: try utf8Sequence()
        }
      }
    }

    /// One multi-byte UTF-8 sequence (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
    mutating func utf8Sequence() throws(Invalid) {
      guard let lead = current else { throw fail("bad UTF-8") }
      let length: Int
      var scalar: UInt32
      switch lead {
      case 0xC2...0xDF: length = 2; scalar = UInt32(lead & 0x1F)
      case 0xE0...0xEF: length = 3; scalar = UInt32(lead & 0x0F)
      case 0xF0...0xF4: length = 4; scalar = UInt32(lead & 0x07)
      default: throw fail("bad UTF-8 lead byte")
      }
      guard index + length <= bytes.count else { throw fail("truncated UTF-8") }
      for k in 1..<length {
        let c = bytes[index + k]
        guard c & 0xC0 == 0x80 else { throw fail("bad UTF-8 continuation") }
        scalar = scalar << 6 | UInt32(c & 0x3F)
      }
      let minimum: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
      guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else {
        throw fail("overlong, surrogate or out-of-range UTF-8")
      }
      index += length
    }
  }
}
