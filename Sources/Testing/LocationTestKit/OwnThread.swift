import Foundation
import Synchronization

/// Runs `body` on a thread of its own and waits for its result without holding a thread of the
/// concurrency pool: for calls that may block (opening a FIFO planted in place of a file).
///
/// - Parameter seconds: how long to wait, a guard against a hang only (default 20 s: a loaded
///   2-core machine may not run the waiting task for seconds, so a short limit would fail calls
///   that did return).
/// - Returns: `body`'s result, or `nil` when it has not returned in time (it hangs; its thread is
///   left behind).
public func resultOnItsOwnThread<T: Sendable>(
  within seconds: Double = 20, _ body: @escaping @Sendable () -> T
) async -> T? {
  let result = Mutex<T?>(nil)
  Thread.detachNewThread {
    let value = body()
    result.withLock { $0 = value }
  }
  let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
  while true {
    if let value = result.withLock({ $0 }) { return value }
    if ContinuousClock.now >= deadline { return nil }
    try? await Task.sleep(for: .milliseconds(10))
  }
}
