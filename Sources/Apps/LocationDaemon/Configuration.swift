import LocationModel
import MQTTFrontEnd
import LocationProtocol
import ServiceCore
import Regions
import FoundationEssentials
import Glibc
import SystemIO
import WebFrontEnd
import TrackStore

/// Why the configuration is unusable; each message says what to do.
public enum ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
  /// An unknown command-line flag.
  case unknownFlag(String)
  /// A flag needs a value and none followed.
  case missingValue(String)
  /// A flag is followed by a word that starts with `--` (another option), which is never taken
  /// as its value: a value that starts with `--` is written `--flag=--value` (``OptionValue``).
  case optionAsValue(flag: String, next: String)
  /// A flag that takes no value was given one (`--help=1`).
  case unexpectedValue(String)
  /// A value could not be used.
  case invalidValue(key: String, value: String, reason: String)
  /// The backend URI is malformed.
  case invalidBackend(String, reason: String)
  /// The config file could not be read.
  case unreadableFile(String, reason: String)
  /// A config file line is not `key = value` or names an unknown key.
  case invalidLine(file: String, line: Int, reason: String)
  /// The backend URI names a file (replay log, GPX route) that cannot be read.
  case missingInput(String, reason: String)
  /// The backend needs a library that cannot be loaded.
  case unavailable(String, reason: String)
  /// A value given in a config file could not be used: `error` is what the same value given as
  /// a flag would be, `line` (from 1) the line of `file` that set it.
  indirect case inFile(file: String, line: Int, ConfigurationError)

  /// A message that says what to do; control and other invisible characters in what the user
  /// gave are shown as `\u{A}` (``TextRules/escapingInvisibles(_:)``), so that a value cannot break
  /// the message's line or the journal's, and a text longer than 200 characters is cut.
  public var description: String {
    switch self.shown {
    case .unknownFlag(let flag):
      return "unknown option \(flag): see locationd --help"
    case .missingValue(let flag):
      return "option \(flag) needs a value: see locationd --help"
    case .unexpectedValue(let flag):
      return "option \(flag) takes no value: see locationd --help"
    case .optionAsValue(let flag, let next):
      return OptionValue.Problem.looksLikeOption(option: flag, next: next).description + ": see locationd --help"
    case .invalidValue(let key, let value, let reason):
      return "invalid \(key) \"\(value)\": \(reason)"
    case .invalidBackend(let uri, let reason):
      return "invalid backend \"\(uri)\": \(reason)"
    case .unreadableFile(let path, let reason):
      // Out of descriptors or memory, the path is not what to fix.
      let resources = [EMFILE, ENFILE, ENOMEM].map { String(cString: strerror($0)) }
      let hint = resources.contains { reason.contains($0) } ? "" : "; fix the path given to --config"
      return "cannot read config file \(path): \(reason)\(hint)"
    case .invalidLine(let file, let line, let reason):
      return "\(file):\(line): \(reason)"
    case .missingInput(let uri, let reason):
      return "backend \"\(uri)\": \(reason)"
    case .unavailable(let uri, let reason):
      return "backend \"\(uri)\": \(reason)"
    case .inFile(let file, let line, let error):
      return "\(file):\(line): \(error.description)"
    }
  }

  /// This error with every invisible character in its texts written as `\u{X}`, and the values
  /// the user gave cut to 200 characters (not the reasons, which may list what to use).
  private var shown: ConfigurationError {
    func shown(_ text: String) -> String { TextRules.escapingInvisibles(text) }
    let value = TextRules.quoted
    switch self {
    case .unknownFlag(let flag): return .unknownFlag(value(flag))
    case .missingValue(let flag): return .missingValue(value(flag))
    case .unexpectedValue(let flag): return .unexpectedValue(value(flag))
    case .optionAsValue(let flag, let next): return .optionAsValue(flag: value(flag), next: value(next))
    case .invalidValue(let key, let text, let reason):
      return .invalidValue(key: value(key), value: value(text), reason: shown(reason))
    case .invalidBackend(let uri, let reason): return .invalidBackend(value(uri), reason: shown(reason))
    case .unreadableFile(let path, let reason): return .unreadableFile(value(path), reason: shown(reason))
    case .invalidLine(let file, let line, let reason): return .invalidLine(file: value(file), line: line, reason: shown(reason))
    case .missingInput(let uri, let reason): return .missingInput(value(uri), reason: shown(reason))
    case .unavailable(let uri, let reason): return .unavailable(value(uri), reason: shown(reason))
    // The inner error escapes its own texts when it is described.
    case .inFile(let file, let line, let error): return .inFile(file: shown(file), line: line, error)
    }
  }
}

