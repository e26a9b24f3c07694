/// Paces bytes as a serial line at a given baud rate carries them.
///
/// 8N1 framing (one start bit, eight data bits, one stop bit): ten bits per byte, so the line
/// carries `baud / 10` bytes a second (480 at 4800 baud, 960 at 9600, 3840 at 38400, 11520 at
/// 115200). The pacer releases bytes on a 10 ms tick: by the end of tick `k` of an epoch,
/// `floor(k * bytesPerSecond / 100)` bytes have gone out, the granularity of a UART driver's
/// transmit interrupt. Any window of one second then holds at most 100 ticks, hence at most
/// `bytesPerSecond` bytes: the line's rate is never exceeded, whatever the window.
///
/// An epoch that does not fit the epoch interval at this rate is cut the way a receiver's
/// transmit buffer cuts it: the sentences are queued in order and those that would not have left
/// before the next epoch begins are dropped whole (usually the trailing GSV, GST and ZDA), never
/// sent late: delaying them would push every later epoch further behind. ``fit(_:interval:)``
/// returns the count so the sender can log one warning and count the rest.
public struct SerialLinePacer: Sendable, Hashable {
  /// The baud rates a simulated receiver offers: 4800 (NMEA 0183's own), 9600, 38400, 115200.
  public static let baudRates = [4800, 9600, 38400, 115_200]
  /// The pacing tick.
  public static let tick: Duration = .milliseconds(10)
  /// Ticks per second.
  static let ticksPerSecond = 100

  /// Bits per second of the line.
  public let baud: Int

  /// Creates a pacer for `baud` (one of ``baudRates``).
  ///
  /// - Throws: ``SimulatedReceiverError/invalidBaudRate(_:)`` for any other rate.
  public init(baud: Int) throws(SimulatedReceiverError) {
    guard Self.baudRates.contains(baud) else { throw .invalidBaudRate(baud) }
    self.baud = baud
  }

  /// NMEA 0183's maximum sentence length in bytes, `$` through CR LF: an epoch's first sentence
  /// (RMC, about 70 bytes with a fix) fits in it, so a smaller per-epoch budget may carry nothing.
  public static let maximumSentenceBytes = 82

  /// Why a line at `baud` cannot carry epochs at `rate` Hz, or `nil` when it can.
  ///
  /// The per-epoch budget is ``capacity(of:)`` of `1 / rate` seconds (about `baud / 10 / rate`
  /// bytes); below ``maximumSentenceBytes`` not even the epoch's RMC is sure to fit, so every
  /// sentence could be cut and nothing sent at all. The text names the budget, the lowest offered
  /// baud rate for `rate` and the highest whole rate for `baud`. A `baud` not in ``baudRates``
  /// or a rate outside 1...10 Hz gives `nil` (those are refused elsewhere).
  public static func epochBudgetProblem(baud: Int, rate: Double) -> String? {
    guard let pacer = try? SerialLinePacer(baud: baud), rate.isFinite, rate >= 1, rate <= 10 else {
      return nil
    }
    let budget = pacer.capacity(of: .seconds(1 / rate))
    guard budget < maximumSentenceBytes else { return nil }
    let rateText = rate == rate.rounded() ? String(Int(rate)) : String(rate)
    var text =
      "\(baud) baud at \(rateText) Hz leaves \(budget) bytes per epoch, less than one RMC sentence "
      + "(up to \(maximumSentenceBytes) bytes), so nothing would be sent"
    if let minimum = baudRates.first(where: {
      ((try? SerialLinePacer(baud: $0))?.capacity(of: .seconds(1 / rate)) ?? 0)
        >= maximumSentenceBytes
    }) {
      text += ": use at least \(minimum) baud at \(rateText) Hz"
    }
    if let highest = (1...10).reversed().first(where: {
      pacer.capacity(of: .seconds(1 / Double($0))) >= maximumSentenceBytes
    }) {
      text += ", or at most \(highest) Hz at \(baud) baud"
    }
    return text
  }

  /// Bytes per second the line carries (8N1: `baud / 10`).
  public var bytesPerSecond: Int { baud / 10 }

