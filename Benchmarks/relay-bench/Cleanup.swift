// What to undo when the run stops early, and how progress and failures are told.

import BenchKit
import Foundation
import Glibc
import Synchronization

/// What to undo when the run stops early (a failure exits the process): the private gpsd, the
/// simulated receiver, locationd. Each action is keyed so that it can be dropped once done.
final class Cleanup: Sendable {
  private let actions = Mutex<[String: @Sendable () -> Void]>([:])

  func register(_ key: String, _ action: @escaping @Sendable () -> Void) {
    actions.withLock { $0[key] = action }
  }

  func remove(_ key: String) { _ = actions.withLock { $0.removeValue(forKey: key) } }

  /// Runs and drops every registered action.
  func runAll() {
    let pending = actions.withLock { actions in
      defer { actions.removeAll() }
      return actions
    }
    for action in pending.values { action() }
  }
}

let cleanup = Cleanup()

/// Progress, on standard error: standard output carries only the result (table or JSON).
func say(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Standard error, then exit: 64 for bad usage, 1 for a failure of the run.
func fail(_ message: String, status: Int32 = 1) -> Never {
  FileHandle.standardError.write(Data("relay-bench: \(message)\n".utf8))
  cleanup.runAll()
  exit(status)
}

/// What `body` returns; when it throws, its message goes through ``fail(_:status:)`` (status 1).
func orFail<Value>(_ body: () throws(BenchError) -> Value) -> Value {
  do { return try body() } catch { fail(error.description) }
}
