import LocationModel

/// The talker identifier: the two letters after `$` naming the source (NMEA 0183 table 5).
public enum TalkerID: Sendable, Hashable {
  /// GP: GPS.
  case gps
  /// GL: GLONASS.
  case glonass
  /// GA: Galileo.
  case galileo
  /// GB or BD: BeiDou.
  case beidou
  /// GQ: QZSS.
  case qzss
  /// GI: NavIC (IRNSS).
  case navic
  /// GN: combined multi-constellation solution.
  case multiGNSS
  /// Any other talker, accepted as unknown; holds the two letters.
  case other(SentenceName)

  /// The constellation a talker names, or `nil` for GN and unknown talkers.
  public var constellation: Constellation? {
    switch self {
    case .gps: return .gps
    case .glonass: return .glonass
    case .galileo: return .galileo
    case .beidou: return .beidou
    case .qzss: return .qzss
    case .navic: return .navic
    case .multiGNSS, .other: return nil
    }
  }

  init(_ a: UInt8, _ b: UInt8) {
    switch (a, b) {
    case (0x47, 0x50): self = .gps  // GP
    case (0x47, 0x4C): self = .glonass  // GL
    case (0x47, 0x41): self = .galileo  // GA
    case (0x47, 0x42), (0x42, 0x44): self = .beidou  // GB, BD
    case (0x47, 0x51): self = .qzss  // GQ
    case (0x47, 0x49): self = .navic  // GI
    case (0x47, 0x4E): self = .multiGNSS  // GN
    default: self = .other(SentenceName(a, b))
    }
  }
}
