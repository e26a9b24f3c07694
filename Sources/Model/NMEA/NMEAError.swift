import LocationModel
/// Why a line could not become an ``NMEASentence`` (NMEA 0183 v4.11 sections 5.2-5.3).
public enum NMEAError: Error, Equatable, Sendable {
  /// The line does not start with `$`.
  case notASentence
  /// The line is longer than ``NMEAFramer/maximumLineLength`` bytes.
  case tooLong(byteCount: Int)
  /// A byte outside printable ASCII appeared in the sentence.
  case invalidCharacter
  /// `*` is not followed by exactly two hexadecimal digits.
  case malformedChecksum
  /// The stated checksum differs from the XOR of the characters between `$` and `*`.
  case checksumMismatch(stated: UInt8, computed: UInt8)
  /// The address field is not a two-letter talker and a three-letter sentence formatter.
  case malformedAddress
  /// A field could not be read; `index` is 1-based after the address field, as NMEA numbers them.
  case invalidField(SentenceType, index: Int, name: String, value: String)
  /// The sentence has `count` fields (the address included) where its formatter needs at least
  /// `minimum` (``SentenceType/minimumFieldCount``).
  case tooFewFields(SentenceType, count: Int, minimum: Int)

  /// The statistics bucket this error is counted in.
  public var rejection: NMEARejection {
    switch self {
    case .notASentence, .malformedAddress: return .malformedAddress
    case .tooLong: return .tooLong
    case .invalidCharacter: return .invalidCharacter
    case .malformedChecksum: return .malformedChecksum
    case .checksumMismatch: return .checksumMismatch
    case .invalidField: return .invalidField
    case .tooFewFields: return .tooFewFields
    }
  }
}

/// The sentence formatters (NMEA 0183 three-letter sentence identifiers) this package interprets.
public enum SentenceType: String, Sendable, Hashable, CaseIterable, Codable {
  /// GGA: global positioning system fix data (time, position, quality, satellites, HDOP, altitude).
  case gga = "GGA"
  /// RMC: recommended minimum specific GNSS data (time, date, status, position, speed, course).
  case rmc = "RMC"
  /// GLL: geographic position, latitude/longitude, with time and status.
  case gll = "GLL"
  /// GSA: GNSS DOP and active satellites (mode, PRNs used, PDOP/HDOP/VDOP, system ID).
  case gsa = "GSA"
  /// GSV: GNSS satellites in view (PRN, elevation, azimuth, SNR, signal ID).
  case gsv = "GSV"
  /// VTG: course over ground and ground speed.
  case vtg = "VTG"
  /// ZDA: time and date.
  case zda = "ZDA"
  /// GNS: GNSS fix data (multi-constellation GGA).
  case gns = "GNS"
  /// GST: GNSS pseudorange error statistics.
  case gst = "GST"

  /// The fewest fields, the address field included, that a sentence of this formatter must have to
  /// be read at all; a shorter one is rejected as ``NMEAError/tooFewFields(_:count:minimum:)``.
  ///
  /// These are gpsd 3.22's minimums (`nmea_phrase[]` in `drivers/driver_nmea0183.c`, and
  /// `processGSV`'s "fieldcount <= 3" check), so that a sentence gpsd skips as too short is skipped
  /// here too. gpsd counts the fields of a sentence without a checksum one short; here the count
  /// is the same with or without one.
  public var minimumFieldCount: Int {
    switch self {
    case .gga: return 13
    case .rmc: return 8
    case .gll: return 7
    case .gsa: return 18
    case .gsv: return 4
    case .vtg: return 5
    case .zda: return 4
    case .gns: return 13
    case .gst: return 8
    }
  }
}

/// Up to eight ASCII letters or digits naming a talker, a formatter or a proprietary sentence
/// (`XX`, `RMB`, `PGRME`), held inline so that parsed sentences need no allocation.
public struct SentenceName: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
  private let packed: UInt64

  /// Packs the first eight bytes of `bytes`.
  init(_ bytes: UnsafeBufferPointer<UInt8>) {
    var value: UInt64 = 0
    for (i, b) in bytes.prefix(8).enumerated() { value |= UInt64(b) << (8 * UInt64(i)) }
    packed = value
  }

  init(_ a: UInt8, _ b: UInt8) { packed = UInt64(a) | UInt64(b) << 8 }

  /// Creates a name from text (its first eight UTF-8 bytes).
  public init(stringLiteral value: String) {
    var v: UInt64 = 0
    for (i, b) in value.utf8.prefix(8).enumerated() { v |= UInt64(b) << (8 * UInt64(i)) }
    packed = v
  }

  /// The name as text.
  public var description: String {
    var bytes: [UInt8] = []
    var v = packed
    while v != 0 {
      bytes.append(UInt8(truncatingIfNeeded: v))
      v >>= 8
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
