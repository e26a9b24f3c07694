import CGPS
import Glibc
import LocationModel
import NMEA

// The only file of locationd that imports CGPS (libgps). Everything leaving it is a Sendable copy.

/// One gpsd TPV report ("time-position-velocity"), copied out of libgps's `gps_data_t`.
///
/// Units as in the gpsd JSON protocol: degrees (WGS84), metres, m/s, degrees true, seconds.
/// Every field gpsd did not send (NaN or absent in libgps) is `nil`.
public struct GPSDTPV: Sendable, Hashable {
  /// The device that produced the report (`/dev/ttyACM0`), when gpsd named it.
  public var device: String?
  /// gpsd `mode`: 0 not seen, 1 no fix, 2 2D, 3 3D.
  public var mode: Int
  /// gpsd `status` (0 unknown, 1 normal, 2 DGPS, 3 RTK fixed, 4 RTK float, 5 DR, 6 GNSS+DR,
  /// 7 time only, 8 simulated, 9 PPS); `nil` when not sent.
  public var status: Int?
  /// UTC time of the epoch, milliseconds since 1970; `nil` when not sent.
  public var time: Int64?
  /// Latitude, degrees north.
  public var latitude: Double?
  /// Longitude, degrees east.
  public var longitude: Double?
  /// Altitude above mean sea level, metres (`altMSL`).
  public var altitudeMSL: Double?
  /// Height above the WGS84 ellipsoid, metres (`altHAE`).
  public var altitudeHAE: Double?
  /// Geoid separation, metres (`geoidSep`).
  public var geoidSeparation: Double?
  /// Speed over ground, m/s (`speed`).
  public var speed: Double?
  /// Course over ground, degrees true (`track`).
  public var track: Double?
  /// Vertical speed, m/s, up positive (`climb`).
  public var climb: Double?
  /// Magnetic variation, degrees, east positive (`magvar`).
  public var magneticVariation: Double?
  /// Estimated time error, seconds (`ept`).
  public var ept: Double?
  /// Estimated longitude error, metres (`epx`).
  public var epx: Double?
  /// Estimated latitude error, metres (`epy`).
  public var epy: Double?
  /// Estimated vertical error, metres (`epv`).
  public var epv: Double?
  /// Estimated horizontal position error, metres (`eph`).
  public var eph: Double?
  /// Estimated spherical (3D) position error, metres (`sep`).
  public var sep: Double?
  /// Estimated speed error, m/s (`eps`).
  public var eps: Double?
  /// Estimated course error, degrees (`epd`).
  public var epd: Double?
  /// Estimated climb error, m/s (`epc`).
  public var epc: Double?
  /// Age of differential corrections, seconds (`dgpsAge`).
  public var dgpsAge: Double?
  /// Differential reference station (`dgpsSta`).
  public var dgpsStation: Int?

  /// Creates a report; only the mode is required.
  public init(mode: Int) { self.mode = mode }
}

/// One satellite of a gpsd SKY report.
public struct GPSDSatellite: Sendable, Hashable {
  /// NMEA-style PRN (`PRN`).
  public var prn: Int
  /// u-blox style constellation number (`gnssid`): 0 GPS, 1 SBAS, 2 Galileo, 3 BeiDou, 4 IMES,
  /// 5 QZSS, 6 GLONASS, 7 NavIC.
  public var gnssID: Int
  /// Elevation, degrees; `nil` when unknown.
  public var elevation: Double?
  /// Azimuth, degrees true; `nil` when unknown.
  public var azimuth: Double?
  /// Signal strength, dB-Hz (`ss`); `nil` when not tracked.
  public var snr: Double?
  /// Whether the satellite was used in the solution.
  public var used: Bool

  /// Creates a satellite entry.
  public init(prn: Int, gnssID: Int, elevation: Double?, azimuth: Double?, snr: Double?, used: Bool)
  {
    self.prn = prn
    self.gnssID = gnssID
    self.elevation = elevation
    self.azimuth = azimuth
    self.snr = snr
    self.used = used
  }
}

