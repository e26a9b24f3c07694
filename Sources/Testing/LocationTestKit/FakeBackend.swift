import LocationCore
import NMEA
import Synchronization
import LocationModel

/// Why a ``FakeBackend`` refused to start (scripted with ``FakeBackend/failNextStart(_:)``).
public struct FakeBackendError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The scripted message.
  public var message: String
  /// The message.
  public var description: String { message }
}

/// A ``LocationBackend`` driven by the test: events are sent with ``send(_:)``, starts and stops
/// are counted, a start can be made to fail.
///
/// On `start()` it reports ``BackendStatus/connected`` and then plays ``script``; on `stop()` it
/// reports ``BackendStatus/stopped``. ``send(_:)`` works whether or not it runs, so tests can also
/// check that a stopped backend's stale events are ignored.
public final class FakeBackend: LocationBackend {
  private struct State {
    var startCount = 0
    var stopCount = 0
    var isRunning = false
    var failure: String?
    var holdNext = false
    var held: CheckedContinuation<Void, Never>?
    var released = false
    var heldWaiters: [CheckedContinuation<Void, Never>] = []
  }

  /// The URI given at creation.
  public let uri: String
  /// Every event sent, in order.
  public let events: BackendEvents
  /// Events sent automatically after each successful start.
  public let script: [BackendEvent]
  /// Never waits and never drops: the test decides how much it sends (``QueueOverflow/waitForSpace``
  /// with ``EventQueue/post(_:)`` queues beyond the bound).
  private let queue = EventQueue<BackendEvent>(capacity: 1024, overflow: .waitForSpace)
  private let state = Mutex(State())

  /// Creates a fake backend; `script` is sent after each start.
  public init(uri: String = "fake", script: [BackendEvent] = []) {
    self.uri = uri
    self.script = script
    events = BackendEvents(queue)
  }

  deinit {
    queue.finish()
  }

  /// Successful `start()` calls so far.
  public var startCount: Int { state.withLock { $0.startCount } }
  /// `stop()` calls that stopped a running backend so far.
  public var stopCount: Int { state.withLock { $0.stopCount } }
  /// Whether started and not stopped.
  public var isRunning: Bool { state.withLock { $0.isRunning } }

  /// Makes the next `start()` throw ``FakeBackendError`` with `message`.
  public func failNextStart(_ message: String) {
    state.withLock { $0.failure = message }
  }

  /// Makes the next `start()` wait, before it does anything, until ``releaseStart()``: a test
  /// holds a caller's await open while something else runs.
  public func holdNextStart() {
    state.withLock {
      $0.holdNext = true
      $0.released = false
    }
  }

  /// Returns once a `start()` is held by ``holdNextStart()``.
  public func waitUntilStartIsHeld() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let isHeld = state.withLock { state -> Bool in
        if state.held != nil { return true }
        state.heldWaiters.append(continuation)
        return false
      }
      if isHeld { continuation.resume() }
    }
  }

  /// Lets the held `start()` go on (or the next one, if it has not begun yet).
  public func releaseStart() {
    let held = state.withLock { state -> CheckedContinuation<Void, Never>? in
      state.holdNext = false
      if state.held == nil { state.released = true }
      defer { state.held = nil }
      return state.held
    }
    held?.resume()
  }

  /// Starts (or throws the scripted failure), reports `connected` and sends ``script``.
  public func start() async throws {
    if state.withLock({ $0.holdNext }) {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let (waiters, goOn) = state.withLock {
          state -> ([CheckedContinuation<Void, Never>], Bool) in
          state.holdNext = false
          if state.released { return ([], true) }
          state.held = continuation
          defer { state.heldWaiters = [] }
          return (state.heldWaiters, false)
        }
        if goOn { continuation.resume() }
        for waiter in waiters { waiter.resume() }
      }
    }
    let outcome: Result<Bool, FakeBackendError> = state.withLock { state in
      if let failure = state.failure {
        state.failure = nil
        return .failure(FakeBackendError(message: failure))
      }
      if state.isRunning { return .success(false) }
      state.isRunning = true
      state.startCount += 1
      return .success(true)
    }
    guard try outcome.get() else { return }
    queue.post(.status(.connected, detail: "fake"))
    for event in script { queue.post(event) }
  }

  /// Stops and reports `stopped`; idempotent.
  public func stop() async {
    let wasRunning: Bool = state.withLock { state in
      guard state.isRunning else { return false }
      state.isRunning = false
      state.stopCount += 1
      return true
    }
    if wasRunning { queue.post(.status(.stopped, detail: nil)) }
  }

  /// Sends `event` to the consumer.
  public func send(_ event: BackendEvent) {
    queue.post(event)
  }

  /// Sends `fix` as a location with fake provenance and returns the location sent.
  @discardableResult
  public func send(fix: Fix, line: Int? = nil) -> Location {
    let location = Location(
      fix: fix, provenance: Provenance(backend: uri, line: line, isSimulated: true))
    queue.post(.location(location))
    return location
  }
}

