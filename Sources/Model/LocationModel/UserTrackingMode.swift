/// How the map follows the current location, as MapKit's `MKUserTrackingMode`.
///
/// The raw values are the wire names (`"none"`, `"follow"`, `"followWithHeading"`) used by the
/// `mode` request, the `MAP` reply and the saved map state.
public enum UserTrackingMode: String, Sendable, Hashable, Codable, CaseIterable {
  /// The map does not move with the current location (except on the first fix of a tracking
  /// session and on an explicit "center on current location").
  case none
  /// Every fix moves the center to the current location.
  case follow
  /// As ``follow``, and the map rotates so that the course over ground points up.
  case followWithHeading

  /// Whether fixes move the center.
  public var follows: Bool { self != .none }
}
