import Foundation
import Glibc
import LocationProtocol
import Testing

@testable import LocationDaemon
@testable import WebFrontEnd

@Suite("Web front-end")
struct WebFrontEndTests {
  @Test("--http takes ADDRESS:PORT, [IPv6]:PORT, localhost:PORT or PORT; off by default")
  func httpAddress() throws {
    #expect(try Configuration.parse(arguments: []).http == nil)
    let cases: [(String, String, UInt16)] = [
      ("127.0.0.1:8080", "127.0.0.1", 8080), ("8080", "127.0.0.1", 8080),
      ("localhost:0", "127.0.0.1", 0),
      ("[::1]:80", "::1", 80), ("0.0.0.0:65535", "0.0.0.0", 65535),
    ]
    for (text, address, port) in cases {
      let http = try Configuration.parse(arguments: ["--http", text]).http
      #expect(http?.address == address, "\(text)")
      #expect(http?.port == port, "\(text)")
    }
    for bad in [
      "", ":", "example.com:80", "127.0.0.1:65536", "127.0.0.1:-1", "[::1:80", "::1:80", "1.2.3:80",
      "127.0.0.1:８０",
    ] {
      #expect(throws: ConfigurationError.self, "\(bad)") {
        try Configuration.parse(arguments: ["--http", bad])
      }
    }
    let fromFile = try Configuration.parse(arguments: ["--config", "c"]) { _ in
      "http = 9000\nhttp-tiles = none\n"
    }
    #expect(fromFile.http?.port == 9000)
    #expect(fromFile.httpTiles == "none")
  }

  @Test("a tile template cannot break out of the CSP header or the page's attribute")
  func tiles() throws {
    #expect(WebOptions.problem(withTiles: "none") == nil)
    #expect(WebOptions.problem(withTiles: WebOptions.openStreetMapTiles) == nil)
    #expect(WebOptions.problem(withTiles: "https://{s}.tile.example.org/{z}/{x}/{y}.png") == nil)
    for bad in [
      "ftp://x/{z}/{x}/{y}", "https://x/{z}/{x}.png", "https://x/{z}/{x}/{y}.png; script-src *",
      "https://x/{z}/{x}/{y}\".png", "https://x/{z}/{x}/{y}.png'", "https://x/{z}/{x}/{y}\n.png",
      "https://x/{z}/{x}/{y}<b>",
    ] {
      #expect(WebOptions.problem(withTiles: bad) != nil, "\(bad)")
      #expect(throws: ConfigurationError.self) {
        try Configuration.parse(arguments: ["--http-tiles", bad])
      }
    }
    var options = WebOptions(address: "127.0.0.1", port: 0, stateDirectory: "/tmp")
    #expect(options.tileOrigin == "https://tile.openstreetmap.org")
    options.tiles = "https://{s}.tile.example.org/{z}/{x}/{y}.png"
    #expect(options.tileOrigin == "https://*.tile.example.org")
    options.tiles = "none"
    #expect(options.tileOrigin == nil)
    let assets = WebAssets(options: options)
    #expect(
      assets.contentSecurityPolicy.hasPrefix(
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"))
    #expect(!assets.contentSecurityPolicy.contains("unsafe"))
  }

  @Test(
    "a tile template gives valid CSP sources (CSP3 host-source: scheme, host, port) or is refused",
    arguments: [
      ("https://tile.openstreetmap.org/{z}/{x}/{y}.png", "https://tile.openstreetmap.org"),
      ("https://{s}.tile.example.org/{z}/{x}/{y}.png", "https://*.tile.example.org"),
      ("http://{s}.localhost:8080/{z}/{x}/{y}.png", "http://*.localhost:8080"),
      (
        "https://tile-{s}.example.com/{z}/{x}/{y}.png",
        "https://tile-a.example.com https://tile-b.example.com https://tile-c.example.com"
      ),
      (
        "https://cartodb-basemaps-{s}.global.ssl.fastly.net/light_all/{z}/{x}/{y}.png",
        "https://cartodb-basemaps-a.global.ssl.fastly.net https://cartodb-basemaps-b.global.ssl.fastly.net https://cartodb-basemaps-c.global.ssl.fastly.net"
      ),
      (
        "http://tile-{s}.example.test:18198/{z}/{x}/{y}.png",
        "http://tile-a.example.test:18198 http://tile-b.example.test:18198 http://tile-c.example.test:18198"
      ),
      (
        "https://tiles.{s}.example.com/{z}/{x}/{y}.png",
        "https://tiles.a.example.com https://tiles.b.example.com https://tiles.c.example.com"
      ),
      ("https://{s}/{z}/{x}/{y}.png", "https://a https://b https://c"),
      ("https://tiles.example.com?z={z}&x={x}&y={y}", "https://tiles.example.com"),
      ("https://tiles.example.com#{z}/{x}/{y}", "https://tiles.example.com"),
      ("https://Tiles.Example.COM:443/{z}/{x}/{y}{r}.png", "https://tiles.example.com:443"),
      ("http://127.0.0.1:18198/{z}/{x}/{y}.png", "http://127.0.0.1:18198"),
      ("https://a.b/{z}/{x}/{y}.png?key=abc@def", "https://a.b"),
    ])
  func tileSources(template: String, sources: String) throws {
    #expect(WebOptions.problem(withTiles: template) == nil, "\(template)")
    var options = WebOptions(address: "127.0.0.1", port: 0, stateDirectory: "/tmp")
    options.tiles = template
    #expect(options.tileOrigin == sources, "\(template)")
    // Every source matches the CSP3 host-source grammar (no path, query or user information).
    for source in (options.tileOrigin ?? "").split(separator: " ") {
      #expect(Self.isHostSource(String(source)), "\(source)")
    }
    let assets = WebAssets(options: options)
    #expect(assets.contentSecurityPolicy.contains("img-src 'self' data: \(sources);"))
    _ = try Configuration.parse(arguments: ["--http-tiles", template])
  }

  @Test(
    "a tile template for which no valid CSP source can be made is refused at start",
    arguments: [
      "https://user:pw@tiles.example.com/{z}/{x}/{y}.png",
      "https://user@tiles.example.com/{z}/{x}/{y}.png",
      "https://[::1]:8080/{z}/{x}/{y}.png",
      "https://tiles..example.com/{z}/{x}/{y}.png",
      "https://tiles.example.com./{z}/{x}/{y}.png",
      "https://.example.com/{z}/{x}/{y}.png",
      "https:///{z}/{x}/{y}.png",
      "https://tiles.example.com:/{z}/{x}/{y}.png",
      "https://tiles.example.com:0/{z}/{x}/{y}.png",
      "https://tiles.example.com:65536/{z}/{x}/{y}.png",
      "https://tiles.example.com:{s}/{z}/{x}/{y}.png",
      "https://tiles.example.com:*/{z}/{x}/{y}.png",
      "https://*.example.com/{z}/{x}/{y}.png",
      "https://{z}.example.com/{z}/{x}/{y}.png",
      "https://tiles_1.example.com/{z}/{x}/{y}.png",
      "https://tïles.example.com/{z}/{x}/{y}.png",
    ])
  func tileTemplatesRefused(template: String) {
    #expect(WebOptions.problem(withTiles: template) != nil, "\(template)")
    var options = WebOptions(address: "127.0.0.1", port: 0, stateDirectory: "/tmp")
    options.tiles = template
    #expect(options.tileOrigin == nil, "\(template)")
    #expect(throws: ConfigurationError.self, "\(template)") {
      try Configuration.parse(arguments: ["--http-tiles", template])
    }
  }

  /// CSP Level 3 `host-source` without a path: `scheme "://" host-part [":" port-part]`.
  static func isHostSource(_ source: String) -> Bool {
    guard let range = source.range(of: "://") else { return false }
    let scheme = source[..<range.lowerBound]
    guard !scheme.isEmpty,
      scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
    else { return false }
    var rest = source[range.upperBound...]
    if let colon = rest.lastIndex(of: ":") {
      let port = rest[rest.index(after: colon)...]
      guard port == "*" || (!port.isEmpty && port.allSatisfy({ $0.isASCII && $0.isNumber })) else {
        return false
      }
      rest = rest[..<colon]
    }
    if rest == "*" { return true }
    if rest.hasPrefix("*.") { rest = rest.dropFirst(2) }
    let labels = rest.split(separator: ".", omittingEmptySubsequences: false)
    return labels.allSatisfy { label in
      !label.isEmpty
        && label.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") })
    }
  }

  @Test("the page escapes its one configured attribute and has no inline script or handler")
  func page() {
    #expect(WebAssets.attributeEscaped("a\"b<c>&'d") == "a&quot;b&lt;c&gt;&amp;&#39;d")
    let html = String(
      decoding: WebAssets(options: WebOptions(address: "127.0.0.1", port: 0, stateDirectory: "/t"))
        .html, as: UTF8.self)
    #expect(html.contains("data-tiles=\"https://tile.openstreetmap.org/{z}/{x}/{y}.png\""))
    #expect(!html.contains("<script>"))
    // No event-handler attribute (` onclick=`, ` onload=`...).
    let words = html.lowercased().split(whereSeparator: { $0 == " " || $0 == "<" || $0 == "\n" })
    #expect(!words.contains { $0.hasPrefix("on") && $0.contains("=") })
    #expect(!html.contains("style="))
    #expect(!WebPage.script.contains("innerHTML"))
    #expect(WebPage.script.contains("textContent"))
  }

  @Test("/leaflet/ serves files under the Leaflet directory and nothing else")
  func leafletPaths() {
    let assets = WebAssets(options: WebOptions(address: "127.0.0.1", port: 0, stateDirectory: "/t"))
    for bad in [
      "../../../etc/passwd", "..", ".hidden", "images/../../x", "", "a//b", "a/b/c/d/e",
      "leaflet.js%00", "im ages",
    ] {
      #expect(assets.leaflet(bad).status == 404, "\(bad)")
    }
  }

  @Test("tokens are 64 hex digits, different each time, compared in full")
  func tokens() {
    let a = WebToken.generate()
    let b = WebToken.generate()
    #expect(a.count == 64 && a.allSatisfy(\.isHexDigit))
    #expect(a != b)
    #expect(WebToken.matches(a, a))
    #expect(!WebToken.matches(b, a))
    #expect(!WebToken.matches(String(a.dropLast()), a))
    #expect(!WebToken.matches("", ""))
  }

  @Test("the token file is created 0600 and replaced, never written through a planted link")
  func tokenFile() throws {
    let directory = "/tmp/webtoken-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
    #expect(mkdir(directory, 0o700) == 0)
    defer {
      _ = unlink(directory + "/" + WebToken.fileName)
      _ = rmdir(directory)
    }
    try WebToken.write("abc", directory: directory)
    var info = stat()
    #expect(stat(directory + "/" + WebToken.fileName, &info) == 0)
    #expect(info.st_mode & 0o777 == 0o600)
    // A symbolic link planted at the name is replaced, not followed.
    _ = unlink(directory + "/" + WebToken.fileName)
    #expect(symlink("/tmp/webtoken-target-never", directory + "/" + WebToken.fileName) == 0)
    try WebToken.write("def", directory: directory)
    #expect(lstat(directory + "/" + WebToken.fileName, &info) == 0)
    #expect(info.st_mode & S_IFMT == S_IFREG)
    #expect(access("/tmp/webtoken-target-never", F_OK) != 0)
  }

  private func channel(limits: EventStreamLimits = EventStreamLimits()) -> EventStreamChannel {
    EventStreamChannel(id: 1, run: "r", firstID: 1, limits: limits, wake: {})
  }

  private func drain(_ channel: EventStreamChannel, chunk: Int = 4096) -> String {
    var bytes: [UInt8] = []
    while let next = channel.nextChunk(maximum: chunk), !next.isEmpty {
      #expect(next.count <= chunk)
      bytes += next
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  @Test("a stalled browser gets the newest TPV with missed:N, every BACKEND event, in order")
  func coalescing() {
    let stream = channel()
    for n in 1...5 {
      stream.deliver(EncodedEvent(.location(["class": "TPV", "n": .int(Int64(n))])))
    }
    stream.deliver(EncodedEvent(.backend(uri: "u", state: .connected, detail: nil)))
    stream.deliver(EncodedEvent(.location(["class": "TPV", "n": 6])))
    let text = drain(stream, chunk: 7)
    #expect(
      text == """
        id: r-1
        data: {"class":"BACKEND","uri":"u","state":"connected","detail":null}

        id: r-2
        data: {"class":"TPV","n":6,"missed":5}


        """)
    #expect(stream.nextChunk(maximum: 100) == [])
  }

  @Test("a backlog of never-coalesced events past the bound ends that stream only")
  func bound() {
    let stream = channel(limits: EventStreamLimits(maxBacklogBytes: 1000, maxBacklogMessages: 3))
    for _ in 0..<3 { #expect(stream.deliver(EncodedEvent(.warning("w")))) }
    #expect(!stream.deliver(EncodedEvent(.warning("w"))))
    #expect(!stream.isConnected)
    #expect(stream.nextChunk(maximum: 100) == nil)
  }

  @Test("Last-Event-ID numbering continues; ids go up")
  func ids() {
    let stream = EventStreamChannel(
      id: 1, run: "abc", firstID: 41, limits: EventStreamLimits(), wake: {})
    stream.send(Event.warning("a"))
    stream.send(Event.warning("b"))
    let text = drain(stream)
    #expect(text.contains("id: abc-41\n") && text.contains("id: abc-42\n"))
  }

  @Test(
    "Last-Event-ID: only RUN-N of this run with N at most the highest id written is resumed",
    arguments: [
      ("abc-0", 1), ("abc-5", 6), ("abc-7", 8), ("abc-8", 1),
      ("abc-18446744073709551615", 1), ("abc-18446744073709551614", 1),
      ("abc-18446744073709551613", 1), ("abc-9223372036854775808", 1),
      ("abc-9223372036854775807", 1), ("abc--1", 1), ("abc-+5", 1), ("abc-", 1),
      ("abc-99999999999999999999999999999999", 1), ("abc-007", 8), ("abc-5 ", 1),
      ("xyz-5", 1), ("5", 1), ("abc-٣", 1),
    ] as [(String, UInt64)])
  func resumedIDs(header: String, first: UInt64) {
    let register = EventIDRegister()
    let stream = EventStreamChannel(
      id: 1, run: "abc", firstID: 1, limits: EventStreamLimits(), register: register, wake: {})
    for n in 1...7 { stream.send(Event.warning("w\(n)")) }
    _ = drain(stream)
    #expect(register.highestIssued == 7)
    #expect(register.firstID(resuming: header, run: "abc") == first)
  }

  @Test("ids near 2^64 wrap instead of stopping the daemon")
  func idsAtTheTop() {
    let stream = EventStreamChannel(
      id: 1, run: "abc", firstID: UInt64.max - 1, limits: EventStreamLimits(), wake: {})
    for n in 1...3 { stream.send(Event.warning("w\(n)")) }
    let text = drain(stream)
    #expect(
      text.contains("id: abc-18446744073709551614\n")
        && text.contains("id: abc-18446744073709551615\n") && text.contains("id: abc-0\n"))
  }

  @Test("the Bearer scheme name is matched in any case (RFC 7235 section 2.1)")
  func bearerScheme() {
    #expect(WebFrontEnd.bearerCredentials("Bearer abc") == "abc")
    #expect(WebFrontEnd.bearerCredentials("bearer abc") == "abc")
    #expect(WebFrontEnd.bearerCredentials("BEARER  abc") == "abc")
    #expect(WebFrontEnd.bearerCredentials("Bearer abc \t ") == "abc")
    #expect(WebFrontEnd.bearerCredentials("bEaReR abc") == "abc")
    #expect(WebFrontEnd.bearerCredentials("Bearerabc") == nil)
    #expect(WebFrontEnd.bearerCredentials("Basic abc") == nil)
    #expect(WebFrontEnd.bearerCredentials("Bearer") == nil)
    #expect(WebFrontEnd.bearerCredentials("béarer abc") == nil)
    #expect(WebFrontEnd.bearerCredentials(nil) == nil)
  }

  @Test("API error codes map to HTTP statuses")
  func statuses() {
    #expect(WebFrontEnd.response(.error(.malformedJSON, message: "m"), id: nil).status == 400)
    #expect(WebFrontEnd.response(.error(.notAuthorized, message: "m"), id: nil).status == 403)
    #expect(WebFrontEnd.response(.error(.notFound, message: "m"), id: nil).status == 404)
    #expect(WebFrontEnd.response(.error(.noFix, message: "m"), id: nil).status == 409)
    #expect(WebFrontEnd.response(.error(.notSaved, message: "m"), id: nil).status == 503)
    #expect(WebFrontEnd.response(.ok(.stop), id: nil).status == 200)
  }
}