/// The clock for tests: a ``VirtualClock`` (manual by default; `autoAdvance: true` runs paced
/// backends as fast as possible with exact virtual instants).
public typealias FakeClock = VirtualClock

/// Builders for test fixes.
public enum TestFixes {
  /// A 3D fix at `latitude`/`longitude` (WGS84 degrees), UTC `time` (ms since 1970), with `hdop`
  /// (eph = 19 m x HDOP at 95%), 8 satellites used, speed 0.
  public static func fix(
    latitude: Double, longitude: Double, time: Int64, hdop: Double = 1.0, mode: FixMode = .fix3D
  ) -> Fix {
    var fix = Fix(mode: mode)
    fix.time = time
    fix.timeOfDay = Int32(((time % 86_400_000) + 86_400_000) % 86_400_000)
    if mode.hasPosition {
      fix.quality = .gps
      fix.coordinate = Coordinate(latitude: latitude, longitude: longitude)
      fix.hdop = hdop
      fix.satellitesUsed = 8
      fix.speedOverGround = 0
      if mode == .fix3D { fix.altitudeMSL = 50 }
    } else {
      fix.quality = .invalid
    }
    return fix
  }

  /// `count` 3D fixes one `intervalMilliseconds` apart starting at `start`, moving north along
  /// the meridian by `stepMetres` each (measured on the WGS84 ellipsoid, as ``Geodesy`` measures),
  /// as decoded epochs with line numbers 1, 11, 21...
  public static func track(
    count: Int, start: Int64 = 1_700_000_000_000, intervalMilliseconds: Int64 = 1000,
    stepMetres: Double = 10,
    latitude: Double = 3.1386, longitude: Double = 101.6044
  ) -> [DecodedFix] {
    (0..<max(0, count)).map { index in
      let position = Geodesic.direct(
        from: Coordinate(latitude: latitude, longitude: longitude), azimuth: 0,
        distance: Double(index) * stepMetres
      ).coordinate
      return DecodedFix(
        fix: fix(
          latitude: position.latitude, longitude: longitude,
          time: start + Int64(index) * intervalMilliseconds),
        line: 1 + index * 10)
    }
  }
}

/// Waits (polling, up to `timeout` of real time) until `condition` holds; returns whether it did.
///
/// The timeout only ends a wait for something that will never happen: it is long (30 s by
/// default) because a test task on a loaded 2-core machine may not run for seconds.
public func eventually(
  timeout: Duration = .seconds(30), _ condition: @Sendable () async -> Bool
) async -> Bool {
  let clock = ContinuousClock()
  let deadline = clock.now + timeout
  while clock.now < deadline {
    if await condition() { return true }
    await Task.yield()
    try? await Task.sleep(for: .milliseconds(1))
  }
  return await condition()
}

/// A thread-safe list that tasks append to and tests read.
public final class Recorder<Element: Sendable>: Sendable {
  private let storage = Mutex<[Element]>([])

  /// Creates an empty recorder.
  public init() {}

  /// Appends `element`.
  public func append(_ element: Element) {
    storage.withLock { $0.append(element) }
  }

  /// Everything appended so far, in order.
  public var values: [Element] { storage.withLock { $0 } }
}
