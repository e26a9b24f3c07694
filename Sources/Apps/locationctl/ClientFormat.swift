import LocationModel
import LocationProtocol
import NMEA

/// Human-readable text for replies and events.
enum Format {
  /// `value` with exactly `digits` decimals, halves away from zero; a value too large for fixed
  /// decimals (JSON carries no NaN or infinity) in Swift's shortest form, such as `1e+300`.
  private static func fixed(_ value: Double, _ digits: Int) -> String {
    DecimalText.fixed(value, places: digits) ?? String(value)
  }

  /// One line for a gpsd TPV object: time, position, altitude, speed, course, mode, error.
  static func fix(_ tpv: JSONValue?) -> String {
    guard let tpv, tpv != .null else { return "none" }
    var parts: [String] = []
    if let time = tpv["time"]?.stringValue { parts.append(time) }
    let mode = tpv["mode"]?.intValue ?? 0
    if let lat = tpv["lat"]?.doubleValue, let lon = tpv["lon"]?.doubleValue {
      parts.append(
        fixed(abs(lat), 6) + (lat < 0 ? " S" : " N") + " " + fixed(abs(lon), 6)
          + (lon < 0 ? " W" : " E"))
    } else {
      parts.append("no position")
    }
    if let alt = tpv["altMSL"]?.doubleValue ?? tpv["alt"]?.doubleValue {
      parts.append("alt \(fixed(alt, 1)) m")
    }
    if let speed = tpv["speed"]?.doubleValue { parts.append("speed \(fixed(speed, 2)) m/s") }
    if let track = tpv["track"]?.doubleValue {
      parts.append("course \(fixed(CompassAngle.rounded(track, places: 1), 1))°")
    }
    if let eph = tpv["eph"]?.doubleValue { parts.append("±\(fixed(eph, 1)) m") }
    parts.append(["mode 0 (unknown)", "no fix", "2D", "3D"][max(0, min(3, mode))])
    if let missed = tpv["missed"]?.intValue, missed > 0 { parts.append("(\(missed) missed)") }
    return parts.joined(separator: "  ")
  }

  static func tracking(_ reply: JSONValue) -> String {
    guard reply["tracking"] == true else {
      return "tracking: off"
        + (reply["backendActive"] == true ? " (the backend still runs for other clients)" : "")
    }
    var filters: [String] = []
    if let value = reply["distanceFilter"]?.doubleValue {
      filters.append("distance filter \(value) m")
    }
    if let value = reply["minInterval"]?.doubleValue { filters.append("min interval \(value) s") }
    if let value = reply["desiredAccuracy"]?.doubleValue {
      filters.append("desired accuracy \(value) m")
    }
    return "tracking: on" + (filters.isEmpty ? "" : " (" + filters.joined(separator: ", ") + ")")
  }

  static func status(_ reply: JSONValue) -> String {
    let backend = reply["backend"]
    var backendText =
      (backend?["uri"]?.stringValue ?? "?") + " (" + stateText(backend?["state"]?.stringValue) + ")"
    if let detail = backend?["detail"]?.stringValue { backendText += ": " + detail }
    let text = """
      authorization: \(reply["authorization"]?.stringValue ?? "?")
      tracking: \(userTracking(reply))
      backend active: \(reply["backendActive"] == true ? "yes" : "no") (for any client)
      backend: \(backendText)
      clients: \(reply["clients"]?.intValue.map(String.init) ?? "?")
      initial: \(fix(reply["initial"]))
      current: \(fix(reply["current"]))
      """ + ageLine(reply)
    return text + storage(reply["storage"])
  }

  /// "\nage: 6.2 s since the current fix arrived", with " (stale)" when the current location is
  /// stale, for a `STATUS` or `LOCATION` reply with an `age`; "" when it has none (no fix yet).
  static func ageLine(_ reply: JSONValue) -> String {
    guard let age = reply["age"]?.doubleValue else { return "" }
    return "\nage: \(age) s since the current fix arrived" + (reply["stale"] == true ? " (stale)" : "")
  }

