import LocationModel
import OwnTracks

/// The fleet view's devices: the last position heard from each topic, as map annotations, and
/// which have gone silent. Pure: times are passed in (UNIX seconds), so tests drive it.
///
/// Each device is one annotation in the fleet's own namespace: `id` ``Annotation/fleetPrefix``
/// plus the topic (`fleet:owntracks/USER/DEVICE`), so that it never replaces or deletes a
/// user's annotation, `title` its `tid` (or the topic's last level without one), `subtitle` the
/// time of its last report (ISO 8601 UTC of its `tst`), `kind` ``liveKind``. A device is stale
/// when its last report (the earlier of its `tst` and the time it arrived, so a retained message
/// from a device gone for a day is stale at once) is more than ``staleAfter`` seconds old: then
/// `kind` is ``staleKind`` and the subtitle `stale TIME`; after its Last Will `kind` is
/// ``offlineKind`` and the subtitle `offline TIME`.
///
/// Every update counts against the fleet's caps (``maxDevices``, ``maxTextBytes``), stale and
/// offline ones too: a device is admitted with the bytes of the largest form its annotation can
/// take (the `offline TIME` subtitle and the longest kind), so that going stale or offline never
/// grows the fleet's text, and a report that would make it larger (a longer `tid`) is refused.
/// So the fleet never takes the user's share of the map (100 annotations, 8 KiB).
public struct FleetRoster: Sendable {
  /// Kind of a live device's annotation.
  public static let liveKind = "owntracks"
  /// Kind of a stale device's annotation (silent for more than ``staleAfter`` seconds).
  public static let staleKind = "owntracks-stale"
  /// Kind of an offline device's annotation (its Last Will arrived).
  public static let offlineKind = "owntracks-offline"
  /// The three kinds of fleet annotations.
  public static let kinds: Set<String> = [liveKind, staleKind, offlineKind]

  struct Device: Sendable {
    var location: OwnTracksLocation
    var lastReport: Int64
    var stale: Bool
    /// Bytes counted for it: ``FleetRoster/reservedBytes(id:title:)``.
    var bytes = 0
  }

  /// Devices shown at most: below the map's 1000 annotations, so that 100 are always left for
  /// the user's own (`locationctl annotate`).
  public static let maxDevices = 900
  /// Annotation text of all devices together at most, bytes (each device counted with
  /// ``reservedBytes(id:title:)``): below the map's 64 KiB, so that 8 KiB are always left for
  /// the user's own annotations.
  public static let maxTextBytes = 56 * 1024

  /// Longest subtitle a device can have: `offline ` and an ISO 8601 time of 20 bytes (a year
  /// of 4 digits; a later one is clamped to the arrival time, which has 4).
  static let maxSubtitleBytes = "offline ".utf8.count + 20

  /// Updates refused because the fleet view holds ``maxDevices`` or ``maxTextBytes``: new
  /// devices, and reports of known ones whose annotation would grow past the cap.
  public private(set) var capacityRefused = 0
  /// Annotation text counted for the devices shown, bytes: each device's
  /// ``reservedBytes(id:title:)``, at most ``maxTextBytes``.
  public private(set) var textBytes = 0

  /// Seconds a message's `tst` may lie ahead of the clock (receiver clocks drift, brokers queue):
  /// a message further in the future is refused, so that one wrong `tst` cannot make a device's
  /// later genuine reports look older and be ignored.
  public static let futureTolerance: Int64 = 300

  /// Messages refused because their `tst` is more than ``futureTolerance`` seconds ahead.
  public private(set) var futureRefused = 0
  /// Messages refused because their topic does not make an annotation id (``TextRules``: the
  /// prefix and the topic over ``Annotation/maxIdentifierBytes`` bytes, or too many combining
  /// marks on a character).
  public private(set) var topicRefused = 0

  /// Seconds without a report after which a device is stale, `> 0`.
  public var staleAfter: Double
  /// The topic this daemon publishes to: its own messages are not shown.
  public let ownTopic: String
  private var devices: [String: Device] = [:]

  /// Creates an empty roster.
  public init(staleAfter: Double, ownTopic: String) {
    self.staleAfter = staleAfter
    self.ownTopic = ownTopic
  }

  /// Devices known.
  public var count: Int { devices.count }

  /// The annotation id of a device's topic: ``Annotation/fleetPrefix`` and the topic.
  public static func identifier(topic: String) -> String { Annotation.fleetPrefix + topic }

