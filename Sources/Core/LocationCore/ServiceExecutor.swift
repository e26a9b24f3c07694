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
/// - Its ``taskExecutor`` shares the queue and the one-at-a-time rule: a task that prefers it
///   (`Task(executorPreference:)`) resumes here rather than on the pool. Those jobs run as the
///   runtime enqueued them (nonisolated code, or a default actor's), not as this executor's
///   actors'.
public final class ServiceExecutor: SerialExecutor, Sendable {
  /// The task executor of a ``ServiceExecutor``: its jobs go to the same queue.
  public final class Preferred: TaskExecutor, Sendable {
    fileprivate let core: Core
    fileprivate init(_ core: Core) { self.core = core }

    /// Runs `job` after the jobs enqueued before it on the executor's queue, as a task job.
    public func enqueue(_ job: consuming ExecutorJob) {
      core.enqueue(UnownedJob(job), as: .task(UnownedTaskExecutor(ordinary: self)))
    }

    /// This executor, unowned, as a task's preferred executor.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
      UnownedTaskExecutor(ordinary: self)
    }
  }

  /// Most jobs one thread runs before the rest is handed on (to the queue, for a new round).
  public static let roundSize = 256

  private let core: Core
  /// The task executor that shares this executor's queue; pass it to `Task(executorPreference:)`.
  public let taskExecutor: Preferred

  /// Creates an executor whose rounds run on a serial dispatch queue named `label` (shown by
  /// debuggers and in crash reports).
  public init(label: String) {
    core = Core(label: label)
    taskExecutor = Preferred(core)
  }

  /// Runs `body` on the calling thread with the right to run, at once and on this thread, the
  /// jobs it enqueues on any ``ServiceExecutor`` that is idle (see the type's description). For
  /// threads that wait on a source in `poll` and hold no lock while they post (a backend's
  /// thread); not for threads of the concurrency pool.
  public static func runningJobsInline<T>(_ body: () throws -> T) rethrows -> T {
    let thread = pthread_self()
    Core.inlineThreads.withLock { $0[thread] = .idle }
    defer { _ = Core.inlineThreads.withLock { $0.removeValue(forKey: thread) } }
    return try body()
  }

  /// Ends the calling thread's inline run after the job that calls this: what that job and the
  /// jobs after it enqueue is run by a round on the queue. The hub calls it once a fix's events
  /// are written, so that the receiver's thread goes back to its source (and leaves the CPU to
  /// the clients it just woke) while a thread of the pool takes the fix on to the regions and the
  /// map. Does nothing on other threads.
  public static func endInlineRun() {
    let thread = pthread_self()
    Core.inlineThreads.withLock { threads in
      if threads[thread] == .running { threads[thread] = .ending }
    }
  }

  /// Whether a thread is running this executor's jobs now (for diagnostics and tests: a job
  /// enqueued meanwhile waits for that thread rather than running inline).
  public var isRunningJobs: Bool { core.isRunning }

  /// Runs `job` after the jobs enqueued before it, isolated to this executor.
  public func enqueue(_ job: consuming ExecutorJob) {
    core.enqueue(UnownedJob(job), as: .serial(asUnownedSerialExecutor()))
  }

  /// This executor, unowned, for an actor's `unownedExecutor`.
  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }
}

/// The queue and the one-at-a-time rule that a ``ServiceExecutor`` and its task executor share.
private final class Core: Sendable {
  /// How a job runs: isolated to the serial executor, or as a job of the task executor.
  enum Kind {
    case serial(UnownedSerialExecutor)
    case task(UnownedTaskExecutor)
  }

  struct Queued {
    var job: UnownedJob
    var kind: Kind
    /// The thread that enqueued it, when that thread is inside
    /// ``ServiceExecutor/runningJobsInline(_:)``.
    var inlineThread: pthread_t?
  }

  struct State {
    var jobs = FIFO<Queued>(retainedCapacity: 64)
    /// A thread is running the jobs (the queue's round or an inline thread).
    var running = false
  }

  /// What a thread inside ``ServiceExecutor/runningJobsInline(_:)`` is doing.
  enum InlineState {
    /// Not running jobs: a job it enqueues on an idle executor runs at once, on it.
    case idle
    /// Running jobs: a job it enqueues is queued, and run by it next.
    case running
    /// Running its last job (``ServiceExecutor/endInlineRun()``): what follows goes to the queue.
    case ending
  }

  /// Threads inside ``ServiceExecutor/runningJobsInline(_:)``, by `pthread_self()`.
  static let inlineThreads = Mutex<[pthread_t: InlineState]>([:])

  private let queue: DispatchQueue
  private let state = Mutex(State())

  init(label: String) {
    queue = DispatchQueue(label: label)
  }

  var isRunning: Bool { state.withLock { $0.running } }

  func enqueue(_ job: UnownedJob, as kind: Kind) {
    let thread = pthread_self()
    let inline = Self.inlineThreads.withLock { $0[thread] }
    let startsRunning = state.withLock { state -> Bool in
      state.jobs.append(Queued(job: job, kind: kind, inlineThread: inline == nil ? nil : thread))
      if state.running { return false }
      state.running = true
      return true
    }
    guard startsRunning else { return }
    if inline == .idle {
      runInline(on: thread)
    } else {
      handOn()
    }
  }

  /// A round on the dispatch queue: up to ``ServiceExecutor/roundSize`` jobs, then a new round
  /// for the rest.
  private func runRound() {
    for _ in 0..<ServiceExecutor.roundSize {
      guard let next = take(onlyFrom: nil) else { return }
      run(next)
    }
    handOn()
  }

  /// The inline thread's run: its own jobs, in order, up to ``ServiceExecutor/roundSize`` or
  /// until a job ends the run (``ServiceExecutor/endInlineRun()``); the first job that another
  /// thread enqueued, or the rest, go to the queue.
  private func runInline(on thread: pthread_t) {
    Self.inlineThreads.withLock { $0[thread] = .running }
    defer { Self.inlineThreads.withLock { $0[thread] = .idle } }
    for _ in 0..<ServiceExecutor.roundSize {
      guard let next = take(onlyFrom: thread) else { return }
      run(next)
      if Self.inlineThreads.withLock({ $0[thread] }) == .ending { break }
    }
    handOn()
  }

  /// The next job, or `nil` after marking the executor idle (nothing queued) or handing the
  /// queued jobs to the queue (the next job was not enqueued by `inlineThread`, when given).
  private func take(onlyFrom inlineThread: pthread_t?) -> Queued? {
    enum Next { case job(Queued), idle, handOn }
    let next = state.withLock { state -> Next in
      guard let head = state.jobs.first else {
        state.running = false
        return .idle
      }
      if let inlineThread, head.inlineThread != inlineThread { return .handOn }
      _ = state.jobs.popFirst()
      return .job(head)
    }
    switch next {
    case .job(let queued): return queued
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

  private func run(_ queued: Queued) {
    switch queued.kind {
    case .serial(let executor): queued.job.runSynchronously(on: executor)
    case .task(let executor): queued.job.runSynchronously(on: executor)
    }
  }
}
