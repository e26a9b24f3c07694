import JSON
import LocationModel

/// What made a device publish a location, OwnTracks' `t` member (booklet, "JSON", `_type=location`).
///
/// locationd publishes on its own schedule (a minimum interval and distance, like the apps'
/// move mode), so its own messages carry ``timer``; the other values are read from other devices.
public enum OwnTracksTrigger: String, Sendable, Hashable, CaseIterable {
  /// `p`: a ping issued by a background task.
  case ping = "p"
  /// `c`: a circular region was entered or left.
  case circularRegion = "c"
  /// `b`: a beacon region was entered or left.
  case beaconRegion = "b"
  /// `r`: the response to a `reportLocation` command.
  case response = "r"
  /// `u`: a manual publish requested by the user.
  case manual = "u"
  /// `t`: a timer-based publish in move mode; what locationd sends.
  case timer = "t"
  /// `v`: iOS frequent-locations monitoring.
  case frequentLocations = "v"
}

/// One OwnTracks `location` message (`{"_type":"location",...}`), in OwnTracks' own units.
///
/// Members written (booklet "JSON", `_type=location`): `lat`, `lon` (degrees, WGS84), `tst`
/// (UNIX time of the fix, whole seconds), `acc` (accuracy radius, whole metres), `alt` (metres
/// above mean sea level, whole), `vel` (speed, whole km/h), `cog` (course over ground, whole
/// degrees `0..<360`), `tid` (tracker ID, 1-2 characters on the apps; locationd allows up to 8),
/// `t` (``OwnTracksTrigger``). Unknown quantities are left out, never written as 0.
public struct OwnTracksLocation: Sendable, Hashable {
  /// Latitude, degrees, `-90...90`.
  public var latitude: Double
  /// Longitude, degrees, `-180...180`.
  public var longitude: Double
  /// Time of the fix, seconds since 1970-01-01T00:00:00Z (OwnTracks `tst`).
  public var timestamp: Int64
  /// Accuracy radius, metres, `>= 0` (OwnTracks `acc`); `nil` when unknown.
  public var accuracy: Int?
  /// Altitude above mean sea level, metres (OwnTracks `alt`); `nil` without a 3D fix.
  public var altitude: Int?
  /// Speed over ground, km/h, `>= 0` (OwnTracks `vel`); `nil` when unknown.
  public var velocity: Int?
  /// Course over ground, degrees true, `0..<360` (OwnTracks `cog`); `nil` when unknown.
  public var course: Int?
  /// Tracker ID (OwnTracks `tid`), shown on maps as the device's label; `nil` when absent.
  public var trackerID: String?
  /// Why the message was published (OwnTracks `t`); `nil` when absent.
  public var trigger: OwnTracksTrigger?

  /// Creates a message from values already in OwnTracks' units.
  public init(
    latitude: Double, longitude: Double, timestamp: Int64, accuracy: Int? = nil, altitude: Int? = nil,
    velocity: Int? = nil, course: Int? = nil, trackerID: String? = nil, trigger: OwnTracksTrigger? = nil
  ) {
    self.latitude = latitude
    self.longitude = longitude
    self.timestamp = timestamp
    self.accuracy = accuracy
    self.altitude = altitude
    self.velocity = velocity
    self.course = course
    self.trackerID = trackerID
    self.trigger = trigger
  }

  /// The message for a gpsd TPV object as locationd's events carry it (docs/PROTOCOL.md).
  ///
  /// Mapping: `lat`/`lon` as they are; `tst` = `time` (ISO 8601 UTC) truncated to the second;
  /// `acc` = `eph` rounded (gpsd's 95% horizontal error radius: OwnTracks states no confidence
  /// level, and the 95% radius is the one locationd knows for every source); `alt` = `altMSL`
  /// rounded (OwnTracks: above sea level; only for a 3D fix, `mode` 3); `vel` = `speed` (m/s) times
  /// 3.6, rounded; `cog` = `track` rounded, 360 written as 0.
  ///
  /// - Returns: `nil` when the TPV has no position (`mode` below 2, or no `lat`/`lon`) or no
  ///   `time` (OwnTracks requires `tst`).
  public init?(tpv: JSONValue, trackerID: String?, trigger: OwnTracksTrigger? = .timer) {
    guard tpv["class"]?.stringValue == "TPV", let mode = tpv["mode"]?.intValue, mode >= 2,
      let latitude = tpv["lat"]?.doubleValue, let longitude = tpv["lon"]?.doubleValue,
      latitude.isFinite, longitude.isFinite, (-90...90).contains(latitude), (-180...180).contains(longitude),
      let time = tpv["time"]?.stringValue, let seconds = OwnTracksTime.epochSeconds(iso8601: time)
    else { return nil }
    self.init(latitude: latitude, longitude: longitude, timestamp: seconds, trackerID: trackerID, trigger: trigger)
    accuracy = Self.whole(tpv["eph"]?.doubleValue, in: 0...1e7)
    if mode >= 3 { altitude = Self.whole(tpv["altMSL"]?.doubleValue, in: -1e6...1e7) }
    velocity = Self.whole(tpv["speed"]?.doubleValue.map { $0 * 3.6 }, in: 0...1e6)
    if let course = Self.whole(tpv["track"]?.doubleValue, in: 0...360) { self.course = course % 360 }
  }

