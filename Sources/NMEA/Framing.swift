/// Splits a byte stream from a receiver into candidate NMEA 0183 sentences.
///
/// NMEA 0183 v4.11 section 5.3: a sentence starts with `$`, ends with `<CR><LF>`, and has at most
/// 82 characters. Real receivers exceed that (u-blox GSV with signal IDs, Trimble GNS), so lines
/// up to ``maximumLineLength`` bytes are accepted. The framer:
/// - accepts LF, CR LF or a lone CR as the line end;
/// - skips bytes before `$` (binary protocols interleaved on the same port, stray spaces);
/// - skips comment lines that start with `#` (gpsd's test-log headers); a `#` followed by binary
///   bytes is noise, not a comment;
/// - resynchronises at the next `$`: a sentence interrupted by a new `$` is reported ``NMEARejection/truncated``;
/// - rejects a sentence that contains a byte outside printable ASCII (NUL, binary noise) or runs
///   past ``maximumLineLength``.
/// Memory is bounded: one line of at most ``maximumLineLength`` bytes is buffered.
public struct NMEAFramer: Sendable {
  /// The longest sentence accepted, in bytes from `$` to the last checksum digit (NMEA says 82).
  public static let maximumLineLength = 102

  private enum State: Sendable { case lineStart, hunting, comment, sentence }

  private var state: State = .lineStart
  private var buffer: [UInt8] = []
  private var sentenceLine = 1
  /// 1-based number of the line the framer is reading (counts LF bytes).
  public private(set) var lineNumber = 1

  /// Bytes of the sentence being framed (never more than ``maximumLineLength``).
  var bufferedByteCount: Int { buffer.capacity > 4 * Self.maximumLineLength ? buffer.capacity : buffer.count }

  /// Creates a framer at the start of a stream.
  public init() { buffer.reserveCapacity(Self.maximumLineLength + 1) }

  /// What the framer found.
  public enum Event {
    /// A complete candidate sentence from `$` to the byte before the line end, with the 1-based
    /// line number it started on. The buffer is valid only during the callback.
    case sentence(UnsafeBufferPointer<UInt8>, line: Int)
    /// A candidate sentence was dropped.
    case rejected(NMEARejection)
  }

  /// Frames the next chunk of bytes; any chunking of the same stream yields the same events.
  public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ onEvent: (Event) -> Void) {
    for byte in bytes {
      switch byte {
      case 0x0A, 0x0D:  // LF, CR
        if state == .sentence { emit(onEvent) }
        if byte == 0x0A { lineNumber &+= 1 }
        state = .lineStart
      case 0x24:  // "$"
        if state == .comment { continue }
        if state == .sentence { onEvent(.rejected(.truncated)) }
        buffer.removeAll(keepingCapacity: true)
        buffer.append(byte)
        sentenceLine = lineNumber
        state = .sentence
      default:
        switch state {
        case .sentence:
          if byte < 0x20 || byte > 0x7E {
            onEvent(.rejected(.invalidCharacter))
            state = .hunting
          } else if buffer.count >= Self.maximumLineLength {
            if byte != 0x20 {  // trailing blanks after a full-length sentence are harmless
              onEvent(.rejected(.tooLong))
              state = .hunting
            }
          } else {
            buffer.append(byte)
          }
        case .lineStart:
          state = byte == 0x23 ? .comment : .hunting  // "#"
        case .comment:
          // A comment is text; binary bytes mean the "#" was noise: hunt for "$" again.
          if (byte < 0x20 && byte != 0x09) || byte > 0x7E { state = .hunting }
        case .hunting:
          break
        }
      }
    }
  }

  /// Ends the stream: a final sentence without a line end is emitted if it carries a checksum
  /// (so a log whose last line lacks a newline loses nothing), otherwise reported truncated.
  public mutating func finish(_ onEvent: (Event) -> Void) {
    if state == .sentence {
      if buffer.contains(0x2A) { emit(onEvent) } else { onEvent(.rejected(.truncated)) }
    }
    state = .lineStart
  }

  private mutating func emit(_ onEvent: (Event) -> Void) {
    state = .hunting
    let line = sentenceLine
    buffer.withUnsafeBufferPointer { onEvent(.sentence($0, line: line)) }
  }
}
