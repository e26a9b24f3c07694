import Glibc
import LocationModel
import OwnTracks

/// Why an MQTT setting or the credentials file cannot be used; each message says what to do.
public struct MQTTSettingError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The setting's name (`mqtt`, `mqtt-topic`, ...), as in the config file.
  public var key: String
  /// The value as given.
  public var value: String
  /// What is wrong and what to give instead.
  public var reason: String

  /// `invalid KEY "VALUE": REASON`, the shape of every configuration error.
  public var description: String { "invalid \(key) \"\(value)\": \(reason)" }
}

/// The broker's address from `--mqtt mqtt[s]://HOST[:PORT]`.
public struct MQTTBrokerAddress: Sendable, Hashable, CustomStringConvertible {
  /// Host name or address (IPv6 in brackets in the URI, without them here).
  public var host: String
  /// TCP port, `1...65535`; default 1883 for `mqtt`, 8883 for `mqtts`.
  public var port: Int
  /// Whether the connection uses TLS (`mqtts`).
  public var tls: Bool

  /// Parses `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]` (no path, user or query: credentials
  /// come from a file, ``MQTTSettings/credentialsFile``).
  ///
  /// - Throws: ``MQTTSettingError`` with key `mqtt`.
  public init(uri: String) throws(MQTTSettingError) {
    func fail(_ reason: String) -> MQTTSettingError { MQTTSettingError(key: "mqtt", value: uri, reason: reason) }
    let rest: Substring
    if uri.hasPrefix("mqtt://") {
      tls = false
      rest = uri.dropFirst(7)
    } else if uri.hasPrefix("mqtts://") {
      tls = true
      rest = uri.dropFirst(8)
    } else {
      throw fail("use mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
    }
    var authority = rest
    if authority.hasSuffix("/") { authority = authority.dropLast() }
    guard !authority.isEmpty, !authority.contains("/"), !authority.contains("?"), !authority.contains("#") else {
      throw fail("give only HOST[:PORT], without a path or query")
    }
    guard !authority.contains("@") else {
      throw fail("credentials are never taken from the command line: put them in the file given by mqtt-credentials")
    }
    var hostPart = authority
    var portPart: Substring?
    if authority.hasPrefix("[") {
      guard let close = authority.firstIndex(of: "]") else { throw fail("an IPv6 address needs a closing ]") }
      hostPart = authority[authority.index(after: authority.startIndex)..<close]
      let after = authority[authority.index(after: close)...]
      if !after.isEmpty {
        guard after.hasPrefix(":") else { throw fail("expected :PORT after the IPv6 address") }
        portPart = after.dropFirst()
      }
    } else if let colon = authority.lastIndex(of: ":") {
      hostPart = authority[..<colon]
      portPart = authority[authority.index(after: colon)...]
    }
    guard !hostPart.isEmpty, hostPart.utf8.count <= 253,
      hostPart.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
    else { throw fail("the host must be a name or address of at most 253 printable ASCII characters") }
    host = String(hostPart)
    if let portPart {
      guard let number = Int(portPart), (1...65535).contains(number) else { throw fail("the port must be within 1...65535") }
      port = number
    } else {
      port = tls ? 8883 : 1883
    }
  }

  /// `mqtt[s]://HOST:PORT`.
  public var description: String {
    (tls ? "mqtts://" : "mqtt://") + (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
  }
}

/// The MQTT front-end's settings: `--mqtt` and the `mqtt-*` keys (config file or flags).
///
/// Defaults: topic `owntracks/USER/DEVICE` with USER the daemon's user name and DEVICE the host
/// name (each with `/`, `+`, `#` replaced by `_`); client id derived from the topic
/// (``defaultClientID(topic:)``); keepalive 60 s;
/// QoS 1; retain on; tracker ID the first two characters of DEVICE; no minimum interval or
/// distance; no subscription; stale after 900 s; catch-up 50 messages/s; queue 100,000 messages;
/// reconnect attempts at most 5 s apart.
public struct MQTTSettings: Sendable, Hashable {
  /// The broker (`mqtt`).
  public var broker: MQTTBrokerAddress
  /// Topic the location messages and the Last Will go to (`mqtt-topic`); `nil` = the default.
  public var topic: String?
  /// MQTT client identifier (`mqtt-client-id`), 1...128 printable ASCII characters; `nil` = default.
  public var clientID: String?
  /// Keepalive, seconds, `5...65535` (`mqtt-keepalive`).
  public var keepalive: Int = 60
  /// QoS of published messages and of the subscription, `0` or `1` (`mqtt-qos`).
  public var qos: Int = 1
  /// Whether location messages are retained (`mqtt-retain`, `on`/`off`).
  public var retain = true
  /// CA certificates file for `mqtts` (`mqtt-ca-file`); `nil` = the system's default CAs are not
  /// used by libmosquitto, so `mqtts` needs it.
  public var caFile: String?
  /// File holding `USER:PASSWORD` on its first line (`mqtt-credentials`), mode 0600 or 0400,
  /// owned by the daemon's user or root.
  public var credentialsFile: String?
  /// OwnTracks tracker ID, 1...8 characters (`mqtt-tid`); `nil` = default.
  public var trackerID: String?
  /// Minimum seconds between published fixes, `0...86400` (`mqtt-min-interval`).
  public var minimumInterval: Double = 0
  /// Minimum metres between published fixes, `0...1000000` (`mqtt-min-distance`).
  public var minimumDistance: Double = 0
  /// Subscription for the fleet view (`mqtt-subscribe`, e.g. `owntracks/+/+`); `nil` = none.
  public var subscribe: String?
  /// Seconds without a message after which a fleet device is marked stale, `1...604800` (`mqtt-stale`).
  public var staleAfter: Double = 900
  /// Messages per second published at most while the queue drains after a reconnect, `1...100000`
  /// (`mqtt-catch-up-rate`).
  public var catchUpRate: Double = 50
  /// Messages the queue holds at most, `1...10000000` (`mqtt-queue-limit`); at the limit the oldest is dropped.
  public var queueLimit: Int = 100_000
  /// Longest wait between two connection attempts, seconds, `1...3600` (`mqtt-reconnect-max`):
  /// the backoff doubles from 1 s up to it. A broker back after an outage is found within this
  /// many seconds.
  public var reconnectMaximum: Double = 5
  /// Bytes of topics and payloads the queue holds at most, 64 KiB...64 GiB (`mqtt-queue-size`,
  /// `32M`, `1G`, `512K`: binary multiples); at the bound the oldest messages are dropped.
  public var queueMaxBytes: Int64 = 32 << 20

  /// Settings for `broker` with every default.
  public init(broker: MQTTBrokerAddress) { self.broker = broker }

  /// The warning logged at start when the last location is retained (`mqtt-retain on`) on a
  /// connection without credentials, or `nil`: a broker that lets this daemon in anonymously
  /// usually lets anyone read too (Debian's mosquitto allows anonymous reads by default), and
  /// the retained message hands every local user the last location. docs/mqtt.md gives the ACL.
  public func anonymousRetainWarning(hasCredentials: Bool) -> String? {
    guard retain, !hasCredentials else { return nil }
    return
      "mqtt-retain is on and the connection is anonymous: a broker that allows anonymous connections usually lets anyone read \(effectiveTopic), retained last location included; give mqtt-credentials and an ACL that lets only that user read owntracks/# (docs/mqtt.md), or set mqtt-retain off"
  }

  /// The keys ``apply(_:_:)`` understands (flag names without `--`), `mqtt` first, in the order
  /// locationd's `--help` names them.
  public static let orderedKeys: [String] = [
    "mqtt", "mqtt-topic", "mqtt-client-id", "mqtt-keepalive", "mqtt-qos", "mqtt-retain", "mqtt-ca-file",
    "mqtt-credentials", "mqtt-tid", "mqtt-min-interval", "mqtt-min-distance", "mqtt-subscribe", "mqtt-stale",
    "mqtt-catch-up-rate", "mqtt-queue-limit", "mqtt-queue-size", "mqtt-reconnect-max",
  ]

  /// Each `mqtt-*` key's value placeholder and one-line help with its range and default, in
  /// ``orderedKeys`` order (`mqtt` aside), for locationd's `--help` (docs/mqtt.md has the same
  /// rows at length).
  public static let help: [(key: String, value: String, text: String)] = [
    ("mqtt-topic", "TOPIC", "locations and the Last Will (transitions: TOPIC/event); no + or #, not $... (default owntracks/USER/HOST)"),
    ("mqtt-client-id", "ID", "1...128 printable ASCII characters (default locationd-USER-HOST, or hashed)"),
    ("mqtt-keepalive", "S", "whole seconds, 5...65535 (default 60)"),
    ("mqtt-qos", "0|1", "QoS of every message (default 1)"),
    ("mqtt-retain", "on|off", "the broker keeps the last location for new subscribers; yes/no, true/false, 1/0 too, any case (default on)"),
    ("mqtt-ca-file", "FILE", "PEM CA certificates of the broker, absolute path; needed for mqtts (default none)"),
    ("mqtt-credentials", "FILE", "absolute path of a file whose first line is USER:PASSWORD (default anonymous)"),
    ("mqtt-tid", "TID", "OwnTracks tracker ID, 1...8 bytes (default: 2 characters of the topic)"),
    ("mqtt-min-interval", "S", "seconds between published fixes, 0...86400 (default 0)"),
    ("mqtt-min-distance", "M", "metres between published fixes, 0...1000000 (default 0)"),
    ("mqtt-subscribe", "FILTER", "topic filter of the fleet view, such as owntracks/+/+ (default none)"),
    ("mqtt-stale", "S", "seconds without a report before a fleet device is stale, 1...604800 (default 900)"),
    ("mqtt-catch-up-rate", "N", "messages per second at most, 1...100000 (default 50)"),
    ("mqtt-queue-limit", "N", "messages the queue holds at most, 1...10000000 (default 100000)"),
    ("mqtt-queue-size", "SIZE", "bytes the queue holds at most, 64K...64G, such as 32M or 1G (default 32M)"),
    ("mqtt-reconnect-max", "S", "longest wait between connection attempts, seconds, 1...3600 (default 5)"),
  ]

  /// The keys ``apply(_:_:)`` understands, as a set.
  public static let keys: Set<String> = Set(orderedKeys)

  /// Applies one setting to `settings` (created by the `mqtt` key; the other keys need it).
  ///
  /// - Throws: ``MQTTSettingError`` naming the key and what to give.
  public static func apply(_ key: String, _ value: String, to settings: inout MQTTSettings?) throws(MQTTSettingError) {
    func fail(_ reason: String) -> MQTTSettingError { MQTTSettingError(key: key, value: value, reason: reason) }
    if key == "mqtt" {
      let broker = try MQTTBrokerAddress(uri: value)
      if settings == nil { settings = MQTTSettings(broker: broker) } else { settings?.broker = broker }
      return
    }
    guard var current = settings else { throw fail("give the broker with mqtt = mqtt[s]://HOST[:PORT] first") }
    // Decimal notation only (no hexadecimal, inf or nan), as every number locationd reads.
    func number(_ range: ClosedRange<Double>) throws(MQTTSettingError) -> Double {
      guard let number = DecimalText.number(value), range.contains(number) else {
        throw fail("use a number within \(plain(range.lowerBound))...\(plain(range.upperBound))")
      }
      return number
    }
    // Counts and whole seconds: digits only.
    func whole(_ range: ClosedRange<Int>) throws(MQTTSettingError) -> Int {
      guard value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let number = Int(value),
        range.contains(number)
      else { throw fail("use a whole number within \(range.lowerBound)...\(range.upperBound)") }
      return number
    }
    func plain(_ bound: Double) -> String { bound == bound.rounded() ? String(Int64(bound)) : String(bound) }
    switch key {
    case "mqtt-topic":
      guard MQTTTopic.isValidName(value) else {
        throw fail(
          "use a topic name of 1...256 bytes without +, # or control characters, not starting with $ (reserved for the broker), e.g. owntracks/alice/car"
        )
      }
      current.topic = value
    case "mqtt-client-id":
      guard (1...128).contains(value.utf8.count), value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
        throw fail("use 1...128 printable ASCII characters")
      }
      current.clientID = value
    case "mqtt-keepalive": current.keepalive = try whole(5...65535)
    case "mqtt-qos":
      guard value == "0" || value == "1" else { throw fail("use 0 or 1") }
      current.qos = value == "0" ? 0 : 1
    case "mqtt-retain":
      // As --track reads its words: any case, and 1 and 0.
      switch value.lowercased() {
      case "on", "true", "yes", "1": current.retain = true
      case "off", "false", "no", "0": current.retain = false
      default: throw fail("use on or off (yes or no, true or false, 1 or 0)")
      }
    case "mqtt-ca-file":
      guard value.hasPrefix("/") else { throw fail("use an absolute path") }
      current.caFile = value
    case "mqtt-credentials":
      guard value.hasPrefix("/") else { throw fail("use an absolute path to a file holding USER:PASSWORD") }
      current.credentialsFile = value
    case "mqtt-tid":
      guard OwnTracksMessage.isValidTrackerID(value),
        value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
      else {
        throw fail(
          "use 1...\(OwnTracksMessage.maxTrackerIDBytes) bytes of UTF-8 of printable characters, at most \(TextRules.maxCombiningMarks) combining marks on one"
        )
      }
      current.trackerID = value
    case "mqtt-min-interval": current.minimumInterval = try number(0...86400)
    case "mqtt-min-distance": current.minimumDistance = try number(0...1_000_000)
    case "mqtt-subscribe":
      guard MQTTTopic.isValidFilter(value) else {
        throw fail("use a topic filter such as owntracks/+/+ (+ for one level, # last for the rest)")
      }
      current.subscribe = value
    case "mqtt-stale": current.staleAfter = try number(1...604_800)
    case "mqtt-catch-up-rate": current.catchUpRate = try number(1...100_000)
    case "mqtt-queue-limit": current.queueLimit = try whole(1...10_000_000)
    case "mqtt-reconnect-max": current.reconnectMaximum = try number(1...3600)
    case "mqtt-queue-size":
      let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
      var digits = Substring(value)
      var unit: Int64 = 1
      if let last = value.uppercased().last, let factor = units[last] {
        unit = factor
        digits = digits.dropLast()
      }
      guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }), let number = Int64(digits),
        number <= (64 << 30) / unit, ((64 << 10)...(64 << 30)).contains(number * unit)
      else { throw fail("use a size from 64K to 64G, such as 32M or 1G") }
      current.queueMaxBytes = number * unit
    default: throw fail("unknown setting: use one of \(keys.sorted().joined(separator: ", "))")
    }
    settings = current
  }

  /// The device part of the default topic: the host name (read once).
  public static let defaultDevice: String = {
    var buffer = [CChar](repeating: 0, count: 256)
    let name = gethostname(&buffer, buffer.count - 1) == 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    return MQTTTopic.level(name.isEmpty ? "locationd" : name)
  }()

  /// The user part of the default topic: the daemon's user name (or its uid when it has none),
  /// read once (`getpwuid`'s static buffer is then never read by two threads at once).
  public static let defaultUser: String = {
    let uid = geteuid()
    guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return String(uid) }
    return MQTTTopic.level(String(cString: name))
  }()

  /// The topic in effect.
  public var effectiveTopic: String { topic ?? "owntracks/\(Self.defaultUser)/\(Self.defaultDevice)" }
  /// The client id in effect: ``clientID``, else ``defaultClientID(topic:)`` of the topic in effect.
  public var effectiveClientID: String { clientID ?? Self.defaultClientID(topic: effectiveTopic) }

  /// The default client id of a daemon publishing to `topic`: one per topic, so two daemons on one
  /// host (or cloned devices given their own topics) do not take each other's session at the
  /// broker (MQTT 3.1.1, 3.1.4: a second connection with a client id closes the first, and the
  /// broker then publishes the first one's Last Will).
  ///
  /// `locationd-USER-DEVICE` for a topic `owntracks/USER/DEVICE` whose two levels are ASCII
  /// letters and digits, when that is at most 23 bytes (the length and characters every MQTT 3.1.1
  /// server must accept, 3.1.3.1); otherwise `locationd-` plus up to 4 letters or digits of the
  /// topic's last level, `-`, and 8 hexadecimal digits of the topic's 32-bit FNV-1a hash (at most
  /// 23 bytes).
  public static func defaultClientID(topic: String) -> String {
    func plain(_ character: Character) -> Bool { character.isASCII && (character.isLetter || character.isNumber) }
    let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
    if levels.count == 3, levels[0] == "owntracks", !levels[1].isEmpty, !levels[2].isEmpty,
      levels[1].allSatisfy(plain), levels[2].allSatisfy(plain)
    {
      let id = "locationd-\(levels[1])-\(levels[2])"
      if id.utf8.count <= 23 { return id }
    }
    var hash: UInt32 = 0x811c_9dc5
    for byte in topic.utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
    let hex = String(hash, radix: 16)
    let readable = String((levels.last ?? "").filter(plain).prefix(4))
    return "locationd-" + (readable.isEmpty ? "" : readable + "-") + String(repeating: "0", count: 8 - hex.count) + hex
  }
  /// The tracker ID in effect: ``trackerID`` or the first two characters of the topic's last level.
  public var effectiveTrackerID: String {
    trackerID ?? String((effectiveTopic.split(separator: "/").last.map(String.init) ?? "ld").prefix(2))
  }
}