/// A gpsd SKY report: dilutions of precision and the satellites in view.
public struct GPSDSky: Sendable, Hashable {
  /// The device that produced the report, when named.
  public var device: String?
  /// Horizontal, vertical and position dilution of precision; `nil` when not sent.
  public var hdop: Double?
  /// Vertical dilution of precision.
  public var vdop: Double?
  /// Position (3D) dilution of precision.
  public var pdop: Double?
  /// Satellites used in the solution (`uSat`), when known.
  public var satellitesUsed: Int?
  /// Satellites in view.
  public var satellites: [GPSDSatellite]

  /// Creates a report.
  public init(satellites: [GPSDSatellite] = []) { self.satellites = satellites }
}

/// A gpsd GST report: pseudorange noise statistics, one sigma, metres (NMEA GST).
public struct GPSDGST: Sendable, Hashable {
  /// UTC time of the statistics, milliseconds since 1970; `nil` when not sent.
  public var time: Int64?
  /// The estimates, in the domain model's shape.
  public var estimates: ErrorEstimates

  /// Creates a report.
  public init(time: Int64?, estimates: ErrorEstimates) {
    self.time = time
    self.estimates = estimates
  }
}

/// What one `gps_read` produced.
public enum GPSDReport: Sendable, Hashable {
  /// A TPV object.
  case tpv(GPSDTPV)
  /// A SKY object.
  case sky(GPSDSky)
  /// A GST object.
  case gst(GPSDGST)
  /// A DEVICE object: a device was activated (`activated` true) or closed.
  case device(path: String, activated: Bool)
  /// An ERROR object from gpsd.
  case error(String)
  /// Anything else (VERSION, WATCH, DEVICES, PPS, ...), or a partial read.
  case other
}

/// Errors of the libgps layer, with libgps's own message (`gps_errstr`).
public enum GPSDSessionError: Error, Sendable, Hashable, CustomStringConvertible {
  /// `gps_open` failed: gpsd is not running, refused, or the host is unknown.
  case openFailed(host: String, port: String, code: Int32, message: String)
  /// `gps_stream` (the WATCH command) could not be sent.
  case watchFailed(code: Int32, message: String)
  /// `gps_read` returned -1: gpsd closed the connection or the socket failed.
  case connectionLost(code: Int32, message: String)
  /// The libgps data structure could not be allocated.
  case outOfMemory
  /// libgps could not be loaded (it is loaded on first use); the text says what to install.
  case libraryUnavailable(String)

  /// A one-line explanation.
  public var description: String {
    switch self {
    case .openFailed(let host, let port, let code, let message):
      return "cannot connect to gpsd at \(host):\(port): \(message) (\(code))"
    case .watchFailed(let code, let message): return "gpsd WATCH failed: \(message) (\(code))"
    case .connectionLost(let code, let message): return "gpsd connection lost: \(message) (\(code))"
    case .outOfMemory: return "cannot allocate the libgps data structure"
    case .libraryUnavailable(let reason): return reason
    }
  }
}

/// One connection to gpsd through libgps: `gps_open`, `gps_stream`, `gps_waiting`, `gps_read`,
/// `gps_close`.
///
/// Not thread-safe: use it from one thread (``GPSDBackend`` runs it on a dedicated thread, never
/// on the Swift concurrency pool, since every call may block). `close()` must be called; it is
/// idempotent. The 24 KB `gps_data_t` lives on the heap.
final class GPSDSession {
  private let data: UnsafeMutablePointer<gps_data_t>
  private var isOpen: Bool

