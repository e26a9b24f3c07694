import JSON
import LocationModel

/// Whether the device is known to be in a region.
public enum RegionState: String, Sendable {
  /// No fix has yet decided: the region was just added (or replaced), or was restored as unknown.
  case unknown
  /// Confirmed inside.
  case inside
  /// Confirmed outside.
  case outside
}

/// What a ``RegionTransition`` reports.
public enum RegionEventKind: String, Sendable {
  /// The state became ``RegionState/inside`` (from outside or unknown); only when
  /// ``Region/notifyOnEntry``.
  case enter
  /// The state became ``RegionState/outside`` from inside; only when ``Region/notifyOnExit``.
  case exit
  /// The device has been inside for the region's ``Region/dwell`` time; once per stay.
  case dwell
}

/// One event of one region.
public struct RegionTransition: Sendable, Hashable {
  /// The region's identifier.
  public var id: String
  /// What happened.
  public var event: RegionEventKind
  /// Milliseconds since 1970-01-01T00:00:00Z (UTC): for `enter` and `exit` the time of the fix
  /// that confirmed the transition; for `dwell` the instant the dwell time was over (or the
  /// later deciding fix it waited for, see ``RegionMonitor``).
  public var time: Int64
  /// For `enter` and `exit` the confirming fix; for `dwell` the last deciding fix.
  public var location: Location

  /// Creates a transition.
  public init(id: String, event: RegionEventKind, time: Int64, location: Location) {
    self.id = id
    self.event = event
    self.time = time
    self.location = location
  }
}

/// A region with its monitoring state.
public struct RegionStatus: Sendable, Hashable {
  /// The region.
  public var region: Region
  /// The confirmed state.
  public var state: RegionState
  /// Milliseconds since 1970 (UTC): the time of the fix that confirmed the transition into
  /// `state`, or the restored time; `nil` while unknown or when not known.
  public var since: Int64?
  /// Signed distance, metres, from the last deciding fix that evaluated this region to its
  /// boundary: negative inside, positive outside (see ``Region/signedDistance(to:)``: exact
  /// when the boundary is within 1 km of the fix, or within the fix's margin when that is larger,
  /// up to 100 km; otherwise a lower bound of more than that in magnitude). `nil` until a deciding fix has evaluated the region: a fix far from a region that
  /// is settled outside does not evaluate it (nor update this value), and a fix far from an
  /// unknown region only votes it outside.
  public var distanceToBoundary: Double?
  /// Milliseconds since 1970 (UTC): the time of the deciding fix that measured
  /// ``distanceToBoundary``, on its source's timeline; `nil` when the distance is `nil` or was
  /// restored from a file.
  public var distanceTime: Int64?

  /// Creates a status.
  public init(
    region: Region, state: RegionState, since: Int64?, distanceToBoundary: Double?, distanceTime: Int64? = nil
  ) {
    self.region = region
    self.state = state
    self.since = since
    self.distanceToBoundary = distanceToBoundary
    self.distanceTime = distanceToBoundary == nil ? nil : distanceTime
  }
}

/// The thresholds of the decision rule (see ``RegionMonitor``).
public struct RegionMonitorConfiguration: Sendable, Equatable {
  /// How much of the fix's 95% horizontal error radius must lie inside (or outside) the region
  /// beyond ``minimumMargin`` for the fix to decide, `0...10`. Default 1.0: the whole 95% error
  /// circle.
  public var errorFraction: Double
  /// Metres the error circle must additionally clear the boundary by, `0...10_000`. Default 5 m
  /// (above the largest deviation of a polygon edge from the straight line the point-in-polygon
  /// test uses, see ``RegionShape/maxExtentRadius``).
  public var minimumMargin: Double
  /// Consecutive deciding fixes that must agree before a transition, `1...100`. Default 2.
  public var confirmations: Int
  /// Seconds, `0...86_400`: a fix whose time differs from the clock (`now`) by more than this
  /// (older: stale; newer: the clocks disagree) never decides. Default 10 s.
  public var maximumFixAge: Double
  /// Seconds, `0...86_400`: a gap longer than this between two votes discards a
  /// half-confirmed transition (confirmation starts again), and a dwell does not fire until a
  /// deciding fix no older than this has not voted outside. The confirmed state is kept across
  /// any outage, however long (see ``RegionMonitor``). Default 60 s.
  public var outageReset: Double

