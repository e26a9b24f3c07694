import LocationModel
// GSV: GNSS satellites in view (NMEA 0183 v4.11).
//
//         1 2 3  4  5  6   7  ... (up to 4 satellites: ID, elevation, azimuth, SNR)  last
//  $--GSV,x,x,xx,xx,xx,xxx,xx,...,h*hh
//  From NMEA 4.10 a signal ID (hex) follows the last satellite.
//
//  $GPGSV,3,1,12,09,88,089,31,07,60,281,44,23,55,123,33,10,44,274,32*78                   (MT3339)
//  $GPGSV,3,1,11,02,26,314,29,05,50,265,37,06,22,185,31,12,54,094,36,1*62                 (ZED-F9P)

/// GSV: one message of the satellites-in-view sequence (NMEA 0183 v4.11).
public struct GSV: Sendable, Hashable {
  /// One satellite entry of a GSV message; stored compactly (16 bytes) since GSV is the most
  /// frequent sentence.
  public struct Entry: Sendable, Hashable {
    private let storedID: Int32
    private let storedElevation: Float
    private let storedAzimuth: Float
    private let storedSNR: Float

    /// Creates an entry; angles in degrees, SNR in dB-Hz.
    public init(id: Int, elevation: Double?, azimuth: Double?, snr: Double?) {
      storedID = Int32(clamping: id)
      storedElevation = elevation.map { Float($0) } ?? .nan
      storedAzimuth = azimuth.map { Float($0) } ?? .nan
      storedSNR = snr.map { Float($0) } ?? .nan
    }

    /// Satellite ID (NMEA numbering).
    public var id: Int { Int(storedID) }
    /// Elevation, degrees, `-90...90`.
    public var elevation: Double? { storedElevation.isNaN ? nil : Double(storedElevation) }
    /// Azimuth, degrees true, `0...359`.
    public var azimuth: Double? { storedAzimuth.isNaN ? nil : Double(storedAzimuth) }
    /// Signal-to-noise ratio (C/N0), dB-Hz, `0...99`; `nil` when not tracking.
    public var snr: Double? { storedSNR.isNaN ? nil : Double(storedSNR) }
  }
  /// Field 1: total number of messages in the sequence.
  public var messageCount: Int?
  /// Field 2: this message's number, 1-based.
  public var messageNumber: Int?
  /// Field 3: total satellites in view.
  public var satellitesInView: Int?
  /// The satellites of this message (0 to 4).
  public var entries: [Entry] { (0..<entryCount).compactMap { entry(at: $0) } }
  /// Number of satellites in this message, `0...4`.
  public private(set) var entryCount = 0
  private var e0: Entry?
  private var e1: Entry?
  private var e2: Entry?
  private var e3: Entry?

  /// The satellite at `index` (`0..<entryCount`), without allocating.
  public func entry(at index: Int) -> Entry? {
    switch index {
    case 0: return e0
    case 1: return e1
    case 2: return e2
    case 3: return e3
    default: return nil
    }
  }
  /// NMEA 4.10+ signal ID (hex), `nil` before 4.10 or when empty.
  public var signalID: Int?

  init(_ f: FieldReader) throws(NMEAError) {
    messageCount = try f.int(1, "number of messages")
    messageNumber = try f.int(2, "message number")
    satellitesInView = try f.int(3, "satellites in view")
    let extra = max(0, f.count - 4)
    let hasSignalID = extra % 4 == 1
    let groups = min(extra / 4, 4)
    for g in 0..<groups {
      let base = 4 + g * 4
      guard let id = try f.int(base, "satellite ID") else { continue }
      let elevation = try f.double(base + 1, "elevation", in: -90...90)
      let azimuth = try f.double(base + 2, "azimuth", in: FieldReader.compass)
      let snr = try f.double(base + 3, "SNR", in: 0...99)
      let entry = Entry(id: id, elevation: elevation, azimuth: azimuth, snr: snr)
      switch entryCount {
      case 0: e0 = entry
      case 1: e1 = entry
      case 2: e2 = entry
      default: e3 = entry
      }
      entryCount += 1
    }
    if hasSignalID { signalID = try? f.hexInt(f.count - 1, "signal ID") }
  }
}
