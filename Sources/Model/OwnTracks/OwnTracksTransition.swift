import JSON
import LocationModel

/// The `event` member of an OwnTracks `transition` message (booklet "JSON", `_type=transition`).
public enum OwnTracksTransitionEvent: String, Sendable, Hashable, CaseIterable {
  /// `enter`: the device entered the region.
  case enter
  /// `leave`: the device left the region (locationd's `exit`).
  case leave

  /// The OwnTracks event for a locationd `REGION` event's `event` (`enter`, `exit`, `dwell`):
  /// `enter` → ``enter``, `exit` → ``leave``; `nil` for `dwell` (OwnTracks has no dwell event)
  /// and anything else.
  public init?(regionEvent: String) {
    switch regionEvent {
    case "enter": self = .enter
    case "exit": self = .leave
    default: return nil
    }
  }
}

/// One OwnTracks `transition` message (`{"_type":"transition",...}`), published on the device's
/// topic plus `/event` when the device enters or leaves a region, in OwnTracks' own units.
///
/// Members written (booklet "JSON", `_type=transition`): `wtst` (UNIX time of the region's
/// creation, whole seconds; locationd keeps none and writes 0, see docs/mqtt.md), `lat`, `lon`
/// (degrees, WGS84, where the transition was decided), `tst` (UNIX time of the deciding fix, whole
/// seconds), `acc` (accuracy radius of that fix, whole metres; left out when unknown), `tid`
/// (tracker ID), `event` (``OwnTracksTransitionEvent``), `desc` (the region's title, or its id
/// without one), `t` (`c`: OwnTracks' trigger for geographical regions, used for circles and
/// polygons alike; `b` is for beacons, which locationd does not monitor), `rid` (the region's id).
public struct OwnTracksTransition: Sendable, Hashable {
  /// Time the region was created, seconds since 1970-01-01T00:00:00Z (OwnTracks `wtst`), `>= 0`.
  public var regionCreated: Int64
  /// Latitude of the deciding fix, degrees, `-90...90`.
  public var latitude: Double
  /// Longitude of the deciding fix, degrees, `-180...180`.
  public var longitude: Double
  /// Time of the deciding fix, seconds since 1970-01-01T00:00:00Z (OwnTracks `tst`).
  public var timestamp: Int64
  /// Accuracy radius of the deciding fix, metres, `>= 0` (OwnTracks `acc`); `nil` when unknown.
  public var accuracy: Int?
  /// Tracker ID (OwnTracks `tid`); `nil` when absent.
  public var trackerID: String?
  /// Entered or left.
  public var event: OwnTracksTransitionEvent
  /// The region's name (OwnTracks `desc`): its title, or its id without one.
  public var description: String
  /// The region's id (OwnTracks `rid`).
  public var regionID: String
  /// OwnTracks `t`: ``OwnTracksTrigger/circularRegion`` for every locationd region.
  public var trigger: OwnTracksTrigger

  /// Creates a message from values already in OwnTracks' units.
  public init(
    regionCreated: Int64 = 0, latitude: Double, longitude: Double, timestamp: Int64, accuracy: Int? = nil,
    trackerID: String? = nil, event: OwnTracksTransitionEvent, description: String, regionID: String,
    trigger: OwnTracksTrigger = .circularRegion
  ) {
    self.regionCreated = regionCreated
    self.latitude = latitude
    self.longitude = longitude
    self.timestamp = timestamp
    self.accuracy = accuracy
    self.trackerID = trackerID
    self.event = event
    self.description = description
    self.regionID = regionID
    self.trigger = trigger
  }