  /// The defaults: error fraction 1.0, minimum margin 5 m, 2 confirmations, maximum fix age 10 s,
  /// outage reset 60 s.
  public static let `default` = RegionMonitorConfiguration()

  /// Creates a configuration with the values as given (check them with ``validate()``).
  public init(
    errorFraction: Double = 1.0, minimumMargin: Double = 5, confirmations: Int = 2,
    maximumFixAge: Double = 10, outageReset: Double = 60
  ) {
    self.errorFraction = errorFraction
    self.minimumMargin = minimumMargin
    self.confirmations = confirmations
    self.maximumFixAge = maximumFixAge
    self.outageReset = outageReset
  }

  /// Checks every value against its documented range.
  ///
  /// - Throws: ``RegionError/invalidConfiguration(name:value:range:)`` for the first value out
  ///   of range (NaN and infinities included).
  public func validate() throws(RegionError) {
    func check(_ name: String, _ value: Double, _ range: ClosedRange<Double>) throws(RegionError) {
      guard value.isFinite, range.contains(value) else {
        throw .invalidConfiguration(name: name, value: value, range: "\(range.lowerBound)...\(range.upperBound)")
      }
    }
    try check("errorFraction", errorFraction, 0...10)
    try check("minimumMargin", minimumMargin, 0...10_000)
    try check("confirmations", Double(confirmations), 1...100)
    try check("maximumFixAge", maximumFixAge, 0...86_400)
    try check("outageReset", outageReset, 0...86_400)
  }

  /// This configuration with every value that ``validate()`` would refuse replaced by its
  /// default: what ``RegionMonitor`` uses, so that no configuration can make it misbehave.
  public var normalized: RegionMonitorConfiguration {
    func value(_ value: Double, _ range: ClosedRange<Double>, _ fallback: Double) -> Double {
      value.isFinite && range.contains(value) ? value : fallback
    }
    return RegionMonitorConfiguration(
      errorFraction: value(errorFraction, 0...10, 1.0), minimumMargin: value(minimumMargin, 0...10_000, 5),
      confirmations: (1...100).contains(confirmations) ? confirmations : 2,
      maximumFixAge: value(maximumFixAge, 0...86_400, 10), outageReset: value(outageReset, 0...86_400, 60))
  }
}

