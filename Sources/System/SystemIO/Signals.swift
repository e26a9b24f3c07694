import Dispatch
import Glibc
import Synchronization

/// Turns Unix signals into an `AsyncStream` of signal numbers.
///
/// A `sigaction` handler writes each signal's number into a self-pipe (the handler does nothing
/// else, as async-signal safety requires); a `DispatchSource` reads the pipe and yields the
/// numbers. Unlike a `DispatchSource` signal source this works whichever thread the kernel
/// picks, so SIGTERM always ends the process through its normal shutdown path. The one signal
/// path of the process: locationd's main loop and `locationctl simulate` both use it.
public enum SignalSequence {
  /// Ignores SIGPIPE process-wide: writes to a closed socket then fail with `EPIPE` instead of
  /// killing the daemon. Call once at start-up.
  public static func ignoreSIGPIPE() {
    signal(SIGPIPE, SIG_IGN)
  }

  /// Empties the calling thread's signal mask, as daemon(7) asks of a daemon at start. Call it
  /// first thing on the main thread, before any other thread exists: threads inherit the mask
  /// of the thread that creates them.
  ///
  /// A process inherits its parent's mask, and a parent that starts it from a Dispatch thread
  /// (Foundation's `Process` inside a Swift task does) passes SIGTERM, SIGINT and SIGHUP blocked.
  /// ``stream(_:)`` unblocks them only on the thread that calls it, a thread of the concurrency
  /// pool that Dispatch ends once it has been idle for a while; Dispatch's other threads block
  /// every signal. With the main thread's mask left as inherited, no thread then took SIGTERM,
  /// and the process could no longer be stopped.
  public static func resetSignalMask() {
    var empty = sigset_t()
    sigemptyset(&empty)
    pthread_sigmask(SIG_SETMASK, &empty, nil)
  }

  /// The signals in `signals` (e.g. `[SIGTERM, SIGINT, SIGHUP]`), in arrival order. While any
  /// stream is being iterated the signals are caught; when the consumer stops, they are ignored.
  ///
  /// The signals are also unblocked in the calling thread: a process inherits its parent's
  /// signal mask (Foundation's `Process` passes a mask with them blocked), and a blocked signal
  /// would never reach the handler.
  public static func stream(_ signals: [Int32]) -> AsyncStream<Int32> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: Int32.self, bufferingPolicy: .bufferingNewest(64))
    let token = SignalPipe.shared.register(Set(signals), continuation)
    continuation.onTermination = { _ in SignalPipe.shared.unregister(token) }
    for number in signals {
      var action = sigaction()
      action.__sigaction_handler.sa_handler = signalPipeHandler
      sigemptyset(&action.sa_mask)
      action.sa_flags = SA_RESTART
      sigaction(number, &action, nil)
    }
    var unblocked = sigset_t()
    sigemptyset(&unblocked)
    for number in signals { sigaddset(&unblocked, number) }
    pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
    return stream
  }

  /// The conventional name of a signal for logs (`SIGTERM`...), or `signal N`.
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

/// Write end of the self-pipe, read by the signal handler (an atomic load is async-signal-safe).
private let signalPipeWriteFD = Atomic<Int32>(-1)

private let signalPipeHandler: @convention(c) (Int32) -> Void = { number in
  let savedErrno = errno
  var byte = UInt8(truncatingIfNeeded: number)
  _ = write(signalPipeWriteFD.load(ordering: .relaxed), &byte, 1)
  errno = savedErrno
}

private final class SignalPipe: Sendable {
  static let shared = SignalPipe()

  private struct Registration {
    var signals: Set<Int32>
    var continuation: AsyncStream<Int32>.Continuation
  }

  private let registrations = Mutex<[UInt64: Registration]>([:])
  private let nextToken = Atomic<UInt64>(1)
  // Kept alive for the life of the process; set once in init.
  nonisolated(unsafe) private let source: (any DispatchSourceRead)?

  private init() {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else {
      source = nil
      return
    }
    for fd in fds {
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    signalPipeWriteFD.store(fds[1], ordering: .releasing)
    let readFD = fds[0]
    let source = DispatchSource.makeReadSource(
      fileDescriptor: readFD, queue: DispatchQueue(label: "locationd.signals"))
    self.source = source
    source.setEventHandler { [self] in
      var buffer = [UInt8](repeating: 0, count: 64)
      while true {
        // Non-blocking: EAGAIN once the pipe is empty.
        guard let count = try? SystemIO.read(readFD, into: &buffer), count > 0 else { break }
        self.registrations.withLock { registrations in
          for byte in buffer[0..<count] {
            let number = Int32(byte)
            for registration in registrations.values where registration.signals.contains(number) {
              registration.continuation.yield(number)
            }
          }
        }
      }
    }
    source.resume()
  }

  func register(_ signals: Set<Int32>, _ continuation: AsyncStream<Int32>.Continuation) -> UInt64 {
    let token = nextToken.wrappingAdd(1, ordering: .relaxed).oldValue
    registrations.withLock {
      $0[token] = Registration(signals: signals, continuation: continuation)
    }
    return token
  }

  func unregister(_ token: UInt64) {
    let orphaned = registrations.withLock { registrations -> Set<Int32> in
      guard let removed = registrations.removeValue(forKey: token) else { return [] }
      let stillWanted = registrations.values.reduce(into: Set<Int32>()) { $0.formUnion($1.signals) }
      return removed.signals.subtracting(stillWanted)
    }
    for number in orphaned { signal(number, SIG_IGN) }
  }
}