  /// Connects to gpsd at `host:port` (blocking `connect`).
  ///
  /// - Throws: ``GPSDSessionError/openFailed(host:port:code:message:)``.
  init(host: String, port: UInt16) throws(GPSDSessionError) {
    if let reason = locationd_gps_load() { throw .libraryUnavailable(String(cString: reason)) }
    guard let data = locationd_gps_alloc() else { throw .outOfMemory }
    // Do the fallible call before storing anything: a throwing init whose stored properties are
    // all set still runs deinit, and gps_close after a failed gps_open is a double free.
    let result = locationd_gps_open(host, String(port), data)
    if result != 0 {
      let code = errno
      locationd_gps_free(data)
      throw .openFailed(host: host, port: String(port), code: code, message: Self.errorText(code))
    }
    // libgps reads with a blocking recv() when it holds a partial line; bound that wait so a
    // stalled gpsd turns into a connection loss (and a reconnect) instead of a hung thread.
    var timeout = timeval(tv_sec: 2, tv_usec: 0)
    _ = setsockopt(
      data.pointee.gps_fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    self.data = data
    self.isOpen = true
  }

  deinit {
    close()
    locationd_gps_free(data)
  }

  /// The socket descriptor, for `poll`.
  var fileDescriptor: Int32 { data.pointee.gps_fd }

  /// Sends `?WATCH={"enable":true,"json":true}` (optionally for one device only).
  ///
  /// - Throws: ``GPSDSessionError/watchFailed(code:message:)``.
  func watch(device: String?) throws(GPSDSessionError) {
    var flags = UInt32(WATCH_ENABLE | WATCH_JSON)
    let result: Int32
    if let device {
      flags |= UInt32(WATCH_DEVICE)
      result = device.withCString {
        locationd_gps_stream(data, flags, UnsafeMutableRawPointer(mutating: $0))
      }
    } else {
      result = locationd_gps_stream(data, flags, nil)
    }
    if result != 0 {
      let code = errno
      throw .watchFailed(code: code, message: Self.errorText(code))
    }
  }

  /// Sends `?WATCH={"enable":false}`: gpsd may then close the device and power the receiver down.
  func unwatch() {
    guard isOpen else { return }
    _ = locationd_gps_stream(data, UInt32(WATCH_DISABLE), nil)
  }

  /// Whether libgps already holds unread input (a complete or partial line), without waiting.
  var hasBufferedInput: Bool { isOpen && locationd_gps_waiting(data, 0) }

  /// Reads and decodes one report. Call when ``fileDescriptor`` is readable or
  /// ``hasBufferedInput`` is true, otherwise it blocks.
  ///
  /// - Throws: ``GPSDSessionError/connectionLost(code:message:)`` when gpsd closed the socket.
  func read() throws(GPSDSessionError) -> GPSDReport {
    data.pointee.set = 0
    var message = [CChar](repeating: 0, count: 256)
    let result = message.withUnsafeMutableBufferPointer { buffer in
      locationd_gps_read_message(data, buffer.baseAddress, Int32(buffer.count))
    }
    if result < 0 {
      let code = errno
      throw .connectionLost(
        code: code, message: result == -1 && code == 0 ? "end of stream" : Self.errorText(code))
    }
    if result == 0 { return .other }
    let report = Self.report(from: data)
    if case .other = report, data.pointee.set & UInt64(DEVICE_SET) == 0 {
      // libgps 3.22 cannot parse the DEVICE object gpsd 3.22 sends for a device it closed
      // ("activated":0, a number where it expects a time string): read it from the line.
      let length = message.firstIndex(of: 0) ?? message.count
      let line = String(decoding: message[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
      if let closed = Self.closedDevice(line) { return .device(path: closed, activated: false) }
    }
    return report
  }

  /// The path of a DEVICE object that announces a closed device (`"activated":0`), from the
  /// start of its JSON line; `nil` for any other line.
  static func closedDevice(_ line: String) -> String? {
    guard line.hasPrefix("{\"class\":\"DEVICE\""),
      line.contains("\"activated\":0,") || line.contains("\"activated\":0}"),
      let start = line.firstRange(of: "\"path\":\"")
    else { return nil }
    let rest = line[start.upperBound...]
    guard let end = rest.firstIndex(of: "\"") else { return nil }
    let path = String(rest[..<end])
    return path.isEmpty ? nil : path
  }

  /// Closes the connection (`gps_close`); idempotent.
  func close() {
    guard isOpen else { return }
    isOpen = false
    _ = locationd_gps_close(data)
  }

  // MARK: Copying out of gps_data_t

  static func report(from data: UnsafeMutablePointer<gps_data_t>) -> GPSDReport {
    let set = data.pointee.set
    if set & UInt64(ERROR_SET) != 0 {
      return .error(String(cString: locationd_gps_error_text(data)))
    }
    if set & UInt64(GST_SET) != 0, let gst = locationd_gps_gst(data)?.pointee {
      var estimates = ErrorEstimates()
      estimates.rangeRMS = finite(gst.rms_deviation)
      estimates.semiMajor = finite(gst.smajor_deviation)
      estimates.semiMinor = finite(gst.sminor_deviation)
      estimates.orientation = finite(gst.smajor_orientation)
      estimates.latitude = finite(gst.lat_err_deviation)
      estimates.longitude = finite(gst.lon_err_deviation)
      estimates.altitude = finite(gst.alt_err_deviation)
      return .gst(GPSDGST(time: milliseconds(gst.utctime), estimates: estimates))
    }
    if set & UInt64(SATELLITE_SET) != 0 {
      var sky = GPSDSky()
      sky.device = devicePath(data)
      let dop = data.pointee.dop
      sky.hdop = finite(dop.hdop)
      sky.vdop = finite(dop.vdop)
      sky.pdop = finite(dop.pdop)
      let used = data.pointee.satellites_used
      sky.satellitesUsed = used >= 0 ? Int(used) : nil
      let visible = max(0, min(Int(data.pointee.satellites_visible), Int(MAXCHANNELS)))
      for index in 0..<visible {
        guard let satellite = locationd_gps_satellite(data, Int32(index))?.pointee,
          satellite.PRN > 0
        else { continue }
        sky.satellites.append(
          GPSDSatellite(
            prn: Int(satellite.PRN), gnssID: Int(satellite.gnssid),
            elevation: finite(satellite.elevation), azimuth: finite(satellite.azimuth),
            snr: satellite.ss >= 0 ? finite(satellite.ss) : nil, used: satellite.used))
      }
      return .sky(sky)
    }
    if set & UInt64(DEVICE_SET) != 0 {
      let activated = data.pointee.dev.activated
      return .device(
        path: devicePath(data) ?? "", activated: activated.tv_sec != 0 || activated.tv_nsec != 0)
    }
    if set & UInt64(STATUS_SET) != 0 {
      let fix = data.pointee.fix
      var tpv = GPSDTPV(mode: Int(fix.mode))
      tpv.device = devicePath(data)
      tpv.status = Int(fix.status)
      tpv.time = set & UInt64(TIME_SET) != 0 ? milliseconds(fix.time) : nil
      if set & UInt64(LATLON_SET) != 0 {
        tpv.latitude = finite(fix.latitude)
        tpv.longitude = finite(fix.longitude)
      }
      tpv.altitudeMSL = finite(fix.altMSL)
      tpv.altitudeHAE = finite(fix.altHAE)
      tpv.geoidSeparation = finite(fix.geoid_sep)
      tpv.speed = finite(fix.speed)
      tpv.track = finite(fix.track)
      tpv.climb = finite(fix.climb)
      tpv.magneticVariation = finite(fix.magnetic_var)
      tpv.ept = finite(fix.ept)
      tpv.epx = finite(fix.epx)
      tpv.epy = finite(fix.epy)
      tpv.epv = finite(fix.epv)
      tpv.eph = finite(fix.eph)
      tpv.sep = finite(fix.sep)
      tpv.eps = finite(fix.eps)
      tpv.epd = finite(fix.epd)
      tpv.epc = finite(fix.epc)
      tpv.dgpsAge = fix.dgps_age >= 0 ? finite(fix.dgps_age) : nil
      tpv.dgpsStation = fix.dgps_station >= 0 ? Int(fix.dgps_station) : nil
      return .tpv(tpv)
    }
    return .other
  }

  private static func finite(_ value: Double) -> Double? { value.isFinite ? value : nil }

  private static func milliseconds(_ time: timespec) -> Int64? {
    guard time.tv_sec != 0 || time.tv_nsec != 0 else { return nil }
    return Int64(time.tv_sec) * 1000 + (Int64(time.tv_nsec) + 500_000) / 1_000_000
  }

  private static func devicePath(_ data: UnsafeMutablePointer<gps_data_t>) -> String? {
    guard let path = locationd_gps_device_path(data) else { return nil }
    let text = String(cString: path)
    return text.isEmpty ? nil : text
  }

  static func errorText(_ code: Int32) -> String {
    guard let text = locationd_gps_errstr(code) else { return "error \(code)" }
    return String(cString: text)
  }
}
