import LocationProtocol

/// Splits a byte stream into `\n`-terminated lines (a trailing `\r` is removed), enforcing a
/// maximum line length.
///
/// A line longer than ``maximumLength`` produces one ``Item/tooLong`` and everything up to the
/// next `\n` is discarded, so the reader resynchronises at the next line. Any chunking of the
/// input gives the same items. Memory is bounded by ``maximumLength`` plus one chunk.
public struct LineReader: Sendable {
  /// What the reader produced.
  public enum Item: Sendable, Hashable {
    /// A complete line without its terminator.
    case line([UInt8])
    /// A line exceeded the maximum length and was discarded.
    case tooLong
  }

  /// The longest accepted line, bytes, without the terminator.
  public let maximumLength: Int
  private var buffer: [UInt8] = []
  private var discarding = false

  /// Creates a reader; `maximumLength` defaults to the request limit (64 KiB).
  public init(maximumLength: Int = Request.maximumLineLength) {
    self.maximumLength = maximumLength
  }

  /// Bytes of an incomplete line held so far.
  public var bufferedCount: Int { buffer.count }

  /// Ends the input: an unterminated last line is returned as a line (or as ``Item/tooLong``),
  /// for the caller to decide whether it is a request.
  public mutating func finish() -> [Item] {
    guard !discarding, !buffer.isEmpty else {
      discarding = false
      buffer = []
      return []
    }
    return feed([UInt8(ascii: "\n")])
  }

  /// Consumes a chunk and returns the items it completes, in order. Blank lines are skipped.
  public mutating func feed(_ chunk: ArraySlice<UInt8>) -> [Item] { consume(chunk) }

  /// Consumes a chunk and returns the items it completes, in order. Blank lines are skipped.
  public mutating func feed(_ chunk: [UInt8]) -> [Item] { consume(chunk[...]) }

  /// Consumes a chunk and returns the items it completes, in order. Blank lines are skipped.
  public mutating func feed(_ chunk: some Collection<UInt8>) -> [Item] { consume(chunk) }

  /// The one implementation; the concrete `feed` overloads give it concrete types, so the
  /// socket server's and the fuzz target's calls run specialized code instead of looking up
  /// generic metadata for every chunk.
  private mutating func consume<Chunk: Collection<UInt8>>(_ chunk: Chunk) -> [Item] {
    var items: [Item] = []
    var start = chunk.startIndex
    while start != chunk.endIndex {
      guard let newline = chunk[start...].firstIndex(of: UInt8(ascii: "\n")) else {
        let rest = chunk[start...]
        if !discarding {
          if buffer.count + rest.count > maximumLength + 1 {
            // +1 leaves room for the "\r" of a CRLF line of exactly maximumLength bytes.
            items.append(.tooLong)
            discarding = true
            buffer.removeAll(keepingCapacity: false)
          } else {
            buffer.append(contentsOf: rest)
          }
        }
        break
      }
      let part = chunk[start..<newline]
      start = chunk.index(after: newline)
      if discarding {
        discarding = false
        continue
      }
      buffer.append(contentsOf: part)
      if buffer.last == UInt8(ascii: "\r") { buffer.removeLast() }
      if buffer.count > maximumLength {
        items.append(.tooLong)
      } else if buffer.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) {
        items.append(.line(buffer))
      }
      // Keep a small buffer for the next line, not one grown by an occasional long request.
      buffer.removeAll(keepingCapacity: buffer.capacity <= 4096)
    }
    return items
  }
}
