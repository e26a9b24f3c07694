import Foundation
import GPSDBackend
import Glibc
import LocationCore
import LocationTestKit
import NMEA
import Synchronization
import SystemIO
import LocationModel

/// 2026-03-14T12:00:00Z, the first epoch of the test route, in milliseconds since 1970.

/// A backend event with the monotonic time it was received.
struct TimedEvent: Sendable {
  var event: BackendEvent
  var at: UInt64
}

/// Collects a backend's events in the background; tests wait for conditions on them.
final class EventCollector: Sendable {
  private final class Store: Sendable {
    let events = Mutex<[TimedEvent]>([])
  }
  private let store = Store()
  private let task: Task<Void, Never>

  init(_ backend: GPSDBackend) {
    let store = self.store
    task = Task {
      for await event in backend.events {
        let at = MonotonicClock.nanoseconds()
        store.events.withLock { $0.append(TimedEvent(event: event, at: at)) }
      }
    }
  }

  deinit { task.cancel() }

  var all: [TimedEvent] { store.events.withLock { $0 } }

  var locations: [(location: Location, at: UInt64)] {
    all.compactMap { item in
      if case .location(let location) = item.event { return (location, item.at) }
      return nil
    }
  }

  var statuses: [(status: BackendStatus, at: UInt64)] {
    all.compactMap { item in
      if case .status(let status, _) = item.event { return (status, item.at) }
      return nil
    }
  }

  /// Polls every 10 ms until `condition` holds or `timeout` seconds pass; returns whether it held.
  func wait(timeout: Double, _ condition: ([TimedEvent]) -> Bool) async -> Bool {
    let deadline = MonotonicClock.nanoseconds() + UInt64(timeout * 1e9)
    while MonotonicClock.nanoseconds() < deadline {
      if condition(all) { return true }
      try? await Task.sleep(for: .milliseconds(10))
    }
    return condition(all)
  }
}

/// Records what the simulated receiver wrote, keyed by fix time.
final class WriteLog: Sendable {
  private let written = Mutex<[Int64: SimulatedReceiver.WrittenEpoch]>([:])

  func record(_ epoch: SimulatedReceiver.WrittenEpoch) {
    guard let time = epoch.fix.time else { return }
    written.withLock { $0[time] = epoch }
  }

  subscript(time: Int64) -> SimulatedReceiver.WrittenEpoch? { written.withLock { $0[time] } }

  /// The epoch written with `time`, waiting for it: the writer thread records an epoch just
  /// after write() returns, and gpsd can report it before that. The 10 s limit only ends the
  /// wait for an epoch that was never written.
  func epoch(_ time: Int64) async -> SimulatedReceiver.WrittenEpoch? {
    let deadline = MonotonicClock.nanoseconds() + 10_000_000_000
    while MonotonicClock.nanoseconds() < deadline {
      if let epoch = self[time] { return epoch }
      try? await Task.sleep(for: .milliseconds(10))
    }
    return self[time]
  }

  /// A description of the written epoch times nearest to `time`, for failure messages.
  func nearest(_ time: Int64) -> String {
    let times = written.withLock { Array($0.keys) }.sorted { abs($0 - time) < abs($1 - time) }
    return "nearest written: \(times.prefix(3).map { $0 - time }) ms away, \(times.count) written"
  }
  var count: Int { written.withLock { $0.count } }
}

/// A fresh path for a pty link in the temporary directory.
func temporaryLinkPath(_ name: String) -> String {
  NSTemporaryDirectory() + "locationd-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
}

/// Epoch `index` of the shared test route (``TestRoute/fix(_:periodMilliseconds:)``).
func routeFix(_ index: Int, periodMilliseconds: Int64 = 100) -> Fix {
  TestRoute.fix(index, periodMilliseconds: periodMilliseconds)
}
