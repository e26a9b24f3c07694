import Glibc
import JSON
import LocationModel
import LocationProtocol
import ServiceCore
import Synchronization
import SystemIO

/// The HTTP front-end: the live map page, its assets, the map renderers, Server-Sent Events and
/// the JSON API for the page's controls, served by libmicrohttpd (docs/web.md).
///
/// Everything a request changes or reads goes through ``LocationService/handle(_:from:)`` like
/// a socket client's request: one state. Reads of the page and its static files are open; location
/// data (`/events`, `/map.geojson`, `/map.svg`) and every write need the token
/// (`Authorization: Bearer TOKEN`, see ``WebToken``). A token holder acts with the daemon's own
/// user and group (it could read the token file, so it could be that user).
public final class WebFrontEnd: FrontEnd, HTTPServerDelegate, Sendable {
  private struct Stream {
    var channel: EventStreamChannel
    var exchange: HTTPExchange
    var context: ClientContext
    var setup: Task<Void, Never>?
  }

  private let service: any RequestHandler
  private let options: WebOptions
  private let token: String
  /// Names this run in event ids (`RUN-N`), so a `Last-Event-ID` from an earlier run is known as such.
  private let run: String
  /// The highest event id written in this run, which bounds a resumed `Last-Event-ID`.
  private let eventIDs = EventIDRegister()
  private let peer: PeerCredentials
  private let streams = Mutex<[UInt64: Stream]>([:])
  private let server = Mutex<HTTPServer?>(nil)
  private let boundPort = Atomic<UInt16>(0)
  private let keepAlive = Mutex<Task<Void, Never>?>(nil)
  private let assets: WebAssets

  /// The page's address without the token, e.g. `http://127.0.0.1:8080/`. Bound to every
  /// address (`0.0.0.0`, `::`), it names the loopback address of that family, which a browser
  /// on this machine can open.
  public var url: String {
    let address = options.address == "0.0.0.0" ? "127.0.0.1" : options.address == "::" ? "::1" : options.address
    let host = address.contains(":") ? "[\(address)]" : address
    return "http://\(host):\(boundPort.load(ordering: .relaxed))/"
  }

  /// The token file's path.
  public var tokenFile: String { options.stateDirectory + "/" + WebToken.fileName }

  /// Open `/events` streams.
  public var clientCount: Int { streams.withLock { $0.count } }

  /// Where the page is and how to authorize (`STATUS`'s `http` member).
  public var endpoint: FrontEndEndpoint? { FrontEndEndpoint(url: url, tokenFile: tokenFile) }

  /// Binds the address, then writes a new token file (atomically) and starts serving. A
  /// front-end that cannot bind never touches the token file.
  ///
  /// - Throws: ``WebStartError`` when the token file cannot be written, the address cannot be
  ///   bound or libmicrohttpd is missing.
  public init(options: WebOptions, service: any RequestHandler) throws(WebStartError) {
    self.options = options
    self.service = service
    token = WebToken.generate()
    run = String(WebToken.generate().prefix(8))
    peer = PeerCredentials(pid: getpid(), uid: geteuid(), gid: getegid())
    assets = WebAssets(options: options)
    let http: HTTPServer
    do {
      http = try HTTPServer(
        address: options.address, port: options.port, limits: options.limits, delegate: self)
    } catch {
      throw WebStartError(
        description: error.message,
        libraryMissing: error.code == 0 && error.message.containsBytes("not installed"))
    }
    // Only once the address is ours: a daemon that cannot serve (address in use: another
    // daemon serves there) leaves the serving daemon's token file alone.
    do {
      try WebToken.write(token, directory: options.stateDirectory)
    } catch {
      http.stop()
      throw WebStartError(
        description:
          "cannot write the token file \(options.stateDirectory)/\(WebToken.fileName): \(error)",
        libraryMissing: false)
    }
    server.withLock { $0 = http }
    boundPort.store(http.port, ordering: .relaxed)
    let seconds = max(1, options.keepAliveSeconds)
    keepAlive.withLock {
      $0 = Task { [weak self] in
        while !Task.isCancelled {
          try? await Task.sleep(for: .seconds(seconds))
          guard let self else { return }
          for channel in self.streams.withLock({ $0.values.map(\.channel) }) {
            channel.sendComment("keep-alive")
          }
        }
      }
    }
  }

