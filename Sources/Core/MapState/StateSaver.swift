import Dispatch
import Synchronization

/// Saves the newest value of a state file on a thread of its own, so that no fix and no request
/// waits for the disk: the map state (saved on every fix while following) and the regions.
///
/// ``submit(_:)`` hands over a value and returns at once; values that arrive while a save runs
/// replace each other, and only the newest is saved next (a stalled disk delays saves, and only
/// saves, and costs one value of memory). ``wait(for:timeout:)`` lets a request's reply wait a
/// bounded time for its own change to reach the disk, so that the reply can say `notSaved` when
/// the save failed; when the disk does not answer in time the reply goes out and the save
/// completes later (its failure is logged, and reported by the next change's reply).
///
/// Failures are logged once per run of the same failure (the same step and `errno`: a full or
/// read-only disk gives one line, not one per fix), and once more when saving works again.
public final class StateSaver<Value: Sendable>: Sendable {
  /// Saves one value (atomically, see ``StateFile``).
  public typealias Save = @Sendable (Value) throws(MapStoreError) -> Void
  /// Told each change of outcome: `(failure, recovered)`: a new failure (`recovered` false), or
  /// `nil` and `true` when a save succeeded after failures.
  public typealias Report = @Sendable (_ failure: MapStoreError?, _ recovered: Bool) -> Void

  private struct Waiter {
    var id: UInt64
    var ticket: UInt64
    var continuation: CheckedContinuation<Bool, Never>
  }

  private struct State {
    var pending: Value?
    var running = false
    /// Tickets: every submitted value gets the next one; `completed` is the newest ticket whose
    /// value (or a newer one) has been saved or has failed.
    var submitted: UInt64 = 0
    var completed: UInt64 = 0
    var failure: MapStoreError?
    var waiters: [Waiter] = []
    var nextWaiter: UInt64 = 0
  }

  private let state = Mutex(State())
  private let queue: DispatchQueue
  private let save: Save
  private let report: Report

  /// Creates a saver whose saves run on a serial dispatch queue labelled `label`.
  public init(label: String, save: @escaping Save, report: @escaping Report) {
    queue = DispatchQueue(label: label)
    self.save = save
    self.report = report
  }

  /// Queues `value` to be saved (replacing a value still waiting) and returns its ticket for
  /// ``wait(for:timeout:)``. Never waits for the disk.
  @discardableResult public func submit(_ value: Value) -> UInt64 {
    let (ticket, start): (UInt64, Bool) = state.withLock { state in
      state.submitted += 1
      state.pending = value
      let start = !state.running
      state.running = true
      return (state.submitted, start)
    }
    if start { queue.async { self.drain() } }
    return ticket
  }

  /// The outcome of the newest completed save: `nil` when it reached the disk (or nothing was
  /// ever saved), else its failure.
  public var failure: MapStoreError? { state.withLock { $0.failure } }

  /// Whether every submitted value has been saved or has failed.
  public var isIdle: Bool { state.withLock { $0.completed == $0.submitted } }

  /// Waits until the save of `ticket`'s value (or of a newer value) has completed, at most
  /// `timeout` of the continuous clock.
  ///
  /// - Returns: `true` when it completed, `false` on timeout (the save goes on).
  public func wait(for ticket: UInt64, timeout: Duration) async -> Bool {
    let id: UInt64 = state.withLock { state in
      state.nextWaiter += 1
      return state.nextWaiter
    }
    let timer = Task {
      try? await Task.sleep(for: timeout)
      let waiter: Waiter? = state.withLock { state in
        guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return state.waiters.remove(at: index)
      }
      waiter?.continuation.resume(returning: false)
    }
    defer { timer.cancel() }
    return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      let done: Bool = state.withLock { state in
        if state.completed >= ticket { return true }
        state.waiters.append(Waiter(id: id, ticket: ticket, continuation: continuation))
        return false
      }
      if done { continuation.resume(returning: true) }
    }
  }

  /// The outcome of the save of `ticket`'s value after waiting up to `timeout` for it (at
  /// shutdown): its failure, ``MapStoreError/stalled(path:seconds:)`` naming `path` when the disk
  /// did not finish in time, or `nil` when it is on disk.
  public func outcome(of ticket: UInt64, timeout: Duration, path: String) async -> MapStoreError? {
    guard await wait(for: ticket, timeout: timeout) else {
      let (seconds, attoseconds) = timeout.components
      return .stalled(path: path, seconds: Double(seconds) + Double(attoseconds) / 1e18)
    }
    return failure
  }

  /// Waits until every value submitted so far is saved or has failed, at most `timeout`.
  ///
  /// - Returns: `true` when it is, `false` on timeout.
  public func flush(timeout: Duration) async -> Bool {
    let ticket = state.withLock { $0.submitted }
    return await wait(for: ticket, timeout: timeout)
  }

  private func drain() {
    while true {
      let next: (value: Value, ticket: UInt64)? = state.withLock { state in
        guard let value = state.pending else {
          state.running = false
          return nil
        }
        state.pending = nil
        return (value, state.submitted)
      }
      guard let next else { return }
      var failure: MapStoreError?
      do throws(MapStoreError) { try save(next.value) } catch { failure = error }
      let (previous, ready): (MapStoreError?, [Waiter]) = state.withLock { state in
        let previous = state.failure
        state.failure = failure
        state.completed = max(state.completed, next.ticket)
        let completed = state.completed
        let ready = state.waiters.filter { $0.ticket <= completed }
        state.waiters.removeAll { $0.ticket <= completed }
        return (previous, ready)
      }
      if let failure {
        if !Self.sameFailure(previous, failure) { report(failure, false) }
      } else if previous != nil {
        report(nil, true)
      }
      for waiter in ready { waiter.continuation.resume(returning: true) }
    }
  }

  /// Whether `new` is the failure `old` was: the same step and error (temporary names differ).
  public static func sameFailure(_ old: MapStoreError?, _ new: MapStoreError) -> Bool {
    guard let old else { return false }
    if case .system(let oldStep, _, let oldCode) = old, case .system(let newStep, _, let newCode) = new {
      return oldStep == newStep && oldCode == newCode
    }
    return old == new
  }
}
