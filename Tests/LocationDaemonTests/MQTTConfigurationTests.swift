import LocationTestKit
import MQTTFrontEnd
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
    let needsBroker = "needs a broker: give --mqtt mqtt[s]://HOST[:PORT] (mqtt = ... in a config file)"
    #expect(throws: ConfigurationError.invalidValue(key: "mqtt-qos", value: "1", reason: needsBroker)) {
      try Configuration.parse(arguments: ["--mqtt-qos", "1"])
    }
    // Several keys without the broker: always the same one named (flags by name), whatever the order.
    for _ in 0..<8 {
      #expect(throws: ConfigurationError.invalidValue(key: "mqtt-stale", value: "60", reason: needsBroker)) {
        try Configuration.parse(arguments: ["--mqtt-subscribe", "owntracks/+/+", "--mqtt-stale", "60", "--mqtt-tid", "ab"])
      }
    }
    #expect(throws: ConfigurationError.invalidValue(
      key: "mqtt", value: "mqtts://broker.example:8883",
      reason: "mqtts needs the CA certificates of the broker: give mqtt-ca-file = PATH (--mqtt-ca-file PATH)")
    ) { try Configuration.parse(arguments: ["--mqtt", "mqtts://broker.example"]) }
    #expect(try Configuration.parse(arguments: ["--mqtt", "mqtts://broker.example", "--mqtt-ca-file", "/etc/ssl/ca.pem"]).mqtt?.caFile == "/etc/ssl/ca.pem")
    #expect(throws: ConfigurationError.self) { try Configuration.parse(arguments: ["--mqtt", "mqtt://u:p@h"]) }
    // CA certificates with a plain broker: TLS was meant and would not happen.
    let plainWithCA = ConfigurationError.invalidValue(
      key: "mqtt-ca-file", value: "/etc/ssl/ca.pem",
      reason: "is for an mqtts broker, and mqtt://broker.example:1883 is plain mqtt: write the broker as mqtts://HOST[:PORT], or leave mqtt-ca-file out")
    #expect(throws: plainWithCA) {
      try Configuration.parse(arguments: ["--mqtt", "mqtt://broker.example", "--mqtt-ca-file", "/etc/ssl/ca.pem"])
    }
    // In a file, the error names the mqtt-ca-file line.
    let plainFile = "mqtt = mqtt://broker.example\nmqtt-ca-file = /etc/ssl/ca.pem\n"
    #expect(throws: ConfigurationError.inFile(file: "/c", line: 2, plainWithCA)) {
      try Configuration.parse(arguments: ["--config", "/c"], readFile: files(["/c": plainFile]))
    }
  }

  @Test("a topic the broker reserves ($SYS/..., $share...) is refused: the broker would drop every message")
  func reservedTopics() throws {
    for topic in ["$SYS/x", "$share/g/t", "$"] {
      #expect(throws: ConfigurationError.self, "\(topic)") {
        try Configuration.parse(arguments: ["--mqtt", "mqtt://broker.example", "--mqtt-topic", topic])
      }
    }
    #expect(try Configuration.parse(arguments: ["--mqtt", "mqtt://b", "--mqtt-topic", "owntracks/a$/b"]).mqtt?.topic == "owntracks/a$/b")
  }
}
