// swift-tools-version:6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
  name: "locationd",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "locationd", targets: ["locationd"]),
    .executable(name: "locationctl", targets: ["locationctl"]),
    .library(name: "NMEA", targets: ["NMEA"]),
    .library(name: "LocationCore", targets: ["LocationCore"]),
    .library(name: "MapState", targets: ["MapState"]),
  ],
  targets: [
    // libgps (headers from libgps-dev); only GPSDBackend imports it. A C target that loads the
    // library with dlopen on first use instead of linking it (see its header), so no pkgConfig:
    // that would link it.
    .target(name: "CGPS", linkerSettings: [.linkedLibrary("dl")]),
    // libxml2 for GPX route files (instead of Foundation's XMLParser, which links all of
    // Foundation and ICU into the daemon); loaded on first use like libgps. Its headers are
    // reached through the link Sources/CLibXML2/include/libxml -> /usr/include/libxml2/libxml.
    .target(name: "CLibXML2", linkerSettings: [.linkedLibrary("dl")]),
    // epoll(7) and eventfd(2), which the Glibc module does not export: the socket server's event
    // loop and the benchmark's clients.
    .target(name: "CLinux"),
    // read(2), write(2) and send(2) on Swift buffers with every index checked: the one place
    // outside the socket server's event loop where buffers meet the kernel.
    .target(name: "SystemIO", swiftSettings: swiftSettings),
    // NMEA 0183 framing, parsing, fix assembly and encoding; pure, no I/O.
    .target(name: "NMEA", swiftSettings: swiftSettings, linkerSettings: [.linkedLibrary("m")]),
    .target(name: "LocationCore", dependencies: ["NMEA", "CLibXML2", "SystemIO"], swiftSettings: swiftSettings),
    .target(name: "GPSDBackend", dependencies: ["CGPS", "LocationCore", "NMEA"], swiftSettings: swiftSettings),
    .target(name: "MapState", dependencies: ["NMEA", "SystemIO"], swiftSettings: swiftSettings),
    .target(
      name: "LocationServer",
      dependencies: ["CLinux", "LocationCore", "MapState", "NMEA", "GPSDBackend", "SystemIO"],
      swiftSettings: swiftSettings),
    .target(name: "LocationTestKit", dependencies: ["LocationCore", "NMEA"], swiftSettings: swiftSettings),
    .executableTarget(name: "locationd", dependencies: ["LocationServer"], swiftSettings: swiftSettings),
    .executableTarget(
      name: "locationctl",
      dependencies: ["NMEA", "LocationCore", "LocationServer", "GPSDBackend", "SystemIO"],
      swiftSettings: swiftSettings),
    .executableTarget(name: "nmea-bench", dependencies: ["NMEA"], swiftSettings: swiftSettings),
    .executableTarget(name: "core-bench", dependencies: ["LocationCore", "NMEA"], swiftSettings: swiftSettings),
    .executableTarget(
      name: "gpsd-bench", dependencies: ["GPSDBackend", "LocationCore", "LocationTestKit", "NMEA"],
      swiftSettings: swiftSettings),
    .executableTarget(
      name: "daemon-bench", dependencies: ["CLinux", "LocationServer", "LocationCore", "LocationTestKit", "NMEA"],
      swiftSettings: swiftSettings),
    .executableTarget(
      name: "relay-bench", dependencies: ["CLinux", "LocationCore", "LocationTestKit"], swiftSettings: swiftSettings),
    .testTarget(name: "SystemIOTests", dependencies: ["SystemIO"], swiftSettings: swiftSettings),
    .testTarget(name: "NMEATests", dependencies: ["NMEA", "LocationTestKit"], swiftSettings: swiftSettings),
    .testTarget(
      name: "LocationCoreTests", dependencies: ["LocationCore", "LocationTestKit", "NMEA"],
      swiftSettings: swiftSettings),
    // Golden/ holds expected renderer output, read by path (not a resource bundle).
    .testTarget(
      name: "MapStateTests", dependencies: ["MapState", "NMEA"], exclude: ["Golden"],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "LocationServerTests",
      dependencies: ["LocationServer", "LocationCore", "MapState", "LocationTestKit"],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "GPSDBackendTests", dependencies: ["GPSDBackend", "LocationCore", "LocationTestKit"],
      swiftSettings: swiftSettings),
    // Fuzz targets: the harness logic, built and tested like any library; the libFuzzer driver
    // that runs it is added below only for scripts/fuzz.
    .target(
      name: "FuzzTargets", dependencies: ["NMEA", "LocationCore", "LocationServer", "MapState", "GPSDBackend"],
      swiftSettings: swiftSettings),
    // Replays the committed fuzz corpus (Tests/FuzzCorpus) and every crash found so far.
    .testTarget(
      name: "FuzzTargetsTests", dependencies: ["FuzzTargets", "LocationServer"],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "EndToEndTests", dependencies: ["LocationCore", "LocationTestKit", "NMEA"],
      swiftSettings: swiftSettings),
  ]
)

// The libFuzzer driver links only with -sanitize=fuzzer (it calls LLVMFuzzerRunDriver), so a plain
// `swift build` must not see it: scripts/fuzz sets LOCATIOND_FUZZ=1 and builds it in its own
// scratch path.
if Context.environment["LOCATIOND_FUZZ"] == "1" {
  package.targets += [
    .target(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
    .executableTarget(
      name: "locationd-fuzz", dependencies: ["CLibFuzzer", "FuzzTargets"], path: "Fuzz/locationd-fuzz",
      swiftSettings: swiftSettings),
  ]
}
