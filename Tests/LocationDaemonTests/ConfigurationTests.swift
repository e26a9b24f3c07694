import LocationTestKit
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel
import SystemIO
import Foundation

@Suite("Configuration")
struct ConfigurationTests {
  private func files(_ contents: [String: String]) -> (String) throws -> String {
    { path in
      guard let text = contents[path] else { throw TestError("no such file") }
      return text
    }
  }

  @Test("a control character in a config line is refused, not cut short at the C library")
  func controlCharacters() {
    for (text, line) in [
      ("socket = /tmp/a\u{0}b\n", 1), ("backend = simulate\ngroup = users\u{0}junk\n", 2),
      ("state-dir = /tmp/st\u{1B}x\n", 1),
      // Only LF ends a line: other breaks are refused where they stand, so line numbers are an
      // editor's.
      ("max-clients = 10\u{0B}max-clients = 11\n", 1), ("max-clients = 10\u{0C}x = 1\n", 1),
      ("group = \"\"\nmax-clients = 10\r\r\nmax-clients = 11\n", 2), ("group = a\u{85}b\n", 1),
      ("group = a\u{2028}b\n", 1), ("backend = simulate\r\ngroup = a\u{2029}\r\n", 2),
    ] {
      #expect(throws: ConfigurationError.self, "\(text.debugDescription)") {
        try Configuration.parseFile(text, path: "c.conf")
      }
      do {
        _ = try Configuration.parseFile(text, path: "c.conf")
      } catch {
        #expect(error.description.contains("c.conf:\(line)"), "\(error)")
        // A NUL suggests UTF-16; only a line break says that LF alone ends a line.
        let says =
          text.contains("\u{0}")
          ? "NUL (U+0000) in the line: if the file is UTF-16, save it as UTF-8"
          : text.contains("\u{1B}") ? "control character U+001B in the line" : "(only LF ends a line)"
        #expect(error.description.contains(says), "\(error)")
      }
    }
    // Invisible characters in a message are shown escaped, and a long value is cut.
    do {
      _ = try Configuration.parseFile("\u{FEFF}max-clients = 1\n\u{FEFF}max-clients = 2\n", path: "c.conf")
      Issue.record("a key after a second byte-order mark was accepted")
    } catch {
      #expect(error.description.contains("unknown key \"\\u{FEFF}max-clients\""), "\(error)")
    }
    do {
      _ = try Configuration.parse(arguments: ["--max-clients", String(repeating: "9", count: 100_000)])
      Issue.record("a 100,000-digit max-clients was accepted")
    } catch {
      #expect(error.description.utf8.count < 400 && error.description.contains("(100000 bytes in all)"), "\(error)")
    }
    // What to use is never cut: the list of keys is whole.
    do {
      _ = try Configuration.parseFile("bogus = 1\n", path: "c.conf")
    } catch {
      #expect(error.description.hasSuffix(Configuration.knownKeys.sorted().joined(separator: ", ")), "\(error)")
    }
    do {
      _ = try Configuration.parseFile("config = /etc/other.conf\n", path: "c.conf")
      Issue.record("config in a config file was accepted")
    } catch {
      #expect(error.description == "c.conf:1: a config file cannot name another: give --config on the command line")
    }
    // Tabs are blanks, and a byte-order mark before the first key is not part of it.
    let parsed = try? Configuration.parseFile("\u{FEFF}socket\t=\t/tmp/s.sock\n", path: "c.conf")
    #expect(parsed?.first?.0 == "socket")
    #expect(parsed?.first?.1 == "/tmp/s.sock")
  }

  @Test("defaults")
  func defaults() throws {
    let configuration = try Configuration.parse(arguments: [])
    #expect(configuration.backendURI == "simulate")
    #expect(configuration.socketPath == "/run/locationd/locationd.sock")
    #expect(configuration.stateDirectory == "/var/lib/locationd")
    #expect(configuration.group == "locationd")
    #expect(configuration.maxClients == 64)
    #expect(configuration.configFile == nil)
    #expect(configuration.trackEnabled)
    #expect(configuration.trackRecording == .live)
    #expect(configuration.trackMaxAge == 90 * 86_400_000)
    #expect(configuration.trackMaxSize == 256 * 1024 * 1024)
  }

  @Test("track keys: on/off, ages with units, sizes with binary multiples")
  func trackKeys() throws {
    let configuration = try Configuration.parse(
      arguments: ["--config", "/c", "--track-max-size", "2G"],
      readFile: files(["/c": "track = off\ntrack-max-age = 12h\ntrack-max-size = 5M\n"]))
    #expect(!configuration.trackEnabled)
    #expect(configuration.trackMaxAge == 12 * 3_600_000)
    #expect(try Configuration.parse(arguments: ["--track", "all"]).trackRecording == .all)
    #expect(try Configuration.parse(arguments: ["--track", "on"]).trackRecording == .live)
    #expect(throws: ConfigurationError.self) { try Configuration.parse(arguments: ["--track", "sometimes"]) }
    #expect(configuration.trackMaxSize == 2 << 30)
    #expect(try Configuration.parse(arguments: ["--track-max-age", "3600"]).trackMaxAge == 3_600_000)
    #expect(try Configuration.parse(arguments: ["--track-max-age", "0"]).trackMaxAge == 0)
    #expect(try Configuration.parse(arguments: ["--track-max-size", "500k"]).trackMaxSize == 500 * 1024)
    #expect(try Configuration.parse(arguments: ["--track-max-size", "64K"]).trackMaxSize == 65_536)
    #expect(try Configuration.parse(arguments: ["--track-max-size", "0"]).trackMaxSize == 0)
  }

  @Test("flags win over the config file; --key=value works")
  func precedence() throws {
    let file = """
      # locationd settings
      backend = simulate
      socket = "/tmp/from-file.sock"
      max-clients = 8\r
      group =

      """
    let configuration = try Configuration.parse(
      arguments: [
        "--config", "/etc/locationd.conf", "--socket=/tmp/flag.sock", "--state-dir", "/tmp/state",
      ],
      readFile: files(["/etc/locationd.conf": file]))
    #expect(configuration.backendURI == "simulate")
    #expect(configuration.socketPath == "/tmp/flag.sock")
    #expect(configuration.stateDirectory == "/tmp/state")
    #expect(configuration.maxClients == 8)
    #expect(configuration.group == nil)
    #expect(configuration.configFile == "/etc/locationd.conf")
    // A value the file gets wrong is overridden by its flag, not judged; without the flag it is
    // refused at its line. MQTT keys too.
    let bad = "max-clients = 5000\nmqtt = mqtt://broker.example\nmqtt-qos = 7\n"
    let overridden = try Configuration.parse(
      arguments: ["--config", "/c", "--max-clients=5", "--mqtt-qos", "1"], readFile: files(["/c": bad]))
    #expect(overridden.maxClients == 5)
    #expect(overridden.mqtt?.qos == 1)
    #expect(throws: ConfigurationError.self) {
      try Configuration.parse(arguments: ["--config", "/c", "--mqtt-qos", "1"], readFile: files(["/c": bad]))
    }
    #expect(throws: ConfigurationError.self) {
      try Configuration.parse(arguments: ["--config", "/c", "--max-clients=5"], readFile: files(["/c": bad]))
    }
  }

  @Test("a socket error's advice names the setting where it was given: the file's key at its line, or the flag")
  func socketAdviceNamesTheSetting() throws {
    let fromFile = try Configuration.parse(
      arguments: ["--config", "/c"], readFile: files(["/c": "socket = /tmp/x.sock\ngroup = nosuch\n"]))
    #expect(
      fromFile.placed(.noSuchGroup("nosuch"), for: "group")
        == "/c:2: group nosuch does not exist: create it (groupadd nosuch) or change group")
    #expect(
      fromFile.placed(.notASocket("/tmp/x.sock"), for: "socket")
        == "/c:1: /tmp/x.sock exists and is not a socket: remove it or choose another socket path")
    let fromFlag = try Configuration.parse(
      arguments: ["--config", "/c", "--group", "nosuch"], readFile: files(["/c": "group = other\n"]))
    #expect(
      fromFlag.placed(.noSuchGroup("nosuch"), for: "group")
        == "group nosuch does not exist: create it (groupadd nosuch) or change --group")
  }

  @Test("reload re-reads the file and keeps the flags")
  func reload() throws {
    let first = try Configuration.parse(
      arguments: ["--config", "/c", "--group", "gps"],
      readFile: files(["/c": "max-clients = 4\ngroup = other\n"]))
    #expect(first.maxClients == 4)
    #expect(first.group == "gps")
    let second = try first.reloaded(readFile: files(["/c": "max-clients = 9\n"]))
    #expect(second.maxClients == 9)
    #expect(second.group == "gps")
    #expect(throws: ConfigurationError.self) { try first.reloaded(readFile: files([:])) }
  }

  @Test(
    "errors say what is wrong",
    arguments: [
      (["--bogus", "1"], "unknown option --bogus"),
      (["--socket"], "needs a value"),
      (["--socket", "relative.sock"], "absolute path"),
      (["--max-clients", "0"], "1...4096"),
      (["--max-clients", "many"], "1...4096"),
      (["--backend", "bluetooth:/dev/rfcomm0"], "unknown backend: use serial:PATH"),
      (["--backend", "replay:/x.nmea?speed=-1"], "speed"),
      (["--backend", "replay:/x.nmea?fast=1"], "unknown parameter 'fast'"),
      (["--backend", "gpsd://localhost:99999"], "not a number in 1...65535"),
      (["--backend", "simulate:/no/such/route.gpx"], "/no/such/route.gpx"),
      (["--backend", "replay:/no/such/log.nmea"], "cannot open /no/such/log.nmea: No such file or directory"),
      (["--backend", "replay:/tmp"], "/tmp is a directory"),
      (["--config", "/missing"], "cannot read config file /missing"),
      (["--config", "/bad"], "/bad:2: unknown key \"colour\""),
      (["--config", "/noequals"], "/noequals:1: expected key = value"),
    (["--backend", "replay:/dev/null"], "/dev/null is not a regular file"),
      (["--track", "maybe"], "use live, all or off"),
      (["--track-max-age", "3 weeks"], "90d, 12h, 30m or 3600s"),
      (["--track-max-age", "-1d"], "90d, 12h, 30m or 3600s"),
      (["--track-max-size", "huge"], "256M, 2G or 500K"),
      (["--track-max-size", "2P"], "256M, 2G or 500K"),
      (["--track-max-size", "32K"], "use at least 64K (an empty track store takes 32K); 0 for no cap"),
      (["--track-max-size", "65535"], "use at least 64K"),
    ])
  func errors(arguments: [String], fragment: String) {
    do {
      _ = try Configuration.parse(
        arguments: arguments,
        readFile: files(["/bad": "backend = simulate\ncolour = red\n", "/noequals": "backend\n"]))
      Issue.record("accepted \(arguments)")
    } catch {
      #expect(error.description.contains(fragment), "\(error.description)")
    }
  }

  @Test(
    "backend URIs are validated by the backend factory and kept as given",
    arguments: [
      "simulate", "simulate?rate=5&seed=7", "replay:/etc/passwd", "replay:/etc/passwd?speed=0",
      "replay:/etc/passwd?speed=10&loop=true", "gpsd", "gpsd://127.0.0.1:2950",
      "gpsd://gps.local:2947/dev/ttyACM0", "gpsd://[::1]:2947",
    ])
  func backends(text: String) throws {
    let configuration = try Configuration.parse(arguments: ["--backend", text])
    #expect(configuration.backendURI == text)
  }

  @Test("a config file that cannot be read is reported with the system's message")
  func unreadableConfigFile() {
    do {
      _ = try Configuration.parse(arguments: ["--config", "/no/such/file.conf"])
      Issue.record("accepted a missing config file")
    } catch {
      #expect(
        error.description
          == "cannot read config file /no/such/file.conf: No such file or directory; fix the path given to --config")
    }
  }

  @Test("log values with spaces are quoted")
  func logQuoting() {
    #expect(Log.quote("simple") == "simple")
    #expect(Log.quote("two words") == "\"two words\"")
    #expect(Log.quote("a\"b\nc") == "\"a\\\"b\\nc\"")
    #expect(Log.quote("") == "\"\"")
  }

  @Test("flags follow the file's rule: a control character in a value is refused, and shown escaped")
  func controlCharactersInFlags() {
    for arguments in [
      ["--state-dir", "/tmp/st\nnl"], ["--socket", "/tmp/a\u{0}b.sock"], ["--group", "a\nb"],
      ["--mqtt", "mqtt://broker", "--mqtt-topic", "a\u{1B}b"],
    ] {
      do {
        _ = try Configuration.parse(arguments: arguments)
        Issue.record("\(arguments) was accepted")
      } catch {
        #expect(error.description.contains("control character U+00"), "\(error)")
        #expect(!error.description.contains("\n") && !error.description.contains("\u{1B}"), "\(error)")
      }
    }
    #expect((try? Configuration.parse(arguments: ["--group", "a\tb"]))?.group == "a\tb")
  }

  @Test("the NMEA feed may not share the control socket's path")
  func nmeaSocketOfItsOwn() {
    for nmea in ["/tmp/l.sock", "/tmp//l.sock", "/tmp/./l.sock"] {
      do {
        _ = try Configuration.parse(arguments: ["--socket", "/tmp/l.sock", "--nmea-socket", nmea])
        Issue.record("\(nmea) was accepted")
      } catch {
        #expect(error.description.contains("it is the --socket path too"), "\(error)")
      }
    }
    #expect((try? Configuration.parse(arguments: ["--socket", "/tmp/l.sock", "--nmea-socket", "/tmp/n.sock"])) != nil)
  }

  @Test("a value from the config file that cannot be used is reported at its file and line, with the flag's exit status")
  func fileValueErrorsNameTheLine() {
    let readFile = files([
      "/values": "# locationd\nbackend = simulate\nmax-clients = many\n",
      "/broker": "group = \"\"\nmqtt-qos = 1\n",
      "/qos": "mqtt = mqtt://broker\n\nmqtt-qos = 7\n",
      "/log": "backend = replay:/no/such/drive.nmea\n",
    ])
    let cases: [(String, String, ExitCode)] = [
      ("/values", "/values:3: invalid max-clients \"many\"", .configuration),
      ("/broker", "/broker:2: invalid mqtt-qos \"1\": needs a broker", .configuration),
      ("/qos", "/qos:3: invalid mqtt-qos \"7\"", .configuration),
      ("/log", "/log:1: backend \"replay:/no/such/drive.nmea\"", .noInput),
    ]
    for (path, prefix, status) in cases {
      do {
        _ = try Configuration.parse(arguments: ["--config", path], readFile: readFile)
        Issue.record("accepted \(path)")
      } catch {
        #expect(error.description.hasPrefix(prefix), "\(error.description)")
        #expect(error.exitCode == status, "\(path): \(error.exitCode)")
      }
    }
    // The same value given as a flag is reported without a place.
    do {
      _ = try Configuration.parse(arguments: ["--max-clients", "many"])
      Issue.record("accepted --max-clients many")
    } catch {
      #expect(error.description.hasPrefix("invalid max-clients \"many\""), "\(error.description)")
    }
  }

  @Test("bytes that are not UTF-8 are refused at their line in the file, and in a flag's value, never read as U+FFFD")
  func notUTF8Text() throws {
    let path = NSTemporaryDirectory() + "locationd-utf8-\(getpid()).conf"
    defer { unlink(path) }
    let bytes: [UInt8] = Array("group = \"\"\nsocket = /tmp/s".utf8) + [0xFF] + Array(".sock\n".utf8)
    #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
    #expect(throws: Configuration.NotUTF8Text.self) { try Configuration.readTextFile(path) }
    do {
      _ = try Configuration.parse(arguments: ["--config", path])
      Issue.record("a file that is not UTF-8 was accepted")
    } catch {
      #expect(error.description == "\(path):2: not UTF-8 text: save the file as UTF-8", "\(error)")
      #expect(error.exitCode == .configuration)
    }
    // The command line's decoding turns such bytes into U+FFFD: refused with the flag's name.
    for arguments in [["--socket", "/tmp/\u{FFFD}.sock"], ["--group", "gr\u{FFFD}ppe"], ["--config", "/tmp/\u{FFFD}.conf"]] {
      do {
        _ = try Configuration.parse(arguments: arguments)
        Issue.record("accepted \(arguments)")
      } catch {
        #expect(error.description.contains("not UTF-8 text"), "\(error)")
      }
    }
  }

  @Test("a key set twice in a file is refused, naming both lines")
  func duplicateKeys() {
    do {
      _ = try Configuration.parseFile("group = \"\"\n# later\ngroup = root\n", path: "c.conf")
      Issue.record("a duplicate key was accepted")
    } catch {
      #expect(error.description == "c.conf:3: group is set again (first on line 1): give each key once")
    }
    #expect((try? Configuration.parseFile("group = a\nsocket = /tmp/s\n", path: "c.conf"))?.count == 2)
  }

  @Test("numbers are plain decimals: hexadecimal, inf and nan are refused; counts and whole seconds take no fraction")
  func decimalNumbersOnly() {
    for arguments in [
      ["--region-error-fraction", "0x1p3"], ["--region-minimum-margin", "inf"], ["--region-minimum-margin", "nan"],
      ["--mqtt", "mqtt://broker", "--mqtt-keepalive", "0x10"], ["--mqtt", "mqtt://broker", "--mqtt-keepalive", "5.5"],
      ["--mqtt", "mqtt://broker", "--mqtt-queue-limit", "1.5"], ["--mqtt", "mqtt://broker", "--mqtt-stale", "1e400"],
      ["--mqtt", "mqtt://broker", "--mqtt-min-distance", " 5"],
    ] {
      #expect(throws: ConfigurationError.self, "\(arguments)") { try Configuration.parse(arguments: arguments) }
    }
    do {
      _ = try Configuration.parse(arguments: ["--mqtt", "mqtt://broker", "--mqtt-min-interval", "-1"])
    } catch {
      #expect(error.description.hasSuffix("use a number within 0...86400"), "\(error)")
    }
    let parsed = try? Configuration.parse(arguments: [
      "--region-error-fraction", "2.5e-1", "--mqtt", "mqtt://broker", "--mqtt-keepalive", "30", "--mqtt-min-distance", ".5",
    ])
    #expect(parsed?.regionErrorFraction == 0.25)
    #expect(parsed?.mqtt?.keepalive == 30)
    #expect(parsed?.mqtt?.minimumDistance == 0.5)
  }

  @Test("numbers are digits only: a sign in a port, age or size is refused; so is an IPv4-mapped --http address")
  func signsAndMappedAddresses() {
    for arguments in [
      ["--http", "127.0.0.1:+80"], ["--http", "+8080"], ["--http", "[::ffff:127.0.0.1]:8080"],
      ["--http", "[::ffff:7f00:1]:8080"], ["--track-max-age", "+5d"], ["--track-max-size", "+5M"],
    ] {
      #expect(throws: ConfigurationError.self, "\(arguments)") { try Configuration.parse(arguments: arguments) }
    }
    #expect((try? Configuration.parse(arguments: ["--http", "[::1]:8080"]))?.http?.address == "::1")
  }

  @Test("a flag's value may not start with --: --group --backend X names the missing value, --group=--x sets it")
  func optionAsValue() throws {
    do {
      _ = try Configuration.parse(arguments: ["--group", "--backend", "simulate"])
      Issue.record("--group --backend simulate was accepted")
    } catch {
      #expect(error == .optionAsValue(flag: "--group", next: "--backend"))
      #expect(error.exitCode == .usage)
      #expect(error.description.contains("--group=--backend"), "\(error)")
    }
    // `--` (the end of options elsewhere) is not a value either.
    #expect(throws: ConfigurationError.optionAsValue(flag: "--socket", next: "--")) {
      try Configuration.parse(arguments: ["--socket", "--"])
    }
    // Joined, a value may start with -- (group names allow it), and one - stays a value.
    let joined = try Configuration.parse(arguments: ["--group=--x", "--backend", "simulate"])
    #expect(joined.group == "--x")
    #expect(joined.backendURI == "simulate")
    let dash = try Configuration.parse(arguments: ["--group", "-staff"])
    #expect(dash.group == "-staff")
    // An unknown flag is still named as unknown, whatever follows it.
    #expect(throws: ConfigurationError.unknownFlag("--bogus")) {
      try Configuration.parse(arguments: ["--bogus", "--group", "x"])
    }
    #expect(throws: ConfigurationError.missingValue("--group")) { try Configuration.parse(arguments: ["--group"]) }
  }

  @Test("--help names every flag: --mqtt and each --mqtt-* and region flag, as flags, not keys")
  func helpNamesEveryFlag() {
    let usage = Configuration.usage
    let synopsis = usage.split(separator: "\n").prefix(6).joined(separator: "\n")
    #expect(synopsis.contains("[--mqtt URI]"), "\(synopsis)")
    for key in Configuration.knownKeys.union(["config"]) where !key.hasPrefix("region-") {
      #expect(usage.contains("--\(key) ") || usage.contains("--\(key),") || usage.contains("--\(key)\n"), "--help lacks --\(key)")
    }
    for key in Configuration.knownKeys where key.hasPrefix("region-") {
      #expect(usage.contains("--\(key) "), "--help lacks --\(key)")
    }
    #expect(!usage.contains(" keys"), "--help calls flags keys")
  }
}
