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
public struct RegionTransition: Sendable, Equatable {
  /// The region's identifier.
  public var id: String
  /// What happened.
  public var event: RegionEventKind
  /// Milliseconds since 1970-01-01T00:00:00Z (UTC): for `enter` and `exit` the time of the fix
  /// that confirmed the transition; for `dwell` the clock time (`now`) at which it fired.
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
public struct RegionStatus: Sendable, Equatable {
  /// The region.
  public var region: Region
  /// The confirmed state.
  public var state: RegionState
  /// Milliseconds since 1970 (UTC): the time of the fix that confirmed the transition into
  /// `state`, or the restored time; `nil` while unknown or when not known.
  public var since: Int64?
  /// Signed distance, metres, from the last deciding fix that evaluated this region to its
  /// boundary: negative inside, positive outside. Exact (geodesic) within a few kilometres of the
  /// region; for a fix far away it is the distance to the region's bounding cap, a lower bound.
  /// `nil` until a deciding fix has evaluated the region (fixes far from a region that is
  /// outside do not evaluate it).
  public var distanceToBoundary: Double?

  /// Creates a status.
  public init(region: Region, state: RegionState, since: Int64?, distanceToBoundary: Double?) {
    self.region = region
    self.state = state
    self.since = since
    self.distanceToBoundary = distanceToBoundary
  }
}

/// The thresholds of the decision rule (see ``RegionMonitor``).
public struct RegionMonitorConfiguration: Sendable, Equatable {
  /// How much of the fix's 95% horizontal error radius must lie inside (or outside) the region
  /// beyond ``minimumMargin`` for the fix to decide, `>= 0`. Default 1.0: the whole 95% error
  /// circle.
  public var errorFraction: Double
  /// Metres the error circle must additionally clear the boundary by, `>= 0`. Default 5 m.
  public var minimumMargin: Double
  /// Consecutive deciding fixes that must agree before a transition, `>= 1`. Default 2.
  public var confirmations: Int
  /// Seconds: a fix whose time differs from the clock (`now`) by more than this (older, or
  /// newer) never decides. Default 10 s.
  public var maximumFixAge: Double
  /// Seconds without a deciding fix after which a half-confirmed transition is discarded
  /// (confirmation starts again) and the dwell timer waits for a fresh deciding fix inside.
  /// The confirmed state is kept across any outage. Default 60 s.
  public var outageReset: Double

  /// The defaults: error fraction 1.0, minimum margin 5 m, 2 confirmations, maximum fix age 10 s,
  /// outage reset 60 s.
  public static let `default` = RegionMonitorConfiguration()

  /// Creates a configuration. A value that is not finite or out of range is replaced by its
  /// default (confirmations below 1 by 1).
  public init(
    errorFraction: Double = 1.0, minimumMargin: Double = 5, confirmations: Int = 2,
    maximumFixAge: Double = 10, outageReset: Double = 60
  ) {
    self.errorFraction = errorFraction.isFinite && errorFraction >= 0 ? errorFraction : 1.0
    self.minimumMargin = minimumMargin.isFinite && minimumMargin >= 0 ? minimumMargin : 5
    self.confirmations = max(1, confirmations)
    self.maximumFixAge = maximumFixAge.isFinite && maximumFixAge >= 0 ? maximumFixAge : 10
    self.outageReset = outageReset.isFinite && outageReset >= 0 ? outageReset : 60
  }
}

/// Monitors regions against a stream of fixes: enter, exit and dwell decided on the fixes' error
/// estimates, on a clock the caller supplies. Pure: no I/O, no clock of its own.
public struct RegionMonitor: Sendable {
  /// The thresholds.
  public private(set) var configuration: RegionMonitorConfiguration

  /// Per-region record.
  struct Entry: Sendable {
    var region: Region
    var state: RegionState = .unknown
    var since: Int64? = nil
    var pendingVote: RegionState = .unknown
    var pendingCount: Int = 0
    var pendingTime: Int64 = 0
    var distance: Double = .nan
    var dwellFired = false
    var lastInside: Int64 = .min
  }

  var entries: [String: Entry] = [:]
  /// Time of the last deciding fix, ms.
  var lastDecidingTime: Int64? = nil
  /// The last deciding fix.
  var lastDecidingLocation: Location? = nil

  /// Creates an empty monitor.
  public init(configuration: RegionMonitorConfiguration = .default) {
    self.configuration = configuration
  }

  /// Adds `region`, replacing a region with the same id (whose state is then discarded: the new
  /// one starts ``RegionState/unknown``).
  ///
  /// - Returns: `true` when a region with the same id was replaced.
  @discardableResult
  public mutating func add(_ region: Region) -> Bool {
    let replaced = entries[region.id] != nil
    entries[region.id] = Entry(region: region)
    return replaced
  }

  /// Removes the region `id`. - Returns: `false` when there was none.
  @discardableResult
  public mutating func remove(id: String) -> Bool {
    entries.removeValue(forKey: id) != nil
  }

  /// Every region, sorted by id (Unicode scalar order of the identifiers).
  public var regions: [Region] { entries.values.map(\.region).sorted { $0.id < $1.id } }

