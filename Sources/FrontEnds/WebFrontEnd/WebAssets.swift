import Glibc
import SystemIO

/// The page (HTML, script, style sheet) and Leaflet's files from Debian's `libjs-leaflet`.
struct WebAssets: Sendable {
  /// Where `libjs-leaflet` installs Leaflet; `/leaflet/*` serves files under it and nothing else.
  static let leafletDirectory = "/usr/share/javascript/leaflet"

  let html: [UInt8]
  let contentSecurityPolicy: String

  init(options: WebOptions) {
    let tiles = options.tiles
    let attribution = tiles == WebOptions.openStreetMapTiles ? "openstreetmap" : ""
    html = Array(
      WebPage.html.substituting("@TILES@", Self.attributeEscaped(tiles))
        .substituting("@ATTRIBUTION@", attribution).utf8)
    contentSecurityPolicy =
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:"
      + (options.tileOrigin.map { " " + $0 } ?? "")
      + "; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
  }

  /// `&`, `<`, `>`, `"` and `'` as character references, for a double-quoted attribute value.
  static func attributeEscaped(_ text: String) -> String {
    var result = ""
    for character in text {
      switch character {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"": result += "&quot;"
      case "'": result += "&#39;"
      default: result.append(character)
      }
    }
    return result
  }

  func page(_ path: String) -> WebFrontEnd.Response {
    switch path {
    case "/map.js":
      return WebFrontEnd.Response(
        status: 200, contentType: "text/javascript; charset=utf-8",
        headers: [("Cache-Control", "no-cache")],
        body: Array(WebPage.script.utf8))
    case "/map.css":
      return WebFrontEnd.Response(
        status: 200, contentType: "text/css; charset=utf-8",
        headers: [("Cache-Control", "no-cache")],
        body: Array(WebPage.style.utf8))
    default:
      return WebFrontEnd.Response(
        status: 200, contentType: "text/html; charset=utf-8",
        headers: [("Cache-Control", "no-cache")], body: html)
    }
  }

  /// A file under ``leafletDirectory``: `relative` is one to four `/`-separated names of letters,
  /// digits, `.`, `_` and `-`, none starting with `.` (so no `..`, no hidden file); the file is
  /// opened without following a final symbolic link and served only when regular and at most 2 MiB.
  func leaflet(_ relative: String) -> WebFrontEnd.Response {
    let components = relative.split(separator: "/", omittingEmptySubsequences: false)
    let allowed = { (byte: UInt8) in
      (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
        || (byte >= 0x61 && byte <= 0x7A)
        || byte == 0x2E || byte == 0x5F || byte == 0x2D
    }
    guard (1...4).contains(components.count),
      components.allSatisfy({
        !$0.isEmpty && $0.utf8.count <= 64 && !$0.hasPrefix(".") && $0.utf8.allSatisfy(allowed)
      })
    else {
      return WebFrontEnd.error(404, "notFound", "no such file under /leaflet/")
    }
    let path = Self.leafletDirectory + "/" + relative
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else {
      // The hint only when the whole directory is missing, not for one file it does not have.
      let installed = access(Self.leafletDirectory, F_OK) == 0
      return WebFrontEnd.error(
        404, "notFound", "no such file under /leaflet/" + (installed ? "" : " (is libjs-leaflet installed?)"))
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
      let bytes = try? SystemIO.readToEnd(fd, limit: 2 << 20)
    else {
      return WebFrontEnd.error(404, "notFound", "no such file under /leaflet/")
    }
    return WebFrontEnd.Response(
      status: 200, contentType: Self.contentType(relative),
      headers: [("Cache-Control", "max-age=3600")], body: bytes)
  }

  static func contentType(_ name: String) -> String {
    if name.hasSuffix(".js") { return "text/javascript; charset=utf-8" }
    if name.hasSuffix(".css") { return "text/css; charset=utf-8" }
    if name.hasSuffix(".png") { return "image/png" }
    if name.hasSuffix(".map") { return "application/json" }
    return "application/octet-stream"
  }
}

extension String {
  /// The string with every `target` replaced by `replacement`, compared byte by byte (UTF-8).
  /// Written out rather than the standard library's `replacing(_:with:)`, whose string
  /// processing library would add about 1 MB of resident code to the daemon for this one use.
  func substituting(_ target: String, _ replacement: String) -> String {
    let source = Array(utf8)
    let pattern = Array(target.utf8)
    guard !pattern.isEmpty, source.count >= pattern.count else { return self }
    var result: [UInt8] = []
    result.reserveCapacity(source.count)
    var index = 0
    while index < source.count {
      if index + pattern.count <= source.count
        && source[index..<(index + pattern.count)].elementsEqual(pattern)
      {
        result.append(contentsOf: replacement.utf8)
        index += pattern.count
      } else {
        result.append(source[index])
        index += 1
      }
    }
    return String(decoding: result, as: UTF8.self)
  }

  /// Whether `target` occurs in the string (UTF-8 bytes).
  func containsBytes(_ target: String) -> Bool {
    substituting(target, "") != self
  }
}
