import Glibc
import LocationCore
import Synchronization
import SystemIO
import Testing

/// An actor on a given executor that waits for a signal and records which thread ran it.
private actor Probe {
  let executor: ServiceExecutor
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
  private var count = 0
  init(_ executor: ServiceExecutor) { self.executor = executor }

  /// Waits for `gate` to be opened, then returns the thread that runs the rest.
  func threadAfter(_ gate: Gate) async -> pthread_t {
    await gate.wait()
    return pthread_self()
  }

  /// Waits for `gate`, records the thread, ends the inline run, yields, and returns both threads:
  /// the one before and the one that runs the rest.
  func threadsAroundEnd(_ gate: Gate) async -> (before: pthread_t, after: pthread_t) {
    await gate.wait()
    let before = pthread_self()
    ServiceExecutor.endInlineRun()
    await Task.yield()
    return (before, pthread_self())
  }

  /// Counts the jobs inside this method at once (an atomic, so that a broken executor running
  /// two at a time is seen, not raced on) while doing some work; returns the most seen.
  func overlapping(_ counter: Inside) -> Int {
    let now = counter.value.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
    var most = now
    for _ in 0..<2_000 {
      most = max(most, counter.value.load(ordering: .sequentiallyConsistent))
    }
    count += 1
    counter.value.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    return most
  }

  var total: Int { count }
}

/// The thread that ran the probe's job, once it has run.
private final class Recorded: Sendable {
  let thread = Mutex<pthread_t?>(nil)
}

/// How many jobs are inside ``Probe/overlapping(_:)``.
private final class Inside: Sendable {
  let value = Atomic<Int>(0)
}

/// A one-shot signal: ``wait()`` suspends until ``open()`` (resumed after the lock is released).
private final class Gate: Sendable {
  private let state = Mutex<(open: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))
  func wait() async {
    await withCheckedContinuation { continuation in
      let resumeNow = state.withLock { state -> Bool in
        if state.open { return true }
        state.waiter = continuation
        return false
      }
      if resumeNow { continuation.resume() }
    }
  }
  var hasWaiter: Bool { state.withLock { $0.waiter != nil } }
  func open() {
    let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
      state.open = true
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume()
  }
}

@Suite("ServiceExecutor")
struct ServiceExecutorTests {
  /// Opens `gate` from a new POSIX thread, inside `runningJobsInline` when `inline`; returns that
  /// thread and whether `recorded` was set when `open()` returned.
  private func openFromThread(_ gate: Gate, inline: Bool, recorded: Recorded) async throws
    -> (thread: pthread_t, ranBeforeReturn: Bool)
  {
    try await withCheckedThrowingContinuation { continuation in
      do {
        try SystemIO.startThread {
          let body = { () -> (pthread_t, Bool) in
            gate.open()
            return (pthread_self(), recorded.thread.withLock { $0 != nil })
          }
          let result = inline ? ServiceExecutor.runningJobsInline(body) : body()
          continuation.resume(returning: result)
        }
      } catch {
        continuation.resume(throwing: error)
      }
    }
  }

  /// Waits until the probe's job waits at the gate and its executor has gone idle (the job that
  /// stored the waiter may still be returning when the waiter is seen).
  private func waitForWaiter(_ gate: Gate, _ executor: ServiceExecutor) async {
    while !gate.hasWaiter || executor.isRunningJobs { await Task.yield() }
  }

  /// Starts `job` on a probe of a new executor, in a task that prefers the executor (as the
  /// manager's consumer does, so that the gate's nonisolated wait resumes on it), opens the gate
  /// from a new thread, inside `runningJobsInline` when `inline`, and returns the job's result
  /// with what ``openFromThread(_:inline:recorded:)`` saw.
  private func resumeFromThread<T: Sendable>(
    inline: Bool, _ job: @escaping @Sendable (Probe, Gate, Recorded) async -> T
  ) async throws -> (result: T, opener: (thread: pthread_t, ranBeforeReturn: Bool)) {
    let executor = ServiceExecutor(label: "test.executor")
    let probe = Probe(executor)
    let gate = Gate()
    let recorded = Recorded()
    let waiting = Task(executorPreference: executor.taskExecutor) { await job(probe, gate, recorded) }
    await waitForWaiter(gate, executor)
    let opener = try await openFromThread(gate, inline: inline, recorded: recorded)
    return (await waiting.value, opener)
  }

  @Test func aReceiverThreadRunsTheJobItResumesItself() async throws {
    let (ranOn, opener) = try await resumeFromThread(inline: true) { probe, gate, recorded in
      let thread = await probe.threadAfter(gate)
      recorded.thread.withLock { $0 = thread }
      return thread
    }
    #expect(ranOn == opener.thread, "the actor's job ran on the thread that resumed it")
    #expect(opener.ranBeforeReturn, "and had run when the resume returned")
  }

  @Test func endingTheInlineRunLeavesTheRestToTheQueue() async throws {
    let (threads, opener) = try await resumeFromThread(inline: true) { probe, gate, _ in
      await probe.threadsAroundEnd(gate)
    }
    #expect(threads.before == opener.thread, "the job before the end ran on the receiver's thread")
    #expect(threads.after != opener.thread, "what followed ran on a thread of the queue")
  }

  @Test func anOrdinaryThreadLeavesTheJobToTheQueue() async throws {
    let (ranOn, opener) = try await resumeFromThread(inline: false) { probe, gate, _ in
      await probe.threadAfter(gate)
    }
    #expect(ranOn != opener.thread, "the actor's job ran on a thread of the queue")
  }

  @Test func jobsRunOneAtATimeFromEveryThread() async throws {
    let probe = Probe(ServiceExecutor(label: "test.serial"))
    let inside = Inside()
    let most = await withTaskGroup(of: Int.self) { group in
      for _ in 0..<500 { group.addTask { await probe.overlapping(inside) } }
      var most = 0
      for await value in group { most = max(most, value) }
      return most
    }
    #expect(most == 1, "one job at a time")
    #expect(await probe.total == 500)
  }
}