  /// Number of regions.
  public var count: Int { entries.count }

  /// The region `id` with its state, or `nil` when there is none.
  public func status(id: String) -> RegionStatus? {
    guard let entry = entries[id] else { return nil }
    return RegionStatus(
      region: entry.region, state: entry.state, since: entry.since,
      distanceToBoundary: entry.distance.isNaN ? nil : entry.distance)
  }

  /// Feeds one fix; `now` is the clock time in ms since 1970 (a virtual clock in tests).
  ///
  /// - Returns: the transitions this fix (and the clock) caused, sorted by region id.
  public mutating func update(with location: Location, now: Int64) -> [RegionTransition] {
    var transitions: [RegionTransition] = []
    if let coordinate = location.coordinate, let error = location.horizontalAccuracy95, error.isFinite,
      let time = location.fix.time, abs(Double(now - time)) <= configuration.maximumFixAge * 1000,
      lastDecidingTime.map({ time > $0 }) ?? true
    {
      lastDecidingTime = time
      lastDecidingLocation = location
      let margin = configuration.errorFraction * error + configuration.minimumMargin
      for id in entries.keys {
        guard var entry = entries[id] else { continue }
        let distance = entry.region.prepared.signedDistance(to: coordinate)
        entry.distance = distance
        let vote: RegionState = distance <= -margin ? .inside : distance >= margin ? .outside : .unknown
        apply(vote, to: &entry, time: time, location: location, into: &transitions)
        entries[id] = entry
      }
    }
    transitions += dwellEvents(now: now)
    return transitions.sorted { $0.id < $1.id }
  }

  /// Advances the clock to `now` (ms since 1970) without a new fix: fires due dwell events.
  public mutating func advance(to now: Int64) -> [RegionTransition] {
    dwellEvents(now: now).sorted { $0.id < $1.id }
  }

  func apply(
    _ vote: RegionState, to entry: inout Entry, time: Int64, location: Location,
    into transitions: inout [RegionTransition]
  ) {
    guard vote != .unknown else {
      entry.pendingVote = .unknown
      entry.pendingCount = 0
      return
    }
    if vote == .inside { entry.lastInside = time }
    if vote == entry.state {
      entry.pendingVote = .unknown
      entry.pendingCount = 0
      return
    }
    if entry.pendingVote == vote, Double(time - entry.pendingTime) <= configuration.outageReset * 1000 {
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
    entry.pendingVote = .unknown
    entry.pendingCount = 0
    entry.dwellFired = false
    if vote == .inside, entry.region.notifyOnEntry {
      transitions.append(RegionTransition(id: entry.region.id, event: .enter, time: time, location: location))
    } else if vote == .outside, old == .inside, entry.region.notifyOnExit {
      transitions.append(RegionTransition(id: entry.region.id, event: .exit, time: time, location: location))
    }
  }

  mutating func dwellEvents(now: Int64) -> [RegionTransition] {
    var transitions: [RegionTransition] = []
    guard let location = lastDecidingLocation else { return [] }
    for id in entries.keys {
      guard var entry = entries[id], entry.state == .inside, !entry.dwellFired,
        let dwell = entry.region.dwell, let since = entry.since
      else { continue }
      guard Double(now - since) >= dwell * 1000,
        Double(now - entry.lastInside) <= configuration.outageReset * 1000
      else { continue }
      entry.dwellFired = true
      entries[id] = entry
      transitions.append(RegionTransition(id: id, event: .dwell, time: now, location: location))
    }
    return transitions
  }

  /// The regions and their states as a versioned JSON document.
  public func persisted() -> JSONValue {
    .object([JSONMember("version", .int(1))])
  }

  /// Restores a monitor from ``persisted()``.
  ///
  /// - Throws: ``RegionError/invalidDocument(reason:)``.
  public init(restoring document: JSONValue, configuration: RegionMonitorConfiguration = .default)
    throws(RegionError)
  {
    self.configuration = configuration
    throw .invalidDocument(reason: "not implemented")
  }
}

/// GeoJSON (RFC 7946) input and output of regions.
public enum RegionGeoJSON {
  /// Largest GeoJSON text accepted, bytes: 10 MiB.
  public static let maxBytes = 10 * 1024 * 1024

  /// Parses a GeoJSON Polygon geometry, a Feature with a Polygon geometry, or a FeatureCollection
  /// with exactly one such Feature.
  ///
  /// - Throws: ``RegionError/fileTooLarge(bytes:limit:)``, ``RegionError/invalidGeoJSON(reason:)``
  ///   or any error of ``RegionShape/validate()``.
  public static func shape(from bytes: [UInt8]) throws(RegionError) -> RegionShape {
    if bytes.count > maxBytes { throw .fileTooLarge(bytes: bytes.count, limit: maxBytes) }
    throw .invalidGeoJSON(reason: "not implemented")
  }

  /// A GeoJSON Feature for a region and its state.
  public static func feature(_ status: RegionStatus) -> JSONValue {
    .object([JSONMember("type", "Feature")])
  }
}