/// The daemon's settings: defaults, overridden by the config file, overridden by flags.
///
/// Config file format: one `key = value` per line; `#` starts a comment line; blank lines are
/// ignored; keys are the long flag names without `--`, one per row of ``settings`` (every key,
/// its values and what a reload does with it: docs/configuration.md). Values may be wrapped in
/// double quotes.
public struct Configuration: Sendable, Hashable {
  /// The default socket path: ``ServiceSocket/defaultPath``, where clients look for the service.
  public static let defaultSocketPath = ServiceSocket.defaultPath
  /// The default state directory (systemd's `StateDirectory=locationd`).
  public static let defaultStateDirectory = "/var/lib/locationd"
  /// The default backend.

  /// The backend URI exactly as configured (`simulate` by default); ``BackendFactory`` creates
  /// the backend from it.
  public var backendURI: String = "simulate"
  /// The Unix socket path (`--socket`); ignored when systemd passes the socket.
  public var socketPath: String = defaultSocketPath
  /// Directory for persistent state such as the map state (`--state-dir`).
  public var stateDirectory: String = defaultStateDirectory
  /// Members of this group are authorized (`--group`); `nil` = root only.
  public var group: String? = "locationd"
  /// The NMEA feed's socket (`--nmea-socket`): each fix as RMC and GGA for readers such as
  /// GeoClue's `nmea-socket`; `nil` (the default, or `""`) = no feed.
  public var nmeaSocketPath: String?
  /// Maximum connected clients (`--max-clients`, `1...4096`).
  public var maxClients: Int = 64
  /// Region monitoring: the share of a fix's 95% horizontal error circle that must clear a
  /// region's boundary (`--region-error-fraction`, `0...10`; see docs/regions.md).
  public var regionErrorFraction: Double = RegionMonitorConfiguration.default.errorFraction
  /// Metres the error circle must clear the boundary by besides (`--region-minimum-margin`,
  /// `0...10000`).
  public var regionMinimumMargin: Double = RegionMonitorConfiguration.default.minimumMargin
  /// Consecutive agreeing fixes a transition needs (`--region-confirmations`, `1...100`).
  public var regionConfirmations: Int = RegionMonitorConfiguration.default.confirmations
  /// Seconds by which a fix's time may differ from the clock and still decide
  /// (`--region-maximum-fix-age`, `0...86400`).
  public var regionMaximumFixAge: Double = RegionMonitorConfiguration.default.maximumFixAge
  /// Seconds between votes after which a half-confirmed transition starts again, and how recent
  /// the evidence for a dwell must be (`--region-outage-reset`, `0...86400`).
  public var regionOutageReset: Double = RegionMonitorConfiguration.default.outageReset

  /// The region monitor's thresholds from the `region-*` settings.
  public var regionMonitorConfiguration: RegionMonitorConfiguration {
    RegionMonitorConfiguration(
      errorFraction: regionErrorFraction, minimumMargin: regionMinimumMargin, confirmations: regionConfirmations,
      maximumFixAge: regionMaximumFixAge, outageReset: regionOutageReset)
  }

