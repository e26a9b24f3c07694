// swift-tools-version:6.0
// A package outside locationd that depends on it by path, as an application would, and uses
// LocationClient's public API: it proves the product and its API are usable from outside
// (scripts/test builds and runs it).
import PackageDescription

// A path dependency's identity is its directory's name (the checkout may be called anything).
let root = Context.packageDirectory.split(separator: "/").dropLast(2).last.map(String.init) ?? "locationd"

let package = Package(
  name: "OutsidePackage",
  platforms: [.macOS(.v15)],
  dependencies: [.package(path: "../..")],
  targets: [
    .executableTarget(
      name: "client-check", dependencies: [.product(name: "LocationClient", package: root)]),
    // The example of README.md and docs/client.md, as written there (a test compares them):
    // built, not run (it waits for locations from a daemon).
    .executableTarget(
      name: "readme-example", dependencies: [.product(name: "LocationClient", package: root)]),
  ]
)
