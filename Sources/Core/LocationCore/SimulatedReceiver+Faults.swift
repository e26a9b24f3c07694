import LocationModel

/// Faults a simulated receiver injects into its output, seeded and scheduled over time.
///
/// A schedule is a comma-separated list of terms (``parse(_:)``):
/// - `KIND:P`: each sentence suffers fault KIND with probability P (`0...1`); the kinds are
///   `checksum` (wrong checksum digits), `bitflip` (one bit of one byte between `$` and `*`
///   inverted), `drop` (the sentence is not sent), `truncate` (the sentence is cut before its
///   `*` and its line end, as when power or the cable goes mid-sentence) and `garbage` (1 to 8
///   bytes of line noise, 0x80-0xFF, inside the sentence);
/// - `stuck@A-B`: from second A to second B of the run (epoch time since start, A inclusive,
///   B exclusive) the receiver repeats the last fix it had before A, time stamp included, as a
///   receiver whose firmware hung;
/// - `unplug@A-B`: from second A to B the device is gone (the pty closes and the link goes away;
///   TCP connections are closed) and comes back at B at the same path or port;
/// - `seed=N`: the seed of the random choices (default 1); the same seed and schedule give the
///   same faults on every run.
///
/// Example: `checksum:0.01,bitflip:0.001,drop:0.01,truncate:0.01,garbage:0.005,stuck@120-180,unplug@300-310`.
///
/// At most one per-sentence fault hits a sentence (checked in the order above, each against its
/// own probability). Every fault that corrupts a sentence makes a checksummed NMEA decoder reject
/// exactly that sentence, never accept a changed one:
/// - a checksum error is a mismatch;
/// - a bit flip inverts one bit of one body byte, so the XOR checksum of the body changes in
///   exactly that bit: a single-bit error is always detected (NMEA's XOR is a longitudinal
///   parity). The flip is chosen so the byte stays printable and is not `$`, `*`, `!` or `,`
///   (framing characters): the line keeps its shape and fails on the checksum alone;
/// - a truncated sentence ends before its `*`, with no line end, so the next `$` (or the end of
///   input) interrupts it: rejected as truncated;
/// - garbage bytes outside printable ASCII inside a sentence make it rejected as an invalid
///   character (garbage between sentences would be skipped silently by any decoder, so it is
///   put inside one, where it can be counted).
public struct NMEAFaultSchedule: Sendable, Hashable {
  /// Probability per sentence of a wrong checksum, `0...1`.
  public var checksum = 0.0
  /// Probability per sentence of a single-bit error in the body, `0...1`.
  public var bitflip = 0.0
  /// Probability per sentence that it is not sent, `0...1`.
  public var drop = 0.0
  /// Probability per sentence that it is cut short, `0...1`.
  public var truncate = 0.0
  /// Probability per sentence of line noise inside it, `0...1`.
  public var garbage = 0.0
  /// Time windows, in seconds since the start, during which the last fix is repeated.
  public var stuck: [Range<Double>] = []
  /// Time windows, in seconds since the start, during which the device is unplugged.
  public var unplug: [Range<Double>] = []
  /// Seed of the random choices.
  public var seed: UInt64 = 1

  /// No faults.
  public init() {}

  /// Whether the schedule injects nothing.
  public var isEmpty: Bool {
    checksum == 0 && bitflip == 0 && drop == 0 && truncate == 0 && garbage == 0 && stuck.isEmpty
      && unplug.isEmpty
  }

