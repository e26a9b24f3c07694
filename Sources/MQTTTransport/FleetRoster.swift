import LocationModel
import OwnTracks

/// The fleet view's devices: the last position heard from each topic, as map annotations, and
/// which have gone silent. Pure: times are passed in (UNIX seconds), so tests drive it.
///
/// Each device is one annotation: `id` the topic (`owntracks/USER/DEVICE`), `title` its `tid`
/// (or the topic's last level without one), `subtitle` the time of its last report (ISO 8601 UTC
/// of its `tst`), `kind` `owntracks`. A device is stale when its last report (the earlier of its
/// `tst` and the time it arrived, so a retained message from a device gone for a day is stale at
/// once) is more than ``staleAfter`` seconds old, or when its Last Will arrived: then `kind` is
/// `owntracks-stale` and the subtitle `stale TIME` or `offline TIME`. Short texts, so that 1,000
/// devices fit the map's 64 KiB of annotation text (about 51 bytes each).
public struct FleetRoster: Sendable {
  /// Kind of a live device's annotation.
  public static let liveKind = "owntracks"
  /// Kind of a stale device's annotation.
  public static let staleKind = "owntracks-stale"

  struct Device: Sendable {
    var location: OwnTracksLocation
    var lastReport: Int64
    var stale: Bool
    /// ``Annotation/textByteCount`` of its annotation.
    var bytes = 0
  }

  /// Devices shown at most: below the map's 1000 annotations, so that 100 are always left for
  /// the user's own (`locationctl annotate`).
  public static let maxDevices = 900
  /// Annotation text of all devices together at most, bytes (``Annotation/textByteCount``):
  /// below the map's 64 KiB, so that 8 KiB are always left for the user's own annotations.
  public static let maxTextBytes = 56 * 1024

  /// New devices refused because the fleet view holds ``maxDevices`` or ``maxTextBytes``.
  public private(set) var capacityRefused = 0
  /// Annotation text of the devices shown, bytes.
  public private(set) var textBytes = 0

  /// Seconds a message's `tst` may lie ahead of the clock (receiver clocks drift, brokers queue):
  /// a message further in the future is refused, so that one wrong `tst` cannot make a device's
  /// later genuine reports look older and be ignored.
  public static let futureTolerance: Int64 = 300

  /// Messages refused because their `tst` is more than ``futureTolerance`` seconds ahead.
  public private(set) var futureRefused = 0
  /// Messages refused because their topic is longer than ``Annotation/maxIdentifierLength``.
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

  /// What a message changes: the annotation to set, or `nil` when it changes nothing (own
  /// topic, a message type the fleet view does not use, a Last Will of an unknown device, a
  /// location older than the device's last; counted in ``capacityRefused``: a new device beyond
  /// ``maxDevices`` or ``maxTextBytes``; counted in ``topicRefused``: a topic longer than
  /// ``Annotation/maxIdentifierLength``; counted in ``futureRefused``: a location whose `tst` is
  /// more than ``futureTolerance`` seconds after `now`).
  public mutating func receive(_ message: OwnTracksMessage, topic: String, at now: Int64) -> Annotation? {
    guard topic != ownTopic else { return nil }
    guard topic.count <= Annotation.maxIdentifierLength else {
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
      let shown = annotation(topic, location, stale ? "stale \(Self.iso(lastReport))" : Self.iso(location.timestamp), stale: stale)
      if devices[topic] == nil,
        devices.count >= Self.maxDevices || textBytes + shown.textByteCount > Self.maxTextBytes
      {
        capacityRefused += 1
        return nil
      }
      store(topic, Device(location: location, lastReport: lastReport, stale: stale), shown)
      return shown
    case .lastWill(let will):
      guard var device = devices[topic] else { return nil }
      device.stale = true
      let shown = annotation(topic, device.location, "offline \(Self.iso(max(min(will.timestamp, now), device.lastReport)))", stale: true)
      store(topic, device, shown)
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
      let shown = annotation(topic, device.location, "stale \(Self.iso(device.lastReport))", stale: true)
      store(topic, marked, shown)
      changed.append(shown)
    }
    return changed.sorted { $0.id < $1.id }
  }

  private mutating func store(_ topic: String, _ device: Device, _ shown: Annotation) {
    var device = device
    device.bytes = shown.textByteCount
    textBytes += device.bytes - (devices[topic]?.bytes ?? 0)
    devices[topic] = device
  }

  private func annotation(_ topic: String, _ location: OwnTracksLocation, _ subtitle: String, stale: Bool) -> Annotation {
    let title = location.trackerID ?? String(topic.split(separator: "/").last ?? Substring(topic)).prefix(Annotation.maxTextLength).description
    return Annotation(
      id: topic, coordinate: Coordinate(latitude: location.latitude, longitude: location.longitude), title: title,
      subtitle: subtitle, kind: stale ? Self.staleKind : Self.liveKind)
  }

  /// `YYYY-MM-DDTHH:MM:SSZ` for UNIX seconds.
  static func iso(_ seconds: Int64) -> String {
    let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
    let rest = Int(seconds - Int64(days) * 86_400)
    let date = CivilDate.civil(days: days)
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(date.year)-\(two(date.month))-\(two(date.day))T\(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60))Z"
  }
}
