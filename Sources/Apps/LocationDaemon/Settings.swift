import LocationCore
import LocationModel
import MQTTFrontEnd
import SocketFrontEnd
import SystemIO
import WebFrontEnd

/// One setting of locationd, declared once: its key (the config file's `key = value` and the
/// flag `--key`), its `--help` text, how a value is checked and applied, and what a reload
/// (SIGHUP) does with a change. ``Configuration/settings`` is the table; the usage text,
/// ``Configuration/knownKeys``, the config-file parser and the reload diff
/// (``Configuration/needsRestart(comparedWith:)``) are derived from it.
public struct Setting: Sendable {
  /// What a reload does when the setting's value changed.
  public enum Reload: Sendable, Hashable {
    /// Applied at once (to connected clients too).
    case live
    /// Logged as `needsRestart=NAME` and applied at the next start; related keys share a name
    /// (`http` for `http` and `http-tiles`).
    case restart(String)
    /// A command-line flag only (`--config`): not a config-file key, never re-read.
    case commandLineOnly
  }

  /// Where the setting's help stands in `--help`.
  public enum Section: Sendable, Hashable {
    /// The options list.
    case options
    /// "MQTT", after the options: the `mqtt-*` flags.
    case mqtt
    /// "Region monitoring", after MQTT.
    case regions
  }

  /// The key: the flag's name without `--` (`max-clients`).
  public let key: String
  /// The flag with its value in the usage synopsis (`[--max-clients N]`); `nil` when a family
  /// item stands for it (`[--mqtt-... VALUE]`).
  public let synopsis: String?
  /// Its lines in `--help` (each starting with two spaces, ending with a newline).
  public let help: String
  /// The part of `--help` it is listed in.
  public let section: Section
  /// What a reload does with a change.
  public let reload: Reload
  /// Checks `value` (its range or shape) and stores it.
  ///
  /// - Throws: ``ConfigurationError/invalidValue(key:value:reason:)`` saying what to give (or
  ///   a backend error for `backend`).
  let apply: @Sendable (inout Configuration, String) throws(ConfigurationError) -> Void
  /// Whether two configurations differ in this setting.
  let differs: @Sendable (Configuration, Configuration) -> Bool

  /// Whether the key may appear in a config file (every one but `config`).
  public var isFileKey: Bool { reload != .commandLineOnly }

  init(
    _ key: String, synopsis: String?, help: String, section: Section = .options, reload: Reload,
    apply: @escaping @Sendable (inout Configuration, String) throws(ConfigurationError) -> Void,
    differs: @escaping @Sendable (Configuration, Configuration) -> Bool
  ) {
    self.key = key
    self.synopsis = synopsis
    self.help = help
    self.section = section
    self.reload = reload
    self.apply = apply
    self.differs = differs
  }
}