  /// Parses the schedule syntax described on the type.
  ///
  /// - Throws: ``NMEAFaultScheduleError`` naming the term that is not understood.
  public static func parse(_ text: String) throws(NMEAFaultScheduleError) -> NMEAFaultSchedule {
    var schedule = NMEAFaultSchedule()
    let terms = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces }
    guard terms.contains(where: { !$0.isEmpty }) else { throw .empty }
    var seen: Set<String> = []
    for term in terms {
      guard !term.isEmpty else { throw .emptyTerm(schedule: text) }
      if let at = term.firstIndex(of: "@") {
        let kind = String(term[..<at])
        let bounds = term[term.index(after: at)...].split(
          separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = DecimalText.number(bounds[0]), let end = DecimalText.number(bounds[1]),
          start.isFinite, end.isFinite,
          start >= 0, end > start, end <= maximumWindowSeconds
        else { throw .invalidWindow(term: String(term)) }
        switch kind {
        case "stuck":
          guard !schedule.stuck.contains(where: { $0.overlaps(start..<end) }) else {
            throw .overlappingWindow(term: String(term))
          }
          schedule.stuck.append(start..<end)
        case "unplug":
          guard !schedule.unplug.contains(where: { $0.overlaps(start..<end) }) else {
            throw .overlappingWindow(term: String(term))
          }
          schedule.unplug.append(start..<end)
        default: throw .unknownKind(term: String(term))
        }
      } else if term.hasPrefix("seed=") {
        guard let seed = DecimalText.wholeNumber(term.dropFirst(5)) else { throw .invalidSeed(term: String(term)) }
        guard seen.insert("seed").inserted else { throw .repeatedKind(term: String(term)) }
        schedule.seed = seed
      } else {
        let parts = term.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw .unknownKind(term: String(term)) }
        guard let p = DecimalText.number(parts[1]), p >= 0, p <= 1 else {
          throw .invalidProbability(term: String(term))
        }
        switch parts[0] {
        case "checksum": schedule.checksum = p
        case "bitflip": schedule.bitflip = p
        case "drop": schedule.drop = p
        case "truncate": schedule.truncate = p
        case "garbage": schedule.garbage = p
        default: throw .unknownKind(term: String(term))
        }
        guard seen.insert(String(parts[0])).inserted else { throw .repeatedKind(term: String(term)) }
      }
    }
    return schedule
  }

  /// The latest end of a `stuck` or `unplug` window, in seconds (about 31.7 years).
  public static let maximumWindowSeconds = 1_000_000_000.0

  /// Whether `seconds` since the start falls in a `stuck` window.
  public func isStuck(at seconds: Double) -> Bool { stuck.contains { $0.contains(seconds) } }
  /// Whether `seconds` since the start falls in an `unplug` window.
  public func isUnplugged(at seconds: Double) -> Bool { unplug.contains { $0.contains(seconds) } }
}

/// Why a fault schedule could not be read.
public enum NMEAFaultScheduleError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A term names no known fault (`checksum`, `bitflip`, `drop`, `truncate`, `garbage`, `stuck@`, `unplug@`, `seed=`).
  case unknownKind(term: String)
  /// A probability is not a number in `0...1`.
  case invalidProbability(term: String)
  /// A window is not `A-B` seconds with `0 <= A < B <= ` ``NMEAFaultSchedule/maximumWindowSeconds``.
  case invalidWindow(term: String)
  /// A seed is not an unsigned 64-bit integer.
  case invalidSeed(term: String)
  /// The schedule has no term at all (empty or only commas).
  case empty
  /// The schedule has an empty term (two commas in a row, or a leading or trailing comma).
  case emptyTerm(schedule: String)
  /// A probability kind or the seed is given twice.
  case repeatedKind(term: String)
  /// A `stuck` or `unplug` window overlaps an earlier window of the same kind.
  case overlappingWindow(term: String)

  /// A one-line explanation.
  public var description: String {
    switch self {
    case .unknownKind(let term):
      return
        "unknown fault '\(term)': expected checksum:P, bitflip:P, drop:P, truncate:P, garbage:P, stuck@A-B, unplug@A-B or seed=N"
    case .invalidProbability(let term):
      return "fault '\(term)': the probability must be a number in 0...1"
    case .invalidWindow(let term):
      return "fault '\(term)': the window must be A-B seconds with 0 <= A < B <= \(Int(NMEAFaultSchedule.maximumWindowSeconds))"
    case .empty:
      return "the fault schedule is empty: give at least one term such as checksum:0.01 or unplug@10-20"
    case .emptyTerm(let schedule):
      return "fault schedule '\(schedule)' has an empty term (a stray comma)"
    case .repeatedKind(let term):
      return "fault '\(term)': this kind is already given earlier in the schedule"
    case .overlappingWindow(let term):
      return "fault '\(term)': the window overlaps an earlier window of the same kind"
    case .invalidSeed(let term):
      return "fault '\(term)': the seed must be an unsigned 64-bit integer"
    }
  }
}

/// Counters of the faults injected so far.
public struct NMEAFaultStatistics: Sendable, Hashable {
  /// Sentences sent with a wrong checksum.
  public var checksum = 0
  /// Sentences sent with one bit inverted.
  public var bitflip = 0
  /// Sentences not sent.
  public var drop = 0
  /// Sentences cut short.
  public var truncate = 0
  /// Sentences with line noise inside.
  public var garbage = 0
  /// Epochs that repeated the last fix instead of the current one.
  public var stuckEpochs = 0
  /// Times the device was unplugged.
  public var unplugs = 0
  /// Sentences offered to the injector (before drops).
  public var sentences = 0
  /// Creates zeroed counters.
  public init() {}

  /// Sentences a checksumming decoder must reject as a checksum mismatch: `checksum + bitflip`.
  public var expectedChecksumMismatches: Int { checksum + bitflip }