  /// The bus to serve the GeoClue2 D-Bus API on (`--dbus system|session|none`); `nil` = none.
  public var dbus: String? = nil
  /// The HTTP front-end's numeric address and port (`--http ADDRESS:PORT`); `nil`: off (the default).
  public var http: (address: String, port: UInt16)? {
    get { httpAddress.map { ($0, httpPort) } }
    set {
      httpAddress = newValue?.address
      httpPort = newValue?.port ?? 0
    }
  }
  private var httpAddress: String?
  private var httpPort: UInt16 = 0
  /// The map page's tile URL template (`--http-tiles`), or `none` for a plain background.
  public var httpTiles: String = WebOptions.openStreetMapTiles
  /// The config file (`--config`), re-read on SIGHUP.
  public var configFile: String?
  /// Which accepted fixes are recorded in the track store, `track.sqlite` in the state
  /// directory (`--track live|all|off`, default live; docs/track.md).
  public var trackRecording = TrackRecordingMode.live
  /// Whether any fix is recorded (``trackRecording`` is not `off`).
  public var trackEnabled: Bool { trackRecording != .off }
  /// Retention by age, milliseconds before the newest recorded fix (`--track-max-age`, e.g.
  /// `90d`, `12h`, `3600s` or `3600`; `0` keeps every age); default 90 days.
  public var trackMaxAge: Int64 = TrackStoreConfiguration().maxAge
  /// Retention by size, bytes of live data (`--track-max-size`, e.g. `256M`, `2G`, `500000K`;
  /// `0` for no cap); default 256 MiB.
  public var trackMaxSize: Int64 = TrackStoreConfiguration().maxBytes
  /// Whether `--help` was given (print ``usage`` and exit 0).
  public var showHelp = false
  /// The MQTT front-end (`--mqtt` and the `mqtt-*` keys, docs/mqtt.md); `nil` = off.
  public var mqtt: MQTTSettings?

  /// Creates the default configuration.
  public init() {}

  /// The command-line flags seen by ``parse(arguments:readFile:)``, kept for ``reloaded(readFile:)``.
  public private(set) var flags: [String: String] = [:]

  /// The line (from 1) of the config file that set each key whose value is in effect (a flag for
  /// the same key wins and takes it out).
  private var fileLines: [String: Int] = [:]

  /// How a message names the setting `key` (`"state-dir"`): `--state-dir` when a flag or the
  /// default gave its value, `FILE:LINE: state-dir` when the config file did, so that the user
  /// knows where to change it.
  public func named(_ key: String) -> String {
    place(of: key).map { "\($0): \(key)" } ?? "--" + key
  }

  /// `FILE:LINE: ` to begin a message about `key` when the config file set it, else nothing.
  public func prefix(for key: String) -> String { place(of: key).map { "\($0): " } ?? "" }

  /// How advice names the setting `key`: `group` when the config file gave its value (the
  /// line to change), `--group` otherwise.
  public func settingName(_ key: String) -> String { place(of: key) == nil ? "--" + key : key }

  /// A socket error about `key` placed where its value came from: after ``prefix(for:)``, with
  /// its advice naming the setting as ``settingName(_:)`` does.
  public func placed(_ error: ListenError, for key: String) -> String {
    prefix(for: key) + TextRules.escapingInvisibles(error.description(naming: settingName))
  }

  /// Why ``group`` cannot be used, placed as ``placed(_:for:)`` places it, or `nil` when it is
  /// off (empty or `nil`) or names a group of the system's group database. The start and a
  /// reload both refuse a group that does not exist: it would shut every member out.
  public func missingGroupMessage() -> String? {
    guard let group, !group.isEmpty, GroupDatabase.groupID(named: group) == nil else { return nil }
    return placed(ListenError.noSuchGroup(group), for: "group")
  }

  /// `FILE:LINE` of the config file line that set `key`, or `nil` when a flag or the default gave
  /// its value.
  public func place(of key: String) -> String? {
    guard let line = fileLines[key], let path = flags["config"] else { return nil }
    return "\(TextRules.escapingInvisibles(path)):\(line)"
  }

