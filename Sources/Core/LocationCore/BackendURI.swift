import LocationModel
/// Why a backend URI (`replay:PATH?speed=10`, `simulate:route.gpx?rate=5`) was refused.
public enum BackendURIError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The URI does not start with the scheme the backend expects (`replay`, `simulate`).
  case wrongScheme(expected: String, uri: String)
  /// The scheme needs a path (`replay:` with nothing after it).
  case missingPath(uri: String)
  /// A query item is not `key=value`.
  case malformedParameter(String)
  /// A query key the backend does not know; `allowed` lists the ones it does.
  case unknownParameter(String, allowed: [String])
  /// A query value out of range or of the wrong type; `expected` says what is accepted.
  case invalidValue(key: String, value: String, expected: String)
  /// A query key given more than once (`speed=1&speed=2`): which one was meant is unclear.
  case repeatedParameter(String)

  /// A one-line message for logs and error replies.
  public var description: String {
    switch self {
    case .wrongScheme(let expected, let uri):
      return "backend URI '\(uri)' does not start with '\(expected)'"
    case .missingPath(let uri):
      // Only a replay reads standard input; a receiver needs its device.
      return uri.hasPrefix("replay:")
        ? "backend URI '\(uri)' names no file (use '-' for standard input)"
        : "backend URI '\(uri)' names no device: give its path, such as serial:/dev/ttyUSB0"
    case .malformedParameter(let item):
      return "query item '\(item)' is not key=value"
    case .unknownParameter(let key, let allowed):
      return "unknown parameter '\(key)' (known: \(allowed.joined(separator: ", ")))"
    case .invalidValue(let key, let value, let expected):
      return "invalid value '\(value)' for '\(key)': expected \(expected)"
    case .repeatedParameter(let key):
      return
        "parameter '\(key)' is given more than once: give it once (lists such as outage and mode take commas)"
    }
  }
}

/// Splits `scheme[:path][?k=v&k=v]` into its parts; shared by the backends' URI parsers.
struct BackendURIParts {
  var path: String?
  var parameters: [(key: String, value: String)]

  /// Parses `uri`, which must start with `scheme` followed by end, `:` or `?`.
  static func parse(_ uri: String, scheme: String, allowed: [String]) throws(BackendURIError)
    -> BackendURIParts
  {
    guard uri.hasPrefix(scheme) else { throw .wrongScheme(expected: scheme, uri: uri) }
    var rest = Substring(uri.dropFirst(scheme.count))
    var path: String?
    if rest.hasPrefix("://") {
      rest = rest.dropFirst(3)
    } else if rest.hasPrefix(":") {
      rest = rest.dropFirst()
    } else if !(rest.isEmpty || rest.hasPrefix("?")) {
      throw .wrongScheme(expected: scheme, uri: uri)
    }
    let query: Substring?
    if let mark = rest.firstIndex(of: "?") {
      query = rest[rest.index(after: mark)...]
      rest = rest[..<mark]
    } else {
      query = nil
    }
    if !rest.isEmpty { path = String(rest) }
    var parameters: [(key: String, value: String)] = []
    for item in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
      guard let equals = item.firstIndex(of: "=") else { throw .malformedParameter(String(item)) }
      let key = String(item[..<equals])
      let value = String(item[item.index(after: equals)...])
      guard allowed.contains(key) else { throw .unknownParameter(key, allowed: allowed) }
      guard !parameters.contains(where: { $0.key == key }) else { throw .repeatedParameter(key) }
      parameters.append((key, value))
    }
    return BackendURIParts(path: path, parameters: parameters)
  }

  static func bool(_ value: String, key: String) throws(BackendURIError) -> Bool {
    switch value.lowercased() {
    case "true", "1", "yes", "on": return true
    case "false", "0", "no", "off": return false
    default: throw .invalidValue(key: key, value: value, expected: "true or false")
    }
  }

  static func double(_ value: String, key: String, range: ClosedRange<Double>, expected: String)
    throws(BackendURIError)
    -> Double
  {
    guard let number = DecimalText.number(value), range.contains(number) else {
      throw .invalidValue(key: key, value: value, expected: expected)
    }
    return number
  }
}

/// The syntax of a host in a backend URI (`tcp://HOST:PORT`, `udp://ADDR:PORT`,
/// `gpsd://HOST:PORT`), checked without a name lookup.
public enum HostSyntax {
  /// Whether `host` can name a host: a DNS name of letters, digits, `-`, `_` and `.` (at most 253
  /// bytes, RFC 1035 section 2.3.4) whose last label is not all digits (no top-level domain is:
  /// RFC 3696 section 2), or else a dotted IPv4 address of four decimal octets 0-255 (so
  /// `1.2.3.4.5` and `10.0.0.256` are refused, where a resolver would take them as names and
  /// fail only when the backend starts), and an octet with a leading zero (`010`, which the C
  /// library reads as octal). IPv6 literals are checked by ``isIPv6Literal(_:)``.
  public static func isHostName<S: StringProtocol>(_ host: S) -> Bool {
    guard !host.isEmpty, host.utf8.count <= 253,
      host.utf8.allSatisfy({ b in
        (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) || b == 0x2D || b == 0x2E || b == 0x5F
      })
    else { return false }
    let labels = host.split(separator: ".", omittingEmptySubsequences: false)
    guard let last = labels.last(where: { !$0.isEmpty }) else { return false }
    guard last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
      // A name: no empty label inside it (a trailing dot, the root, is allowed), and no label
      // that begins or ends with a hyphen (RFC 1123 section 2.1).
      return !labels.dropLast().contains { $0.isEmpty }
        && labels.allSatisfy { $0.utf8.count <= 63 && $0.first != "-" && $0.last != "-" }
    }
    // An octet with a leading zero is refused: inet_aton(3), which getaddrinfo uses, reads
    // 010.0.0.1 as octal, 8.0.0.1.
    return labels.count == 4
      && labels.allSatisfy { label in
        (1...3).contains(label.utf8.count) && label.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
          && (Int(label) ?? 256) <= 255 && (label.utf8.count == 1 || label.first != "0")
      }
  }

  /// An IPv6 address as written in brackets (RFC 3986 IP-literal, RFC 6874 zone): hexadecimal
  /// digits, `:` and `.` (an embedded IPv4 address), at least one `:`, then an optional `%` and a
  /// zone of letters, digits, `-`, `.`, `_`.
  public static func isIPv6Literal<S: StringProtocol>(_ host: S) -> Bool {
    let address: S.SubSequence
    if let percent = host.firstIndex(of: "%") {
      let zone = host[host.index(after: percent)...]
      guard !zone.isEmpty,
        zone.utf8.allSatisfy({ b in
          (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) || b == 0x2D || b == 0x2E || b == 0x5F
        })
      else { return false }
      address = host[..<percent]
    } else {
      address = host[...]
    }
    return address.contains(":")
      && address.utf8.allSatisfy { b in
        (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x66) || b == 0x3A || b == 0x2E
      }
  }
}
