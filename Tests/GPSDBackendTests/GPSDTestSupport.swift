import Foundation
import GPSDBackend
import Glibc
import LocationCore
import LocationTestKit
import NMEA
import Synchronization

/// 2026-03-14T12:00:00Z, the first epoch of the test route, in milliseconds since 1970.
let routeStart: Int64 = 1_773_489_600_000

/// Epoch `index` of a 10 Hz test route heading north-east from Munich, with centimetre-scale
/// wiggles so that no two epochs share a coordinate digit pattern.
func routeFix(_ index: Int, periodMilliseconds: Int64 = 100) -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.time = routeStart + Int64(index) * periodMilliseconds
  fix.quality = .gps
  let wiggle = Double((index * 7919) % 101) * 1.3e-7
  fix.coordinate = Coordinate(
    latitude: 48.137_154 + Double(index) * 8.1e-6 + wiggle,
    longitude: 11.576_124 + Double(index) * 1.21e-5 - wiggle)
  fix.altitudeMSL = 519.5 + Double(index % 50) * 0.1
  fix.geoidSeparation = 47.3
  fix.speedOverGround = 12.5
  fix.courseOverGround = 45.0
  fix.hdop = 0.9
  fix.vdop = 1.3
  fix.pdop = 1.6
  fix.satellitesUsed = 4
  fix.satellites = [
    Satellite(constellation: .gps, prn: 3, elevation: 61, azimuth: 120, snr: 44, used: true),
    Satellite(constellation: .gps, prn: 8, elevation: 35, azimuth: 250, snr: 40, used: true),
    Satellite(constellation: .gps, prn: 14, elevation: 20, azimuth: 40, snr: 35, used: true),
    Satellite(constellation: .gps, prn: 22, elevation: 75, azimuth: 310, snr: 47, used: true),
    Satellite(constellation: .gps, prn: 31, elevation: 5, azimuth: 180, snr: 20, used: false),
  ]
  return fix
}

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
        let at = SimulatedReceiver.monotonicNanoseconds()
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
    let deadline = SimulatedReceiver.monotonicNanoseconds() + UInt64(timeout * 1e9)
    while SimulatedReceiver.monotonicNanoseconds() < deadline {
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

  /// The epoch written with `time`, waiting up to 500 ms for it: the writer thread records an
  /// epoch just after write() returns, and gpsd can report it before that.
  func epoch(_ time: Int64) async -> SimulatedReceiver.WrittenEpoch? {
    for _ in 0..<50 {
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
