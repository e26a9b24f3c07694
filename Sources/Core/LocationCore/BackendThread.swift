import Synchronization
import SystemIO

/// The one thread and the one event queue of a backend that reads a live source on a thread of
/// its own (gpsd's connection, a serial, TCP or UDP receiver): at most one thread runs at a time;
/// ``start(_:)`` starts it, ``stop()`` asks it to return and waits until it has, and releasing
/// the backend asks it to return without waiting and finishes the queue.
///
/// The queue never makes the thread wait (a live source cannot be slowed down): beyond
/// `bufferedLocations` unread locations the oldest is dropped (``droppedLocations``); statuses
/// and errors are always queued.
///
/// The thread is a ``SystemIO/WorkerThread``, inside ``ServiceExecutor/runningJobsInline(_:)``:
/// it runs the jobs its posts resume on an idle ``ServiceExecutor`` itself. Its body waits with
/// ``SystemIO/WorkerThread/wait(for:timeoutNanoseconds:)`` (no CPU while waiting) and returns
/// soon after ``SystemIO/WorkerThread/isStopping`` becomes true.
package final class BackendThread: Sendable {
  private let running = Mutex<WorkerThread?>(nil)
  /// The queue the thread posts to.
  package let queue: EventQueue<BackendEvent>
  /// The queue's consumer side: the backend's ``LocationBackend/events``.
  package let events: BackendEvents

  /// Creates a slot with no thread running and an empty queue that keeps at most
  /// `bufferedLocations` unread locations (at least 1).
  package init(bufferedLocations: Int) {
    queue = EventQueue(capacity: max(1, bufferedLocations), overflow: .dropOldest)
    events = BackendEvents(queue)
  }

  deinit {
    running.withLock { $0?.requestStop() }
    queue.finish()
  }

  /// Locations dropped so far because the consumer fell behind.
  package var droppedLocations: Int { queue.dropped }

  /// Starts a thread running the body that `makeBody` returns, unless one runs already (then
  /// `makeBody` is not called). Returns at once.
  ///
  /// - Throws: ``SystemIO/SystemError`` when the wake pipe or the thread cannot be created.
  package func start(_ makeBody: () -> @Sendable (WorkerThread) -> Void) throws(SystemError) {
    try running.withLock { current throws(SystemError) in
      guard current == nil else { return }
      // The body posts with no lock held, so it may run the manager's delivery of what it posts
      // itself (ServiceExecutor): a fix reaches the watchers without waking another thread.
      let body = makeBody()
      current = try WorkerThread { thread in ServiceExecutor.runningJobsInline { body(thread) } }
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
