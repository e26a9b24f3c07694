import LocationModel

/// One recorded fix: what the track store keeps of a ``Location`` (a row of the `fixes` table).
///
/// Units are the model's SI units: degrees (WGS84), metres, m/s, degrees true. Absent values are
/// `nil` (stored as SQL NULL), never zero.
public struct TrackPoint: Sendable, Hashable {
  /// Fix time, milliseconds since 1970-01-01T00:00:00Z (UTC).
  public var time: Int64
  /// Position, WGS84 degrees (latitude `-90...90`, longitude `-180...180`).
  public var coordinate: Coordinate
  /// Altitude above mean sea level (the geoid), metres.
  public var altitudeMSL: Double?
  /// Geoid separation (geoid above the WGS84 ellipsoid), metres; HAE = MSL + separation.
  public var geoidSeparation: Double?
  /// Speed over ground, m/s.
  public var speed: Double?
  /// Course over ground, degrees true `0..<360`.
  public var course: Double?
  /// Climb (vertical speed), m/s, positive up.
  public var climb: Double?
  /// Estimated horizontal position error, metres (gpsd `eph`).
  public var eph: Double?
  /// Estimated vertical position error, metres (gpsd `epv`).
  public var epv: Double?
  /// Horizontal dilution of precision (NMEA GSA/GGA), dimensionless, 0.5...99.9 in practice.
  public var hdop: Double?
  /// Vertical dilution of precision (NMEA GSA), dimensionless.
  public var vdop: Double?
  /// Position (3D) dilution of precision (NMEA GSA), dimensionless.
  public var pdop: Double?
  /// Satellites used in the solution.
  public var satellitesUsed: Int?
  /// Fix mode: only ``FixMode/fix2D`` and ``FixMode/fix3D`` are recorded.
  public var mode: FixMode
  /// GGA fix quality, when known.
  public var quality: FixQuality?
  /// The backend URI that produced the fix (``Provenance/backend``).
  public var backend: String
  /// The device or file path (``Provenance/source``).
  public var source: String?
  /// Whether the fix was simulated or replayed rather than measured live.
  public var isSimulated: Bool

  /// 0001-01-01T00:00:00Z in milliseconds since the Unix epoch: the earliest time a stored fix
  /// is read back with.
  public static let earliestTime: Int64 = -62_135_596_800_000
  /// 9999-12-31T23:59:59.999Z in milliseconds since the Unix epoch: the latest.
  public static let latestTime: Int64 = 253_402_300_799_999

  /// `end - start` in milliseconds, saturating at the bounds of `Int64` instead of trapping.
  public static func milliseconds(from start: Int64, to end: Int64) -> Int64 {
    let (difference, overflow) = end.subtractingReportingOverflow(start)
    guard overflow else { return difference }
    return end > start ? .max : .min
  }

  /// Creates a point from its fields (tests, the benchmark, and the store's cursor).
  public init(
    time: Int64, coordinate: Coordinate, mode: FixMode = .fix3D, backend: String = "", source: String? = nil,
    isSimulated: Bool = false
  ) {
    self.time = time
    self.coordinate = coordinate
    self.mode = mode
    self.backend = backend
    self.source = source
    self.isSimulated = isSimulated
  }

  /// What the store keeps of `location`; `nil` when it has nothing to record: no UTC date-time
  /// (``Fix/time`` unknown), no valid position, or a mode below 2D.
  public init?(_ location: Location) {
    let fix = location.fix
    guard let time = fix.time, fix.mode.hasPosition, let coordinate = fix.coordinate, coordinate.isValid else {
      return nil
    }
    self.init(
      time: time, coordinate: coordinate, mode: fix.mode, backend: location.provenance.backend,
      source: location.provenance.source, isSimulated: location.provenance.isSimulated)
    altitudeMSL = fix.altitudeMSL
    geoidSeparation = fix.geoidSeparation
    speed = fix.speedOverGround
    course = fix.courseOverGround
    climb = fix.climb
    eph = fix.eph
    epv = fix.epv
    hdop = fix.hdop
    vdop = fix.vdop
    pdop = fix.pdop
    satellitesUsed = fix.satellitesUsed
    quality = fix.quality
  }

  /// Height above the WGS84 ellipsoid, metres: MSL plus the geoid separation, when both are known.
  public var altitudeHAE: Double? {
    guard let altitudeMSL, let geoidSeparation else { return nil }
    return altitudeMSL + geoidSeparation
  }
}

/// Summary of the stored track (`locationctl track stats`).
public struct TrackStatistics: Sendable, Hashable {
  /// Stored points in the range.
  public var points: Int
  /// Length of the track in metres: the sum of WGS84 geodesic distances between consecutive
  /// points in time order (``WGS84Geodesic/distance(_:_:)``), gaps included.
  public var distance: Double
  /// Time of the first point, milliseconds since the Unix epoch; `nil` when empty.
  public var firstTime: Int64?
  /// Time of the last point, milliseconds since the Unix epoch; `nil` when empty.
  public var lastTime: Int64?
  /// Bytes the store occupies on disk (database plus its write-ahead log).
  public var bytes: Int64
  /// Messages waiting in the outbox.
  public var outgoing: Int
  /// Messages the outbox dropped at its bound since the store was created
  /// (``TrackStore/outgoingDropped``).
  public var outgoingDropped: Int = 0

  /// No point, no byte, no message: what `track stats` counts from when there is no track store
  /// (`track off`) and only the MQTT queue's file is there.
  public static let empty = TrackStatistics(
    points: 0, distance: 0, firstTime: nil, lastTime: nil, bytes: 0, outgoing: 0)

  /// `lastTime - firstTime` in milliseconds (0 when empty or a single point).
  public var duration: Int64 {
    guard let firstTime, let lastTime else { return 0 }
    return TrackPoint.milliseconds(from: firstTime, to: lastTime)
  }
}

/// One message waiting in the durable outbox (store-and-forward for a broker).
public struct OutgoingMessage: Sendable, Hashable {
  /// Position in the outbox: strictly increasing, never reused (SQLite AUTOINCREMENT).
  public var id: Int64
  /// Where it goes (an MQTT topic name).
  public var topic: String
  /// The message body, as given.
  public var payload: [UInt8]
  /// MQTT quality of service, `0...2`.
  public var qos: Int
  /// Whether the broker should retain it.
  public var retain: Bool
  /// When it was queued (milliseconds since the Unix epoch, as the caller's clock said); `nil`
  /// when the caller gave none.
  public var enqueuedAt: Int64?

  /// Creates a message (the outbox creates them when read; ``TrackStore/adoptOutgoing(_:through:)``
  /// takes them).
  public init(id: Int64, topic: String, payload: [UInt8], qos: Int, retain: Bool, enqueuedAt: Int64? = nil) {
    self.id = id
    self.topic = topic
    self.payload = payload
    self.qos = qos
    self.retain = retain
    self.enqueuedAt = enqueuedAt
  }
}