extension Configuration {
  /// Every setting, in `--help` order (the reload diff names restarts in this order too).
  public static let settings: [Setting] =
    [
      Setting(
        "backend", synopsis: "[--backend URI]",
        help: """
            --backend URI     simulate[:ROUTE.gpx] | replay:PATH[?speed=10&loop=true] |
                              gpsd://HOST:PORT[/DEVICE] | serial:PATH[?baud=RATE] |
                              tcp://HOST:PORT | udp://ADDR:PORT  (default simulate)

          """, reload: .restart("backend"),
        apply: { configuration, value throws(ConfigurationError) in
          try checkBackend(value)
          configuration.backendURI = value
        }, differs: { $0.backendURI != $1.backendURI }),
      Setting(
        "socket", synopsis: "[--socket PATH]",
        help: """
            --socket PATH     Unix socket to listen on           (default /run/locationd/locationd.sock)

          """, reload: .restart("socket"),
        apply: { configuration, value throws(ConfigurationError) in
          guard value.hasPrefix("/"), value.utf8.count <= 107 else {
            throw .invalidValue(
              key: "socket", value: value, reason: "use an absolute path of at most 107 bytes")
          }
          configuration.socketPath = value
        }, differs: { $0.socketPath != $1.socketPath }),
      Setting(
        "state-dir", synopsis: "[--state-dir DIR]",
        help: """
            --state-dir DIR   persistent state, a directory      (default /var/lib/locationd)

          """, reload: .restart("state-dir"),
        apply: { configuration, value throws(ConfigurationError) in
          guard value.hasPrefix("/") else {
            throw .invalidValue(
              key: "state-dir", value: value, reason: "use an absolute directory path")
          }
          configuration.stateDirectory = value
        }, differs: { $0.stateDirectory != $1.stateDirectory }),
      Setting(
        "group", synopsis: "[--group NAME]",
        help: """
            --group NAME      members may use the service, "" for root only (default locationd)

          """, reload: .live,
        apply: { configuration, value throws(ConfigurationError) in
          guard value.utf8.count <= 32, !value.contains(":"), !value.contains(" ") else {
            throw .invalidValue(
              key: "group", value: value,
              reason: "use a group name such as locationd, or \"\" for root only")
          }
          configuration.group = value.isEmpty ? nil : value
        }, differs: { $0.group != $1.group }),
      Setting(
        "max-clients", synopsis: "[--max-clients N]",
        help: """
            --max-clients N   1...4096                           (default 64)

          """, reload: .live,
        apply: { configuration, value throws(ConfigurationError) in
          guard let number = DecimalText.wholeNumber(value, as: Int.self), (1...4096).contains(number) else {
            throw .invalidValue(
              key: "max-clients", value: value, reason: "use a whole number within 1...4096")
          }
          configuration.maxClients = number
        }, differs: { $0.maxClients != $1.maxClients }),
      Setting(
        "dbus", synopsis: "[--dbus system|session|none]",
        help: """
            --dbus BUS        serve the GeoClue2 D-Bus API (org.freedesktop.GeoClue2) on the
                              system or session bus, or none    (default none); applications look
                              on the system bus, session is for a private or test bus
                              (scripts/try-geoclue, docs/geoclue.md)

          """, reload: .restart("dbus"),
        apply: { configuration, value throws(ConfigurationError) in
          guard ["system", "session", "none"].contains(value) else {
            throw .invalidValue(key: "dbus", value: value, reason: "use system, session or none")
          }
          configuration.dbus = value == "none" ? nil : value
        }, differs: { $0.dbus != $1.dbus }),
      Setting(
        "nmea-socket", synopsis: "[--nmea-socket PATH]",
        help: """
            --nmea-socket PATH  serve each fix as NMEA RMC and GGA on this Unix socket, for GeoClue's
                              nmea-socket; same mode and group as --socket (default none)

          """, reload: .restart("nmea-socket"),
        apply: { configuration, value throws(ConfigurationError) in
          guard value.isEmpty || (value.hasPrefix("/") && value.utf8.count <= 107) else {
            throw .invalidValue(
              key: "nmea-socket", value: value,
              reason: "use an absolute path of at most 107 bytes, or \"\" for no NMEA feed")
          }
          configuration.nmeaSocketPath = value.isEmpty ? nil : value
        }, differs: { $0.nmeaSocketPath != $1.nmeaSocketPath }),
      Setting(
        "http", synopsis: "[--http ADDRESS:PORT]",
        help: """
            --http ADDRESS:PORT
                              serve the live map page over HTTP (off by default); PORT alone or
                              localhost:PORT is 127.0.0.1:PORT, [::1]:PORT for IPv6, 0.0.0.0:PORT
                              for every interface; `locationctl web` prints its URL

          """, reload: .restart("http"),
        apply: { configuration, value throws(ConfigurationError) in
          guard let parsed = parseHTTPAddress(value) else {
            throw .invalidValue(
              key: "http", value: value,
              reason:
                "use ADDRESS:PORT with a numeric address (127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080), localhost:PORT or PORT; PORT 0...65535"
            )
          }
          configuration.http = parsed
        }, differs: { $0.http?.address != $1.http?.address || $0.http?.port != $1.http?.port }),
      Setting(
        "http-tiles", synopsis: "[--http-tiles URL|none]",
        help: """
            --http-tiles URL  tile URL template with {z} {x} {y}, or none for a plain background
                              (default https://tile.openstreetmap.org/{z}/{x}/{y}.png)

          """, reload: .restart("http"),
        apply: { configuration, value throws(ConfigurationError) in
          if let problem = WebOptions.problem(withTiles: value) {
            throw .invalidValue(key: "http-tiles", value: value, reason: problem)
          }
          configuration.httpTiles = value
        }, differs: { $0.httpTiles != $1.httpTiles }),
      Setting(
        "track", synopsis: "[--track live|all|off]",
        help: """
            --track live|all|off  record accepted fixes in STATE-DIR/track.sqlite: live
                              sources only (gpsd), all (replays and simulations too, marked
                              as such), or off; on, yes, true, 1 mean live, and no, false,
                              0 mean off                          (default live)

          """, reload: .restart("track"),
        apply: { configuration, value throws(ConfigurationError) in
          switch value.lowercased() {
          case "live", "on", "yes", "true", "1": configuration.trackRecording = .live
          case "all": configuration.trackRecording = .all
          case "off", "no", "false", "0": configuration.trackRecording = .off
          default: throw .invalidValue(key: "track", value: value, reason: "use live, all or off")
          }
        }, differs: { $0.trackRecording != $1.trackRecording }),
      Setting(
        "track-max-age", synopsis: "[--track-max-age AGE]",
        help: """
            --track-max-age AGE   drop fixes older than AGE before the newest: 90d, 12h, 30m,
                              3600s or 3600, at most 100 years; 0 keeps all (default 90d)

          """, reload: .restart("track"),
        apply: { configuration, value throws(ConfigurationError) in
          guard let milliseconds = duration(value) else {
            throw .invalidValue(
              key: "track-max-age", value: value,
              reason: "use a duration such as 90d, 12h, 30m or 3600s, at most 100 years (36500d); 0 keeps all")
          }
          configuration.trackMaxAge = milliseconds
        }, differs: { $0.trackMaxAge != $1.trackMaxAge }),
      Setting(
        "track-max-size", synopsis: "[--track-max-size SIZE]",
        help: """
            --track-max-size SIZE keep the track under SIZE: 256M, 2G, 500K, 1T or bytes,
                              from 64K to 1T; 0 for no cap         (default 256M)

          """, reload: .restart("track"),
        apply: { configuration, value throws(ConfigurationError) in
          guard let bytes = size(value) else {
            throw .invalidValue(
              key: "track-max-size", value: value,
              reason: "use a size such as 256M, 2G or 500K, at most 1T; 0 for no cap")
          }
          // The store's tables and index take 32 KiB before the first fix: a smaller cap would
          // delete every fix as it is recorded.
          guard bytes == 0 || bytes >= Self.minimumTrackSize else {
            throw .invalidValue(
              key: "track-max-size", value: value,
              reason: "use at least 64K (an empty track store takes 32K); 0 for no cap")
          }
          configuration.trackMaxSize = bytes
        }, differs: { $0.trackMaxSize != $1.trackMaxSize }),
      Setting(
        "config", synopsis: "[--config FILE]",
        help: """
            --config FILE     key = value lines with the flags' names without --; flags win;
                              re-read on SIGHUP

          """, reload: .commandLineOnly,
        apply: { configuration, value throws(ConfigurationError) in
          guard !value.isEmpty else {
            throw .invalidValue(key: "config", value: value, reason: "give a file path")
          }
          configuration.configFile = value
        }, differs: { $0.configFile != $1.configFile }),
    ] + mqttSettings + regionSettings

