// swift-tools-version:6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
]

// How the release locationd is linked (docs/benchmarks.md, "What the daemon's memory is made of";
// scripts/rss-breakdown measures each step). Most of its resident memory is pages of its own
// code, and a page is resident when any function on it ran (and the kernel maps the pages around
// a fault too), so:
//   - lld places the functions that run at start, at rest and per fix together, in the order of
//     link/locationd.order (written by scripts/order-functions; a name it no longer finds is
//     skipped, so a stale list costs memory, never correctness);
//   - relative relocations packed (DT_RELR, glibc 2.36): the loader reads a few kB instead of
//     about 1 MB of .rela.dyn, the executable stays position-independent;
//   - the static Swift runtime's libstdc++ and libgcc linked statically (the -L directory holds a
//     linker script that turns -lstdc++ into libstdc++.a): no libstdc++.so and libgcc_s.so mapped
//     and relocated;
//   - no export of every symbol (the runtime's .lnk asks for --export-dynamic): the loader then
//     does not search the executable's 20,000 dynamic symbols for each symbol of libc.
// Debug builds (and the tests) link as before.
let locationdLinking: [LinkerSetting] = [
  .unsafeFlags(
    [
      "-use-ld=lld",
      "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/link/locationd.order",
      "-Xlinker", "--no-warn-symbol-ordering",
      "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
      "-L\(Context.packageDirectory)/link/static-libstdc++", "-Xclang-linker", "-static-libgcc",
      "-Xlinker", "--no-export-dynamic",
    ], .when(configuration: .release)),
]