/// Monitors regions against a stream of fixes: enter, exit and dwell decided on the fixes' error
/// estimates, on a clock the caller supplies (`now`, milliseconds since 1970 UTC). Pure: no I/O,
/// no clock of its own.
///
/// ## Deciding fixes
/// A fix decides only when all of these hold:
/// - it has a position (mode 2D or 3D with a valid coordinate);
/// - it has a 95% horizontal error radius e95 (`Location.horizontalAccuracy95`: from NMEA GST
///   when the receiver sent it, else gpsd's `eph`, HDOP times the user equivalent range error):
///   without an error estimate a fix cannot decide;
/// - it has a time (`Fix.time`), within ``RegionMonitorConfiguration/maximumFixAge`` of `now`
///   (older is stale; newer means the clocks disagree);
/// - its time is later than the last deciding fix's: an out-of-order or repeated fix (gpsd sends
///   some epochs twice) never decides, so it can never count twice towards a confirmation.
/// Other fixes change nothing (they still advance the clock for dwell).
///
/// ## The decision rule
/// With margin m = ``RegionMonitorConfiguration/errorFraction`` x e95 +
/// ``RegionMonitorConfiguration/minimumMargin`` and d the fix's signed geodesic distance to the
/// region's boundary (negative inside), a deciding fix votes
/// - inside when d <= -m (the error circle, widened by the minimum margin, is wholly inside),
/// - outside when d >= m,
/// - nothing otherwise (too close to the boundary for its error to tell).
/// A transition needs ``RegionMonitorConfiguration/confirmations`` consecutive deciding fixes
/// voting for the new state: a fix voting for the current state or voting nothing restarts the
/// count, and so does a gap of more than ``RegionMonitorConfiguration/outageReset`` between two
/// votes. The transition's time is the confirming fix's time. With the defaults a single wild
/// fix (a 200 m jump with a small reported error) never causes a transition, and a device
/// standing still beyond the margin does not either.
///
/// A region smaller than the margin (for example a 1 m circle with a 5 m minimum margin) can
/// never be decided inside: the fix cannot tell.
///
/// ## States and events
/// - unknown -> inside: `enter` (when ``Region/notifyOnEntry``): the application wants to know
///   it is inside a region it just added, as CoreLocation's initial state report.
/// - unknown -> outside: no event.
/// - outside -> inside: `enter` (when ``Region/notifyOnEntry``).
/// - inside -> outside: `exit` (when ``Region/notifyOnExit``).
/// - `dwell` (when ``Region/dwell`` is set): once per stay, at the instant T = entry time plus
///   the dwell time while the state is still inside, when a deciding fix within the
///   ``RegionMonitorConfiguration/outageReset`` seconds before T did not vote outside (it voted
///   inside, or was too near the boundary to vote); otherwise (an outage, fixes voting outside)
///   at the time of the first later deciding fix that does not vote outside. Checked on every
///   ``update(with:now:)`` (before the fix is applied, and after) and ``advance(to:)``; its
///   time is that instant, not the time of the check, so a recorded drive gives the same
///   events however fast it is replayed. It re-arms on the next transition (exit or enter).
/// - A region added (or replaced with the same id) starts unknown. Restored regions keep their
///   saved state, time and dwell flag: a restart does not fire `enter` again for a region the
///   device is still inside, and a crossing made while the daemon was down is reported by the
///   first confirmed decision after the restart (at that fix's time).
/// - An outage (no deciding fix for any length of time) keeps the confirmed state; the first
///   confirmed decision after it fires only if it differs from the state. So an outage neither
///   causes a transition nor hides a crossing made during it.
///
/// ## Cost
/// Regions are kept in a latitude/longitude grid of their bounding boxes (``RegionIndex``). A
/// deciding fix evaluates the regions whose box meets the fix's neighbourhood of radius m, and
/// the regions that are inside, unknown or half-confirmed (which it may have left); every other
/// region is outside and stays outside, since the fix is farther than m from it. So the cost
/// per fix depends on the regions near the fix, not on how many there are.
public struct RegionMonitor: Sendable {
  /// The thresholds in use (normalized).
  public private(set) var configuration: RegionMonitorConfiguration

  /// Per-region record.
  struct Entry: Sendable {
    var region: Region
    var box: GeoBox
    var state: RegionState = .unknown
    var since: Int64? = nil
    /// The state the pending confirmation votes for (`.unknown` for none).
    var pendingVote: RegionState = .unknown
    var pendingCount: Int32 = 0
    var pendingTime: Int64 = 0
    var distance: Double = .nan
    /// Time of the deciding fix that measured ``distance``, ms.
    var distanceTime: Int64? = nil
    var dwellFired = false
    /// Where the dwell time counts from, ms: the transition's time (``since``), moved to the
    /// first deciding fix after the source's timeline jumped (see ``RegionMonitor/beginSegment()``);
    /// `nil` until known.
    var dwellAnchor: Int64? = nil
    /// Time of the last deciding fix that did not vote outside (voted inside, or was too close
    /// to the boundary to vote), ms: the evidence a dwell needs.
    var lastNotOutside: Int64 = .min
    /// The query generation that last evaluated this entry (deduplication).
    var stamp: UInt32 = 0

    init(region: Region) {
      self.region = region
      self.box = GeoBox(center: region.prepared.capCenter, radius: region.prepared.capRadius)
    }

    /// Whether a fix far from the region could still change something: not (outside and
    /// settled).
    var needsAttention: Bool { state != .outside || pendingVote != .unknown }
  }

