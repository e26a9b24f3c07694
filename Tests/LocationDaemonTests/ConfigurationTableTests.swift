import Foundation
import MQTTFrontEnd
import Testing

@testable import LocationDaemon

private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  .deletingLastPathComponent().deletingLastPathComponent().path

@Suite("Configuration: one table")
struct ConfigurationTableTests {
  @Test("docs/configuration.md lists exactly the table's keys, each with its reload effect")
  func documentedKeys() throws {
    let text = try String(
      contentsOfFile: repositoryRoot + "/docs/configuration.md", encoding: .utf8)
    var documented: [String: String] = [:]
    for line in text.split(separator: "\n") where line.hasPrefix("| `") {
      let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
      guard let key = cells.first?.trimmingCharacters(in: CharacterSet(charactersIn: "`")),
        let last = cells.last
      else { continue }
      #expect(documented[key] == nil, "\(key) documented twice")
      documented[key] = last
    }
    #expect(Set(documented.keys) == Configuration.knownKeys)
    #expect(
      Configuration.knownKeys.isSuperset(of: [
        "track-max-age", "track-max-size", "mqtt", "mqtt-queue-size",
      ]))
    for setting in Configuration.settings where setting.isFileKey {
      let effect = documented[setting.key] ?? ""
      switch setting.reload {
      case .live: #expect(effect.hasPrefix("live"), "\(setting.key): \(effect)")
      case .restart(let name): #expect(effect == "restart: `\(name)`", "\(setting.key): \(effect)")
      case .commandLineOnly: Issue.record("\(setting.key) is a file key")
      }
    }
  }

  @Test(
    "every key is declared once; --help shows every one; MQTTFrontEnd's keys are the mqtt rows")
  func declaredOnce() {
    let keys = Configuration.settings.map(\.key)
    #expect(Set(keys).count == keys.count)
    #expect(Configuration.knownKeys == Set(keys).subtracting(["config"]))
    #expect(
      Configuration.settings.filter { $0.key.hasPrefix("mqtt") }.map(\.key)
        == MQTTSettings.orderedKeys)
    for key in keys {
      #expect(Configuration.usage.contains("--\(key)"), "--help lacks --\(key)")
    }
    // Every setting has help lines of its own that start with its flag; a setting with a range
    // states it and its default.
    for setting in Configuration.settings {
      #expect(setting.help.hasPrefix("  --\(setting.key) "), "\(setting.key): \(setting.help)")
    }
    for row in MQTTSettings.help where row.text.contains("...") {
      let help = Configuration.settingsByKey[row.key]?.help ?? ""
      #expect(help.contains("(default"), "\(row.key): \(help)")
    }
    #expect(MQTTSettings.help.map(\.key) == Array(MQTTSettings.orderedKeys.dropFirst()))
    let synopsis = Configuration.usage.split(separator: "\n").prefix(5)
    #expect(
      synopsis.first
        == "usage: locationd [--backend URI] [--socket PATH] [--state-dir DIR] [--group NAME]")
    #expect(synopsis.allSatisfy { $0.count <= 88 }, "\(synopsis)")
  }

  @Test("the reload diff names each restart once, in table order; live keys are not named")
  func reloadDiff() throws {
    let running = try Configuration.parse(arguments: [])
    var changed = try Configuration.parse(arguments: [
      "--group", "other", "--max-clients", "9", "--http-tiles", "none", "--http", "8080",
      "--track-max-age", "1d", "--track", "off", "--region-confirmations", "3", "--state-dir",
      "/srv/l",
      "--mqtt", "mqtt://broker",
    ])
    #expect(
      changed.needsRestart(comparedWith: running) == [
        "state-dir", "http", "track", "mqtt", "region-thresholds",
      ])
    #expect(running.needsRestart(comparedWith: running).isEmpty)
    changed = running
    changed.group = "other"
    changed.maxClients = 1
    #expect(changed.needsRestart(comparedWith: running).isEmpty)
    changed.mqtt = try Configuration.parse(arguments: ["--mqtt", "mqtt://b", "--mqtt-qos", "0"])
      .mqtt
    #expect(changed.needsRestart(comparedWith: running) == ["mqtt"])
  }
}
