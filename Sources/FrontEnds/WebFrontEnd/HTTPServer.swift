import CMicroHTTPD
import Synchronization

// The one file that touches libmicrohttpd (through CMicroHTTPD): requests in, responses and
// stream bytes out. Every pointer from C is read within the length C gave and copied into Swift
// values before the callback returns; every buffer given to C is a Swift array whose count is
// the length passed. See docs/unsafe-code.md.

/// One HTTP request as the front-end sees it: the method, the path (no query: libmicrohttpd
/// strips it), the headers the front-end decides on, and the whole body.
struct HTTPRequest: Sendable {
  var method: String
  var path: String
  var host: String?
  var origin: String?
  var authorization: String?
  var contentType: String?
  var lastEventID: String?
  var secFetchSite: String?
  /// At most the server's body limit; empty when ``bodyTooLarge``.
  var body: [UInt8]
  /// The client sent more than the body limit.
  var bodyTooLarge: Bool
  /// The peer's numeric address.
  var peer: String
  /// The first of Host, Content-Length, Authorization, Origin sent more than once, if any.
  var repeatedHeader: String? = nil
}

/// The answer to one ``HTTPRequest``: exactly one of ``respond(status:contentType:headers:body:)``
/// or ``respondStream(status:contentType:headers:stream:)``; later calls do nothing.
final class HTTPExchange: Sendable {
  private enum Phase { case open, answered, streaming, released }
  /// The C exchange, as an integer so that the class stays `Sendable`; guarded by `phase`.
  private let address: UInt
  private let phase = Mutex(Phase.open)
  /// Set by ``trust()``.
  private let trusted = Atomic<Bool>(false)

  fileprivate init(_ pointer: OpaquePointer) {
    address = UInt(bitPattern: Int(bitPattern: pointer))
  }

  private var pointer: OpaquePointer? { OpaquePointer(bitPattern: address) }

  /// Marks the request as carrying the valid token, before answering it: its connection may then
  /// stay open for more requests and is never cut to make room under the per-address limit.
  /// Without it the answer says `Connection: close`, so a client without the token holds no
  /// connection beyond one answer.
  func trust() { trusted.store(true, ordering: .relaxed) }

  private var trustFlag: Int32 { trusted.load(ordering: .relaxed) ? 1 : 0 }

  /// Sends a complete response; `headers` are extra header lines (name and value without line breaks).
  func respond(status: Int, contentType: String, headers: [(String, String)] = [], body: [UInt8]) {
    phase.withLock { phase in
      guard phase == .open, let pointer else { return }
      phase = .answered
      let lines = Self.headerLines(headers)
      _ = body.withUnsafeBufferPointer { buffer in
        locationd_http_respond(
          pointer, UInt32(clamping: status), contentType, lines, buffer.baseAddress, buffer.count,
          trustFlag)
      }
    }
  }

  /// Starts a stream read through ``HTTPServerDelegate/nextChunk(stream:maximum:)``. Returns
  /// `false` when the connection has gone (the delegate then hears nothing of `stream`).
  func respondStream(
    status: Int, contentType: String, headers: [(String, String)] = [], stream: UInt64
  ) -> Bool {
    phase.withLock { phase in
      guard phase == .open, let pointer else { return false }
      if locationd_http_respond_stream(
        pointer, UInt32(clamping: status), contentType, Self.headerLines(headers), stream,
        trustFlag) == 1
      {
        phase = .streaming
        return true
      }
      phase = .released
      locationd_http_release(pointer)
      return false
    }
  }

  /// Tells the server that the stream has data (resumes its connection). Never call it while
  /// holding a lock that ``HTTPServerDelegate/nextChunk(stream:maximum:)`` takes.
  func wake() {
    phase.withLock { phase in
      guard phase == .streaming, let pointer else { return }
      locationd_http_wake(pointer)
    }
  }

  /// Gives up the stream's exchange after ``HTTPServerDelegate/streamClosed(_:)``.
  func release() {
    phase.withLock { phase in
      guard phase == .streaming, let pointer else { return }
      phase = .released
      locationd_http_release(pointer)
    }
  }

  /// "Name: value" lines; a name or value with a line break is left out (header injection).
  private static func headerLines(_ headers: [(String, String)]) -> String {
    headers.filter { !($0.0 + $0.1).contains(where: { $0 == "\n" || $0 == "\r" }) }
      .map { "\($0.0): \($0.1)" }.joined(separator: "\n")
  }
}

/// What the server asks of the front-end, on libmicrohttpd's thread: none may block.
protocol HTTPServerDelegate: AnyObject, Sendable {
  /// A complete request; answer through `exchange`, now or later from any thread.
  func handle(_ request: HTTPRequest, exchange: HTTPExchange)
  /// Up to `maximum` bytes of the stream's next data; empty when none is ready (the server waits
  /// for ``HTTPExchange/wake()``), `nil` to end the stream.
  func nextChunk(stream: UInt64, maximum: Int) -> [UInt8]?
  /// The stream's connection has ended; called once.
  func streamClosed(_ stream: UInt64)
}