/// MQTT topic names and filters (MQTT 3.1.1, section 4.7).
public enum MQTTTopic {
  /// Whether `name` can be published to: 1...256 bytes (locationd's limit; MQTT allows 65535),
  /// no `+`, `#`, NUL or control characters, and not starting with `$`, which MQTT 3.1.1
  /// (4.7.2) reserves for the server: brokers acknowledge and drop a client's publish there.
  public static func isValidName(_ name: String) -> Bool {
    (1...256).contains(name.utf8.count) && !name.hasPrefix("$")
      && !name.unicodeScalars.contains { $0 == "+" || $0 == "#" || $0.value < 0x20 || $0.value == 0x7F }
  }

  /// Whether `filter` is a valid subscription: as a name, but `+` may fill a whole level and
  /// `#` may be the whole last level.
  public static func isValidFilter(_ filter: String) -> Bool {
    guard (1...256).contains(filter.utf8.count),
      !filter.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
    else { return false }
    let levels = filter.split(separator: "/", omittingEmptySubsequences: false)
    for (index, level) in levels.enumerated() {
      if level.contains("+") && level != "+" { return false }
      if level.contains("#") && (level != "#" || index != levels.count - 1) { return false }
    }
    return true
  }

  /// `text` made usable as one topic level: `/`, `+`, `#` and control characters become `_`.
  public static func level(_ text: String) -> String {
    String(
      String.UnicodeScalarView(
        text.unicodeScalars.map { $0 == "/" || $0 == "+" || $0 == "#" || $0.value < 0x20 || $0.value == 0x7F ? "_" : $0 }))
  }
}
