import Dispatch
import Glibc
import Queues
import Synchronization

/// The one serial executor on which a ``LocationManager`` and the service built over it (the
/// daemon's hub) run, so that a fix goes from a receiver's thread to the watchers' sockets
/// without waking another thread, as gpsd's one thread does.
///
/// - Jobs run one at a time, in the order they were enqueued, by whichever thread finds the
///   executor idle when it enqueues: normally a job of a serial `DispatchQueue` (threads of the
///   pool), which runs what is queued in rounds of at most ``roundSize`` jobs.
/// - A thread that reads a live source (a backend's ``BackendThread``, inside
///   ``runningJobsInline(_:)``) runs the jobs it starts itself, at once: the manager's delivery
///   that its fix resumes, the hub's dispatch that the manager's delivery resumes, and so on, while
///   each next job was enqueued by that thread. A job enqueued by another thread (a client's
///   request, an actor's reply) is handed to the dispatch queue instead, as is what is left after
///   ``roundSize`` jobs, so the receiver's thread is never kept from its source for longer than
///   its own fix's work. On the default executors each of those hops woke another thread of the
///   pool, tens of microseconds each.
/// - It is also a task executor, so that a task that prefers it (`Task(executorPreference:)`)
///   resumes here rather than on the pool.
public final class ServiceExecutor: SerialExecutor, TaskExecutor, Sendable {
  private struct Queued {
    var job: UnownedJob
    /// The thread that enqueued it, when that thread is inside
    /// ``ServiceExecutor/runningJobsInline(_:)``.
    var inlineThread: pthread_t?
  }

  private struct State {
    var jobs = FIFO<Queued>(retainedCapacity: 64)
    /// A thread is running this executor's jobs (the queue's drain or an inline thread).
    var running = false
  }

  /// Most jobs one thread runs before the rest is handed on (to the queue, for a new round).
  public static let roundSize = 256

  private let queue: DispatchQueue
  private let state = Mutex(State())

  /// Threads inside ``runningJobsInline(_:)``, by `pthread_self()`: `true` while that thread is
  /// running jobs (a job it runs that enqueues another only queues it).
  private static let inlineThreads = Mutex<[pthread_t: Bool]>([:])

  /// Creates an executor whose rounds run on a serial dispatch queue named `label` (shown by
  /// debuggers and in crash reports).
  public init(label: String) {
    queue = DispatchQueue(label: label)
  }

  /// Runs `body` on the calling thread with the right to run, at once and on this thread, the
  /// jobs it enqueues on any ``ServiceExecutor`` that is idle (see the type's description). For
  /// threads that wait on a source in `poll` and hold no lock while they post (a backend's
  /// thread); not for threads of the concurrency pool.
  public static func runningJobsInline<T>(_ body: () throws -> T) rethrows -> T {
    let thread = pthread_self()
    inlineThreads.withLock { $0[thread] = false }
    defer { _ = inlineThreads.withLock { $0.removeValue(forKey: thread) } }
    return try body()
  }

  /// Runs `job` after the jobs enqueued before it.
  public func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    let thread = pthread_self()
    // nil: an ordinary thread; false: an inline thread not running jobs; true: one running them.
    let inline = Self.inlineThreads.withLock { $0[thread] }
    let startsRunning = state.withLock { state -> Bool in
      state.jobs.append(Queued(job: job, inlineThread: inline == nil ? nil : thread))
      if state.running { return false }
      state.running = true
      return true
    }
    guard startsRunning else { return }
    if inline == false {
      runInline(on: thread)
    } else {
      queue.async { self.runRound() }
    }
  }

  /// A round on the dispatch queue: up to ``roundSize`` jobs, then a new round for the rest.
  private func runRound() {
    for _ in 0..<Self.roundSize {
      guard let next = take(onlyFrom: nil) else { return }
      run(next)
    }
    handOn()
  }

  /// The inline thread's run: its own jobs, in order, up to ``roundSize``; the first job that
  /// another thread enqueued, or the rest after the round, go to the queue.
  private func runInline(on thread: pthread_t) {
    Self.inlineThreads.withLock { $0[thread] = true }
    defer { Self.inlineThreads.withLock { $0[thread] = false } }
    for _ in 0..<Self.roundSize {
      guard let next = take(onlyFrom: thread) else { return }
      run(next)
    }
    handOn()
  }

  /// The next job, or `nil` after marking the executor idle (nothing queued) or handing the
  /// queued jobs to the queue (the next job was not enqueued by `inlineThread`, when given).
  private func take(onlyFrom inlineThread: pthread_t?) -> UnownedJob? {
    enum Next { case job(UnownedJob), idle, handOn }
    let next = state.withLock { state -> Next in
      guard let head = state.jobs.first else {
        state.running = false
        return .idle
      }
      if let inlineThread, head.inlineThread != inlineThread { return .handOn }
      _ = state.jobs.popFirst()
      return .job(head.job)
    }
    switch next {
    case .job(let job): return job
    case .idle: return nil
    case .handOn:
      handOn()
      return nil
    }
  }

  /// The executor stays running; a new round on the queue takes what is queued.
  private func handOn() {
    queue.async { self.runRound() }
  }

  private func run(_ job: UnownedJob) {
    job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
  }

  /// This executor, unowned, for an actor's `unownedExecutor`.
  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// This executor, unowned, as a task's preferred executor.
  public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
    UnownedTaskExecutor(ordinary: self)
  }
}
