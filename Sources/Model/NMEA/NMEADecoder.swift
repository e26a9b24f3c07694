import LocationModel

/// A fix assembled from one epoch of NMEA 0183 sentences, with where it came from in the input.
public struct DecodedFix: Sendable, Hashable {
  /// The assembled solution.
  public var fix: Fix
  /// 1-based line number of the first sentence of the epoch in the input.
  public var line: Int
  /// GPS weeks added to the receiver's date by the week-rollover floor (a multiple of 1024), or
  /// 0 when the date is as the receiver sent it.
  public var rolloverWeeks: Int
  /// Whether the epoch holds satellite data only (GSV, GSA without any time or fix sentence):
  /// a sky view to report as SKY, with no TPV. Only a ``FixAssembler`` created with
  /// `skyOnlyEpochs` gives such epochs.
  public var isSkyOnly: Bool

  /// Creates a decoded fix.
  public init(fix: Fix, line: Int, rolloverWeeks: Int = 0, isSkyOnly: Bool = false) {
    self.fix = fix
    self.line = line
    self.rolloverWeeks = rolloverWeeks
    self.isSkyOnly = isSkyOnly
  }
}

/// Streaming NMEA 0183 decoder: bytes in, one ``Fix`` per epoch out.
///
/// Feeds any chunking of the input (a byte, a line, 64 KiB) and produces the same fixes.
/// Memory stays bounded whatever the input: at most one line and one epoch are held.
///
/// One decoder reads one source. Checksums are decided per source: NMEA 0183 v4.11 section 5.2.1
/// makes the `*hh` checksum mandatory, but some old receivers send none at all, so sentences
/// without one are accepted (counted as ``NMEAStatistics/unchecked``) until the source has sent
/// a checksummed sentence. From then on a sentence without `*hh` is one that lost it in
/// transmission, and it is rejected (``NMEARejection/missingChecksum``). Proprietary sentences
/// are exempt: their format is the manufacturer's (`$PASHR` has no checksum), and they are skipped.
public struct NMEADecoder: Sendable {
  /// Counters of what the decoder has seen so far.
  public private(set) var statistics = NMEAStatistics()
  private var framer = NMEAFramer()
  private var assembler = FixAssembler()
  private var sourceSendsChecksums = false

  /// Creates a decoder with empty state.
  public init() {}

  /// Creates a decoder whose dates before `rolloverFloor` (days since 1970-01-01) move forward
  /// in 1024-week steps (see ``FixAssembler/init(rolloverFloor:)``); `nil` keeps dates as sent.
  public init(rolloverFloor: Int?) {
    assembler = FixAssembler(rolloverFloor: rolloverFloor)
  }

  /// Creates a decoder as ``init(rolloverFloor:)``; with `skyOnlyEpochs`, satellite data without
  /// any time or fix sentence is emitted as sky-only epochs (see
  /// ``FixAssembler/init(rolloverFloor:skyOnlyEpochs:)``).
  public init(rolloverFloor: Int?, skyOnlyEpochs: Bool) {
    assembler = FixAssembler(rolloverFloor: rolloverFloor, skyOnlyEpochs: skyOnlyEpochs)
  }

  /// Creates a decoder as ``init(rolloverFloor:)`` for a live source: it learns which sentence
  /// ends the receiver's epochs, so that ``epochAtCycleEnd()`` has the epoch as soon as that
  /// sentence arrives. What ``feed(_:_:)-(UnsafeRawBufferPointer,_)`` emits is the same.
  public init(liveWithRolloverFloor rolloverFloor: Int?) {
    assembler = FixAssembler(rolloverFloor: rolloverFloor)
    assembler.learnsEpochEnd = true
  }

  /// 1-based number of the input line the decoder has reached.
  public var lineNumber: Int { framer.lineNumber }