  /// Parses command-line arguments (without the program name), reading `--config` when given.
  ///
  /// - Parameters:
  ///   - arguments: e.g. `["--backend", "simulate", "--socket=/tmp/l.sock"]`.
  ///   - readFile: reads a file's contents (tests pass their own); defaults to the file system.
  /// - Throws: ``ConfigurationError``.
  public static func parse(
    arguments: [String], readFile: (String) throws -> String = Configuration.readTextFile
  ) throws(ConfigurationError) -> Configuration {
    var flags: [String: String] = [:]
    var configuration = Configuration()
    var scanner = ArgumentScanner(arguments)
    while let word = scanner.next() {
      let name: String
      switch word {
      case .operand("-h"), .option("--help"):
        do { try scanner.noValue() } catch { throw .unexpectedValue("--help") }
        configuration.showHelp = true
        continue
      // No operands: a word that is not an option (and `--`) is named as an unknown flag.
      case .operand(let operand): throw .unknownFlag(operand)
      case .endOfOptions: throw .unknownFlag("--")
      case .option(let option): name = String(option.dropFirst(2))
      }
      // An unknown flag is named as such before its value is looked for (`--bogus=1`: `--bogus`).
      guard Self.knownKeys.contains(name) || name == "config" else {
        throw .unknownFlag("--" + name)
      }
      do {
        flags[name] = try scanner.value()
      } catch {
        switch error {
        case .optionAsValue(let option, let next): throw .optionAsValue(flag: option, next: next)
        default: throw .missingValue("--" + name)
        }
      }
    }
    configuration.flags = flags
    try configuration.apply(flags: flags, readFile: readFile)
    return configuration
  }

  /// The same flags applied again over a fresh read of the config file (SIGHUP).
  ///
  /// - Throws: ``ConfigurationError``; the caller keeps the old configuration then.
  public func reloaded(readFile: (String) throws -> String = Configuration.readTextFile) throws(ConfigurationError)
    -> Configuration
  {
    var configuration = Configuration()
    configuration.flags = flags
    try configuration.apply(flags: flags, readFile: readFile)
    return configuration
  }

  private mutating func apply(flags: [String: String], readFile: (String) throws -> String) throws(ConfigurationError) {
    // Each entry with where it was given: a value from the config file that cannot be used is
    // reported at its file and line.
    var mqttEntries: [(key: String, value: String, line: Int?)] = []
    var configPath = ""
    var fileLines: [String: Int] = [:]
    if let path = flags["config"] {
      if path.unicodeScalars.contains("\u{FFFD}") {
        throw .invalidValue(
          key: "config", value: path, reason: "not UTF-8 text (U+FFFD stands for bytes that are not): give the path in UTF-8")
      }
      try Self.settingsByKey["config"]?.apply(&self, path)
      configPath = path
      let text: String
      do { text = try readFile(path) } catch let error as NotUTF8Text {
        throw .invalidLine(file: path, line: error.line, reason: "not UTF-8 text: save the file as UTF-8")
      } catch { throw .unreadableFile(path, reason: "\(error)") }
      for entry in try Self.parseFileLines(text, path: path) {
        fileLines[entry.key] = entry.line
        // A flag wins over the file's value, which is then not used, and so not judged either:
        // a flag is how a bad value in a file one cannot edit is overridden. (The key itself
        // is known: the flag has it.)
        if flags[entry.key] != nil { continue }
        if MQTTSettings.keys.contains(entry.key) {
          mqttEntries.append((entry.key, entry.value, entry.line))
        } else {
          do { try set(entry.key, entry.value) } catch { throw .inFile(file: path, line: entry.line, error) }
        }
      }
    }
    for (key, value) in flags where key != "config" {
      if MQTTSettings.keys.contains(key) { mqttEntries.append((key, value, nil)) } else { try set(key, value) }
    }
    self.fileLines = fileLines.filter { flags[$0.key] == nil }
    // An error about the value in effect for `key`: at its line when the file gave it (a flag wins).
    func placed(_ error: ConfigurationError, key: String) -> ConfigurationError {
      guard flags[key] == nil, let line = fileLines[key] else { return error }
      return .inFile(file: configPath, line: line, error)
    }
    func setting(_ entry: (key: String, value: String, line: Int?)) throws(ConfigurationError) {
      guard let line = entry.line else { return try set(entry.key, entry.value) }
      do { try set(entry.key, entry.value) } catch { throw .inFile(file: configPath, line: line, error) }
    }
    // Without a broker every other mqtt-* key is an error: name the first one given (file order,
    // then the flags by name, so the message does not depend on dictionary order) and the key
    // that is missing.
    if mqtt == nil, !mqttEntries.isEmpty, !mqttEntries.contains(where: { $0.key == "mqtt" }) {
      let first = mqttEntries.first { $0.line != nil } ?? mqttEntries.min { $0.key < $1.key } ?? mqttEntries[0]
      let error = ConfigurationError.invalidValue(
        key: first.key, value: first.value,
        reason: "needs a broker: give --mqtt mqtt[s]://HOST[:PORT] (mqtt = ... in a config file)")
      if let line = first.line { throw .inFile(file: configPath, line: line, error) }
      throw error
    }
    // The broker first (it creates the MQTT settings), then the rest in file-then-flag order.
    for entry in mqttEntries.filter({ $0.key == "mqtt" }) + mqttEntries.filter({ $0.key != "mqtt" }) {
      try setting(entry)
    }
    // libmosquitto has no default CA store: an mqtts broker without a CA file can never connect,
    // a configuration error at start rather than a failure logged after it.
    if let mqtt, mqtt.broker.tls, mqtt.caFile == nil {
      throw placed(
        .invalidValue(
          key: "mqtt", value: mqtt.broker.description,
          reason: "mqtts needs the CA certificates of the broker: give mqtt-ca-file = PATH (--mqtt-ca-file PATH)"),
        key: "mqtt")
    }
    // CA certificates for a plain broker: the user meant TLS and would get none, so say so rather
    // than send the fixes in clear text.
    if let mqtt, !mqtt.broker.tls, let caFile = mqtt.caFile {
      throw placed(
        .invalidValue(
          key: "mqtt-ca-file", value: caFile,
          reason: "is for an mqtts broker, and \(mqtt.broker.description) is plain mqtt: write the broker as mqtts://HOST[:PORT], or leave mqtt-ca-file out"),
        key: "mqtt-ca-file")
    }
    // One socket path for two servers: the second would find the first listening there.
    if let nmea = nmeaSocketPath, Self.samePath(nmea, socketPath) {
      throw placed(
        .invalidValue(
          key: "nmea-socket", value: nmea, reason: "it is the --socket path too: give the NMEA feed a socket of its own"),
        key: "nmea-socket")
    }
  }

