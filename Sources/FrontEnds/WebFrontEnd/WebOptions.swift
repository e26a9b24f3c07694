import Glibc
import JSON
import LocationModel
import LocationProtocol
import ServiceCore
import Synchronization
import SystemIO

/// Settings of the HTTP front-end (`--http`, `--http-tiles`).
public struct WebOptions: Sendable, Hashable {
  /// The numeric IPv4 or IPv6 address to listen on (`127.0.0.1`, `::1`, `0.0.0.0`).
  public var address: String
  /// The TCP port, `0...65535`; 0 lets the kernel choose (tests).
  public var port: UInt16
  /// The tile URL template (`{z}`, `{x}`, `{y}`, optionally `{s}`), or `none` for a plain
  /// background.
  public var tiles: String
  /// The state directory, where the token file goes.
  public var stateDirectory: String
  /// Connection, idle-time and body limits.
  var limits = HTTPLimits()
  /// Bounds of each `/events` stream's queue.
  public var streamLimits = EventStreamLimits()
  /// Seconds between keep-alive comments on idle `/events` streams.
  public var keepAliveSeconds: Int = 20
  /// Seconds a closed `/events` stream's watch (and so the tracking it holds) outlives the
  /// stream: the page reopens a dropped stream after 1 s, and tracking that stopped and started
  /// again would re-center the map on the new initial fix, a move the user did not ask for.
  public var reconnectGraceSeconds: Int = 10

  /// The default tile template: OpenStreetMap's standard tiles.
  public static let openStreetMapTiles = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"

  /// Creates options; see each property.
  public init(
    address: String, port: UInt16, tiles: String = WebOptions.openStreetMapTiles,
    stateDirectory: String
  ) {
    self.address = address
    self.port = port
    self.tiles = tiles
    self.stateDirectory = stateDirectory
  }

  /// At most this many connections at once (`MHD_OPTION_CONNECTION_LIMIT`, default 256), and
  /// from one address (default 64).
  public mutating func setConnectionLimits(total: Int, perAddress: Int) {
    limits.connections = total
    limits.connectionsPerAddress = perAddress
  }

  /// The Content-Security-Policy `img-src` sources that allow the tiles (space-separated), or
  /// `nil` for `none` or a template no source can be made for (``problem(withTiles:)`` refuses
  /// those at start). See ``tileSources(for:)``.
  public var tileOrigin: String? {
    guard tiles != "none", case .success(let sources) = Self.tileSources(for: tiles) else {
      return nil
    }
    return sources.joined(separator: " ")
  }

  /// The subdomains Leaflet puts for `{s}` (its `subdomains` default, which the page keeps).
  static let tileSubdomains = ["a", "b", "c"]