  /// Bytes the line carries in `interval`.
  public func capacity(of interval: Duration) -> Int {
    let (seconds, attoseconds) = interval.components
    let ticks = Int(seconds) * Self.ticksPerSecond + Int(attoseconds / 10_000_000_000_000_000)
    return ticks * bytesPerSecond / Self.ticksPerSecond
  }

  /// The sentences of one epoch that fit `interval`: the longest prefix whose bytes the line
  /// carries in that time, and how many sentences (and bytes) were dropped after it.
  public func fit(_ sentences: [[UInt8]], interval: Duration) -> (
    kept: [[UInt8]], droppedSentences: Int, droppedBytes: Int
  ) {
    let capacity = capacity(of: interval)
    var total = 0
    var kept: [[UInt8]] = []
    for (index, sentence) in sentences.enumerated() {
      if total + sentence.count > capacity {
        let rest = sentences[index...]
        return (kept, rest.count, rest.reduce(0) { $0 + $1.count })
      }
      total += sentence.count
      kept.append(sentence)
    }
    return (kept, 0, 0)
  }

  /// Bytes released by the end of tick `tick` (1-based) of an epoch.
  public func released(byTick tick: Int) -> Int { tick * bytesPerSecond / Self.ticksPerSecond }

  /// The writes that carry `byteCount` bytes: for each tick (1-based, from the epoch's start)
  /// that releases bytes, the range of the epoch's bytes to write at the end of it.
  public func schedule(byteCount: Int) -> [(tick: Int, bytes: Range<Int>)] {
    var writes: [(tick: Int, bytes: Range<Int>)] = []
    var sent = 0
    var tick = 0
    while sent < byteCount {
      tick += 1
      let upTo = min(byteCount, released(byTick: tick))
      if upTo > sent {
        writes.append((tick, sent..<upTo))
        sent = upTo
      }
    }
    return writes
  }

  /// Sends `bytes` starting at `start` on `clock`: sleeps until each tick and hands `write` the
  /// bytes that tick releases. On a ``VirtualClock`` this runs in virtual time.
  ///
  /// - Throws: `CancellationError` when the task is cancelled while waiting.
  public func transmit(
    _ bytes: [UInt8], startingAt start: Duration, clock: some LocationClock,
    write: (ArraySlice<UInt8>) -> Void
  ) async throws {
    for (tick, range) in schedule(byteCount: bytes.count) {
      try await clock.sleep(until: start + Self.tick * tick)
      write(bytes[range])
    }
  }

  /// What a UART reading at `readAt` bits per second receives from bytes sent back to back at
  /// `sentAt`, both 8N1: the receiver waits for the line to go low (a start bit), samples eight
  /// data bits and the stop bit in the middle of its own bit times, and delivers NUL for a byte
  /// whose stop bit it finds low (a framing error, as Linux reads one in raw mode). At equal
  /// rates the bytes come out unchanged; at any other rate they come out as noise, more bytes
  /// than sent when the reader is faster, fewer when it is slower. Deterministic.
  public static func misread(_ bytes: [UInt8], sentAt: Int, readAt: Int) -> [UInt8] {
    guard sentAt > 0, readAt > 0, sentAt != readAt else { return bytes }
    let total = bytes.count * 10
    // The line level at transmitter bit `bit`: start 0, data LSB first, stop 1, idle 1.
    func high(_ bit: Int) -> Bool {
      guard bit >= 0, bit < total else { return true }
      let position = bit % 10
      if position == 0 { return false }
      if position == 9 { return true }
      return (bytes[bit / 10] >> (position - 1)) & 1 == 1
    }
    // Times in transmitter bit times; one receiver bit lasts `ratio` of them.
    let ratio = Double(sentAt) / Double(readAt)
    var received: [UInt8] = []
    var time = 0.0
    while true {
      var bit = Int(time)
      while bit < total && high(bit) { bit += 1 }
      if bit >= total { break }
      let start = max(time, Double(bit))
      var value: UInt8 = 0
      for index in 0..<8 where high(Int(start + (1.5 + Double(index)) * ratio)) {
        value |= 1 << index
      }
      let stop = start + 9.5 * ratio
      received.append(high(Int(stop)) ? value : 0)
      time = stop
    }
    return received
  }
}