  /// The message for a region transition as the hub hands it to a front-end (typed), with the
  /// mapping of ``init(regionEvent:title:trackerID:regionCreated:)``: `kind` is the `REGION`
  /// event's `event`, `time` its time (milliseconds since 1970, truncated to the second), `fix`
  /// the deciding fix (its coordinate rounded once to the message's 7 decimals, its ``Fix/eph``
  /// rounded for `acc`).
  ///
  /// - Returns: `nil` for `dwell` (OwnTracks has none) or another kind, an empty region id, or a
  ///   fix without a coordinate in range.
  public init?(
    regionID: String, kind: String, time: Int64, fix: Fix, title: String?, trackerID: String?,
    regionCreated: Int64 = 0
  ) {
    guard !regionID.isEmpty, let event = OwnTracksTransitionEvent(regionEvent: kind),
      let coordinate = fix.coordinate,
      coordinate.latitude.isFinite, coordinate.longitude.isFinite,
      (-90...90).contains(coordinate.latitude), (-180...180).contains(coordinate.longitude)
    else { return nil }
    let description = title.flatMap { $0.isEmpty ? nil : $0 } ?? regionID
    self.init(
      regionCreated: max(0, regionCreated), latitude: coordinate.latitude,
      longitude: coordinate.longitude, timestamp: time >= 0 ? time / 1000 : (time - 999) / 1000,
      accuracy: OwnTracksLocation.whole(fix.eph, in: 0...1e7), trackerID: trackerID, event: event,
      description: description, regionID: regionID)
  }

  /// The message for a locationd `REGION` event (docs/PROTOCOL.md:
  /// `{"class":"REGION","region":ID,"event":"enter"|"exit"|"dwell","time":ISO8601,"fix":TPV}`).
  ///
  /// Mapping: `event` `enter` → `enter`, `exit` → `leave`; `lat`/`lon` the fix's; `tst` the event's
  /// `time` truncated to the second; `acc` the fix's `eph` rounded (as for `location` messages);
  /// `desc` = `title`, or the region's id when `title` is `nil` or empty; `rid` the region's id;
  /// `wtst` = `regionCreated`.
  ///
  /// - Returns: `nil` for a `dwell` event (OwnTracks has none), an object that is not a REGION
  ///   event, or one without a region id, a time or a fix with a position.
  public init?(regionEvent: JSONValue, title: String?, trackerID: String?, regionCreated: Int64 = 0) {
    guard regionEvent["class"]?.stringValue == "REGION", let regionID = regionEvent["region"]?.stringValue,
      !regionID.isEmpty, let kind = regionEvent["event"]?.stringValue,
      let event = OwnTracksTransitionEvent(regionEvent: kind),
      let time = regionEvent["time"]?.stringValue, let seconds = OwnTracksTime.epochSeconds(iso8601: time),
      let fix = regionEvent["fix"], let latitude = fix["lat"]?.doubleValue, let longitude = fix["lon"]?.doubleValue,
      latitude.isFinite, longitude.isFinite, (-90...90).contains(latitude), (-180...180).contains(longitude)
    else { return nil }
    let description = title.flatMap { $0.isEmpty ? nil : $0 } ?? regionID
    self.init(
      regionCreated: max(0, regionCreated), latitude: latitude, longitude: longitude, timestamp: seconds,
      accuracy: OwnTracksLocation.whole(fix["eph"]?.doubleValue, in: 0...1e7), trackerID: trackerID, event: event,
      description: description, regionID: regionID)
  }

  /// The JSON object, members in the order `_type`, `tid`, `wtst`, `tst`, `lat`, `lon`, `acc`,
  /// `event`, `desc`, `t`, `rid`; coordinates with 7 decimals (about 1 cm); strings escaped as
  /// RFC 8259 requires.
  public var encoded: [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(200 + description.utf8.count + regionID.utf8.count)
    out.append(contentsOf: #"{"_type":"transition""#.utf8)
    if let trackerID {
      out.append(contentsOf: #","tid":"#.utf8)
      JSONValue.writeString(trackerID, to: &out)
    }
    out.append(contentsOf: ",\"wtst\":\(regionCreated),\"tst\":\(timestamp)".utf8)
    out.append(contentsOf: ",\"lat\":".utf8)
    OwnTracksLocation.appendFixed(latitude, to: &out)
    out.append(contentsOf: ",\"lon\":".utf8)
    OwnTracksLocation.appendFixed(longitude, to: &out)
    if let accuracy { out.append(contentsOf: ",\"acc\":\(accuracy)".utf8) }
    out.append(contentsOf: ",\"event\":\"\(event.rawValue)\",\"desc\":".utf8)
    JSONValue.writeString(description, to: &out)
    out.append(contentsOf: ",\"t\":\"\(trigger.rawValue)\",\"rid\":".utf8)
    JSONValue.writeString(regionID, to: &out)
    out.append(UInt8(ascii: "}"))
    return out
  }
}
