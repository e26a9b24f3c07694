import LocationCore
import LocationModel

/// Why a `gpsd://` URI was rejected.
public enum GPSDURIError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The URI does not start with `gpsd://`.
  case notGPSD(String)
  /// The host part is empty.
  case missingHost(String)
  /// The host is neither a name or IPv4 address (letters, digits, `-`, `.`, `_`) nor an IPv6
  /// address in brackets (hexadecimal digits, `:`, `.`, and a `%` zone of letters and digits).
  case invalidHost(String)
  /// The port is not a number in `1...65535`.
  case invalidPort(String)
  /// The device part is not an absolute path (`gpsd://host:port/dev/ttyACM0`).
  case invalidDevice(String)
  /// A query parameter other than `rollover-floor=YYYY-MM-DD|none`.
  case invalidParameter(String)
  /// A query parameter given more than once.
  case repeatedParameter(String)

  /// A one-line explanation with the expected form.
  public var description: String {
    let form = "expected gpsd://HOST[:PORT][/DEVICE], e.g. gpsd://localhost:2947/dev/ttyACM0"
    switch self {
    case .notGPSD(let uri): return "\"\(uri)\" is not a gpsd URI; \(form)"
    case .missingHost(let uri): return "\"\(uri)\" has no host; \(form)"
    case .invalidHost(let host):
      return "host \"\(host)\" is not a host name, an IPv4 address or an IPv6 address in brackets; \(form)"
    case .invalidPort(let port): return "port \"\(port)\" is not a number in 1...65535; \(form)"
    case .invalidDevice(let device): return "device \"\(device)\" is not an absolute path; \(form)"
    case .invalidParameter(let parameter):
      return "parameter \"\(parameter)\" is not rollover-floor=YYYY-MM-DD (1980 to 2079) or rollover-floor=none; \(form)"
    case .repeatedParameter(let name):
      return "parameter \"\(name)\" is given more than once: give it once; \(form)"
    }
  }
}

/// Where gpsd listens and, optionally, the one device to watch.
public struct GPSDEndpoint: Sendable, Hashable {
  /// Host name or address (`localhost`, `192.0.2.7`, `[::1]` is written without brackets here).
  public var host: String
  /// TCP port, 2947 by default.
  public var port: UInt16
  /// Device path to watch (`/dev/ttyACM0`); `nil` watches every device gpsd serves.
  public var device: String?

  /// gpsd's IANA port.
  public static let defaultPort: UInt16 = 2947

  /// Parses `gpsd://HOST[:PORT][/DEVICE]`; `gpsd://` alone and `gpsd` mean `localhost:2947`.
  ///
  /// IPv6 hosts go in brackets: `gpsd://[::1]:2947`. The device is everything after the first
  /// `/` following the authority, kept absolute (`gpsd://localhost/dev/ttyUSB0` -> `/dev/ttyUSB0`).
  ///
  /// - Throws: ``GPSDURIError``.
  public init(uri fullURI: String) throws(GPSDURIError) {
    var uri = fullURI
    var floor: Int?? = nil
    if let question = fullURI.firstIndex(of: "?") {
      uri = String(fullURI[..<question])
      for parameter in fullURI[fullURI.index(after: question)...].split(separator: "&") {
        let pair = parameter.split(separator: "=", maxSplits: 1).map(String.init)
        guard pair.count == 2, pair[0] == "rollover-floor" else { throw .invalidParameter(String(parameter)) }
        guard floor == nil else { throw .repeatedParameter(pair[0]) }
        if pair[1] == "none" {
          floor = .some(nil)
        } else if let day = CivilDate.days(iso: pair[1]) {
          floor = .some(day)
        } else {
          throw .invalidParameter(String(parameter))
        }
      }
    }
    try self.init(baseURI: uri)
    if let floor { rolloverFloor = floor }
  }

  private init(baseURI uri: String) throws(GPSDURIError) {
    if uri == "gpsd" || uri == "gpsd://" {
      self.init(host: "localhost", port: Self.defaultPort, device: nil)
      return
    }
    guard uri.hasPrefix("gpsd://") else { throw .notGPSD(uri) }
    let rest = uri.dropFirst("gpsd://".count)
    let authority: Substring
    let device: String?
    if let slash = rest.firstIndex(of: "/") {
      authority = rest[..<slash]
      let path = String(rest[slash...])
      device = path == "/" ? nil : path
    } else {
      authority = rest
      device = nil
    }
    var host: Substring
    var portText: Substring?
    if authority.hasPrefix("[") {
      guard let close = authority.firstIndex(of: "]") else { throw .missingHost(uri) }
      host = authority[authority.index(after: authority.startIndex)..<close]
      guard host.isEmpty || HostSyntax.isIPv6Literal(host) else { throw .invalidHost(String(host)) }
      let after = authority[authority.index(after: close)...]
      if after.hasPrefix(":") {
        portText = after.dropFirst()
      } else if !after.isEmpty {
        throw .invalidPort(String(after))
      }
    } else if let colon = authority.lastIndex(of: ":") {
      host = authority[..<colon]
      portText = authority[authority.index(after: colon)...]
    } else {
      host = authority
    }
    // A DNS name is at most 253 characters (RFC 1035 section 2.3.4).
    if host.utf8.count > 253 || (!authority.hasPrefix("[") && !host.isEmpty && !HostSyntax.isHostName(host)) {
      throw .invalidHost(String(host.prefix(64)))
    }
    if host.isEmpty { host = "localhost" }
    var port = Self.defaultPort
    if let portText {
      guard let value = DecimalText.wholeNumber(portText, as: Int.self), (1...65535).contains(value) else {
        throw .invalidPort(String(portText))
      }
      port = UInt16(value)
    }
    // A device is matched against the paths gpsd reports; control characters or ".." segments
    // never name one and would only reach logs and gpsd's command line.
    if let device,
      device.count < 2 || device.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        || device.split(separator: "/").contains("..")
    {
      throw .invalidDevice(device)
    }
    self.init(host: String(host), port: port, device: device)
  }

  /// Creates an endpoint from its parts.
  public init(host: String, port: UInt16 = GPSDEndpoint.defaultPort, device: String? = nil) {
    self.host = host
    self.port = port
    self.device = device
  }

  /// GPS week-rollover floor for fixes from this gpsd, days since 1970-01-01: a fix dated before
  /// it moves forward in 1024-week steps until it is not, and its provenance says so
  /// (`rolloverWeeks`). URI parameter `rollover-floor=YYYY-MM-DD`, or `none` to keep gpsd's
  /// dates. Default ``liveRolloverFloor``.
  public var rolloverFloor: Int? = GPSDEndpoint.liveRolloverFloor

  /// The default floor of live sources: 2019-04-07, the last GPS week rollover. A live receiver
  /// reports the present, so a date before the last rollover can only come from firmware whose
  /// week counter wrapped (gpsd 3.22 itself moves dates before 2017 forward once, by its build's
  /// leap-second count, which this floor extends to any earlier era).
  public static let liveRolloverFloor: Int? = CivilDate.days(year: 2019, month: 4, day: 7)

  /// The canonical URI, `gpsd://host:port[/device]`.
  public var uri: String {
    let shownHost = host.contains(":") ? "[\(host)]" : host
    return "gpsd://\(shownHost):\(port)" + (device ?? "")
  }
}
