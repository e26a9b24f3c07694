import Glibc
import LocationClient
import LocationProtocol
import SystemIO

/// `web`: prints the map page's URL with the token, for a daemon started with `--http`.
///
/// The daemon says where it serves and where the token is in `STATUS` (`"http":{"url":..,
/// "tokenFile":..}`); the token file is readable by the daemon's user and root only, so this
/// works for them. The token follows `#`, which a browser never sends to the server.
func runWeb(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  guard arguments.isEmpty else {
    throw UsageError("web takes no arguments (got \(arguments.joined(separator: " ")))")
  }
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  let status = try connection.call("status")
  guard let http = status["http"], let url = http["url"]?.stringValue,
    let tokenFile = http["tokenFile"]?.stringValue
  else {
    writeError(
      "locationctl: locationd does not serve the map page: start it with --http ADDRESS:PORT (config key http)"
    )
    return ExitCode.failure.rawValue
  }
  let token: String
  do {
    token = try readToken(tokenFile)
  } catch {
    writeError("locationctl: cannot read the token file \(tokenFile): \(error.message)")
    return ExitCode.failure.rawValue
  }
  let page = url + "#token=" + token
  if options.json {
    print(
      String(decoding: JSONValue.object([JSONMember("url", .string(page))]).encoded, as: UTF8.self))
  } else {
    print(page)
  }
  return ExitCode.success.rawValue
}

/// The token: the file's one line of hex digits (at most 4 KiB read; a link is not followed).
private func readToken(_ path: String) throws(ClientError) -> String {
  let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
  guard fd >= 0 else {
    let code = errno
    let hint = code == EACCES ? ": run as root or as the user locationd runs as" : ""
    throw ClientError(String(cString: strerror(code)) + hint)
  }
  defer { close(fd) }
  var info = stat()
  guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
    throw ClientError("not a regular file")
  }
  guard let bytes = try? SystemIO.readToEnd(fd, limit: 4096) else {
    throw ClientError("unreadable or too large")
  }
  let token = String(decoding: bytes, as: UTF8.self).filter { $0.isHexDigit }
  guard token.count == 64 else { throw ClientError("does not hold a token (64 hex digits)") }
  return token
}