  /// The message for a fix as the hub hands it to a front-end (``Fix``, typed), with the same
  /// mapping as ``init(tpv:trackerID:trigger:)`` gives its TPV: `lat`/`lon` in degrees WGS84
  /// (rounded once, to the message's 7 decimals; the TPV's have 9 already);
  /// `tst` = the fix time (milliseconds since 1970) truncated to the second; `acc` = ``Fix/eph``
  /// rounded (metres, 95%); `alt` = ``Fix/altitudeMSL`` rounded (metres, only for a 3D fix);
  /// `vel` = ``Fix/speedOverGround`` (m/s) times 3.6, rounded (km/h); `cog` =
  /// ``Fix/courseOverGround`` rounded (degrees true), 360 written as 0.
  ///
  /// - Returns: `nil` without a position (mode below 2, no coordinate, or one outside
  ///   `-90...90` / `-180...180`) or without a time (OwnTracks requires `tst`), or with a time
  ///   outside the years 0000-9999 that the TPV's ISO 8601 `time` can carry.
  public init?(fix: Fix, trackerID: String?, trigger: OwnTracksTrigger? = .timer) {
    guard fix.mode.hasPosition, let coordinate = fix.coordinate, let time = fix.time,
      coordinate.latitude.isFinite, coordinate.longitude.isFinite,
      (-90...90).contains(coordinate.latitude), (-180...180).contains(coordinate.longitude),
      (-62_167_219_200_000...253_402_300_799_999).contains(time)
    else { return nil }
    // Floor division: a time before 1970 is truncated towards the earlier second, as its ISO text.
    let seconds = time >= 0 ? time / 1000 : (time - 999) / 1000
    self.init(
      latitude: coordinate.latitude, longitude: coordinate.longitude, timestamp: seconds,
      trackerID: trackerID, trigger: trigger)
    accuracy = Self.whole(fix.eph, in: 0...1e7)
    if fix.mode == .fix3D { altitude = Self.whole(fix.altitudeMSL, in: -1e6...1e7) }
    velocity = Self.whole(fix.speedOverGround.map { $0 * 3.6 }, in: 0...1e6)
    if let course = Self.whole(fix.courseOverGround, in: 0...360) { self.course = course % 360 }
  }

  /// `value` rounded to the nearest whole number, or `nil` when absent, not finite or outside `range`.
  static func whole(_ value: Double?, in range: ClosedRange<Double>) -> Int? {
    guard let value, value.isFinite, range.contains(value) else { return nil }
    return Int(value.rounded())
  }

  /// The JSON object, members in the order `_type`, `tid`, `tst`, `lat`, `lon`, `acc`, `alt`,
  /// `vel`, `cog`, `t`; coordinates with 7 decimals (about 1 cm).
  public var encoded: [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(160)
    out.append(contentsOf: #"{"_type":"location""#.utf8)
    if let trackerID {
      out.append(contentsOf: #","tid":"#.utf8)
      JSONValue.writeString(trackerID, to: &out)
    }
    out.append(contentsOf: ",\"tst\":\(timestamp)".utf8)
    out.append(contentsOf: ",\"lat\":".utf8)
    Self.appendFixed(latitude, to: &out)
    out.append(contentsOf: ",\"lon\":".utf8)
    Self.appendFixed(longitude, to: &out)
    if let accuracy { out.append(contentsOf: ",\"acc\":\(accuracy)".utf8) }
    if let altitude { out.append(contentsOf: ",\"alt\":\(altitude)".utf8) }
    if let velocity { out.append(contentsOf: ",\"vel\":\(velocity)".utf8) }
    if let course { out.append(contentsOf: ",\"cog\":\(course)".utf8) }
    if let trigger { out.append(contentsOf: ",\"t\":\"\(trigger.rawValue)\"".utf8) }
    out.append(UInt8(ascii: "}"))
    return out
  }

  /// Writes `value` with 7 decimals, trailing zeros removed (`3.1386`, `-0.5`, `101`).
  static func appendFixed(_ value: Double, to out: inout [UInt8]) {
    let scaled = (value * 10_000_000).rounded()
    guard scaled.isFinite, abs(scaled) < 9e15 else {
      out.append(contentsOf: "0".utf8)
      return
    }
    var units = Int64(scaled)
    if units < 0 {
      out.append(UInt8(ascii: "-"))
      units = -units
    }
    out.append(contentsOf: String(units / 10_000_000).utf8)
    var fraction = units % 10_000_000
    guard fraction != 0 else { return }
    var digits = 7
    while fraction % 10 == 0 {
      fraction /= 10
      digits -= 1
    }
    let text = String(fraction)
    out.append(UInt8(ascii: "."))
    out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits - text.utf8.count))
    out.append(contentsOf: text.utf8)
  }
}

/// OwnTracks' `lwt` message, `{"_type":"lwt","tst":N}`: the MQTT Last Will the broker publishes
/// on the device's topic when the connection is lost without a clean disconnect. `tst` is the
/// time the client connected (UNIX seconds), as the apps send it.
public struct OwnTracksLastWill: Sendable, Hashable {
  /// When the client connected, seconds since 1970-01-01T00:00:00Z.
  public var timestamp: Int64

  /// Creates the message.
  public init(timestamp: Int64) { self.timestamp = timestamp }

  /// The JSON object.
  public var encoded: [UInt8] { Array("{\"_type\":\"lwt\",\"tst\":\(timestamp)}".utf8) }
}

/// ISO 8601 UTC times as gpsd writes them (`2026-11-30T14:00:05.250Z`), to UNIX seconds.
public enum OwnTracksTime {
  /// Whole seconds since 1970-01-01T00:00:00Z for `YYYY-MM-DDTHH:MM:SS[.fff]Z` (the fraction is
  /// dropped); `nil` for anything else or an impossible date or time.
  public static func epochSeconds(iso8601 text: String) -> Int64? {
    UTCTime(iso8601: text, syntax: .tpvLongFraction)?.seconds
  }
}
