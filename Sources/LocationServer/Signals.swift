import Dispatch
import Glibc

/// Turns Unix signals into an `AsyncStream` of signal numbers.
///
/// Each signal's default action is replaced by `SIG_IGN` first and then observed with a
/// `DispatchSource` (signalfd-like delivery on a private queue), so SIGTERM ends the daemon
/// through its normal shutdown path instead of killing it.
public enum SignalSequence {
  /// Ignores SIGPIPE process-wide: writes to a closed socket then fail with `EPIPE` instead of
  /// killing the daemon. Call once at start-up.
  public static func ignoreSIGPIPE() {
    signal(SIGPIPE, SIG_IGN)
  }

  /// The signals in `signals` (e.g. `[SIGTERM, SIGINT, SIGHUP]`), in arrival order, until the
  /// stream's consumer stops iterating; then the sources are cancelled (the signals stay ignored).
  public static func stream(_ signals: [Int32]) -> AsyncStream<Int32> {
    let (stream, continuation) = AsyncStream.makeStream(of: Int32.self, bufferingPolicy: .bufferingNewest(16))
    let queue = DispatchQueue(label: "locationd.signals")
    var sources: [any DispatchSourceSignal] = []
    for number in signals {
      signal(number, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
      source.setEventHandler {
        for _ in 0..<max(1, Int(source.data)) { continuation.yield(number) }
      }
      source.resume()
      sources.append(source)
    }
    let box = SourceBox(sources)
    continuation.onTermination = { _ in box.cancel() }
    return stream
  }

  /// The conventional name of a signal for logs (`SIGTERM`...), or its number.
  public static func name(_ number: Int32) -> String {
    switch number {
    case SIGTERM: return "SIGTERM"
    case SIGINT: return "SIGINT"
    case SIGHUP: return "SIGHUP"
    case SIGQUIT: return "SIGQUIT"
    case SIGUSR1: return "SIGUSR1"
    case SIGUSR2: return "SIGUSR2"
    default: return "signal \(number)"
    }
  }
}

private final class SourceBox: @unchecked Sendable {
  // Written once in init, then only cancelled; DispatchSource.cancel is thread-safe.
  private let sources: [any DispatchSourceSignal]
  init(_ sources: [any DispatchSourceSignal]) { self.sources = sources }
  func cancel() { for source in sources { source.cancel() } }
}
