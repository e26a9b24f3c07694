import JSON
import LocationModel

/// Why another device's message was not used; the fleet view counts each and carries on.
public enum OwnTracksError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The payload is larger than ``OwnTracksMessage/maxPayloadBytes``.
  case oversized(byteCount: Int)
  /// The payload is not one JSON object.
  case notJSON(String)
  /// `_type` is missing or not a string.
  case missingType
  /// A member is missing, of the wrong JSON type or out of its range.
  case invalidMember(String, reason: String)

  /// The reason, naming the member.
  public var description: String {
    switch self {
    case .oversized(let count): return "payload of \(count) bytes exceeds \(OwnTracksMessage.maxPayloadBytes)"
    case .notJSON(let reason): return "not a JSON object: \(reason)"
    case .missingType: return "no \"_type\" string"
    case .invalidMember(let name, let reason): return "\"\(name)\" \(reason)"
    }
  }
}

/// A message read from another device's OwnTracks topic.
public enum OwnTracksMessage: Sendable, Hashable {
  /// `_type` `location`.
  case location(OwnTracksLocation)
  /// `_type` `lwt`: the device's connection was lost at some time after `tst`.
  case lastWill(OwnTracksLastWill)
  /// Any other `_type` (`transition`, `card`, `status`, ...): valid, not used by the fleet view.
  case other(type: String)
  /// An empty payload: a retained message being cleared (MQTT 3.1.1, 3.3.1.3).
  case cleared

  /// Largest payload read, bytes. A location from the apps is about 250 bytes; anything over
  /// 4 KiB is refused before parsing.
  public static let maxPayloadBytes = 4096
  /// Longest `tid` accepted, bytes of UTF-8 (the apps use 2 ASCII characters). Counted in
  /// bytes as every id and title is (``TextRules``), with at most
  /// ``TextRules/maxCombiningMarks`` combining marks on a character.
  public static let maxTrackerIDBytes = 8

  /// Whether `tid` is 1...``maxTrackerIDBytes`` bytes of UTF-8 without control or format
  /// characters and with at most ``TextRules/maxCombiningMarks`` combining marks on a character.
  public static func isValidTrackerID(_ tid: String) -> Bool {
    !tid.isEmpty && TextRules.problem(tid, maxBytes: maxTrackerIDBytes) == nil
      && !tid.unicodeScalars.contains(where: {
        $0.properties.generalCategory == .control || $0.properties.generalCategory == .format
      })
  }

  /// Parses a payload strictly: one JSON object (RFC 8259, no trailing data, each member name
  /// once, no number that underflows to 0 such as `1e-400`) of at most ``maxPayloadBytes`` bytes. For `location`: `lat` `-90...90` and `lon` `-180...180` numbers
  /// and `tst` an integer `>= 0` are required; `acc`, `alt`, `vel`, `cog` must be numbers when
  /// present (rounded to whole numbers; `acc` and `vel` `>= 0`, `cog` `0...360`); `tid` a string of
  /// 1...8 bytes of UTF-8 without control or format characters (``isValidTrackerID(_:)``); `t` one of ``OwnTracksTrigger``'s
  /// letters (another letter is ignored). Members not listed are ignored.
  ///
  /// - Throws: ``OwnTracksError`` naming what is wrong.
  public static func parse(_ payload: [UInt8]) throws(OwnTracksError) -> OwnTracksMessage {
    guard payload.count <= maxPayloadBytes else { throw .oversized(byteCount: payload.count) }
    if payload.isEmpty { return .cleared }
    let value: JSONValue
    do { value = try JSONValue.parse(payload, refusingUnderflow: true) } catch { throw .notJSON(error.description) }
    guard let members = value.objectMembers else { throw .notJSON("not an object") }
    // RFC 8259 section 4 leaves duplicate names undefined: a reader taking the first and another
    // the last would see different messages, so none is read.
    var names = Set<String>()
    for member in members where !names.insert(member.key).inserted {
      throw .invalidMember(member.key, reason: "appears more than once")
    }
    guard let type = value["_type"]?.stringValue else { throw .missingType }
    switch type {
    case "location":
      return .location(try location(value))
    case "lwt":
      return .lastWill(OwnTracksLastWill(timestamp: try timestamp(value)))
    default:
      return .other(type: type)
    }
  }