  /// Whether two paths name the same place as written (repeated and trailing slashes and `./`
  /// aside); the file system is not asked.
  static func samePath(_ a: String, _ b: String) -> Bool {
    func parts(_ path: String) -> [Substring] { path.split(separator: "/").filter { $0 != "." } }
    return a.hasPrefix("/") == b.hasPrefix("/") && parts(a) == parts(b)
  }

  /// Applies one setting through its row of ``settings``.
  ///
  /// - Throws: ``ConfigurationError`` from the row's check; an unknown key names the known ones.
  private mutating func set(_ key: String, _ value: String) throws(ConfigurationError) {
    guard let setting = Self.settingsByKey[key], setting.isFileKey else {
      throw .invalidValue(key: key, value: value, reason: "unknown setting: use one of \(Self.knownKeys.sorted().joined(separator: ", "))")
    }
    // The config file's rule for flags too: a NUL or other control character would cut a path
    // or group name short where it reaches the C library, or make a name no one can type.
    if let control = value.unicodeScalars.first(where: { $0.properties.generalCategory == .control && $0 != "\t" }) {
      throw .invalidValue(
        key: key, value: value,
        reason: "control character U+\(String(control.value, radix: 16, uppercase: true).leftPadded(4)) in the value")
    }
    // Bytes that are not UTF-8 reach here as U+FFFD (the command line's decoding and this file
    // reader's both replace them): taken as written, a path or group name would silently change.
    if value.unicodeScalars.contains("\u{FFFD}") {
      throw .invalidValue(
        key: key, value: value,
        reason: "not UTF-8 text (U+FFFD stands for bytes that are not): give the value in UTF-8")
    }
    try setting.apply(&self, value)
  }

  /// A finite number in decimal notation (``DecimalText/number(_:)``: no hexadecimal, `inf` or
  /// `nan`) within `range`.
  ///
  /// - Throws: ``ConfigurationError/invalidValue(key:value:reason:)`` naming the range and unit.
  static func number(_ key: String, _ value: String, in range: ClosedRange<Double>, unit: String)
    throws(ConfigurationError) -> Double
  {
    guard let number = DecimalText.number(value), range.contains(number) else {
      throw .invalidValue(
        key: key, value: value,
        reason: "use a number within \(TextNumber.plain(range.lowerBound))...\(TextNumber.plain(range.upperBound)) (\(unit))")
    }
    return number
  }

