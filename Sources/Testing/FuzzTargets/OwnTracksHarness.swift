import LocationModel
import MQTTFrontEnd
import OwnTracks

/// Another device's MQTT payload, as the fleet view reads it: strict OwnTracks parsing and the
/// roster's annotation.
///
/// Input: the payload's bytes. Invariants: parsing throws only ``OwnTracksError`` (never traps);
/// a payload over ``OwnTracksMessage/maxPayloadBytes`` is refused as oversized; a parsed location
/// has `lat` within -90...90, `lon` within -180...180, `cog` within 0..<360, `acc` and `vel` at
/// least 0 and `tid` at most 8 bytes of UTF-8; encoding it and parsing the encoding gives the same
/// location (coordinates within half a unit of the encoding's 7th decimal, 5e-8 degrees, plus binary rounding); the roster's annotation
/// for it has the fleet's prefix and the topic as id and passes the map's validation limits.
enum OwnTracksHarness {
  static func check(_ bytes: [UInt8]) throws(FuzzFailure) {
    let message: OwnTracksMessage
    do { message = try OwnTracksMessage.parse(bytes) } catch {
      if bytes.count > OwnTracksMessage.maxPayloadBytes {
        try require(error == .oversized(byteCount: bytes.count), "an oversized payload refused as \(error)")
      }
      return
    }
    try require(bytes.count <= OwnTracksMessage.maxPayloadBytes, "a payload of \(bytes.count) bytes was parsed")
    guard case .location(let location) = message else { return }
    try require((-90...90).contains(location.latitude) && (-180...180).contains(location.longitude),
      "position out of range: \(location.latitude), \(location.longitude) from \(bytes.escaped)")
    try require(location.course.map { (0..<360).contains($0) } ?? true, "cog \(String(describing: location.course))")
    try require((location.accuracy ?? 0) >= 0 && (location.velocity ?? 0) >= 0, "negative acc or vel from \(bytes.escaped)")
    try require((location.trackerID?.utf8.count ?? 0) <= OwnTracksMessage.maxTrackerIDBytes, "tid too long")
    let again: OwnTracksMessage
    do { again = try OwnTracksMessage.parse(location.encoded) } catch {
      throw FuzzFailure("the encoding of a parsed location does not parse (\(error)): \(location.encoded.escaped)")
    }
    guard case .location(let reparsed) = again else { throw FuzzFailure("the encoding is not a location") }
    // Half a unit of the 7th decimal, plus the rounding of the decimal-to-binary conversions
    // (3.13862315 is written as 3.1386232: 5.0000000002e-8 apart in binary).
    let halfUnit = 5e-8 + 1e-12
    var expected = location
    expected.latitude = reparsed.latitude
    expected.longitude = reparsed.longitude
    try require(
      reparsed == expected && abs(reparsed.latitude - location.latitude) <= halfUnit
        && abs(reparsed.longitude - location.longitude) <= halfUnit,
      "round trip changed \(location) into \(reparsed)")
    var roster = FleetRoster(staleAfter: 60, ownTopic: "owntracks/me/here")
    guard let annotation = roster.receive(message, topic: "owntracks/fuzz/device", at: location.timestamp) else {
      throw FuzzFailure("a location of another device gave no annotation")
    }
    try require(annotation.id == Annotation.fleetPrefix + "owntracks/fuzz/device", "annotation id \(annotation.id)")
    try require(
      annotation.title.utf8.count <= Annotation.maxTextBytes && (annotation.subtitle?.utf8.count ?? 0) <= Annotation.maxTextBytes,
      "annotation text too long")
  }
}