  /// Ends every stream and stops serving.
  public func stop() {
    keepAlive.withLock { $0?.cancel() }
    let http = server.withLock { server -> HTTPServer? in
      defer { server = nil }
      return server
    }
    http?.stop()
  }

  // MARK: - HTTPServerDelegate

  func handle(_ request: HTTPRequest, exchange: HTTPExchange) {
    if let credentials = Self.bearerCredentials(request.authorization),
      WebToken.matches(credentials, token)
    {
      exchange.trust()
    }
    let response = route(request, exchange: exchange)
    if let response { send(response, to: exchange) }
  }

  func nextChunk(stream: UInt64, maximum: Int) -> [UInt8]? {
    guard let channel = streams.withLock({ $0[stream]?.channel }) else { return nil }
    return channel.nextChunk(maximum: maximum)
  }

  func streamClosed(_ stream: UInt64) {
    guard let entry = streams.withLock({ $0.removeValue(forKey: stream) }) else { return }
    entry.channel.closed()
    entry.exchange.release()
    let service = service
    let grace = options.reconnectGraceSeconds
    Task {
      await entry.setup?.value
      // The watch lasts a little longer than its stream, so that the page's reconnect finds
      // tracking still on (events meanwhile go nowhere: the channel is closed).
      if grace > 0 { try? await Task.sleep(for: .seconds(grace)) }
      await service.clientDisconnected(entry.context)
    }
  }

  // MARK: - Routing

  struct Response {
    var status: Int
    var contentType: String
    var headers: [(String, String)] = []
    var body: [UInt8]
  }

  /// The response for `request`, or `nil` when it is answered later (API calls, streams).
  func route(_ request: HTTPRequest, exchange: HTTPExchange) -> Response? {
    var request = request
    // The absolute form of the target (`GET http://HOST:PORT/map.js`): its authority stands for
    // the Host header, which is then ignored (RFC 9112 3.2.2).
    let absoluteForm = request.path.utf8.count > 7 && request.path.prefix(7).lowercased() == "http://"
    if absoluteForm {
      let rest = request.path.dropFirst(7)
      let slash = rest.firstIndex(of: "/") ?? rest.endIndex
      request.host = String(rest[..<slash])
      request.path = slash == rest.endIndex ? "/" : String(rest[slash...])
    }
    if let repeated = request.repeatedHeader {
      // Two values of a header the server decides on: which one a proxy in front used is
      // unknown (request smuggling), so neither is trusted (RFC 9112 3.2, 6.3).
      return Self.error(400, "badRequest", "the \(repeated) header is sent more than once")
    }
    guard let host = request.host, !host.isEmpty else {
      return Self.error(400, "badRequest", "send a Host header that names this server (RFC 9112 3.2)")
    }
    guard isAllowedHost(host) else {
      return Self.error(
        421, "misdirectedRequest",
        absoluteForm
          ? "the request target must name this server by address or as localhost"
          : "the Host header must name this server by address or as localhost")
    }
    let reads = ["GET", "HEAD"]
    switch request.path {
    case "/", "/index.html", "/map.js", "/map.css":
      guard reads.contains(request.method) else { return Self.methodNotAllowed("GET, HEAD") }
      return assets.page(request.path)
    case "/favicon.ico":
      // No icon: an empty answer rather than a 404 in the browser's console.
      guard reads.contains(request.method) else { return Self.methodNotAllowed("GET, HEAD") }
      return Response(
        status: 204, contentType: "image/x-icon", headers: [("Cache-Control", "max-age=86400")],
        body: [])
    case "/events":
      // GET only: a stream has no length, so a HEAD answer could not say where it ends.
      guard request.method == "GET" else { return Self.methodNotAllowed("GET") }
      if let refusal = checkToken(request) { return refusal }
      return openStream(request, exchange: exchange)
    case "/map.geojson", "/map.svg":
      guard reads.contains(request.method) else { return Self.methodNotAllowed("GET, HEAD") }
      if let refusal = checkToken(request) { return refusal }
      let format: MapFormat = request.path == "/map.svg" ? .svg : .geojson
      answerLater(exchange) { [self] in await renderMap(format) }
      return nil
    case "/api":
      guard request.method == "POST" else { return Self.methodNotAllowed("POST") }
      if let refusal = checkToken(request) ?? checkOrigin(request) { return refusal }
      if request.bodyTooLarge {
        return Self.error(
          413, "bodyTooLarge", "the request body is larger than \(options.limits.maxBody) bytes")
      }
      guard Self.isJSON(request.contentType) else {
        return Self.error(
          415, "unsupportedMediaType", "send the request as Content-Type: application/json")
      }
      let parsed: Request
      do {
        parsed = try Request.parse(request.body)
      } catch {
        // An unknown command is told the commands this endpoint takes, not the socket's.
        var message = error.message
        if error.code == .unknownCommand, let cut = message.firstRange(of: ": use one of ") {
          message = message[..<cut.lowerBound] + ": over HTTP use one of "
            + Self.apiCommands.sorted().joined(separator: ", ")
        }
        return Self.error(400, error.code.rawValue, message)
      }
      guard Self.apiCommands.contains(parsed.command.name) else {
        return Self.error(
          403, "notAllowed",
          "over HTTP only \(Self.apiCommands.sorted().joined(separator: ", ")) are accepted; use the socket for \(parsed.command.name)"
        )
      }
      answerLater(exchange) { [self] in await call(parsed) }
      return nil
    default:
      if request.path.hasPrefix("/leaflet/") {
        guard reads.contains(request.method) else { return Self.methodNotAllowed("GET, HEAD") }
        return assets.leaflet(String(request.path.dropFirst("/leaflet/".count)))
      }
      return Self.error(404, "notFound", "no such path; see docs/web.md for the endpoints")
    }
  }

