import LocationModel
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

  private enum State: Sendable { case lineStart, hunting, comment, sentence, overlong }

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
  ///
  /// A sentence that lies wholly inside the chunk is handed out in place, without a copy; only a
  /// sentence cut by the chunk's end is carried over in the line buffer.
  public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ onEvent: (Event) -> Void) {
    guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
    let count = bytes.count
    var i = 0
    var dollar = -1  // where the sentence in progress began, when it began in this chunk
    while i < count {
      if state == .sentence {
        // Scan the rest of the sentence: printable ASCII up to a line end.
        let start = dollar >= 0 ? dollar : i
        dollar = -1
        let carried = buffer.count
        var j = i
        var stop: UInt8 = 0
        // Eight bytes at a time while none is special and the line is short enough.
        while j + 8 <= count && j + 8 - start + carried <= Self.maximumLineLength {
          let w = SWAR.load(base + j)
          if SWAR.nonPrintableLanes(w) | SWAR.lanes(w, equalTo: 0x24) != 0 { break }
          j += 8
        }
        while j < count {
          let b = base[j]
          if b &- 0x20 > 0x5E || b == 0x24 {  // not printable, or "$"
            stop = b
            break
          }
          j += 1
          if j - start + carried > Self.maximumLineLength { break }
        }
        let length = j - start + carried
        if j == count && length <= Self.maximumLineLength {
          // The chunk ends inside the sentence: carry it over.
          buffer.append(contentsOf: UnsafeBufferPointer(start: base + start, count: j - start))
          return
        }
        if length > Self.maximumLineLength {
          j = min(j, count)
          // Trailing blanks after a full-length sentence are harmless; anything else is too long.
          var k = j - 1
          while k < count && base[k] == 0x20 { k += 1 }
          if k < count && (base[k] == 0x0A || base[k] == 0x0D) {
            j = k
            stop = base[k]
          } else if k == count {
            buffer.append(contentsOf: UnsafeBufferPointer(start: base + start, count: Self.maximumLineLength - carried))
            state = .overlong
            return
          } else {
            onEvent(.rejected(.tooLong))
            state = .hunting
            i = j
            continue
          }
        }
        switch stop {
        case 0x0A, 0x0D:
          let line = sentenceLine
          state = .hunting
          if carried == 0 {
            onEvent(.sentence(UnsafeBufferPointer(start: base + start, count: min(j - start, Self.maximumLineLength)), line: line))
          } else {
            buffer.append(contentsOf: UnsafeBufferPointer(start: base + start, count: min(j - start, Self.maximumLineLength - carried)))
            buffer.withUnsafeBufferPointer { onEvent(.sentence($0, line: line)) }
          }
          i = j  // the line end itself is handled below
        case 0x24:
          onEvent(.rejected(.truncated))
          state = .hunting
          i = j
        default:
          onEvent(.rejected(.invalidCharacter))
          state = .hunting
          i = j + 1
          continue
        }
      } else if state == .overlong {
        // The end of a full-length sentence was cut by the chunk: only blanks may follow.
        var k = i
        while k < count && base[k] == 0x20 { k += 1 }
        if k == count { return }
        if base[k] == 0x0A || base[k] == 0x0D {
          let line = sentenceLine
          buffer.withUnsafeBufferPointer { onEvent(.sentence($0, line: line)) }
        } else {
          onEvent(.rejected(.tooLong))
        }
        state = .hunting
        i = k
        continue
      }
      // Outside a sentence: look for "$", count lines, skip comments and noise.
      let b = base[i]
      switch b {
      case 0x0A:
        lineNumber &+= 1
        state = .lineStart
      case 0x0D:
        state = .lineStart
      case 0x24:
        if state != .comment {
          buffer.removeAll(keepingCapacity: true)
          dollar = i
          sentenceLine = lineNumber
          state = .sentence
        }
      default:
        switch state {
        case .lineStart:
          state = b == 0x23 ? .comment : .hunting  // "#"
        case .comment:
          // A comment is text; binary bytes mean the "#" was noise: hunt for "$" again.
          if (b < 0x20 && b != 0x09) || b > 0x7E { state = .hunting }
        default:
          break
        }
      }
      i += 1
    }
    // The chunk ended right after a "$": carry it over.
    if state == .sentence && dollar >= 0 {
      buffer.append(contentsOf: UnsafeBufferPointer(start: base + dollar, count: count - dollar))
    }
  }

  /// Ends the stream: a final sentence without a line end is emitted if it carries a checksum
  /// (so a log whose last line lacks a newline loses nothing), otherwise reported truncated.
  public mutating func finish(_ onEvent: (Event) -> Void) {
    if state == .sentence || state == .overlong {
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