  /// Decodes the next chunk of input, calling `onFix` for every epoch that the chunk completes.
  public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ onFix: (DecodedFix) -> Void) {
    // The framer is moved out while it calls back (its buffers stay uniquely referenced); the
    // assembler and counters are updated in place, not copied for every chunk.
    var framer = self.framer
    self.framer = NMEAFramer()
    withUnsafeTemporaryAllocation(of: Int32.self, capacity: 2 * FieldReader.maximumFields) {
      scratch in
      framer.feed(bytes) { event in
        Self.handle(event, scratch, &self.assembler, &self.statistics, &self.sourceSendsChecksums, onFix)
      }
    }
    self.framer = framer
  }

  /// Decodes the next chunk of input held in an array.
  public mutating func feed(_ bytes: [UInt8], _ onFix: (DecodedFix) -> Void) {
    bytes.withUnsafeBytes { feed($0, onFix) }
  }

  /// The epoch in progress when the last sentence decoded ended the receiver's reporting cycle
  /// (``FixAssembler/epochAtCycleEnd()``), for live sources that report at once; `nil` otherwise.
  /// The epoch is still emitted by a later ``feed(_:_:)-(UnsafeRawBufferPointer,_)`` or
  /// ``finish(_:)``, normally with the same value.
  public func epochAtCycleEnd() -> DecodedFix? { assembler.epochAtCycleEnd() }

  /// The epoch being assembled as it would end now (see ``FixAssembler/epochInProgress()``);
  /// `nil` when no sentence of one has come. Nothing changes.
  public func epochInProgress() -> DecodedFix? { assembler.epochInProgress() }

  /// Whether an epoch is being assembled (``epochInProgress()`` without building it).
  public var hasEpochInProgress: Bool { assembler.hasEpochInProgress }

  /// Emits the epoch being assembled, if any, and starts the next; a line still without its line
  /// end stays in the framer (a connection that broke cut it: it is not decoded).
  public mutating func endEpoch(_ onFix: (DecodedFix) -> Void) {
    assembler.flush(onFix)
  }

  /// Ends the input: decodes a last line that lacks a line end and emits the epoch still being
  /// assembled, if any.
  public mutating func finish(_ onFix: (DecodedFix) -> Void) {
    var assembler = self.assembler
    var statistics = self.statistics
    var checksums = sourceSendsChecksums
    withUnsafeTemporaryAllocation(of: Int32.self, capacity: 2 * FieldReader.maximumFields) {
      scratch in
      framer.finish { event in
        Self.handle(event, scratch, &assembler, &statistics, &checksums, onFix)
      }
    }
    sourceSendsChecksums = checksums
    assembler.flush(onFix)
    self.assembler = assembler
    self.statistics = statistics
  }

  private static func handle(
    _ event: NMEAFramer.Event, _ scratch: UnsafeMutableBufferPointer<Int32>,
    _ assembler: inout FixAssembler,
    _ statistics: inout NMEAStatistics, _ sendsChecksums: inout Bool, _ onFix: (DecodedFix) -> Void
  ) {
    statistics.read += 1
    switch event {
    case .rejected(let reason):
      statistics.rejected[reason, default: 0] += 1
    case .sentence(let bytes, let line):
      // A source that sends checksums: a line without '*' lost it, and that is the reason it is
      // refused, before any field is read (the lost '*' runs the checksum into the last field).
      if sendsChecksums, !bytes.contains(0x2A), !(bytes.count > 1 && bytes[1] == 0x50) {
        statistics.rejected[.missingChecksum, default: 0] += 1
        return
      }
      let sentence: NMEASentence
      do {
        sentence = try NMEAParser.parse(bytes, scratch: scratch)
      } catch {
        statistics.rejected[error.rejection, default: 0] += 1
        return
      }
      if sentence.hasChecksum {
        sendsChecksums = true
      } else {
        if sendsChecksums && !sentence.payload.isProprietary {
          statistics.rejected[.missingChecksum, default: 0] += 1
          return
        }
        statistics.unchecked += 1
      }
      statistics.accepted += 1
      if sentence.payload.isProprietary {
        statistics.proprietary += 1
      } else if sentence.payload.isUnsupported {
        statistics.unsupported += 1
      }
      // Sentences not decoded here still take part in gpsd's end-of-cycle detection.
      assembler.apply(sentence, line: line, onFix)
    }
  }
}

/// Counters kept by ``NMEADecoder``.
public struct NMEAStatistics: Sendable, Hashable {
  /// Candidate sentences framed (each `$` that started a line, complete or not).
  public var read = 0
  /// Sentences with a valid or absent checksum that parsed (proprietary and unsupported included).
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

  /// One line of `key=value` pairs, rejections by reason included, e.g.
  /// `read=1200 accepted=1180 unchecked=0 proprietary=12 unsupported=30 rejected=20 checksumMismatch=20`.
  public var summary: String {
    var parts = [
      "read=\(read)", "accepted=\(accepted)", "unchecked=\(unchecked)",
      "proprietary=\(proprietary)",
      "unsupported=\(unsupported)", "rejected=\(rejectedTotal)",
    ]
    for reason in NMEARejection.allCases {
      if let n = rejected[reason], n > 0 { parts.append("\(reason.rawValue)=\(n)") }
    }
    return parts.joined(separator: " ")
  }
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
  /// A sentence without `*hh` from a source that has sent checksummed sentences: the checksum
  /// was lost, so nothing in the sentence can be trusted (see ``NMEADecoder``).
  case missingChecksum
  /// A sentence with fewer fields than its formatter needs (``SentenceType/minimumFieldCount``).
  case tooFewFields
}

extension NMEASentence.Payload {
  var isProprietary: Bool {
    if case .proprietary = self { return true }
    return false
  }

  var isUnsupported: Bool {
    if case .unsupported = self { return true }
    return false
  }
}
