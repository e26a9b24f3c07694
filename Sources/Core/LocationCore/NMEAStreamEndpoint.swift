import LocationModel
import SystemIO

/// Where a live NMEA 0183 stream comes from, spelled as gpsd spells its sources.
///
/// - `serial:PATH[?baud=auto|4800|9600|19200|38400|57600|115200|230400|460800|921600]`, or a bare
///   `/dev/...` path: a serial device (`/dev/ttyUSB0`, `/dev/serial/by-id/...`), `baud=auto` by
///   default.
/// - `tcp://HOST:PORT`: NMEA over TCP (a multiplexer, a phone sharing its receiver).
/// - `udp://ADDR:PORT`: NMEA datagrams received on that local address.
///
/// Every form takes `rollover-floor=YYYY-MM-DD|none` too (default 2019-04-07, as for gpsd).
public struct NMEAStreamEndpoint: Sendable, Hashable {
  /// The kind of source.
  public enum Kind: Sendable, Hashable {
    /// A serial device at `path`; `baud` `nil` means `auto`.
    case serial(path: String, baud: Int?)
    /// A TCP server to connect to.
    case tcp(host: String, port: UInt16)
    /// A local UDP address to receive datagrams on.
    case udp(host: String, port: UInt16)
  }

  /// The source.
  public var kind: Kind
  /// GPS week-rollover floor, days since 1970-01-01 (``NMEADecoder``'s); `nil` keeps dates as sent.
  public var rolloverFloor: Int? = CivilDate.days(year: 2019, month: 4, day: 7)

  /// Creates an endpoint.
  public init(kind: Kind, rolloverFloor: Int? = CivilDate.days(year: 2019, month: 4, day: 7)) {
    self.kind = kind
    self.rolloverFloor = rolloverFloor
  }

  /// Whether `uri` names a stream source (`serial:`, `/dev/...`, `tcp://`, `udp://`), however
  /// malformed the rest.
  public static func names(_ uri: String) -> Bool {
    uri.hasPrefix("serial:") || uri.hasPrefix("/dev/") || uri.hasPrefix("tcp://")
      || uri.hasPrefix("udp://")
  }

  /// What a source is called in status details and provenance: the device path, or
  /// `tcp://HOST:PORT`, `udp://ADDR:PORT`.
  public var sourceName: String {
    switch kind {
    case .serial(let path, _): return path
    case .tcp(let host, let port): return "tcp://\(Self.shown(host)):\(port)"
    case .udp(let host, let port): return "udp://\(Self.shown(host)):\(port)"
    }
  }

  private static func shown(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

  /// Parses a stream URI.
  ///
  /// - Throws: ``BackendURIError`` naming the bad part: a missing path or port, a port outside
  ///   1...65535, a baud rate not in ``SerialPort/standardRates``, an unknown parameter.
  public init(uri: String) throws(BackendURIError) {
    let text = uri.hasPrefix("/dev/") ? "serial:" + uri : uri
    let scheme: String
    if text.hasPrefix("serial:") {
      scheme = "serial"
    } else if text.hasPrefix("tcp://") {
      scheme = "tcp"
    } else if text.hasPrefix("udp://") {
      scheme = "udp"
    } else {
      throw .wrongScheme(expected: "serial:, tcp:// or udp://", uri: uri)
    }
    let allowed = scheme == "serial" ? ["baud", "rollover-floor"] : ["rollover-floor"]
    let parts = try BackendURIParts.parse(text, scheme: scheme, allowed: allowed)
    guard let path = parts.path else { throw .missingPath(uri: uri) }
    var baud: Int?
    for (key, value) in parts.parameters {
      switch key {
      case "baud":
        if value == "auto" { continue }
        guard let rate = DecimalText.wholeNumber(value, as: Int.self), SerialPort.standardRates.contains(rate) else {
          throw .invalidValue(
            key: key, value: value,
            expected: "auto or one of "
              + SerialPort.standardRates.map(String.init).joined(separator: ", "))
        }
        baud = rate
      default:  // rollover-floor
        if value == "none" {
          rolloverFloor = nil
        } else {
          guard let day = CivilDate.days(iso: value) else {
            throw .invalidValue(
              key: key, value: value, expected: "a date YYYY-MM-DD (1980 to 2079) or none")
          }
          rolloverFloor = day
        }
      }
    }
    if scheme == "serial" {
      kind = .serial(path: path, baud: baud)
      return
    }
    // HOST:PORT, HOST an address or name, IPv6 in brackets.
    guard let colon = path.lastIndex(of: ":") else {
      throw .invalidValue(key: "address", value: path, expected: "HOST:PORT")
    }
    var host = String(path[..<colon])
    let bracketed = host.hasPrefix("[") && host.hasSuffix("]")
    if bracketed { host = String(host.dropFirst().dropLast()) }
    guard bracketed || host.contains(":") ? HostSyntax.isIPv6Literal(host) : HostSyntax.isHostName(host) else {
      throw .invalidValue(
        key: "address", value: path,
        expected: "HOST:PORT, HOST a name, an IPv4 address such as 10.0.0.5 or an IPv6 address in brackets")
    }
    guard !host.isEmpty, let port = DecimalText.wholeNumber(path[path.index(after: colon)...], as: UInt16.self), port > 0 else {
      throw .invalidValue(
        key: "address", value: path, expected: "HOST:PORT with a port in 1...65535")
    }
    kind = scheme == "tcp" ? .tcp(host: host, port: port) : .udp(host: host, port: port)
  }
}