  /// Commands the page's controls may send to `/api`.
  static let apiCommands: Set<String> = [
    "center", "setCenter", "zoom", "mode", "annotate", "remove", "map",
  ]

  private func answerLater(
    _ exchange: HTTPExchange, _ work: @escaping @Sendable () async -> Response
  ) {
    Task { [self] in send(await work(), to: exchange) }
  }

  private func send(_ response: Response, to exchange: HTTPExchange) {
    exchange.respond(
      status: response.status, contentType: response.contentType,
      headers: response.headers + securityHeaders,
      body: response.body)
  }

  /// Sent with every response: the CSP (no inline script, scripts and connections to this origin
  /// only, images from here and the tile server), no sniffing, no framing, no referrer.
  private var securityHeaders: [(String, String)] {
    [
      ("Content-Security-Policy", assets.contentSecurityPolicy),
      ("X-Content-Type-Options", "nosniff"),
      ("X-Frame-Options", "DENY"),
      ("Referrer-Policy", "no-referrer"),
    ]
  }

  /// Host must be `localhost` or an address literal, on this port when a port is given: a name
  /// that resolves here (DNS rebinding) is refused.
  func isAllowedHost(_ host: String?) -> Bool {
    guard let host, !host.isEmpty, host.utf8.count <= 300 else { return false }
    var name = Substring(host)
    var port: Substring?
    if name.hasPrefix("[") {
      guard let close = name.firstIndex(of: "]") else { return false }
      let after = name[name.index(after: close)...]
      if after.hasPrefix(":") { port = after.dropFirst() } else if !after.isEmpty { return false }
      name = name[name.index(after: name.startIndex)..<close]
      guard Self.isNumericAddress(String(name), family: AF_INET6) else { return false }
    } else {
      if let colon = name.firstIndex(of: ":") {
        port = name[name.index(after: colon)...]
        name = name[..<colon]
      }
      guard name.lowercased() == "localhost" || Self.isNumericAddress(String(name), family: AF_INET)
      else {
        return false
      }
    }
    // Digits only: `UInt16("+8080")` would take a sign.
    if let port {
      return !port.isEmpty && port.utf8.allSatisfy { (0x30...0x39).contains($0) }
        && UInt16(port) == boundPort.load(ordering: .relaxed)
    }
    return true
  }