  /// `mqtt` and the `mqtt-*` keys (MQTTFrontEnd checks each value: ``MQTTSettings/apply(_:_:to:)``
  /// and gives each flag's help: ``MQTTSettings/help``).
  static var mqttSettings: [Setting] {
    let mqttHelp = """
        --mqtt URI        mqtt[s]://HOST[:PORT]: publish OwnTracks locations (docs/mqtt.md);
                          the --mqtt-* flags below need it

      """
    let help = Dictionary(MQTTSettings.help.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
    /// `  --KEY VALUE  TEXT`, the text wrapped at 91 columns under column 29.
    func lines(_ key: String) -> String {
      guard let row = help[key] else { return "" }
      var flag = "  --\(key) \(row.value)"
      flag += String(repeating: " ", count: max(1, 29 - flag.count))
      var out: [String] = []
      var line = flag
      for word in row.text.split(separator: " ") {
        if line.count + 1 + word.count > 91, line.count > 29 {
          out.append(line)
          line = String(repeating: " ", count: 29)
        }
        line += (line.hasSuffix(" ") ? "" : " ") + word
      }
      out.append(line)
      return out.joined(separator: "\n") + "\n"
    }
    return MQTTSettings.orderedKeys.map { key in
      Setting(
        key,
        synopsis: key == "mqtt" ? "[--mqtt URI]" : key == "mqtt-topic" ? "[--mqtt-... VALUE]" : nil,
        help: key == "mqtt" ? mqttHelp : lines(key), section: key == "mqtt" ? .options : .mqtt, reload: .restart("mqtt"),
        apply: { configuration, value throws(ConfigurationError) in
          do throws(MQTTSettingError) {
            try MQTTSettings.apply(key, value, to: &configuration.mqtt)
          } catch {
            throw .invalidValue(key: error.key, value: error.value, reason: error.reason)
          }
        }, differs: { $0.mqtt != $1.mqtt })
    }
  }

  /// The region monitor's thresholds (docs/regions.md); the ranges are the engine's own.
  static let regionSettings: [Setting] = [
    Setting(
      "region-error-fraction", synopsis: "[--region-... VALUE]",
      help: """
          --region-error-fraction F  share of a fix's 95% error radius that must clear the
                                     boundary, 0...10                  (default 1)

        """, section: .regions, reload: .restart("region-thresholds"),
      apply: { configuration, value throws(ConfigurationError) in
        configuration.regionErrorFraction = try number(
          "region-error-fraction", value, in: 0...10, unit: "a share of the 95% error radius")
      }, differs: { $0.regionErrorFraction != $1.regionErrorFraction }),
    Setting(
      "region-minimum-margin", synopsis: nil,
      help: """
          --region-minimum-margin M  metres to clear it by besides, 0...10000 (default 5)

        """, section: .regions, reload: .restart("region-thresholds"),
      apply: { configuration, value throws(ConfigurationError) in
        configuration.regionMinimumMargin = try number(
          "region-minimum-margin", value, in: 0...10_000, unit: "metres")
      }, differs: { $0.regionMinimumMargin != $1.regionMinimumMargin }),
    Setting(
      "region-confirmations", synopsis: nil,
      help: """
          --region-confirmations N   consecutive agreeing fixes, 1...100 (default 2)

        """, section: .regions, reload: .restart("region-thresholds"),
      apply: { configuration, value throws(ConfigurationError) in
        guard let number = DecimalText.wholeNumber(value, as: Int.self), (1...100).contains(number) else {
          throw .invalidValue(
            key: "region-confirmations", value: value,
            reason: "use a whole number of fixes within 1...100")
        }
        configuration.regionConfirmations = number
      }, differs: { $0.regionConfirmations != $1.regionConfirmations }),
    Setting(
      "region-maximum-fix-age", synopsis: nil,
      help: """
          --region-maximum-fix-age S seconds a fix's time may differ from the clock, 0...86400
                                                                       (default 10)

        """, section: .regions, reload: .restart("region-thresholds"),
      apply: { configuration, value throws(ConfigurationError) in
        configuration.regionMaximumFixAge = try number(
          "region-maximum-fix-age", value, in: 0...86_400, unit: "seconds")
      }, differs: { $0.regionMaximumFixAge != $1.regionMaximumFixAge }),
    Setting(
      "region-outage-reset", synopsis: nil,
      help: """
          --region-outage-reset S    seconds between votes that restart a confirmation,
                                     0...86400                         (default 60)

        """, section: .regions, reload: .restart("region-thresholds"),
      apply: { configuration, value throws(ConfigurationError) in
        configuration.regionOutageReset = try number(
          "region-outage-reset", value, in: 0...86_400, unit: "seconds")
      }, differs: { $0.regionOutageReset != $1.regionOutageReset }),
  ]

  /// The settings by key.
  /// The smallest `track-max-size` other than 0, in bytes: 64 KiB, twice an empty store.
  static let minimumTrackSize: Int64 = 64 * 1024

  static let settingsByKey: [String: Setting] = Dictionary(settings.map { ($0.key, $0) }) {
    first, _ in first
  }

  /// The keys a config file and flags may set (flag names without `--`; `--config` aside).
  public static let knownKeys: Set<String> = Set(settings.filter(\.isFileKey).map(\.key))

  /// The `--help` text: the synopsis, each setting's lines, the region thresholds, the notes
  /// and the exit statuses (``ExitCode/table``).
  public static let usage: String = {
    var synopsis: [String] = []
    var line = "usage: locationd"
    for item in settings.compactMap(\.synopsis) {
      if line.count + 1 + item.count > 88 {
        synopsis.append(line)
        line = String(repeating: " ", count: 16)
      }
      line += " " + item
    }
    synopsis.append(line)
    let options = settings.filter { $0.section == .options }.map(\.help).joined()
    let mqtt = settings.filter { $0.section == .mqtt }.map(\.help).joined()
    let regions = settings.filter { $0.section == .regions }.map(\.help).joined()
    return synopsis.joined(separator: "\n") + "\n\n" + options + "\n"
      + "MQTT (docs/mqtt.md; a change needs a restart):\n" + mqtt + "\n"
      + "Region monitoring (docs/regions.md; a change needs a restart):\n" + regions + "\n"
        + """
        A value that starts with -- is written joined to its flag: --group=--x (a separate word
        that starts with -- is the next flag). The socket's directory and the state directory are
        created when missing (one level: their parents must exist).


        """ + ExitCode.table
  }()

  /// The settings that differ from `running` and need a restart, by their reload name, each
  /// once, in table order (`backend`, `state-dir`, `http`, `mqtt`, `track`,
  /// `region-thresholds`...): the `needsRestart` of the `reloaded` log line.
  public func needsRestart(comparedWith running: Configuration) -> [String] {
    var names: [String] = []
    for setting in Self.settings {
      guard case .restart(let name) = setting.reload, !names.contains(name),
        setting.differs(self, running)
      else {
        continue
      }
      names.append(name)
    }
    return names
  }

  /// Checks a backend URI as ``BackendFactory`` would create it.
  ///
  /// - Throws: ``ConfigurationError/invalidBackend(_:reason:)``,
  ///   ``ConfigurationError/missingInput(_:reason:)`` or ``ConfigurationError/unavailable(_:reason:)``.
  static func checkBackend(_ value: String) throws(ConfigurationError) {
    do {
      _ = try BackendFactory.make(uri: value)
    } catch {
      switch error.kind {
      case .invalid: throw .invalidBackend(value, reason: error.reason)
      case .missingInput: throw .missingInput(value, reason: error.reason)
      case .unavailable: throw .unavailable(value, reason: error.reason)
      }
    }
  }
}
