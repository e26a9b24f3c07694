/// The one rule for identifiers and titles, whichever front-end they come from (the socket, the
/// web page's API, MQTT): annotation ids, titles, subtitles and kinds, region ids and titles,
/// OwnTracks tracker ids and the fleet's ids made from MQTT topics.
///
/// Lengths are counted in bytes of UTF-8, as the socket's line limit and the map's text budget
/// count them, never in grapheme clusters: one "character" can hold any number of combining
/// marks (an `e` followed by 1,499 accents is one grapheme of 2,999 bytes). For what is drawn, at
/// most ``maxCombiningMarks`` combining marks may sit on one character (extended grapheme
/// cluster, Unicode UAX #29), so that no label draws a column of accents over its neighbours.
/// Each type keeps its own refusal of control and format characters.
public enum TextRules {
  /// Most bytes of UTF-8 in an identifier (an annotation's, a region's): 256.
  public static let maxIdentifierBytes = 256
  /// Most bytes of UTF-8 in a title or subtitle: 1,024.
  public static let maxTitleBytes = 1024
  /// Most combining marks (Unicode general categories Mn, nonspacing, and Me, enclosing) on
  /// one character: 4. Written languages need at most 3 (Vietnamese and other stacked
  /// diacritics; a keycap emoji carries 2: U+FE0F and U+20E3).
  public static let maxCombiningMarks = 4
  /// Most Unicode scalars in one character (extended grapheme cluster): 10. Joining sequences a
  /// writing system or emoji needs stay well below (a Hangul syllable of jamo 3, a Devanagari
  /// conjunct 6, a family emoji joined by ZWJ 7), while a base followed by hundreds of vowel
  /// signs, jamo or skin-tone modifiers, which draws one arbitrarily wide character, is refused.
  public static let maxScalarsPerCharacter = 10

  /// `text` with every character that a reader cannot see for what it is written as `\u{X}`
  /// (hexadecimal), for a message that quotes what a user gave: control characters (Unicode
  /// general category Cc: tab, newline, escape, DEL, C1), format characters (Cf: a byte-order
  /// mark, a zero-width space, bidirectional controls), line and paragraph separators (Zl, Zp) and
  /// every space but U+0020 (Zs: a no-break space). A value can then neither break the message's
  /// line or the journal's, nor pass for another (`\u{FEFF}max-clients` is not `max-clients`).
  public static func escapingInvisibles(_ text: String) -> String {
    func hidden(_ scalar: Unicode.Scalar) -> Bool {
      // ASCII's only such characters are the controls (Cc): no table lookup for them.
      if scalar.isASCII { return scalar.value < 0x20 || scalar.value == 0x7F }
      switch scalar.properties.generalCategory {
      case .control, .format, .lineSeparator, .paragraphSeparator: return true
      case .spaceSeparator: return scalar != " "
      default: return false
      }
    }
    guard text.unicodeScalars.contains(where: hidden) else { return text }
    var result = ""
    for scalar in text.unicodeScalars {
      if hidden(scalar) {
        result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
      } else {
        result.unicodeScalars.append(scalar)
      }
    }
    return result
  }

  /// A value a user gave, as a message quotes it: ``shortened(_:limit:)`` (200 characters), then
  /// ``escapingInvisibles(_:)``.
  public static func quoted(_ text: String) -> String { escapingInvisibles(shortened(text)) }

  /// `text` cut to its first `limit` characters (extended grapheme clusters), with how much was
  /// left out, for a message that quotes what a user gave: a 100 kB value does not make a 100 kB
  /// log line. `limit` is at least 1.
  public static func shortened(_ text: String, limit: Int = 200) -> String {
    let limit = max(1, limit)
    guard text.count > limit else { return text }
    return String(text.prefix(limit)) + "... (\(text.utf8.count) bytes in all)"
  }

  /// Whether `scalar` is a combining mark that draws over or around its base (Unicode general
  /// category Mn or Me); spacing marks (Mc) take their own room and are not counted.
  public static func isCombiningMark(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.properties.generalCategory {
    case .nonspacingMark, .enclosingMark: return true
    default: return false
    }
  }

  /// The largest number of combining marks on one character (extended grapheme cluster) of
  /// `text`; 0 for text without any.
  public static func mostCombiningMarks(in text: String) -> Int {
    var most = 0
    for character in text {
      var marks = 0
      for scalar in character.unicodeScalars where isCombiningMark(scalar) { marks += 1 }
      most = max(most, marks)
    }
    return most
  }

  /// The largest number of Unicode scalars in one character (extended grapheme cluster) of
  /// `text`; 0 for empty text.
  public static func longestCharacter(in text: String) -> Int {
    text.reduce(0) { max($0, $1.unicodeScalars.count) }
  }

  /// Whether `scalar` is a format character that joins others into one drawn character and is
  /// allowed in ids and titles although it is of category Cf: ZERO WIDTH JOINER (U+200D, emoji
  /// sequences) and ZERO WIDTH NON-JOINER (U+200C, Persian and Indic text). Other format
  /// characters (bidirectional controls and the like) stay refused.
  public static func isAllowedJoiner(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value == 0x200C || scalar.value == 0x200D
  }

  /// Why `text` breaks the rule for a field of at most `maxBytes` bytes, or `nil` when it keeps
  /// it: `"N bytes of UTF-8, limit L"`, `"N combining marks on one character, limit 4"` or
  /// `"N code points in one character, limit 10"`.
  public static func problem(_ text: String, maxBytes: Int) -> String? {
    let bytes = text.utf8.count
    if bytes > maxBytes { return "\(bytes) bytes of UTF-8, limit \(maxBytes)" }
    let marks = mostCombiningMarks(in: text)
    if marks > maxCombiningMarks {
      return "\(marks) combining marks on one character, limit \(maxCombiningMarks)"
    }
    let longest = longestCharacter(in: text)
    if longest > maxScalarsPerCharacter {
      return "\(longest) code points in one character, limit \(maxScalarsPerCharacter)"
    }
    return nil
  }
}
