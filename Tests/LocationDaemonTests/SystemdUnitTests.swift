import Foundation
import Glibc
import LocationTestKit
import Testing

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  .deletingLastPathComponent()
  .deletingLastPathComponent().path

/// Runs a program and returns its exit status and combined output.
private func run(_ executable: String, _ arguments: [String]) async throws -> (
  status: Int32, output: String
) {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  let output = Pipe()
  process.standardOutput = output
  process.standardError = output
  try await runToExit(process)
  return (
    process.terminationStatus,
    String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
  )
}

@Suite("systemd units")
struct SystemdUnitTests {
  private let analyze = "/usr/bin/systemd-analyze"

  /// The built locationd (ExecStart must name an existing binary for `verify`).
  private func builtDaemon() throws -> String {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [
      testBinary.appendingPathComponent("locationd").path, packageRoot + "/.build/debug/locationd",
    ]
    where access(candidate, X_OK) == 0 {
      return candidate
    }
    throw TestError("locationd is not built: run swift build --build-tests")
  }

  @Test("locationd.service and locationd.socket pass systemd-analyze verify without output")
  func verify() async throws {
    try #require(access(analyze, X_OK) == 0, "systemd-analyze is missing: run scripts/setup")
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let service = try String(
      contentsOfFile: packageRoot + "/systemd/locationd.service", encoding: .utf8)
    #expect(service.contains("ExecStart=/usr/local/bin/locationd "))
    try service.replacingOccurrences(
      of: "ExecStart=/usr/local/bin/locationd ", with: "ExecStart=\(try builtDaemon()) "
    )
    .write(toFile: directory.path + "/locationd.service", atomically: true, encoding: .utf8)
    try FileManager.default.copyItem(
      atPath: packageRoot + "/systemd/locationd.socket",
      toPath: directory.path + "/locationd.socket")
    let result = try await run(
      analyze,
      [
        "verify", "--man=no", directory.path + "/locationd.service",
        directory.path + "/locationd.socket",
      ])
    #expect(result.status == 0)
    #expect(result.output == "", "systemd-analyze verify said: \(result.output)")
  }

  /// Serial receivers need group dialout and the serial device classes, and nothing more.
  @Test("locationd.service lets serial receivers through and no other device")
  func serialDevices() throws {
    let service = try String(
      contentsOfFile: packageRoot + "/systemd/locationd.service", encoding: .utf8)
    let lines = service.split(separator: "\n").map(String.init)
    #expect(lines.contains("SupplementaryGroups=dialout"))
    #expect(lines.contains("DevicePolicy=closed"))
    let allowed = lines.filter { $0.hasPrefix("DeviceAllow=") }
    #expect(
      allowed == [
        "DeviceAllow=char-ttyUSB rw", "DeviceAllow=char-ttyACM rw", "DeviceAllow=char-ttyS rw",
        "DeviceAllow=char-ttyAMA rw",
      ])
  }

  @Test("locationd.service exposure is at most 1.5")
  func security() async throws {
    try #require(access(analyze, X_OK) == 0, "systemd-analyze is missing: run scripts/setup")
    let result = try await run(
      analyze, ["security", "--offline=true", packageRoot + "/systemd/locationd.service"])
    let line =
      result.output.split(separator: "\n").first { $0.contains("Overall exposure level") } ?? ""
    let figure = line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
    print(
      "systemd-analyze security: locationd.service exposure \(figure.map { String($0) } ?? "unknown")"
    )
    let score = try #require(figure, "no exposure figure in: \(result.output.suffix(300))")
    #expect(score <= 1.5)
  }
}
