import Regions
import Testing

@testable import LocationDaemon

@Suite("Configuration: region thresholds")
struct RegionConfigurationTests {
  @Test("defaults are the engine's; flags and config keys set each threshold")
  func settings() throws {
    #expect(try Configuration.parse(arguments: []).regionMonitorConfiguration == .default)
    let configuration = try Configuration.parse(
      arguments: [
        "--config", "/c", "--region-error-fraction", "0.5", "--region-confirmations=3",
        "--region-maximum-fix-age", "2.5",
      ],
      readFile: { _ in
        "region-minimum-margin = 12\nregion-outage-reset = \"90\"\nregion-confirmations = 4\n"
      })
    #expect(
      configuration.regionMonitorConfiguration
        == RegionMonitorConfiguration(
          errorFraction: 0.5, minimumMargin: 12, confirmations: 3, maximumFixAge: 2.5,
          outageReset: 90))
    #expect(Configuration.usage.contains("--region-confirmations N"))
    // The flags' ranges are the engine's: their ends pass its own check.
    for bound in [
      ["--region-error-fraction", "10", "--region-minimum-margin", "10000", "--region-confirmations", "100",
       "--region-maximum-fix-age", "86400", "--region-outage-reset", "86400"],
      ["--region-error-fraction", "0", "--region-minimum-margin", "0", "--region-confirmations", "1",
       "--region-maximum-fix-age", "0", "--region-outage-reset", "0"],
    ] {
      try Configuration.parse(arguments: bound).regionMonitorConfiguration.validate()
    }
  }

  @Test(
    "values out of range or not numbers are refused with the range",
    arguments: [
      ("region-error-fraction", "-0.1", "within 0...10"),
      ("region-error-fraction", "nan", "within 0...10"),
      ("region-minimum-margin", "10001", "within 0...10000 (metres)"),
      ("region-confirmations", "0", "within 1...100"),
      ("region-confirmations", "1.5", "within 1...100"),
      ("region-maximum-fix-age", "inf", "within 0...86400 (seconds)"),
      ("region-outage-reset", "ten", "within 0...86400 (seconds)"),
      ("region-outage-reset", "86401", "within 0...86400 (seconds)"),
    ])
  func refused(_ key: String, _ value: String, _ message: String) {
    do {
      _ = try Configuration.parse(arguments: ["--\(key)", value])
      Issue.record("accepted --\(key) \(value)")
    } catch {
      #expect(error.exitCode == .configuration)
      #expect(
        error.description.contains("invalid \(key) \"\(value)\"")
          && error.description.contains(message), "\(error)")
    }
  }
}
