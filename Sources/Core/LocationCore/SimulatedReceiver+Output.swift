import Glibc
import LocationModel
import NMEA
import Synchronization
import SystemIO

/// How a simulated receiver's bytes leave it: the serial rate they are paced at and the faults
/// injected into them.
public struct SimulatedOutput: Sendable, Hashable {
  /// The serial line's baud rate (``SerialLinePacer/baudRates``), or `nil` to write each epoch
  /// at once, as fast as the reader takes it.
  public var baud: Int?
  /// The faults to inject (none by default).
  public var faults: NMEAFaultSchedule

  /// Creates output settings.
  ///
  /// - Throws: ``SimulatedReceiverError/invalidBaudRate(_:)`` for a rate not offered.
  public init(baud: Int? = nil, faults: NMEAFaultSchedule = NMEAFaultSchedule())
    throws(SimulatedReceiverError)
  {
    if let baud { _ = try SerialLinePacer(baud: baud) }
    self.baud = baud
    self.faults = faults
  }

  /// Unpaced, faultless output.
  public init() {
    baud = nil
    faults = NMEAFaultSchedule()
  }
}

/// Counters of what the output stage did to the encoded sentences.
public struct SimulatedOutputStatistics: Sendable, Hashable {
  /// Faults injected, by kind.
  public var faults = NMEAFaultStatistics()
  /// Epochs whose trailing sentences did not fit the baud rate and were dropped.
  public var epochsCut = 0
  /// Sentences dropped because the epoch did not fit the baud rate.
  public var sentencesCut = 0
  /// Bytes of those sentences.
  public var bytesCut = 0
  /// Epochs not sent because the device was unplugged (pty).
  public var epochsUnplugged = 0
  /// Creates zeroed counters.
  public init() {}
}

/// The output stage shared by every transport: the `stuck` windows, the per-sentence faults and
/// the baud rate's cut, with their counters.
final class SimulatedOutputStage: Sendable {
  struct State: Sendable {
    var injector: NMEAFaultInjector
    var statistics = SimulatedOutputStatistics()
    /// The last fix sent before a `stuck` window began.
    var lastFix: Fix?
    var warnedAboutBaud = false
  }

  let output: SimulatedOutput
  let state: Mutex<State>

  init(_ output: SimulatedOutput) {
    self.output = output
    self.state = Mutex(State(injector: NMEAFaultInjector(schedule: output.faults)))
  }

  var statistics: SimulatedOutputStatistics {
    state.withLock { state in
      var statistics = state.statistics
      statistics.faults = state.injector.statistics
      return statistics
    }
  }

  func countUnplug() { state.withLock { $0.injector.countUnplug() } }

  func countUnpluggedEpoch() { state.withLock { $0.statistics.epochsUnplugged += 1 } }

  /// The fix to send for an epoch `seconds` after the start: `fix`, or inside a `stuck` window
  /// the last fix sent before it (counted).
  func outgoingFix(_ fix: Fix, at seconds: Double) -> Fix {
    state.withLock { state in
      if output.faults.isStuck(at: seconds), let last = state.lastFix {
        state.injector.countStuckEpoch()
        return last
      }
      state.lastFix = fix
      return fix
    }
  }

  /// The sentences of one epoch after faults and the baud rate's cut, in order (a dropped
  /// sentence is gone; a truncated one has no line end).
  func outgoingLines(_ sentences: [String], interval: Duration) -> [[UInt8]] {
    var lines = sentences.map { Array($0.utf8) }
    let (kept, warning) = state.withLock { state -> ([[UInt8]], String?) in
      if !output.faults.isEmpty {
        lines = lines.map { state.injector.apply($0) }.filter { !$0.isEmpty }
      }
      var warning: String?
      if let baud = output.baud, let pacer = try? SerialLinePacer(baud: baud) {
        let (kept, dropped, droppedBytes) = pacer.fit(lines, interval: interval)
        if dropped > 0 {
          state.statistics.epochsCut += 1
          state.statistics.sentencesCut += dropped
          state.statistics.bytesCut += droppedBytes
          if !state.warnedAboutBaud {
            state.warnedAboutBaud = true
            let total = lines.reduce(0) { $0 + $1.count }
            warning =
              "simulated receiver: an epoch of \(total) bytes does not fit \(baud) baud "
              + "(\(pacer.capacity(of: interval)) bytes per epoch): its last \(dropped) sentences "
              + "(\(droppedBytes) bytes) are dropped, as a receiver's full transmit buffer drops them; "
              + "counted in outputStatistics, warned once"
          }
        }
        lines = kept
      }
      return (lines, warning)
    }
    if let warning { try? SystemIO.writeAll(2, warning + "\n") }
    return kept
  }
}

extension SimulatedReceiver {
  /// What the output stage has done so far: faults injected and sentences cut by the baud rate.
  public var outputStatistics: SimulatedOutputStatistics { outputStage.statistics }

  func outgoingFix(_ fix: Fix, at seconds: Double) -> Fix {
    outputStage.outgoingFix(fix, at: seconds)
  }

  func outgoingBytes(_ sentences: [String], interval: Duration) -> [UInt8] {
    outputStage.outgoingLines(sentences, interval: interval).flatMap { $0 }
  }
}
