import Synchronization
import SystemIO

/// The one thread of a backend that reads its source on a thread of its own (gpsd's connection,
/// a serial, TCP or UDP receiver): at most one runs at a time; ``start(_:)`` starts it,
/// ``stop()`` asks it to return and waits until it has, and releasing the backend asks it to
/// return without waiting.
///
/// The thread is a ``SystemIO/WorkerThread``: its body waits with
/// ``SystemIO/WorkerThread/wait(for:timeoutNanoseconds:)`` (no CPU while waiting) and returns
/// soon after ``SystemIO/WorkerThread/isStopping`` becomes true.
package final class BackendThread: Sendable {
  private let running = Mutex<WorkerThread?>(nil)

  /// Creates a slot with no thread running.
  package init() {}

  deinit {
    running.withLock { $0?.requestStop() }
  }

  /// Starts a thread running the body that `makeBody` returns, unless one runs already (then
  /// `makeBody` is not called). Returns at once.
  ///
  /// - Throws: ``SystemIO/SystemError`` when the wake pipe or the thread cannot be created.
  package func start(_ makeBody: () -> @Sendable (WorkerThread) -> Void) throws(SystemError) {
    try running.withLock { current throws(SystemError) in
      guard current == nil else { return }
      current = try WorkerThread(makeBody())
    }
  }

  /// Asks the running thread to return and waits until it has; returns at once when none runs.
  /// Idempotent.
  package func stop() async {
    guard
      let thread = running.withLock({ current -> WorkerThread? in
        defer { current = nil }
        return current
      })
    else { return }
    thread.requestStop()
    await thread.waitUntilFinished()
  }

  /// CPU time of the running thread so far (user + system), `nil` when none runs.
  package var cpuTime: Duration? { running.withLock { $0?.cpuTime } }
}