  var entries: [Entry?] = []
  var free: [Int32] = []
  var slots: [String: Int32] = [:]
  var index = RegionIndex()
  /// Slots that are not settled outside: evaluated on every deciding fix.
  var attention: Set<Int32> = []
  /// Slots inside with a dwell time that has not fired.
  var dwellWatch: Set<Int32> = []
  var generation: UInt32 = 0
  /// Time of the last deciding fix, ms.
  var lastDecidingTime: Int64? = nil
  /// The last deciding fix.
  var lastDecidingLocation: Location? = nil
  /// Set by ``beginSegment()``: the next deciding fix starts a new timeline segment; holds the
  /// time of the last deciding fix of the segment before (`.min` when none).
  var segmentBoundary: Int64? = nil
  /// Incremented whenever a region's confirmed state changes (with or without an event).
  public private(set) var stateRevision: UInt64 = 0

  /// Creates an empty monitor with `configuration` (``RegionMonitorConfiguration/normalized``:
  /// a value out of range is replaced by its default; check it first with
  /// ``RegionMonitorConfiguration/validate()`` to refuse it instead).
  public init(configuration: RegionMonitorConfiguration = .default) {
    self.configuration = configuration.normalized
  }

  /// Adds `region`, replacing a region with the same id (whose state is then discarded: the new
  /// one starts ``RegionState/unknown``).
  ///
  /// - Returns: `true` when a region with the same id was replaced.
  @discardableResult
  public mutating func add(_ region: Region) -> Bool {
    let replaced = remove(id: region.id)
    insert(Entry(region: region))
    return replaced
  }

  mutating func insert(_ entry: Entry) {
    let slot: Int32
    if let reused = free.popLast() {
      slot = reused
      entries[Int(slot)] = entry
    } else {
      slot = Int32(entries.count)
      entries.append(entry)
    }
    slots[entry.region.id] = slot
    index.insert(slot, box: entry.box)
    refreshSets(slot)
  }

  /// Removes the region `id`.
  ///
  /// - Returns: `false` when there was none.
  @discardableResult
  public mutating func remove(id: String) -> Bool {
    guard let slot = slots.removeValue(forKey: id), let entry = entries[Int(slot)] else { return false }
    index.remove(slot, box: entry.box)
    entries[Int(slot)] = nil
    attention.remove(slot)
    dwellWatch.remove(slot)
    free.append(slot)
    return true
  }

  /// Every region, sorted by id (by Unicode scalar values).
  public var regions: [Region] {
    entries.compactMap { $0?.region }.sorted { $0.id.unicodeScalars.lexicographicallyPrecedes($1.id.unicodeScalars) }
  }

  /// Number of regions.
  public var count: Int { slots.count }

  /// The region `id` with its state, or `nil` when there is none.
  public func status(id: String) -> RegionStatus? {
    guard let slot = slots[id], let entry = entries[Int(slot)] else { return nil }
    return Self.status(entry)
  }

  static func status(_ entry: Entry) -> RegionStatus {
    RegionStatus(
      region: entry.region, state: entry.state, since: entry.since,
      distanceToBoundary: entry.distance.isNaN ? nil : entry.distance, distanceTime: entry.distanceTime)
  }

  /// Every region with its state, sorted by id.
  public var statuses: [RegionStatus] {
    entries.compactMap { $0.map(Self.status) }.sorted {
      $0.region.id.unicodeScalars.lexicographicallyPrecedes($1.region.id.unicodeScalars)
    }
  }

  /// Begins a new segment of the source's timeline: the source may have jumped on purpose (a
  /// replay's seek or new pass of a loop, a speed change, another backend). Confirmed states are
  /// kept. The segment's first fix that could decide tells: when its time is more than
  /// ``RegionMonitorConfiguration/outageReset`` away from the last deciding fix's (either way),
  /// the timeline jumped, and the fix decides whatever its time: half-confirmed transitions are
  /// discarded and the dwell time of a region the device is inside counts from that fix, as
  /// after an outage. Otherwise the segment continues where the last one ended (a speed change,
  /// a pause, a seek back a little): nothing changes, and a fix no later than the last deciding
  /// one (replayed again after a seek) does not decide a second time.
  public mutating func beginSegment() {
    if segmentBoundary == nil { segmentBoundary = lastDecidingTime ?? .min }
  }