  /// `ADDRESS:PORT`, `[IPv6]:PORT`, `localhost:PORT` or `PORT` (both loopback: 127.0.0.1) to
  /// a numeric address and a port; `nil` when malformed.
  static func parseHTTPAddress(_ text: String) -> (address: String, port: UInt16)? {
    var host: Substring
    var portText: Substring
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
      host = text[text.index(after: text.startIndex)..<close]
      portText = text[text.index(close, offsetBy: 2)...]
      var address = in6_addr()
      guard inet_pton(AF_INET6, String(host), &address) == 1 else { return nil }
      // An IPv4-mapped address (::ffff:127.0.0.1) cannot be bound by an IPv6-only listener:
      // give the IPv4 address itself.
      let b = address.__in6_u.__u6_addr8
      let isMapped =
        [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7, b.8, b.9].allSatisfy { $0 == 0 } && b.10 == 0xFF && b.11 == 0xFF
      guard !isMapped else { return nil }
    } else if let colon = text.lastIndex(of: ":") {
      host = text[..<colon]
      portText = text[text.index(after: colon)...]
      if host == "localhost" { host = "127.0.0.1" }
      var address = in_addr()
      guard inet_pton(AF_INET, String(host), &address) == 1 else { return nil }
    } else {
      host = "127.0.0.1"
      portText = Substring(text)
    }
    // Digits only: Int parsing would also take a sign ("+80").
    guard !portText.isEmpty, portText.allSatisfy({ ("0"..."9").contains($0) }), let port = UInt16(portText) else {
      return nil
    }
    return (String(host), port)
  }

  /// Milliseconds for `90d`, `12h`, `30m`, `3600s` or `3600` (seconds), up to 100 years; `nil`
  /// for anything else.
  static func duration(_ text: String) -> Int64? {
    let units: [Character: Int64] = ["d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000]
    var digits = Substring(text)
    var unit: Int64 = 1000
    if let last = text.last, let factor = units[last] {
      unit = factor
      digits = digits.dropLast()
    }
    guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }), let number = Int64(digits), number >= 0,
      number <= 100 * 365 * 86_400_000 / unit
    else { return nil }
    return number * unit
  }

  /// Bytes for `256M`, `2G`, `500K` (binary multiples) or a plain number, up to 1 TiB; `nil` for
  /// anything else.
  static func size(_ text: String) -> Int64? {
    let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
    var digits = Substring(text)
    var unit: Int64 = 1
    if let last = text.uppercased().last, let factor = units[last] {
      unit = factor
      digits = digits.dropLast()
    }
    guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }), let number = Int64(digits), number >= 0,
      number <= (1 << 40) / unit
    else { return nil }
    return number * unit
  }

  /// Parses `key = value` lines.
  ///
  /// - Throws: ``ConfigurationError/invalidLine(file:line:reason:)``.
  /// A key given twice is refused (naming both lines): with "the last one wins", a stale line
  /// left above a new one would silently decide nothing, or decide what the reader did not see.
  public static func parseFile(_ text: String, path: String) throws(ConfigurationError) -> [(String, String)] {
    try parseFileLines(text, path: path).map { ($0.key, $0.value) }
  }

  /// ``parseFile(_:path:)`` with the line (from 1) of each entry.
  static func parseFileLines(_ text: String, path: String) throws(ConfigurationError)
    -> [(key: String, value: String, line: Int)]
  {
    var result: [(key: String, value: String, line: Int)] = []
    var lineOfKey: [String: Int] = [:]
    // A byte-order mark some editors write is not part of the first key.
    let text = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
    // Lines end at LF alone (a CR before it belongs to the line end: CRLF files work), as `wc -l`,
    // `grep -n` and editors count them; any other line or paragraph break (VT, FF, a lone CR,
    // NEL, U+2028, U+2029) is refused below rather than taken as one.
    let lines = text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { scalars in
      Substring(String(String.UnicodeScalarView(scalars.last == "\r" ? scalars.dropLast() : scalars[...])))
    }
    for (number, rawLine) in lines.enumerated() {
      // A NUL or other control character would silently cut a path or group name short where
      // it reaches the C library: refuse the line instead.
      if let control = rawLine.unicodeScalars.first(where: {
        ($0.properties.generalCategory == .control && $0 != "\t")
          || $0.properties.generalCategory == .lineSeparator || $0.properties.generalCategory == .paragraphSeparator
      }) {
        let code = "U+\(String(control.value, radix: 16, uppercase: true).leftPadded(4))"
        let lineBreaks: Set<Unicode.Scalar> = ["\r", "\u{0B}", "\u{0C}", "\u{85}", "\u{2028}", "\u{2029}"]
        throw .invalidLine(
          file: path, line: number + 1,
          reason: control == "\0"
            ? "NUL (U+0000) in the line: if the file is UTF-16, save it as UTF-8"
            : lineBreaks.contains(control)
              ? "line break \(code) in the line (only LF ends a line)" : "control character \(code) in the line")
      }
      let line = trim(rawLine)
      if line.isEmpty || line.hasPrefix("#") { continue }
      guard let equals = line.firstIndex(of: "=") else {
        throw .invalidLine(file: path, line: number + 1, reason: "expected key = value")
      }
      let key = trim(line[..<equals])
      var value = trim(line[line.index(after: equals)...])
      if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
        value = String(value.dropFirst().dropLast())
      }
      if key == "config" {
        throw .invalidLine(
          file: path, line: number + 1, reason: "a config file cannot name another: give --config on the command line")
      }
      guard knownKeys.contains(key) else {
        throw .invalidLine(
          file: path, line: number + 1,
          reason: "unknown key \"\(key)\": use one of \(knownKeys.sorted().joined(separator: ", "))")
      }
      if let first = lineOfKey[key] {
        throw .invalidLine(
          file: path, line: number + 1, reason: "\(key) is set again (first on line \(first)): give each key once")
      }
      lineOfKey[key] = number + 1
      result.append((key, value, number + 1))
    }
    return result
  }

  private static func trim(_ text: Substring) -> String {
    let start = text.drop { $0 == " " || $0 == "\t" }
    guard let last = start.lastIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
    return String(start[...last])
  }

  /// Reads a UTF-8 text file of at most 1 MiB. Opened with `O_NONBLOCK` and read only when it
  /// is a regular file, so a FIFO or device at the path cannot hang a reload.
  ///
  /// - Throws: the file system error, "not a regular file", or ``NotUTF8Text``.
  public static func readTextFile(_ path: String) throws -> String {
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { throw FileError(message: String(cString: strerror(errno))) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw FileError(message: String(cString: strerror(errno))) }
    guard info.st_mode & S_IFMT == S_IFREG else { throw FileError(message: "not a regular file") }
    let bytes: [UInt8]
    do {
      bytes = try SystemIO.readToEnd(fd, limit: 1 << 20)
    } catch {
      switch error {
      case .system(let error):
        throw FileError(message: error.description)
      case .tooLarge:
        throw FileError(message: "larger than 1 MiB")
      }
    }
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    // The first line (LF-separated, from 1) that is not UTF-8.
    var line = 1
    for part in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
      if String(validating: part, as: UTF8.self) == nil { break }
      line += 1
    }
    throw NotUTF8Text(line: line)
  }

  /// A config file whose bytes are not UTF-8 from `line` (from 1) on.
  public struct NotUTF8Text: Error, CustomStringConvertible {
    /// The first line that is not UTF-8.
    public var line: Int
    public var description: String { "line \(line) is not UTF-8 text" }
  }

  /// A file error with the system's message (`No such file or directory`).
  struct FileError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
  }
}

extension String {
  /// The string with leading zeros up to `width` characters.
  fileprivate func leftPadded(_ width: Int) -> String {
    String(repeating: "0", count: max(0, width - count)) + self
  }
}

/// Numbers as people write them in messages: `10`, not `10.0`.
enum TextNumber {
  static func plain(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
  }
}

/// Which fixes the daemon records in its track store (`--track`).
public enum TrackRecordingMode: String, Sendable, Hashable {
  /// Fixes from live sources only (gpsd, a receiver): a replay or simulation never enters the
  /// history as if it had happened. The default.
  case live
  /// Every accepted fix; replayed and simulated ones are marked as such in the store
  /// (`track export --source`, `track stats --source`).
  case all
  /// Nothing is recorded.
  case off
}