let package = Package(
  name: "locationd",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "locationd", targets: ["locationd"]),
    .executable(name: "locationctl", targets: ["locationctl"]),
    .library(name: "LocationModel", targets: ["LocationModel"]),
    .library(name: "JSON", targets: ["JSON"]),
    .library(name: "NMEA", targets: ["NMEA"]),
    .library(name: "GNSSSky", targets: ["GNSSSky"]),
    .library(name: "LocationProtocol", targets: ["LocationProtocol"]),
    .library(name: "LocationCore", targets: ["LocationCore"]),
    .library(name: "MapState", targets: ["MapState"]),
    .library(name: "Regions", targets: ["Regions"]),
    .library(name: "TrackStore", targets: ["TrackStore"]),
    .library(name: "LocationClient", targets: ["LocationClient"]),
  ],
  targets: [
    // libgps (headers from libgps-dev); only GPSDBackend imports it. A C target that loads the
    // library with dlopen on first use instead of linking it (see its header), so no pkgConfig:
    // that would link it.
    .target(name: "CGPS", path: "Sources/System/CGPS", linkerSettings: [.linkedLibrary("dl")]),
    // libxml2 for GPX route files (instead of Foundation's XMLParser, which links all of
    // Foundation and ICU into the daemon); loaded on first use like libgps. Its headers are
    // reached through the link Sources/System/CLibXML2/include/libxml -> /usr/include/libxml2/libxml.
    .target(name: "CLibXML2", path: "Sources/System/CLibXML2", linkerSettings: [.linkedLibrary("dl")]),
    // libmicrohttpd (headers from libmicrohttpd-dev) for the HTTP front-end; loaded on first use
    // like libgps, so a daemon without --http maps none of it.
    .target(
      name: "CMicroHTTPD", dependencies: ["CLinux"],
      path: "Sources/System/CMicroHTTPD", linkerSettings: [.linkedLibrary("dl"), .linkedLibrary("pthread")]),
    // libmosquitto for the MQTT front-end; loaded on first use like libgps (it brings OpenSSL).
    .target(name: "CMosquitto", path: "Sources/System/CMosquitto", linkerSettings: [.linkedLibrary("dl")]),
    // SQLite 3 (headers from libsqlite3-dev) for the track store; loaded on first use like libgps,
    // so a daemon with `track = off` never maps it and runs without libsqlite3 installed.
    .target(name: "CSQLite", path: "Sources/System/CSQLite", linkerSettings: [.linkedLibrary("dl")]),
    // epoll(7) and eventfd(2), which the Glibc module does not export: the socket server's event
    // loop and the benchmark's clients.
    .target(name: "CLinux", path: "Sources/System/CLinux"),
    // sd-bus from libsystemd (headers from libsystemd-dev): the GeoClue2 vtables and non-variadic
    // helpers; only GeoClueFrontEnd imports it. Loaded on first use like libgps (see its header):
    // linked, libsystemd and its libraries would cost every daemon about 0.8 MB.
    .target(name: "CSDBus", path: "Sources/System/CSDBus", linkerSettings: [.linkedLibrary("dl")]),
    // read(2), write(2) and send(2) on Swift buffers with every index checked: the one place
    // outside the socket server's event loop where buffers meet the kernel.
    .target(name: "SystemIO", dependencies: ["CLinux"], path: "Sources/System/SystemIO", swiftSettings: swiftSettings),
    // Single-threaded queues shared by the backends' event queues and the socket server.
    .target(name: "Queues", path: "Sources/Core/Queues", swiftSettings: swiftSettings),
    // The domain model: fix, coordinate, satellite, location, provenance, backend status, calendar
    // dates and geodesy. Pure, no I/O; every other module builds on it.
    .target(
      name: "LocationModel",
      path: "Sources/Model/LocationModel", swiftSettings: swiftSettings, linkerSettings: [.linkedLibrary("m")]),
    // JSON values, their writer (the one string escaper) and a strict parser: the one way to
    // produce and read JSON (the gpsd TPV/SKY byte writer aside). Pure, no dependencies.
    .target(name: "JSON", path: "Sources/Model/JSON", swiftSettings: swiftSettings),
    // NMEA 0183 framing, parsing, fix assembly and encoding; pure, no I/O.
    .target(name: "NMEA", dependencies: ["LocationModel"], path: "Sources/Model/NMEA", swiftSettings: swiftSettings),
    // The simulated sky: GPS almanac (YUMA) and nominal GLONASS/Galileo/BeiDou orbits, look angles,
    // obstruction, DOPs. Pure, no I/O.
    .target(
      name: "GNSSSky", dependencies: ["LocationModel"],
      path: "Sources/Model/GNSSSky", swiftSettings: swiftSettings, linkerSettings: [.linkedLibrary("m")]),
    // Backends (replay, simulation) and the LocationManager.
    .target(
      name: "LocationCore", dependencies: ["LocationModel", "NMEA", "Queues", "CLibXML2", "SystemIO", "GNSSSky"],
      path: "Sources/Core/LocationCore",
      swiftSettings: swiftSettings),
    .target(
      name: "GPSDBackend", dependencies: ["CGPS", "LocationCore", "LocationModel", "NMEA", "SystemIO"],
      path: "Sources/Backends/GPSDBackend",
      swiftSettings: swiftSettings),
    .target(
      name: "MapState", dependencies: ["JSON", "LocationModel", "Regions", "SystemIO"],
      path: "Sources/Core/MapState", swiftSettings: swiftSettings),
    // Region monitoring (geofences): shapes, validation, the enter/exit/dwell decision rule, the
    // spatial index, persistence and GeoJSON. Pure, no I/O.
    .target(
      name: "Regions", dependencies: ["JSON", "LocationModel"],
      path: "Sources/Model/Regions", swiftSettings: swiftSettings),
    // The durable track store (recorded fixes and a store-and-forward outbox, one SQLite
    // database), its recorder queue and the GPX/GeoJSON/CSV exporters.
    .target(
      name: "TrackStore", dependencies: ["CSQLite", "LocationModel", "SystemIO"],
      path: "Sources/Core/TrackStore", swiftSettings: swiftSettings),
    // The wire protocol: requests, replies, events and their JSON (gpsd's TPV and SKY included).
    // Pure, no I/O; locationctl and every front-end use it.
    .target(
      name: "LocationProtocol", dependencies: ["JSON", "LocationModel", "Regions"],
      path: "Sources/Model/LocationProtocol", swiftSettings: swiftSettings),
    // The Swift API applications import: LocationClient (CoreLocation's manager and MapKit's map
    // state over the socket protocol), MapViewModel and its renderer protocol. Only the pure
    // modules and SystemIO; never the server's (ServiceCore, SocketFrontEnd, LocationDaemon).
    .target(
      name: "LocationClient", dependencies: ["JSON", "LocationModel", "LocationProtocol", "Regions", "SystemIO"],
      path: "Sources/Apps/LocationClient",
      swiftSettings: swiftSettings),
    // The transport-independent service: authorization, tracking per client and per user, the
    // hub that fans fixes out, map-state wiring, and the lifecycle (Service, ServiceGroup) the
    // daemon starts and stops its parts with. Every front-end calls it through one API.
    .target(
      name: "ServiceCore",
      dependencies: ["LocationProtocol", "LocationCore", "LocationModel", "MapState", "Queues", "Regions", "SystemIO"],
      path: "Sources/Core/ServiceCore",
      swiftSettings: swiftSettings),
    // The Unix-socket front-end: epoll event loop, listening socket, line framing.
    .target(
      name: "SocketFrontEnd",
      dependencies: ["CLinux", "ServiceCore", "LocationProtocol", "LocationModel", "Queues", "SystemIO"],
      path: "Sources/FrontEnds/SocketFrontEnd",
      swiftSettings: swiftSettings),
    // The GeoClue2 D-Bus front-end (org.freedesktop.GeoClue2 over sd-bus).
    .target(
      name: "GeoClueFrontEnd",
      dependencies: [
        "CSDBus", "CLinux", "ServiceCore", "LocationProtocol", "LocationModel", "Queues", "SystemIO",
      ],
      path: "Sources/FrontEnds/GeoClueFrontEnd",
      swiftSettings: swiftSettings),
    // The HTTP front-end: the live map page, Server-Sent Events, the JSON API for its controls.
    .target(
      name: "WebFrontEnd",
      dependencies: ["CMicroHTTPD", "ServiceCore", "LocationProtocol", "LocationModel", "JSON", "Queues", "SystemIO"],
      path: "Sources/FrontEnds/WebFrontEnd",
      swiftSettings: swiftSettings),
    // OwnTracks' JSON messages (location, lwt): encoding from TPV, strict parsing, the publish
    // limiter. Pure, no I/O.
    .target(
      name: "OwnTracks", dependencies: ["JSON", "LocationModel"],
      path: "Sources/Model/OwnTracks", swiftSettings: swiftSettings),
    // The MQTT front-end: OwnTracks publishing with store-and-forward, the fleet view.
    .target(
      name: "MQTTFrontEnd",
      dependencies: [
        "CMosquitto", "OwnTracks", "ServiceCore", "LocationProtocol", "LocationModel", "JSON", "Regions", "SystemIO",
        "TrackStore",
      ],
      path: "Sources/FrontEnds/MQTTFrontEnd",
      swiftSettings: swiftSettings),
    // The NMEA feed front-end: each fix as RMC and GGA on a Unix socket (GeoClue's nmea-socket).
    .target(
      name: "NMEAFeedFrontEnd",
      dependencies: ["ServiceCore", "LocationModel", "LocationProtocol", "NMEA", "SystemIO"],
      path: "Sources/FrontEnds/NMEAFeedFrontEnd",
      swiftSettings: swiftSettings),
    // The daemon's wiring: configuration, backend factory, signals, systemd glue, exit codes.
    .target(
      name: "LocationDaemon",
      dependencies: [
        "SocketFrontEnd", "WebFrontEnd", "ServiceCore", "LocationProtocol", "LocationCore", "LocationModel",
        "MapState", "GPSDBackend", "Regions", "SystemIO", "GeoClueFrontEnd", "NMEAFeedFrontEnd", "MQTTFrontEnd",
        "TrackStore",
      ],
      path: "Sources/Apps/LocationDaemon",
      swiftSettings: swiftSettings),
    // What tests share: fakes, the corpus, private gpsd, bus and broker, temporary directories,
    // the real service over a fake backend (ServiceParts).
    .target(
      name: "LocationTestKit", dependencies: ["LocationCore", "LocationModel", "LocationProtocol", "MapState", "NMEA", "ServiceCore", "SystemIO"],
      path: "Sources/Testing/LocationTestKit", swiftSettings: swiftSettings),
    // What the benchmarks that measure the daemons from outside share: clocks, child processes,
    // notify and client sockets, the epoll reader of many clients.
    .target(name: "BenchKit", dependencies: ["CLinux", "SystemIO"], path: "Benchmarks/BenchKit", swiftSettings: swiftSettings),
    .executableTarget(
      name: "locationd", dependencies: ["LocationDaemon", "SystemIO"],
      path: "Sources/Apps/locationd", swiftSettings: swiftSettings, linkerSettings: locationdLinking),
    .executableTarget(
      name: "locationctl",
      // The client (its connections through LocationClient) and the pty simulator: the wire
      // types, NMEA, the local backends and SystemIO; never the server (ServiceCore,
      // SocketFrontEnd, LocationDaemon).
      dependencies: [
        "LocationClient", "NMEA", "LocationModel", "LocationProtocol", "LocationCore", "Regions", "SystemIO",
        "TrackStore",
      ],
      path: "Sources/Apps/locationctl",
      swiftSettings: swiftSettings),
    // The seed app's map screen as a terminal program: an application of LocationClient and
    // MapViewModel, built with everything else (and run by the end-to-end tests as uid 65534).
    .executableTarget(
      name: "location-map", dependencies: ["LocationClient", "SystemIO"], path: "Examples/LocationMap",
      swiftSettings: swiftSettings),
    .executableTarget(
      name: "nmea-bench", dependencies: ["NMEA", "LocationModel", "LocationProtocol", "SystemIO"],
      path: "Benchmarks/nmea-bench", swiftSettings: swiftSettings),
    // JSONValue against Foundation's JSONEncoder/JSONDecoder and JSONSerialization.
    .executableTarget(
      name: "json-bench", dependencies: ["JSON", "LocationProtocol", "LocationModel", "MapState", "SystemIO"],
      path: "Benchmarks/json-bench",
      swiftSettings: swiftSettings),
    .executableTarget(
      name: "core-bench", dependencies: ["LocationCore", "LocationModel", "LocationTestKit", "NMEA", "SystemIO"],
      path: "Benchmarks/core-bench",
      swiftSettings: swiftSettings),
    .executableTarget(
      name: "gpsd-bench", dependencies: ["GPSDBackend", "LocationCore", "LocationModel", "LocationTestKit", "NMEA", "SystemIO"],
      path: "Benchmarks/gpsd-bench",
      swiftSettings: swiftSettings),
    .executableTarget(
      name: "daemon-bench", dependencies: [
        "BenchKit", "LocationDaemon", "LocationProtocol", "LocationCore", "LocationModel", "LocationTestKit", "NMEA",
        "SystemIO",
      ],
      path: "Benchmarks/daemon-bench",
      swiftSettings: swiftSettings),
    // The MQTT front-end measured from outside: publish rate, the fleet view with 1,000 devices.
    .executableTarget(
      name: "mqtt-bench", dependencies: ["BenchKit", "LocationTestKit", "MQTTFrontEnd", "OwnTracks", "SystemIO"],
      path: "Benchmarks/mqtt-bench",
      swiftSettings: swiftSettings),
    // The track store's figures (fixes/s in and out, RSS during export) and the writer that the
    // crash test kills.
    .executableTarget(
      name: "track-bench", dependencies: ["TrackStore", "LocationModel", "SystemIO"],
      path: "Benchmarks/track-bench", swiftSettings: swiftSettings),
    .executableTarget(
      name: "relay-bench", dependencies: ["BenchKit", "LocationCore", "LocationTestKit", "SystemIO"],
      path: "Benchmarks/relay-bench", swiftSettings: swiftSettings),
    // Per-fix cost and memory of region monitoring at 10, 1,000 and 100,000 regions.
    .executableTarget(
      name: "region-bench", dependencies: ["BenchKit", "Regions", "LocationModel", "SystemIO"],
      path: "Benchmarks/region-bench", swiftSettings: swiftSettings),
    .testTarget(
      name: "RegionsTests", dependencies: ["Regions", "LocationModel", "JSON"],
      path: "Tests/RegionsTests", swiftSettings: swiftSettings),
    // The client library on a scripted daemon and a virtual clock, and MapViewModel's rules.
    .testTarget(
      name: "LocationClientTests", dependencies: ["LocationClient"],
      path: "Tests/LocationClientTests", swiftSettings: swiftSettings),
    .testTarget(
      name: "SystemIOTests", dependencies: ["SystemIO"],
      path: "Tests/SystemIOTests", swiftSettings: swiftSettings),
    .testTarget(
      name: "NMEAFeedFrontEndTests",
      dependencies: [
        "NMEAFeedFrontEnd", "ServiceCore", "LocationDaemon", "LocationCore", "LocationModel", "LocationProtocol",
        "MapState", "NMEA", "LocationTestKit", "SystemIO",
      ],
      path: "Tests/NMEAFeedFrontEndTests",
      swiftSettings: swiftSettings),
    .testTarget(
      name: "NMEATests", dependencies: ["NMEA", "LocationModel", "LocationProtocol", "LocationTestKit"],
      path: "Tests/NMEATests", swiftSettings: swiftSettings),
    .testTarget(
      name: "LocationCoreTests",
      dependencies: ["LocationCore", "LocationModel", "LocationProtocol", "LocationTestKit", "NMEA", "GNSSSky"],
      path: "Tests/LocationCoreTests",
      swiftSettings: swiftSettings),
    // Golden/ holds expected renderer output, read by path (not a resource bundle).
    .testTarget(
      name: "MapStateTests", dependencies: ["MapState", "LocationModel", "JSON", "Regions", "SystemIO"],
      path: "Tests/MapStateTests", exclude: ["Golden"],
      swiftSettings: swiftSettings),
    // The service core: authorization, sessions, the outbound queue every front-end uses (held to
    // one behaviour across the socket and web front-ends), the service group, region monitoring.
    .testTarget(
      name: "ServiceCoreTests",
      dependencies: [
        "ServiceCore", "LocationProtocol", "LocationCore", "LocationModel", "LocationTestKit", "MapState", "NMEA",
        "Regions", "SystemIO", "JSON", "SocketFrontEnd", "WebFrontEnd",
      ],
      path: "Tests/ServiceCoreTests",
      swiftSettings: swiftSettings),
    // The socket server, peer credentials, hostile clients, and locationctl against a server.
    .testTarget(
      name: "SocketFrontEndTests",
      dependencies: [
        "SocketFrontEnd", "ServiceCore", "LocationProtocol", "LocationDaemon", "LocationCore", "LocationModel",
        "LocationTestKit", "MapState", "NMEA", "SystemIO",
      ],
      path: "Tests/SocketFrontEndTests",
      swiftSettings: swiftSettings),
    // The daemon's wiring: the configuration table and file, sd_notify and signals, the units.
    .testTarget(
      name: "LocationDaemonTests",
      dependencies: [
        "LocationDaemon", "LocationModel", "LocationProtocol", "LocationTestKit", "MQTTFrontEnd", "Regions",
        "ServiceCore", "SocketFrontEnd", "SystemIO",
      ],
      path: "Tests/LocationDaemonTests",
      swiftSettings: swiftSettings),
    .testTarget(
      name: "LocationProtocolTests",
      dependencies: [
        "LocationProtocol", "LocationDaemon", "LocationModel", "NMEA", "Regions", "ServiceCore", "SocketFrontEnd",
      ],
      path: "Tests/LocationProtocolTests",
      swiftSettings: swiftSettings),
    .testTarget(
      name: "WebFrontEndTests",
      dependencies: ["WebFrontEnd", "JSON", "LocationDaemon", "LocationProtocol", "LocationTestKit", "ServiceCore"],
      path: "Tests/WebFrontEndTests",
      swiftSettings: swiftSettings),
    .testTarget(
      name: "GeoClueFrontEndTests",
      dependencies: ["GeoClueFrontEnd", "LocationModel", "LocationProtocol", "LocationTestKit", "ServiceCore"],
      path: "Tests/GeoClueFrontEndTests",
      swiftSettings: swiftSettings),
    .testTarget(
      name: "OwnTracksTests", dependencies: ["OwnTracks", "LocationProtocol", "LocationModel", "JSON", "Regions"],
      path: "Tests/OwnTracksTests",
      swiftSettings: swiftSettings),
    // The MQTT front-end: settings, the outbox and its fallback, queue status, transitions.
    .testTarget(
      name: "MQTTFrontEndTests",
      dependencies: [
        "MQTTFrontEnd", "OwnTracks", "ServiceCore", "LocationProtocol", "LocationModel", "JSON", "TrackStore",
        "Regions", "MapState",
      ],
      path: "Tests/MQTTFrontEndTests",
      swiftSettings: swiftSettings),
    .testTarget(
      name: "GPSDBackendTests", dependencies: ["GPSDBackend", "LocationCore", "LocationModel", "LocationTestKit"],
      path: "Tests/GPSDBackendTests",
      swiftSettings: swiftSettings),
    // Fuzz targets: the harness logic, built and tested like any library; the libFuzzer driver
    // that runs it is added below only for scripts/fuzz.
    .target(
      name: "FuzzTargets", dependencies: [
        "NMEA", "LocationModel", "LocationProtocol", "LocationCore", "LocationDaemon", "MapState", "GPSDBackend",
        "Regions", "ServiceCore", "SystemIO", "OwnTracks", "MQTTFrontEnd", "GNSSSky",
      ],
      path: "Sources/Testing/FuzzTargets",
      swiftSettings: swiftSettings),
    // Replays the committed fuzz corpus (Tests/FuzzCorpus) and every crash found so far.
    .testTarget(
      name: "FuzzTargetsTests", dependencies: ["FuzzTargets", "LocationProtocol", "LocationDaemon"],
      path: "Tests/FuzzTargetsTests",
      swiftSettings: swiftSettings),
    // Schema/ holds the GPX 1.1 schema the export tests validate with xmllint (read by path).
    .testTarget(
      name: "TrackStoreTests", dependencies: ["TrackStore", "LocationModel", "LocationProtocol"],
      path: "Tests/TrackStoreTests", exclude: ["Schema"],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "EndToEndTests",
      dependencies: ["LocationClient", "LocationCore", "LocationModel", "LocationTestKit", "NMEA", "GNSSSky", "SystemIO", "CLinux"],
      path: "Tests/EndToEndTests",
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
  // The harness's own comparisons (its reply checks, StrictJSON, the line-count reference) are not
  // what the fuzzer explores, yet with trace-cmp they cost a callback per byte compared: its
  // module keeps edge coverage only. The code under test keeps trace-cmp.
  for target in package.targets where target.name == "FuzzTargets" {
    target.swiftSettings = (target.swiftSettings ?? [])
      + [.unsafeFlags(["-sanitize-coverage=edge,inline-8bit-counters,pc-table"])]
  }
}