  private static func location(_ value: JSONValue) throws(OwnTracksError) -> OwnTracksLocation {
    guard let latitude = value["lat"]?.doubleValue, latitude.isFinite, (-90...90).contains(latitude) else {
      throw .invalidMember("lat", reason: "must be a number within -90...90")
    }
    guard let longitude = value["lon"]?.doubleValue, longitude.isFinite, (-180...180).contains(longitude) else {
      throw .invalidMember("lon", reason: "must be a number within -180...180")
    }
    var location = OwnTracksLocation(latitude: latitude, longitude: longitude, timestamp: try timestamp(value))
    location.accuracy = try optionalWhole(value, "acc", 0...1e9)
    location.altitude = try optionalWhole(value, "alt", -1e6...1e9)
    location.velocity = try optionalWhole(value, "vel", 0...1e7)
    location.course = try optionalWhole(value, "cog", 0...360).map { $0 % 360 }
    if let member = value["tid"] {
      guard let tid = member.stringValue, isValidTrackerID(tid) else {
        throw .invalidMember(
          "tid",
          reason:
            "must be a string of 1...\(maxTrackerIDBytes) bytes of UTF-8 without control or format characters and at most \(TextRules.maxCombiningMarks) combining marks on a character"
        )
      }
      location.trackerID = tid
    }
    if let member = value["t"] {
      guard let letter = member.stringValue else { throw .invalidMember("t", reason: "must be a string") }
      location.trigger = OwnTracksTrigger(rawValue: letter)
    }
    return location
  }

  private static func timestamp(_ value: JSONValue) throws(OwnTracksError) -> Int64 {
    guard let tst = value["tst"]?.intValue, tst >= 0, tst < 1 << 40 else {
      throw .invalidMember("tst", reason: "must be a whole number of seconds since 1970")
    }
    return Int64(tst)
  }

  private static func optionalWhole(_ value: JSONValue, _ name: String, _ range: ClosedRange<Double>)
    throws(OwnTracksError) -> Int?
  {
    guard let member = value[name], member != .null else { return nil }
    guard let number = member.doubleValue, number.isFinite, range.contains(number) else {
      throw .invalidMember(name, reason: "must be a number within \(range.lowerBound)...\(range.upperBound)")
    }
    return Int(number.rounded())
  }
}

/// Decides which fixes are published: at least ``minimumInterval`` seconds (by the fixes' own
/// times) and ``minimumDistance`` metres (WGS84 geodesic, ``WGS84Geodesic/distance(_:_:)``) after
/// the last published one. The first fix is always published, and so is a fix older than the last
/// published one (the fix time stepped backwards: the limiter starts again from it). A value of 0
/// disables a condition.
public struct PublishLimiter: Sendable, Hashable {
  /// Seconds, `>= 0`.
  public var minimumInterval: Double
  /// Metres, `>= 0`.
  public var minimumDistance: Double
  private var last: OwnTracksLocation?

  /// Creates a limiter; the defaults publish every fix.
  public init(minimumInterval: Double = 0, minimumDistance: Double = 0) {
    self.minimumInterval = minimumInterval
    self.minimumDistance = minimumDistance
  }

  /// Whether `location` is published; when it is, it becomes the one later fixes are measured from.
  public mutating func admit(_ location: OwnTracksLocation) -> Bool {
    // A fix older than the last published one (a looping replay, the receiver's clock stepping
    // back) starts the limiter again: measured from the old fix, nothing would be published until
    // the clock caught up with it.
    if let last, location.timestamp >= last.timestamp {
      if minimumInterval > 0, Double(location.timestamp - last.timestamp) < minimumInterval { return false }
      if minimumDistance > 0 {
        let distance = WGS84Geodesic.distance(
          Coordinate(latitude: last.latitude, longitude: last.longitude),
          Coordinate(latitude: location.latitude, longitude: location.longitude))
        // A pair for which the iteration does not converge is nearly antipodal: far enough.
        if let distance, distance < minimumDistance { return false }
      }
    }
    last = location
    return true
  }
}