  /// `status`'s `storage` as lines: "track store: failing, 0 fixes recorded this run, 12 lost to
  /// failed writes, 0 dropped: DETAIL", "MQTT queue: in memory, 40 waiting (40 only in memory),
  /// 0 dropped: DETAIL"; nothing when absent.
  static func storage(_ storage: JSONValue?) -> String {
    guard let storage, storage != .null else { return "" }
    var text = ""
    if let track = storage["track"], track != .null {
      let state = track["state"]?.stringValue ?? "?"
      let recorded = track["recorded"]?.intValue ?? 0
      let failed = track["failed"]?.intValue ?? 0
      let dropped = track["dropped"]?.intValue ?? 0
      var line = "\ntrack store: \(state), \(recorded) fixes recorded this run"
      if failed > 0 || dropped > 0 {
        line += ", \(failed) lost to failed writes, \(dropped) dropped"
      }
      if let waiting = track["waiting"]?.intValue, waiting > 0 {
        line += ", \(waiting) waiting for the disk"
      }
      if let detail = track["detail"]?.stringValue { line += ": " + detail }
      if case .array(let rejected)? = track["rejected"] {
        for file in rejected.compactMap(\.stringValue) { line += "\n  set aside this run: " + file }
      }
      text += line
    }
    if let queue = storage["queue"], queue != .null {
      let inMemory = queue["state"]?.stringValue == "memory"
      var line = "\nMQTT queue: " + (inMemory ? "in memory" : "on disk")
      if let waiting = queue["waiting"]?.intValue { line += ", \(waiting) waiting" }
      if let memory = queue["inMemory"]?.intValue, memory > 0 {
        line += " (\(memory) only in memory)"
      }
      if let dropped = queue["dropped"]?.intValue { line += ", \(dropped) dropped" }
      if queue["busy"] == true {
        line += " (busy: a write the disk has not finished; counts as last read)"
      }
      if let detail = queue["detail"]?.stringValue { line += ": " + detail }
      text += line
    }
    return text
  }

  /// What tracks for the caller's user and why: "on for uid 1000: 1 watch on another
  /// connection (locationctl watch; ends when it closes)".
  static func userTracking(_ reply: JSONValue) -> String {
    guard let user = reply["userTracking"], user != .null else {
      return reply["tracking"] == true ? "on" : "off (not authorized: run locationctl request)"
    }
    let uid = user["uid"]?.intValue.map { "uid \($0)" } ?? "your user"
    var reasons: [String] = []
    if user["start"] == true { reasons.append("started with locationctl start (until locationctl stop)") }
    let others = (user["watches"]?.intValue ?? 0) - (user["thisConnection"] == true ? 1 : 0)
    if user["thisConnection"] == true { reasons.append("this connection watches") }
    if others > 0 {
      reasons.append(
        "\(others) watch\(others == 1 ? "" : "es") on \(others == 1 ? "another connection" : "other connections")"
          + " (locationctl watch or a program; each ends when its connection closes)")
    }
    guard !reasons.isEmpty else {
      return "off for \(uid): no locationctl start in force and no watch (locationctl start or watch turns it on)"
    }
    return "on for \(uid): " + reasons.joined(separator: "; ")
  }

  static func location(_ reply: JSONValue) -> String {
    // The age is shown only when it matters: a fresh location prints as it always has.
    "initial: \(fix(reply["initial"]))\ncurrent: \(fix(reply["current"]))"
      + (reply["stale"] == true ? ageLine(reply) : "")
  }