  /// Applies a pending ``beginSegment()`` at the segment's first fix that could decide (time
  /// `time`).
  mutating func enterSegment(at time: Int64) {
    guard let boundary = segmentBoundary else { return }
    segmentBoundary = nil
    guard boundary == .min || abs(Double(time) - Double(boundary)) > configuration.outageReset * 1000 else {
      return
    }
    lastDecidingTime = nil
    for slot in entries.indices {
      guard var entry = entries[slot] else { continue }
      entry.pendingVote = .unknown
      entry.pendingCount = 0
      entry.lastNotOutside = .min
      if entry.state == .inside { entry.dwellAnchor = time }
      entries[slot] = entry
      refreshSets(Int32(slot))
    }
  }

  /// Feeds one fix (see "Deciding fixes" above); `now` is the clock time in ms since 1970 (a
  /// virtual clock in tests; for a recorded source the time of its newest fix). Also fires due
  /// dwell events, as ``advance(to:)``: those due at or before the fix's time first (they
  /// happened before the fix), then those due by `now`.
  ///
  /// - Returns: the transitions this fix and the clock caused, sorted by region id (and for one
  ///   region enter or exit before dwell).
  public mutating func update(with location: Location, now: Int64) -> [RegionTransition] {
    var transitions: [RegionTransition] = []
    // A fix that could decide: a position, an error estimate and a time recent enough. The first
    // of a new segment tells whether the timeline jumped before ordering is judged.
    let candidate: (coordinate: Coordinate, error: Double, time: Int64)? =
      if let coordinate = location.coordinate, let error = location.horizontalAccuracy95, error.isFinite,
        error >= 0, let time = location.fix.time,
        abs(Double(now) - Double(time)) <= configuration.maximumFixAge * 1000
      { (coordinate, error, time) } else { nil }
    if let candidate { enterSegment(at: candidate.time) }
    if let (coordinate, error, time) = candidate, lastDecidingTime.map({ time > $0 }) ?? true {
      transitions += dwellEvents(now: min(now, time))
      lastDecidingTime = time
      lastDecidingLocation = location
      let margin = configuration.errorFraction * error + configuration.minimumMargin
      generation &+= 1
      if generation == 0 {
        // Wrapped: clear every stamp so none matches by accident.
        for slot in entries.indices { entries[slot]?.stamp = 0 }
        generation = 1
      }
      let query = GeoBox(center: coordinate, radius: margin)
      var candidates: [Int32] = []
      let current = generation
      index.forEachCandidate(in: query) { slot in
        if entries[Int(slot)]?.stamp != current {
          entries[Int(slot)]?.stamp = current
          candidates.append(slot)
        }
      }
      for slot in candidates {
        evaluate(slot, coordinate: coordinate, margin: margin, time: time, location: location, into: &transitions)
      }
      for slot in attention where entries[Int(slot)]?.stamp != current {
        // Not near the fix: farther than the margin from the region, so the fix votes outside.
        guard var entry = entries[Int(slot)] else { continue }
        if entry.state == .inside || entry.pendingVote != .unknown {
          entry.distance = entry.region.prepared.signedDistance(to: coordinate)
          entry.distanceTime = time
        }
        entries[Int(slot)] = entry
        evaluate(slot, vote: .outside, time: time, location: location, into: &transitions)
      }
    }
    transitions += dwellEvents(now: now)
    return Self.sorted(transitions)
  }

  /// Advances the clock to `now` (ms since 1970) without a new fix: fires due dwell events.
  ///
  /// - Returns: the dwell events, sorted by region id.
  public mutating func advance(to now: Int64) -> [RegionTransition] {
    Self.sorted(dwellEvents(now: now))
  }

  static func sorted(_ transitions: [RegionTransition]) -> [RegionTransition] {
    func rank(_ event: RegionEventKind) -> Int { event == .dwell ? 1 : 0 }
    return transitions.sorted {
      $0.id == $1.id
        ? rank($0.event) < rank($1.event) : $0.id.unicodeScalars.lexicographicallyPrecedes($1.id.unicodeScalars)
    }
  }

