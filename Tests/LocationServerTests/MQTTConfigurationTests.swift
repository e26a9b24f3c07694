import MQTTTransport
import Testing

@testable import LocationDaemon

@Suite("Configuration: MQTT keys")
struct MQTTConfigurationTests {
  private func files(_ contents: [String: String]) -> (String) throws -> String {
    { path in
      guard let text = contents[path] else { throw TestError("no such file") }
      return text
    }
  }

  @Test("mqtt keys in any order in the file; flags win; an mqtt-* key without mqtt is refused")
  func keys() throws {
    let file = "mqtt-topic = owntracks/alice/car\nmqtt-qos = 0\nmqtt = mqtt://broker.example\nmqtt-subscribe = owntracks/+/+\n"
    let configuration = try Configuration.parse(
      arguments: ["--config", "/c", "--mqtt-qos", "1", "--mqtt-min-distance", "20"], readFile: files(["/c": file]))
    let mqtt = try #require(configuration.mqtt)
    #expect(mqtt.broker.description == "mqtt://broker.example:1883")
    #expect(mqtt.effectiveTopic == "owntracks/alice/car")
    #expect(mqtt.qos == 1)
    #expect(mqtt.minimumDistance == 20)
    #expect(mqtt.subscribe == "owntracks/+/+")
    #expect(try Configuration.parse(arguments: []).mqtt == nil)
    #expect(throws: ConfigurationError.invalidValue(
      key: "mqtt-qos", value: "1", reason: "give the broker with mqtt = mqtt[s]://HOST[:PORT] first")
    ) { try Configuration.parse(arguments: ["--mqtt-qos", "1"]) }
    #expect(throws: ConfigurationError.self) { try Configuration.parse(arguments: ["--mqtt", "mqtt://u:p@h"]) }
  }
}