/// Limits of one ``HTTPServer``.
struct HTTPLimits: Sendable, Hashable {
  /// Connections at once, all clients (`MHD_OPTION_CONNECTION_LIMIT`).
  var connections: Int = 256
  /// Connections at once from one address; the whole of 127.0.0.0/8 and `::1` count as one
  /// address. At the limit, the oldest of that address's connections that never carried the valid
  /// token and is idle or receiving its request is cut to make room for a newcomer.
  var connectionsPerAddress: Int = 64
  /// Seconds a connection may stay idle before it is closed (not while a stream waits for data).
  var idleTimeoutSeconds: Int = 30
  /// Seconds from the first byte of a request to its last (headers and body) before the
  /// connection is closed, however steadily bytes trickle in (slowloris); 0 for none.
  var requestDeadlineSeconds: Int = 10
  /// Largest request body in bytes; more is answered 413.
  var maxBody: Int = 16 * 1024
}

/// Why the HTTP server could not start.
struct HTTPStartError: Error, CustomStringConvertible {
  /// `errno` of the failed call, 0 when none applies.
  var code: Int32
  var message: String
  var description: String { message }
}

/// A libmicrohttpd daemon bound to one address, serving through a delegate.
final class HTTPServer: Sendable {
  private let address: UInt
  /// The port bound (the one asked for, or the one the kernel chose for 0).
  let port: UInt16

  /// Starts serving `address:port` (numeric IPv4 or IPv6). The delegate is kept for the
  /// process's life (the C server may call it until its thread ends).
  ///
  /// - Throws: ``HTTPStartError`` (library missing, address in use, not permitted...).
  init(address: String, port: UInt16, limits: HTTPLimits, delegate: any HTTPServerDelegate)
    throws(HTTPStartError)
  {
    let context = Unmanaged.passRetained(DelegateBox(delegate)).toOpaque()
    var code: Int32 = 0
    var message = [CChar](repeating: 0, count: 512)
    let server = message.withUnsafeMutableBufferPointer { buffer in
      locationd_http_start(
        address, port, UInt32(clamping: limits.connections),
        UInt32(clamping: limits.connectionsPerAddress),
        UInt32(clamping: limits.idleTimeoutSeconds),
        UInt32(clamping: limits.requestDeadlineSeconds),
        limits.maxBody, context,
        { context, exchange, request in onRequest(context, exchange, request) },
        { context, stream, buffer, capacity in onRead(context, stream, buffer, capacity) },
        { context, stream in onClosed(context, stream) },
        &code, buffer.baseAddress, buffer.count)
    }
    guard let server else {
      Unmanaged<DelegateBox>.fromOpaque(context).release()
      let text = String(
        decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      throw HTTPStartError(code: code, message: text)
    }
    self.address = UInt(bitPattern: Int(bitPattern: server))
    self.port = locationd_http_port(server)
  }

  /// Ends every stream and stops the daemon's thread. Call once.
  func stop() {
    guard let server = OpaquePointer(bitPattern: address) else { return }
    locationd_http_stop(server)
  }
}

/// Holds the delegate behind the C context pointer.
private final class DelegateBox: Sendable {
  let delegate: any HTTPServerDelegate
  init(_ delegate: any HTTPServerDelegate) { self.delegate = delegate }
}

private func delegate(_ context: UnsafeMutableRawPointer?) -> (any HTTPServerDelegate)? {
  guard let context else { return nil }
  return Unmanaged<DelegateBox>.fromOpaque(context).takeUnretainedValue().delegate
}

/// A NUL-terminated C string from C, copied; `nil` for NULL.
private func string(_ pointer: UnsafePointer<CChar>?) -> String? {
  guard let pointer else { return nil }
  return String(cString: pointer)
}

private func onRequest(
  _ context: UnsafeMutableRawPointer?, _ exchange: OpaquePointer?,
  _ request: UnsafePointer<locationd_http_request>?
) {
  guard let exchange, let request, let delegate = delegate(context) else { return }
  let c = request.pointee
  var body: [UInt8] = []
  // C guarantees body_length readable bytes at body (at most the body limit); an absurd length
  // or a NULL body yields an empty body rather than a read past the buffer.
  if let start = c.body, c.body_length > 0, c.body_length <= 1 << 24 {
    body = Array(UnsafeBufferPointer(start: start, count: c.body_length))
  }
  let peer = withUnsafeBytes(of: c.peer) { raw in
    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
  }
  let parsed = HTTPRequest(
    method: string(c.method) ?? "", path: string(c.path) ?? "", host: string(c.host),
    origin: string(c.origin),
    authorization: string(c.authorization), contentType: string(c.content_type),
    lastEventID: string(c.last_event_id), secFetchSite: string(c.sec_fetch_site), body: body,
    bodyTooLarge: c.body_too_large != 0, peer: peer, repeatedHeader: string(c.repeated_header))
  delegate.handle(parsed, exchange: HTTPExchange(exchange))
}

private func onRead(
  _ context: UnsafeMutableRawPointer?, _ stream: UInt64, _ buffer: UnsafeMutablePointer<UInt8>?,
  _ capacity: Int
) -> Int {
  guard let buffer, capacity > 0, let delegate = delegate(context) else { return -1 }
  guard let chunk = delegate.nextChunk(stream: stream, maximum: capacity) else { return -1 }
  // Never more than the capacity C gave, whatever the delegate returned.
  let count = min(chunk.count, capacity)
  chunk.withUnsafeBufferPointer { source in
    guard let base = source.baseAddress, count > 0 else { return }
    buffer.update(from: base, count: count)
  }
  return count
}

private func onClosed(_ context: UnsafeMutableRawPointer?, _ stream: UInt64) {
  delegate(context)?.streamClosed(stream)
}