  /// The CSP `host-source` expressions (CSP Level 3, section 2.3.1: `scheme "://" host-part
  /// [":" port-part]`, `host-part = "*" / ["*."] 1*host-char *("." 1*host-char)`, `host-char =
  /// ALPHA / DIGIT / "-"`) that cover every tile URL the template gives: the scheme, the host
  /// (lower-cased) and the port; never the path, query, fragment or user information, which a
  /// source cannot or need not name.
  ///
  /// `{s}` as the whole first label of the host becomes the wildcard `*.` of its parent domain
  /// (`https://{s}.tile.example.org/...` gives `https://*.tile.example.org`); `{s}` anywhere
  /// else in the host (`https://tile-{s}.example.com/...`) gives one source per host Leaflet
  /// fills in, `a`, `b` and `c`.
  ///
  /// - Returns: the sources, or why none can be made: a template that is not `http://` or
  ///   `https://`, has user information (`user:pw@`), an IPv6 literal, an empty label, a host
  ///   character outside letters, digits and `-` (write other names in punycode), a placeholder
  ///   other than `{s}` in the host, or a port that is not 1 to 65535.
  public static func tileSources(for template: String) -> Result<[String], TileTemplateError> {
    guard let scheme = ["https://", "http://"].first(where: { template.hasPrefix($0) }) else {
      return .failure(TileTemplateError("use an http:// or https:// URL template, or none"))
    }
    let authority = template.utf8.dropFirst(scheme.utf8.count).prefix {
      $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
    }
    if authority.contains(UInt8(ascii: "@")) {
      return .failure(
        TileTemplateError(
          "the tile URL has a user name or password (before @), which a Content-Security-Policy source cannot name; browsers do not send it with images either"
        ))
    }
    if authority.first == UInt8(ascii: "[") {
      return .failure(
        TileTemplateError(
          "a Content-Security-Policy source cannot name an IPv6 address: use a host name"))
    }
    var host = Substring(String(decoding: authority, as: UTF8.self))
    var port = ""
    if let colon = host.lastIndex(of: ":") {
      port = String(host[host.index(after: colon)...])
      host = host[..<colon]
      guard !port.isEmpty, port.utf8.count <= 5, port.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
        let number = Int(port), (1...65535).contains(number)
      else {
        return .failure(TileTemplateError("the tile URL's port must be a number from 1 to 65535"))
      }
      port = ":" + port
    }
    guard !host.isEmpty else {
      return .failure(TileTemplateError("the tile URL names no host"))
    }
    let labels = host.lowercased().split(separator: ".", omittingEmptySubsequences: false)
    for label in labels {
      let plain = label.replacingPlaceholder("{s}", with: "a")
      guard !plain.isEmpty else {
        return .failure(
          TileTemplateError("the tile URL's host has an empty label (two dots, or a dot at an end)")
        )
      }
      guard
        plain.utf8.allSatisfy({
          ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == UInt8(ascii: "-")
        })
      else {
        let what =
          plain.contains("{") || plain.contains("}")
          ? "only {s} may stand in the tile URL's host"
          : "the tile URL's host may hold only letters, digits, - and . (write other names in punycode)"
        return .failure(TileTemplateError(what))
      }
    }
    let rest = labels.dropFirst()
    if labels.first == "{s}", !rest.isEmpty, !rest.contains(where: { $0.contains("{s}") }) {
      return .success([scheme + "*." + rest.joined(separator: ".") + port])
    }
    let joined = labels.joined(separator: ".")
    guard joined.contains("{s}") else { return .success([scheme + joined + port]) }
    return .success(
      tileSubdomains.map { scheme + joined.replacingPlaceholder("{s}", with: $0) + port })
  }

  /// Checks a tile template: `none`, or an `http://` or `https://` URL for which
  /// ``tileSources(for:)`` makes a Content-Security-Policy source, with `{z}`, `{x}` and
  /// `{y}` and none of the characters that would break out of the CSP header or the page's
  /// attribute (whitespace, quotes, `;`, `,`, `<`, `>`, `\`).
  ///
  /// - Returns: `nil` when usable, otherwise what is wrong.
  public static func problem(withTiles template: String) -> String? {
    if template == "none" { return nil }
    if case .failure(let error) = tileSources(for: template) { return error.description }
    guard template.containsBytes("{z}"), template.containsBytes("{x}"),
      template.containsBytes("{y}")
    else {
      return "the template needs {z}, {x} and {y}"
    }
    let forbidden: Set<Character> = [" ", "\t", "\"", "'", ";", ",", "<", ">", "\\", "`"]
    guard template.utf8.count <= 512,
      !template.contains(where: { forbidden.contains($0) || $0.isNewline })
    else {
      return "at most 512 characters, without spaces, quotes, ; , < > \\ or line breaks"
    }
    return nil
  }
}

/// Why no Content-Security-Policy source can be made for a tile template
/// (``WebOptions/tileSources(for:)``).
public struct TileTemplateError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What is wrong with the template and what to write instead.
  public var description: String
  init(_ description: String) { self.description = description }
}

/// Why the HTTP front-end could not start.
public struct WebStartError: Error, Sendable, CustomStringConvertible {
  /// What failed and what to do.
  public var description: String
  /// Whether the failure is libmicrohttpd missing (rather than the address or the state directory).
  public var libraryMissing: Bool
}

extension StringProtocol {
  /// Every `placeholder` replaced by `value` (byte-wise; no locale).
  fileprivate func replacingPlaceholder(_ placeholder: String, with value: String) -> String {
    String(self).substituting(placeholder, value)
  }
}
