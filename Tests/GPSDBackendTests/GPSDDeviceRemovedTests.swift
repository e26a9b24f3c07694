import Foundation
import Glibc
import LocationCore
import LocationModel
import LocationTestKit
import NMEA
import SystemIO
import Testing

@testable import GPSDBackend

/// Sends one command (`-PATH` removes a device, `+PATH` adds it) to gpsd's control socket, as
/// `gpsdctl` and the hotplug scripts do, and returns gpsd's answer (`OK`, `ERROR`).
private func gpsdControl(_ socketPath: String, _ command: String) throws -> String {
  let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
  try #require(fd >= 0)
  defer { close(fd) }
  var address = sockaddr_un()
  address.sun_family = sa_family_t(AF_UNIX)
  let bytes = Array(socketPath.utf8)
  try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path))
  withUnsafeMutableBytes(of: &address.sun_path) { raw in
    for (index, byte) in bytes.enumerated() { raw[index] = byte }
  }
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
    }
  }
  try #require(connected == 0, "cannot connect to \(socketPath): errno \(errno)")
  try SystemIO.writeAll(fd, command + "\r\n")
  var answer = [UInt8](repeating: 0, count: 64)
  let count = try SystemIO.read(fd, into: &answer)
  return String(decoding: answer.prefix(count), as: UTF8.self)
}

/// gpsd announces a device it closes with DEVICE `activated` 0; the backend reports
/// `deviceRemoved` at once (not `noFix`), and `connected` with fixes when gpsd has the device
/// again.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GPSDDeviceRemovedTests {
  /// gpsd 3.22's line for a closed device, which libgps 3.22 does not parse, read by hand.
  @Test func closedDeviceLinesAreRecognised() {
    #expect(
      GPSDSession.closedDevice("{\"class\":\"DEVICE\",\"path\":\"/dev/ttyACM0\",\"activated\":0}")
        == "/dev/ttyACM0")
    #expect(
      GPSDSession.closedDevice(
        "{\"class\":\"DEVICE\",\"path\":\"/tmp/gps0\",\"activated\":0,\"native\":0}") == "/tmp/gps0"
    )
    #expect(
      GPSDSession.closedDevice(
        "{\"class\":\"DEVICE\",\"path\":\"/tmp/gps0\",\"activated\":\"2026-12-01T15:31:30.589Z\"}")
        == nil)
    #expect(
      GPSDSession.closedDevice("{\"class\":\"TPV\",\"device\":\"/tmp/gps0\",\"activated\":0}")
        == nil)
  }

  @Test func gpsdClosingTheDeviceIsDeviceRemovedAndItsReturnIsConnected() async throws {
    let receiver = try SimulatedReceiver(
      // Readable by gpsd's own user: gpsd reopens the device after dropping root.
      linkPath: temporaryLinkPath("removed"), encoder: NMEAEncoder(version: .v4_11),
      deviceMode: 0o666)
    try receiver.start(rate: 10) { elapsed in routeFix(Int((elapsed * 10).rounded())) }
    defer { receiver.stop() }
    let gpsd = try PrivateGPSD(device: receiver.linkPath)
    try await gpsd.start()
    defer { gpsd.stop() }
    let backend = try GPSDBackend(uri: "gpsd://127.0.0.1:\(gpsd.port)")
    let collector = EventCollector(backend)
    try await backend.start()
    #expect(await collector.wait(timeout: 60) { _ in collector.locations.count >= 5 })
    let answer = try gpsdControl(gpsd.controlSocket, "-" + receiver.linkPath)
    #expect(answer.hasPrefix("OK"), "gpsd answered \(answer)")
    #expect(
      await collector.wait(timeout: 60) { _ in
        collector.statuses.contains { $0.status == .deviceRemoved }
      })
    let removedAt = try #require(collector.statuses.first { $0.status == .deviceRemoved }?.at)
    let before = collector.locations.count
    // gpsd is told the device is back.
    let added = try gpsdControl(gpsd.controlSocket, "+" + receiver.linkPath)
    #expect(added.hasPrefix("OK"), "gpsd answered \(added)")
    #expect(await collector.wait(timeout: 60) { _ in collector.locations.count >= before + 5 })
    await backend.stop()
    // After the removal: no `noFix` in its place, and `connected` again before the new fixes.
    let after = collector.statuses.filter { $0.at >= removedAt }.map(\.status)
    #expect(!after.contains(.noFix), "\(after)")
    #expect(after.contains(.connected), "\(after)")
  }
}