  private static func isNumericAddress(_ text: String, family: Int32) -> Bool {
    var storage = in6_addr()
    return inet_pton(family, text, &storage) == 1
  }

  private func checkToken(_ request: HTTPRequest) -> Response? {
    guard let credentials = Self.bearerCredentials(request.authorization),
      WebToken.matches(credentials, token)
    else {
      var response = Self.error(
        401, "notAuthorized",
        "send Authorization: Bearer TOKEN; the token is in \(tokenFile) and in the URL locationctl web prints"
      )
      response.headers.append(("WWW-Authenticate", "Bearer realm=\"locationd\""))
      return response
    }
    return nil
  }

  /// The token of `Authorization: Bearer TOKEN`; the scheme name is case-insensitive and may be
  /// followed by more than one space (RFC 7235 section 2.1, RFC 6750 section 2.1). `nil` for
  /// another scheme or no header.
  static func bearerCredentials(_ value: String?) -> String? {
    guard let value else { return nil }
    let bytes = Array(value.utf8)
    let scheme = Array("bearer".utf8)
    guard bytes.count > scheme.count,
      zip(bytes.prefix(scheme.count), scheme).allSatisfy({ $0 | 0x20 == $1 }),
      bytes[scheme.count] == 0x20
    else { return nil }
    // Spaces after the scheme, and trailing spaces and tabs (a field value's optional
    // whitespace, RFC 9110 5.5), are not part of the token.
    var rest = bytes.dropFirst(scheme.count).drop { $0 == 0x20 }
    while let last = rest.last, last == 0x20 || last == 0x09 { rest = rest.dropLast() }
    return String(decoding: rest, as: UTF8.self)
  }

  /// Writes from a browser must come from this page: `Origin`, when sent, must be this server,
  /// and `Sec-Fetch-Site`, when sent, `same-origin` (or `none`: typed by the user).
  private func checkOrigin(_ request: HTTPRequest) -> Response? {
    if let site = request.secFetchSite, site != "same-origin", site != "none" {
      return Self.error(403, "crossOrigin", "requests from other sites are refused")
    }
    if let origin = request.origin {
      guard let host = request.host, origin == "http://" + host else {
        return Self.error(403, "crossOrigin", "Origin \(origin) is not this server")
      }
    }
    return nil
  }

  private static func isJSON(_ contentType: String?) -> Bool {
    guard let contentType else { return false }
    let type = contentType.split(separator: ";").first.map { $0.trimmingSpaces.lowercased() }
    return type == "application/json"
  }

  // MARK: - Service calls

  private func context(_ channel: any ClientChannel) -> ClientContext {
    ClientContext(connection: channel, peer: peer)
  }

  /// One API request as a socket client's: authorization, the command, disconnect.
  private func call(_ request: Request) async -> Response {
    let client = context(RequestChannel())
    let reply = await authorizedReply(request, client)
    await service.clientDisconnected(client)
    return Self.response(reply, id: request.id)
  }

  private func authorizedReply(_ request: Request, _ client: ClientContext) async -> Reply {
    do throws(SessionRefusal) {
      return try await service.open(peer: client.peer, channel: client.connection).handle(request)
    } catch {
      return error.reply
    }
  }

  private func renderMap(_ format: MapFormat) async -> Response {
    let client = context(RequestChannel())
    let reply = await authorizedReply(Request(command: .map(format)), client)
    await service.clientDisconnected(client)
    guard case .object(_, let members) = reply else { return Self.response(reply, id: nil) }
    if format == .svg, let svg = members.first(where: { $0.key == "svg" })?.value.stringValue {
      return Response(
        status: 200, contentType: "image/svg+xml; charset=utf-8",
        headers: [("Cache-Control", "no-store")], body: Array(svg.utf8))
    }
    if let geojson = members.first(where: { $0.key == "geojson" })?.value {
      return Response(
        status: 200, contentType: "application/geo+json", headers: [("Cache-Control", "no-store")],
        body: geojson.encoded)
    }
    return Self.error(500, "internal", "the map renderer gave no document")
  }