  /// Why `topic` cannot be shown as a device (``TextRules`` for its annotation id), or `nil`.
  public static func topicProblem(_ topic: String) -> String? {
    TextRules.problem(identifier(topic: topic), maxBytes: Annotation.maxIdentifierBytes).map {
      "the annotation id \(Annotation.fleetPrefix)TOPIC would have \($0)"
    }
  }

  /// The bytes a device counts against ``maxTextBytes``: its annotation's text
  /// (``Annotation/textByteCount``) in its largest form, offline.
  public static func reservedBytes(id: String, title: String) -> Int {
    id.utf8.count + title.utf8.count + maxSubtitleBytes + offlineKind.utf8.count
  }

  /// What a message changes: the annotation to set, or `nil` when it changes nothing (own
  /// topic, a message type the fleet view does not use, a Last Will of an unknown device, a
  /// location older than the device's last; counted in ``capacityRefused``: a new device beyond
  /// ``maxDevices`` or ``maxTextBytes``, or a known one whose report would pass
  /// ``maxTextBytes``; counted in ``topicRefused``: a topic that makes no annotation id
  /// (``topicProblem(_:)``); counted in ``futureRefused``: a location whose `tst` is more than
  /// ``futureTolerance`` seconds after `now`).
  public mutating func receive(_ message: OwnTracksMessage, topic: String, at now: Int64) -> Annotation? {
    guard topic != ownTopic else { return nil }
    guard Self.topicProblem(topic) == nil else {
      if case .cleared = message { return nil }
      topicRefused += 1
      return nil
    }
    switch message {
    case .location(let location):
      guard location.timestamp <= now + Self.futureTolerance else {
        futureRefused += 1
        return nil
      }
      if let known = devices[topic], known.location.timestamp > location.timestamp { return nil }
      let lastReport = min(location.timestamp, now)
      let stale = Double(now - lastReport) > staleAfter
      let shown = annotation(
        topic, location, stale ? "stale \(Self.iso(lastReport))" : Self.iso(location.timestamp),
        kind: stale ? Self.staleKind : Self.liveKind)
      let reserved = Self.reservedBytes(id: shown.id, title: shown.title)
      let known = devices[topic]
      if known == nil && devices.count >= Self.maxDevices
        || textBytes - (known?.bytes ?? 0) + reserved > Self.maxTextBytes
      {
        capacityRefused += 1
        return nil
      }
      store(topic, Device(location: location, lastReport: lastReport, stale: stale), reserved)
      return shown
    case .lastWill(let will):
      guard var device = devices[topic] else { return nil }
      device.stale = true
      let time = Self.iso(max(min(will.timestamp, now), device.lastReport))
      let shown = annotation(topic, device.location, "offline \(time)", kind: Self.offlineKind)
      store(topic, device, device.bytes)
      return shown
    case .cleared, .other:
      return nil
    }
  }

  /// The annotations of devices that became stale by `now` (each once, until it reports again).
  public mutating func expire(at now: Int64) -> [Annotation] {
    var changed: [Annotation] = []
    for (topic, device) in devices where !device.stale && Double(now - device.lastReport) > staleAfter {
      var marked = device
      marked.stale = true
      let shown = annotation(topic, device.location, "stale \(Self.iso(device.lastReport))", kind: Self.staleKind)
      store(topic, marked, device.bytes)
      changed.append(shown)
    }
    return changed.sorted { $0.id < $1.id }
  }

  private mutating func store(_ topic: String, _ device: Device, _ bytes: Int) {
    var device = device
    device.bytes = bytes
    textBytes += bytes - (devices[topic]?.bytes ?? 0)
    devices[topic] = device
  }

  private func annotation(_ topic: String, _ location: OwnTracksLocation, _ subtitle: String, kind: String) -> Annotation {
    let title =
      location.trackerID
      ?? Self.prefix(String(topic.split(separator: "/").last ?? Substring(topic)), bytes: Annotation.maxTextBytes)
    return Annotation(
      id: Self.identifier(topic: topic), coordinate: Coordinate(latitude: location.latitude, longitude: location.longitude),
      title: title, subtitle: subtitle, kind: kind)
  }

  /// The longest prefix of `text`, in whole characters, of at most `bytes` bytes of UTF-8.
  static func prefix(_ text: String, bytes: Int) -> String {
    var result = ""
    var count = 0
    for character in text {
      count += character.utf8.count
      if count > bytes { break }
      result.append(character)
    }
    return result
  }

  /// `YYYY-MM-DDTHH:MM:SSZ` for UNIX seconds.
  static func iso(_ seconds: Int64) -> String { UTCTime(seconds: seconds).iso8601(fraction: .none) }
}
