import GPSDBackend
import LocationCore
import LocationProtocol
import ServiceCore
import SocketFrontEnd
import LocationDaemon
import LocationModel

/// Configuration target. The first byte picks the parser, the rest is its input:
/// - 0: a config file (`key = value` lines), read through `--config`;
/// - 1: a backend URI (`simulate...`, `replay:...`, `gpsd://...`);
/// - 2: a command line, arguments separated by NUL bytes, with `--config` reading a fixed file.
///
/// URIs that name a GPX route (`simulate:PATH`) are skipped in modes 0 and 2: creating that
/// backend reads the named file, and a fuzzer must not read arbitrary paths (a FIFO would
/// block). The route reader has its own target (`gpx`).
///
/// Invariants: a parse either throws its documented error with a non-empty description or
/// returns values within the documented ranges and free of U+FFFD; a configuration reloaded from
/// the same flags and file (SIGHUP) parses again and needs no restart; a gpsd endpoint written
/// back as a URI parses to the same endpoint.
enum ConfigHarness {
  static func check(_ input: [UInt8]) throws(FuzzFailure) {
    guard let first = input.first else { return }
    let rest = Array(input.dropFirst())
    let text = String(decoding: rest, as: UTF8.self)
    switch first % 3 {
    case 0:
      guard !text.containsBytes("simulate:") else { return }
      try parseAndCheck(["--config", "/fuzz.conf"], file: text)
      do {
        for (key, _) in try Configuration.parseFile(text, path: "/fuzz.conf") {
          try require(Configuration.knownKeys.contains(key), "unknown key \(key) accepted")
        }
      } catch let error as ConfigurationError {
        try require(!error.description.isEmpty, "empty error description")
      } catch {
        throw FuzzFailure("\(error)")
      }
    case 1:
      try checkURI(text)
    default:
      guard !text.containsBytes("simulate:") else { return }
      let arguments = rest.split(separator: 0, omittingEmptySubsequences: false).map {
        String(decoding: $0, as: UTF8.self)
      }
      try parseAndCheck(arguments, file: "backend = simulate\nmax-clients = 8\n")
    }
  }

  static func parseAndCheck(_ arguments: [String], file: String) throws(FuzzFailure) {
    let configuration: Configuration
    do throws(ConfigurationError) {
      configuration = try Configuration.parse(arguments: arguments, readFile: { _ in file })
    } catch {
      try require(!error.description.isEmpty, "empty error description")
      return
    }
    try checkConfiguration(configuration)
    // SIGHUP: the same flags over the same file give the same configuration, so nothing needs a
    // restart; against the built-in defaults every setting's comparison runs.
    let reloaded: Configuration
    do throws(ConfigurationError) {
      reloaded = try configuration.reloaded(readFile: { _ in file })
    } catch {
      throw FuzzFailure("\(arguments) parsed once but not on reload: \(error)")
    }
    let restart = reloaded.needsRestart(comparedWith: configuration)
    try require(restart.isEmpty, "reloading the same file needs a restart of \(restart)")
    if let defaults = try? Configuration.parse(arguments: [], readFile: { _ in "" }) {
      _ = configuration.needsRestart(comparedWith: defaults)
    }
  }

  static func checkConfiguration(_ c: Configuration) throws(FuzzFailure) {
    // Bytes that are not UTF-8 (read as U+FFFD) never reach a path or a group name.
    for value in [c.socketPath, c.stateDirectory, c.group ?? "", c.backendURI, c.nmeaSocketPath ?? ""] {
      try require(!value.unicodeScalars.contains("\u{FFFD}"), "a value with U+FFFD accepted: \(value)")
    }
    try require((1...4096).contains(c.maxClients), "max-clients \(c.maxClients)")
    try require(c.socketPath.hasPrefix("/") && c.socketPath.utf8.count <= 107, "socket \(c.socketPath)")
    try require(c.stateDirectory.hasPrefix("/"), "state-dir \(c.stateDirectory)")
    if let group = c.group {
      try require(
        !group.isEmpty && group.utf8.count <= 32 && !group.contains(":") && !group.contains(" "),
        "group \(group)")
    }
  }

  static func checkURI(_ uri: String) throws(FuzzFailure) {
    do {
      let o = try SimulatedBackend.Options.parse(uri)
      try require((1...10).contains(o.rate), "rate \(o.rate)")
      try require((0...1000).contains(o.speed), "speed \(o.speed)")
      try require((0...1000).contains(o.noise), "noise \(o.noise)")
      try require((-1000...100_000).contains(o.altitude), "altitude \(o.altitude)")
      for outage in o.outages {
        try require(outage.start >= .zero && outage.end > outage.start, "outage \(outage)")
      }
    } catch let error as BackendURIError {
      try require(!error.description.isEmpty, "empty error description")
    } catch {
      throw FuzzFailure("\(error)")
    }
    do {
      let o = try ReplayBackend.Options.parse(uri)
      try require(!o.path.isEmpty, "empty replay path")
      try require(o.speed.isFinite && (0...1_000_000).contains(o.speed), "replay speed \(o.speed)")
    } catch let error as BackendURIError {
      try require(!error.description.isEmpty, "empty error description")
    } catch {
      throw FuzzFailure("\(error)")
    }
    do {
      let endpoint = try GPSDEndpoint(uri: uri)
      try require(!endpoint.host.isEmpty, "empty gpsd host from \(uri)")
      try require(endpoint.port != 0, "port 0 from \(uri)")
      let again: GPSDEndpoint
      do { again = try GPSDEndpoint(uri: endpoint.uri) } catch {
        throw FuzzFailure("gpsd endpoint \(endpoint.uri) (from \(uri)) does not parse back: \(error)")
      }
      try require(
        again.host == endpoint.host && again.port == endpoint.port && again.device == endpoint.device,
        "gpsd endpoint changes when written back: \(uri) -> \(endpoint.uri) -> \(again.uri)")
    } catch let error as GPSDURIError {
      try require(!error.description.isEmpty, "empty error description")
    } catch {
      throw FuzzFailure("\(error)")
    }
  }
}