  mutating func evaluate(
    _ slot: Int32, coordinate: Coordinate, margin: Double, time: Int64, location: Location,
    into transitions: inout [RegionTransition]
  ) {
    guard let entry = entries[Int(slot)] else { return }
    let distance = entry.region.prepared.signedDistance(to: coordinate, band: margin)
    entries[Int(slot)]?.distance = distance
    entries[Int(slot)]?.distanceTime = time
    let vote: RegionState = distance <= -margin ? .inside : distance >= margin ? .outside : .unknown
    evaluate(slot, vote: vote, time: time, location: location, into: &transitions)
  }

  /// Applies one deciding fix's vote (`.unknown`: no vote) to a region.
  mutating func evaluate(
    _ slot: Int32, vote: RegionState, time: Int64, location: Location, into transitions: inout [RegionTransition]
  ) {
    guard var entry = entries[Int(slot)] else { return }
    defer {
      entries[Int(slot)] = entry
      refreshSets(slot)
    }
    if vote != .outside { entry.lastNotOutside = time }
    guard vote != .unknown else {
      entry.pendingVote = .unknown
      entry.pendingCount = 0
      return
    }
    if vote == entry.state {
      entry.pendingVote = .unknown
      entry.pendingCount = 0
      return
    }
    if entry.pendingVote == vote, abs(Double(time) - Double(entry.pendingTime)) <= configuration.outageReset * 1000 {
      entry.pendingCount += 1
    } else {
      entry.pendingVote = vote
      entry.pendingCount = 1
    }
    entry.pendingTime = time
    guard entry.pendingCount >= configuration.confirmations else { return }
    let old = entry.state
    entry.state = vote
    entry.since = time
    entry.dwellAnchor = time
    entry.pendingVote = .unknown
    entry.pendingCount = 0
    entry.dwellFired = false
    stateRevision &+= 1
    if vote == .inside, entry.region.notifyOnEntry {
      transitions.append(RegionTransition(id: entry.region.id, event: .enter, time: time, location: location))
    } else if vote == .outside, old == .inside, entry.region.notifyOnExit {
      transitions.append(RegionTransition(id: entry.region.id, event: .exit, time: time, location: location))
    }
  }

  /// Keeps ``attention`` and ``dwellWatch`` in step with the entry in `slot`.
  mutating func refreshSets(_ slot: Int32) {
    guard let entry = entries[Int(slot)] else { return }
    if entry.needsAttention { attention.insert(slot) } else { attention.remove(slot) }
    if entry.state == .inside, entry.region.dwell != nil, !entry.dwellFired {
      dwellWatch.insert(slot)
    } else {
      dwellWatch.remove(slot)
    }
  }

  mutating func dwellEvents(now: Int64) -> [RegionTransition] {
    guard let location = lastDecidingLocation, !dwellWatch.isEmpty else { return [] }
    var transitions: [RegionTransition] = []
    for slot in dwellWatch {
      guard var entry = entries[Int(slot)], entry.state == .inside, !entry.dwellFired,
        let dwell = entry.region.dwell, let anchor = entry.dwellAnchor ?? entry.since
      else { continue }
      // The instant the dwell time is over, and the first instant from then on at which a
      // deciding fix within the outage reset did not vote outside: the event's time, the same
      // however late this check runs (a replay at any speed gives the same events).
      let due = Double(anchor) + dwell * 1000
      guard Double(now) >= due, entry.lastNotOutside != .min,
        Double(entry.lastNotOutside) >= due - configuration.outageReset * 1000
      else { continue }
      let fired = min(Int64(max(due, Double(entry.lastNotOutside)).rounded(.up)), now)
      entry.dwellFired = true
      entries[Int(slot)] = entry
      transitions.append(RegionTransition(id: entry.region.id, event: .dwell, time: fired, location: location))
    }
    for transition in transitions {
      if let slot = slots[transition.id] { dwellWatch.remove(slot) }
    }
    return transitions
  }
}