  /// Status of an API reply: 200, or the error's HTTP equivalent.
  static func response(_ reply: Reply, id: RequestID?) -> Response {
    var status = 200
    if case .error(let code, _) = reply {
      switch code {
      case .malformedJSON, .unknownCommand, .invalidArgument, .lineTooLong: status = 400
      case .notAuthorized: status = 403
      case .notFound: status = 404
      case .noFix, .notReplay, .limitExceeded: status = 409
      case .notSaved, .unavailable, .tooManyClients: status = 503
      default: status = 500
      }
    }
    return Response(
      status: status, contentType: "application/json", headers: [("Cache-Control", "no-store")],
      body: reply.json(id: id).encoded)
  }

  static func error(_ status: Int, _ code: String, _ message: String) -> Response {
    Response(
      status: status, contentType: "application/json", headers: [("Cache-Control", "no-store")],
      body: JSONValue.object([
        JSONMember("class", "ERROR"), JSONMember("code", .string(code)),
        JSONMember("message", .string(message)),
      ]).encoded)
  }

  static func methodNotAllowed(_ allowed: String) -> Response {
    var response = error(405, "methodNotAllowed", "use \(allowed)")
    response.headers.append(("Allow", allowed))
    return response
  }

  // MARK: - Streams

  /// `/events`: a Server-Sent Events stream of what `watch` gives, starting with the current
  /// state (MAP, the newest TPV) so that a new or resumed stream needs nothing replayed.
  private func openStream(_ request: HTTPRequest, exchange: HTTPExchange) -> Response? {
    let id = ConnectionNumber.next()
    let firstID = eventIDs.firstID(resuming: request.lastEventID, run: run)
    let channel = EventStreamChannel(
      id: id, run: run, firstID: firstID, limits: options.streamLimits, register: eventIDs,
      wake: { exchange.wake() })
    let client = context(channel)
    streams.withLock {
      $0[id] = Stream(channel: channel, exchange: exchange, context: client, setup: nil)
    }
    channel.sendRaw("retry: 1000\n\n")
    let headers = [("Cache-Control", "no-store"), ("X-Accel-Buffering", "no")] + securityHeaders
    guard
      exchange.respondStream(
        status: 200, contentType: "text/event-stream; charset=utf-8", headers: headers, stream: id)
    else {
      streams.withLock { $0[id] = nil }
      return nil
    }
    let service = service
    let setup = Task {
      let session: ClientSession
      do throws(SessionRefusal) {
        session = try await service.open(peer: client.peer, channel: channel)
      } catch {
        channel.send(Event(body: error.reply.json(id: nil)))
        channel.close()
        return
      }
      let map = await session.handle(Request(command: .map(.json)))
      if case .object = map { channel.send(Event(body: map.json(id: nil), coalescingKey: "MAP")) }
      let location = await session.handle(Request(command: .location))
      if case .object(_, let members) = location,
        let current = members.first(where: { $0.key == "current" })?.value,
        current != .null
      {
        channel.send(.location(current))
      }
      do throws(SessionRefusal) {
        try await session.watch(coalescing: true)
      } catch {
        channel.send(Event(body: error.reply.json(id: nil)))
        channel.close()
      }
    }
    let stillOpen = streams.withLock { streams -> Bool in
      guard streams[id] != nil else { return false }
      streams[id]?.setup = setup
      return true
    }
    if !stillOpen {
      // Closed before the setup was recorded: disconnect after it here.
      Task {
        await setup.value
        await service.clientDisconnected(client)
      }
    }
    return nil
  }
}

extension Substring {
  fileprivate var trimmingSpaces: String {
    String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
  }
}
