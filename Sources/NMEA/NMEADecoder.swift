/// A fix assembled from one epoch of NMEA 0183 sentences, with where it came from in the input.
public struct DecodedFix: Sendable, Hashable {
  /// The assembled solution.
  public var fix: Fix
  /// 1-based line number of the first sentence of the epoch in the input.
  public var line: Int

  /// Creates a decoded fix.
  public init(fix: Fix, line: Int) {
    self.fix = fix
    self.line = line
  }
}

/// Streaming NMEA 0183 decoder: bytes in, one ``Fix`` per epoch out.
///
/// Feeds any chunking of the input (a byte, a line, 64 KiB) and produces the same fixes.
/// Memory stays bounded whatever the input: at most one line and one epoch are held.
public struct NMEADecoder: Sendable {
  /// Counters of what the decoder has seen so far.
  public private(set) var statistics = NMEAStatistics()

  /// Creates a decoder with empty state.
  public init() {}

  /// Decodes the next chunk of input, calling `onFix` for every epoch that the chunk completes.
  public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ onFix: (DecodedFix) -> Void) {}

  /// Ends the input: emits the epoch still being assembled, if any.
  public mutating func finish(_ onFix: (DecodedFix) -> Void) {}
}

/// Counters kept by ``NMEADecoder``.
public struct NMEAStatistics: Sendable, Hashable {
  /// Candidate sentences framed (each `$` that started a line, complete or not).
  public var read = 0
  /// Sentences with a valid or absent checksum that parsed.
  public var accepted = 0
  /// Accepted sentences that carried no checksum.
  public var unchecked = 0
  /// Proprietary `$P...` sentences, recognised and skipped.
  public var proprietary = 0
  /// Well-formed sentences of a type this decoder does not interpret (RMB, TXT, GBS...).
  public var unsupported = 0
  /// Rejected sentences by reason.
  public var rejected: [NMEARejection: Int] = [:]
  /// Total of ``rejected``.
  public var rejectedTotal: Int { rejected.values.reduce(0, +) }
  /// Creates zeroed counters.
  public init() {}
}

/// Why a candidate sentence was rejected.
public enum NMEARejection: String, Sendable, Hashable, CaseIterable, Codable {
  /// The checksum did not match the XOR of the characters between `$` and `*`.
  case checksumMismatch
  /// `*` was not followed by exactly two hexadecimal digits.
  case malformedChecksum
  /// The line was longer than ``NMEAFramer/maximumLineLength`` bytes.
  case tooLong
  /// A byte outside printable ASCII inside the sentence.
  case invalidCharacter
  /// A new `$` (or the end of input) arrived before the line ended.
  case truncated
  /// The address field was not a talker plus a three-letter formatter.
  case malformedAddress
  /// A field could not be read (not a number, out of range).
  case invalidField
}