  /// A `MAP` event on one line: the view and how many annotations, and which ones changed (at
  /// most 5 named), never the whole list: a fleet view of hundreds of devices would print tens
  /// of kilobytes per change.
  static func mapEvent(_ event: JSONValue) -> String {
    let center = event["center"]
    let annotations = event["annotations"]?.arrayValue ?? []
    var text =
      "center: " + fixed(center?["lat"]?.doubleValue ?? 0, 6) + ", " + fixed(center?["lon"]?.doubleValue ?? 0, 6)
      + "  zoom: " + (event["zoom"]?.doubleValue.map { fixed($0, 2) } ?? "?")
      + "  mode: " + terminalSafe(event["mode"]?.stringValue ?? "?")
      + "  annotations: \(annotations.count)"
    let changed = (event["changes"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
      .filter { $0 != "location" }
    if !changed.isEmpty {
      let named = changed.prefix(5).map { id -> String in
        let title = annotations.first { $0["id"]?.stringValue == id }?["title"]?.stringValue ?? ""
        return terminalSafe(String(id.prefix(64))) + (title.isEmpty ? "" : " " + terminalSafe(String(title.prefix(64))))
      }
      text += "  changed: " + named.joined(separator: ", ")
      if changed.count > 5 { text += " (+\(changed.count - 5) more)" }
    }
    return text
  }

  static func map(_ reply: JSONValue) -> String {
    if let svg = reply["svg"]?.stringValue { return svg }
    if let geojson = reply["geojson"] { return geojson.jsonString }
    if reply["class"] == "OK" { return "ok" }
    let center = reply["center"]
    var lines = [
      "center: " + fixed(center?["lat"]?.doubleValue ?? 0, 6) + ", "
        + fixed(center?["lon"]?.doubleValue ?? 0, 6),
      "zoom: " + (reply["zoom"]?.doubleValue.map { fixed($0, 2) } ?? "?"),
      "mode: " + (reply["mode"]?.stringValue ?? "?"),
    ]
    let annotations = reply["annotations"]?.arrayValue ?? []
    lines.append("annotations: \(annotations.count)")
    for annotation in annotations {
      var line = "  " + (annotation["id"]?.stringValue ?? "?") + "  "
      line +=
        fixed(annotation["lat"]?.doubleValue ?? 0, 6) + ", "
        + fixed(annotation["lon"]?.doubleValue ?? 0, 6)
      if let title = annotation["title"]?.stringValue, !title.isEmpty { line += "  " + title }
      if let subtitle = annotation["subtitle"]?.stringValue { line += " (" + subtitle + ")" }
      lines.append(line)
    }
    return lines.joined(separator: "\n")
  }

  static func replay(_ reply: JSONValue) -> String {
    var text = "replay: " + (reply["state"]?.stringValue ?? "?")
    if let speed = reply["speed"]?.doubleValue { text += ", speed \(speed)x" }
    if let position = reply["position"]?.doubleValue { text += ", at \(fixed(position, 1)) s" }
    return text
  }

  /// `SHUTDOWN` as a sentence: "locationd stopped (SIGTERM): ..." .
  static func shutdown(_ event: JSONValue) -> String {
    let reason = event["reason"]?.stringValue ?? "?"
    if reason.hasPrefix("SIG") {
      return "locationd is shutting down (\(terminalSafe(reason))): watch ends; run it again once locationd is back"
    }
    return "locationd is shutting down because it could not start (\(terminalSafe(reason))): see its log (journalctl -u locationd)"
  }

  /// A backend state as people read it: `deviceRemoved` becomes `device removed`, so that it is
  /// not mistaken for `noFix`; the other states as sent.
  static func stateText(_ state: String?) -> String {
    switch state {
    case nil: return "?"
    case "deviceRemoved": return "device removed"
    case let state?: return state
    }
  }

  static func event(_ event: JSONValue) -> String {
    switch event["class"]?.stringValue {
    case "TPV": return fix(event)
    case "BACKEND":
      var text =
        "backend " + (event["uri"]?.stringValue ?? "?") + ": "
        + stateText(event["state"]?.stringValue)
      if let detail = event["detail"]?.stringValue { text += " (" + detail + ")" }
      return text
    case "WARNING": return "warning: " + terminalSafe(event["message"]?.stringValue ?? "")
    case "STALE":
      return event["stale"] == true
        ? "stale: no new fix for \(event["age"]?.doubleValue.map { "\($0)" } ?? "?") s"
        : "fresh: fixes again"
    case "MAP": return mapEvent(event)
    case "AUTHORIZATION": return "authorization: " + (event["authorization"]?.stringValue ?? "?")
    case "REGION": return regionEvent(event)
    case "SHUTDOWN": return shutdown(event)
    default: return event.jsonString
    }
  }
}

/// Which `MAP` events the human `watch` prints: the first, then those that change what a person
/// reads from the map: the zoom, the user-tracking mode, whether tracking runs, the annotations
/// (other than the moving `location` one) and the center when the map does not follow (a
/// manual move or the first fix of a session). The center and rotation that follow each fix are
/// what the TPV line already says, so they print nothing.
struct MapLineFilter {
  private var last: JSONValue?

  /// Whether `event` (a `MAP` object) gets a line; remembers it when it does.
  mutating func shouldPrint(_ event: JSONValue) -> Bool {
    let key = Self.key(event)
    guard key != last else { return false }
    last = key
    return true
  }

  /// What a person cares about in a `MAP` object, as a JSON value compared whole.
  static func key(_ event: JSONValue) -> JSONValue {
    let mode = event["mode"]?.stringValue ?? ""
    let annotations = (event["annotations"]?.arrayValue ?? []).filter { $0["kind"]?.stringValue != "location" }
    var members: [JSONMember] = [
      JSONMember("zoom", event["zoom"] ?? .null), JSONMember("mode", .string(mode)),
      JSONMember("tracking", event["tracking"] ?? .null), JSONMember("annotations", .array(annotations)),
    ]
    if mode == "none" { members.append(JSONMember("center", event["center"] ?? .null)) }
    return .object(members)
  }
}