  /// One line of the counts per kind, in the schedule syntax's order, for logs and summaries:
  /// `faults injected: checksum 3, bitflip 0, drop 2, truncate 1, garbage 0, stuck epochs 60, unplugs 1`.
  public var summary: String {
    "faults injected: checksum \(checksum), bitflip \(bitflip), drop \(drop), truncate \(truncate), "
      + "garbage \(garbage), stuck epochs \(stuckEpochs), unplugs \(unplugs)"
  }
}

/// Applies an ``NMEAFaultSchedule``'s per-sentence faults to framed sentences, deterministically.
public struct NMEAFaultInjector: Sendable {
  /// The schedule applied.
  public let schedule: NMEAFaultSchedule
  /// What has been injected so far.
  public private(set) var statistics = NMEAFaultStatistics()
  private var generator: SeededGenerator

  /// Creates an injector whose random choices start from `schedule.seed`.
  public init(schedule: NMEAFaultSchedule) {
    self.schedule = schedule
    self.generator = SeededGenerator(seed: schedule.seed)
  }

  /// Applies the per-sentence faults to one framed sentence (`$...*hh\r\n`) and returns the bytes
  /// to send (empty when dropped). A line that is not a framed sentence passes unchanged.
  public mutating func apply(_ line: [UInt8]) -> [UInt8] {
    statistics.sentences += 1
    guard line.first == 0x24, let star = line.lastIndex(of: 0x2A), star >= 2, star + 2 < line.count
    else { return line }
    if roll(schedule.checksum) {
      var out = line
      let stated = Self.hexValue(line[star + 1], line[star + 2]) ?? 0
      let wrong = stated ^ UInt8(truncatingIfNeeded: generator.next() % 255 + 1)
      out[star + 1] = Self.hexDigit(wrong >> 4)
      out[star + 2] = Self.hexDigit(wrong & 0x0F)
      statistics.checksum += 1
      return out
    }
    if roll(schedule.bitflip), let flipped = flipBit(line, bodyEnd: star) {
      statistics.bitflip += 1
      return flipped
    }
    if roll(schedule.drop) {
      statistics.drop += 1
      return []
    }
    if roll(schedule.truncate) {
      // Keep `$` and at least one byte, end before `*`: no checksum, no line end.
      let keep = 2 + Int(generator.next() % UInt64(max(1, star - 2)))
      statistics.truncate += 1
      return Array(line[0..<min(keep, star)])
    }
    if roll(schedule.garbage) {
      let count = 1 + Int(generator.next() % 8)
      let noise = (0..<count).map { _ in UInt8(0x80 + generator.next() % 0x80) }
      var out = line
      out.insert(contentsOf: noise, at: 1 + Int(generator.next() % UInt64(star - 1)))
      statistics.garbage += 1
      return out
    }
    return line
  }

  /// Counts an epoch that repeated the last fix (the `stuck` windows are applied by the sender).
  public mutating func countStuckEpoch() { statistics.stuckEpochs += 1 }
  /// Counts one unplug of the device.
  public mutating func countUnplug() { statistics.unplugs += 1 }

  private mutating func roll(_ probability: Double) -> Bool {
    probability > 0 && generator.nextUnitInterval() <= probability
  }

  /// The line with one bit of one body byte (between `$` and `*`) inverted so the byte stays
  /// printable ASCII and no framing character (`$`, `*`, `!`, `,`); `nil` if none was found.
  private mutating func flipBit(_ line: [UInt8], bodyEnd star: Int) -> [UInt8]? {
    for _ in 0..<32 {
      let index = 1 + Int(generator.next() % UInt64(star - 1))
      let flipped = line[index] ^ (1 << UInt8(generator.next() % 7))
      guard (0x20...0x7E).contains(flipped), ![0x24, 0x2A, 0x21, 0x2C].contains(flipped),
        line[index] != 0x2C
      else { continue }
      var out = line
      out[index] = flipped
      return out
    }
    return nil
  }

  static func hexValue(_ high: UInt8, _ low: UInt8) -> UInt8? {
    func nibble(_ c: UInt8) -> UInt8? {
      switch c {
      case 0x30...0x39: return c - 0x30
      case 0x41...0x46: return c - 0x37
      case 0x61...0x66: return c - 0x57
      default: return nil
      }
    }
    guard let h = nibble(high), let l = nibble(low) else { return nil }
    return h << 4 | l
  }

  static func hexDigit(_ value: UInt8) -> UInt8 {
    value < 10 ? 0x30 + value : 0x37 + value
  }
}

extension Substring {
  fileprivate var trimmingSpaces: Substring {
    var s = self
    while s.first == " " { s = s.dropFirst() }
    while s.last == " " { s = s.dropLast() }
    return s
  }
}
