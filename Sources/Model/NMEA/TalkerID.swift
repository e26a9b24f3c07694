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

  /// The talker for the sentences of one constellation, as receivers send GSV: GP for GPS and
  /// SBAS, GL, GA, GB (BeiDou, NMEA 0183 4.10), GQ, GI; `nil` for IMES, which has no talker.
  public init?(constellation: Constellation) {
    switch constellation {
    case .gps, .sbas: self = .gps
    case .glonass: self = .glonass
    case .galileo: self = .galileo
    case .beidou: self = .beidou
    case .qzss: self = .qzss
    case .navic: self = .navic
    case .imes: return nil
    }
  }

  /// The talker named by two ASCII letters or digits (`"GP"`, `"GN"`, `"BD"`...); an unknown
  /// pair gives ``other(_:)``. `nil` unless `letters` is exactly two ASCII letters or digits.
  public init?(letters: String) {
    let bytes = Array(letters.utf8)
    guard bytes.count == 2,
      bytes.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
    else { return nil }
    self.init(bytes[0], bytes[1])
  }

  /// The two letters as an encoder writes them: GP, GL, GA, GB (BeiDou), GQ, GI, GN, or the
  /// letters of an unknown talker.
  public var letters: String {
    switch self {
    case .gps: return "GP"
    case .glonass: return "GL"
    case .galileo: return "GA"
    case .beidou: return "GB"
    case .qzss: return "GQ"
    case .navic: return "GI"
    case .multiGNSS: return "GN"
    case .other(let name): return name.description
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
