import Glibc
import LocationModel
import NMEA
import Testing

@testable import LocationCore

/// A blocking IPv4 socket of `type` on 127.0.0.1: connected to `port` (TCP) or bound to a free
/// port (UDP, `port` 0); with a receive timeout so a missing byte fails the test, not hangs it.
private func localSocket(tcpPort port: UInt16?) throws -> (fd: Int32, port: UInt16) {
  let fd = socket(AF_INET, Int32(port == nil ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
  try #require(fd >= 0)
  var timeout = timeval(tv_sec: 5, tv_usec: 0)
  _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = (port ?? 0).bigEndian
  address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  let ok = withUnsafeMutablePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
      port == nil
        ? bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        : connect(fd, pointer, length) == 0
    }
  }
  try #require(ok, "socket setup: errno \(errno)")
  return (fd, UInt16(bigEndian: address.sin_port))
}

private func receive(_ fd: Int32) -> [UInt8] {
  var buffer = [UInt8](repeating: 0, count: 65_536)
  let n = recv(fd, &buffer, buffer.count, 0)
  return n > 0 ? Array(buffer[0..<n]) : []
}

private func sampleFix(_ index: Int) -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.time = 1_773_489_600_000 + Int64(index) * 1000
  fix.coordinate = Coordinate(latitude: 59.3293, longitude: 18.0686 + Double(index) * 1e-4)
  fix.altitudeMSL = 28
  fix.hdop = 0.9
  fix.satellites = (1...8).map {
    Satellite(
      constellation: $0 % 2 == 0 ? .gps : .galileo, prn: $0 * 3, elevation: 40,
      azimuth: Double(40 * $0), snr: 40, used: true)
  }
  return fix
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct SimulatedNetworkTests {
  /// A backlog of 16 made every 18th client of a connection burst wait a second for the SYN
  /// retransmission; the listener queues the kernel's maximum instead.
  @Test func tcpListenerQueuesTheKernelMaximum() {
    #expect(SimulatedNetworkReceiver.listenBacklog >= 128)
    #expect(SimulatedNetworkReceiver.listenBacklog == Int32(SOMAXCONN))
  }

  @Test func parsesTransportURIs() {
    #expect(SimulatedTransport(uri: "tcp://127.0.0.1:2947") == .tcp(host: "127.0.0.1", port: 2947))
    #expect(SimulatedTransport(uri: "udp://localhost:5000") == .udp(host: "localhost", port: 5000))
    #expect(SimulatedTransport(uri: "tcp://example.org:1") == nil)
    #expect(SimulatedTransport(uri: "tcp://127.0.0.1") == nil)
    #expect(SimulatedTransport(uri: "serial:///dev/ttyS0") == nil)
    // Each refusal says which part is wrong.
    #expect(SimulatedTransport.problem(with: "tcp://127.0.0.1:2947") == nil)
    #expect(SimulatedTransport.problem(with: "serial:///dev/ttyS0") == "use tcp://HOST:PORT or udp://HOST:PORT (IPv4)")
    #expect(SimulatedTransport.problem(with: "tcp://127.0.0.1") == "give a port: tcp://HOST:PORT")
    #expect(SimulatedTransport.problem(with: "udp://127.0.0.1:70000") == "the port must be a number from 0 to 65535, got \"70000\"")
    #expect(SimulatedTransport.problem(with: "tcp://example.org:1") == "the host must be an IPv4 address or localhost, got \"example.org\"")
    #expect(SimulatedTransport.problem(with: "udp://127.0.0.1:0")?.hasPrefix("udp:// needs a port above 0") == true)
    #expect(SimulatedTransport(uri: "udp://127.0.0.1:0") == nil)
    #expect(SimulatedTransport(uri: "tcp://127.0.0.1:0") == .tcp(host: "127.0.0.1", port: 0))
  }

  /// TCP: a client receives the epochs and decodes them back; an unplug window closes the
  /// connection and the listening socket, which reopens on the same port when it ends.
  @Test func tcpClientsGetTheStreamAndAnUnplugClosesThem() async throws {
    let clock = VirtualClock(autoAdvance: true)
    let faults = try NMEAFaultSchedule.parse("unplug@2-4")
    let receiver = try SimulatedNetworkReceiver(
      transport: .tcp(host: "127.0.0.1", port: 0), output: try SimulatedOutput(faults: faults),
      clock: clock)
    defer { receiver.stop() }
    guard case .tcp(_, let port) = receiver.transport, port != 0 else {
      Issue.record("no port bound")
      return
    }
    let client = try localSocket(tcpPort: port)
    defer { close(client.fd) }
    var bytes: [UInt8] = []
    for index in 0..<2 {
      try await receiver.send(sampleFix(index), epoch: index, rate: 1)
      bytes += receive(client.fd)
    }
    var decoder = NMEADecoder()
    var fixes: [Fix] = []
    decoder.feed(bytes) { fixes.append($0.fix) }
    decoder.finish { fixes.append($0.fix) }
    #expect(fixes.map(\.time) == [sampleFix(0).time, sampleFix(1).time])
    #expect(fixes.last?.satellites.count == 8 && decoder.statistics.rejectedTotal == 0)
    // Epochs 2 and 3 fall in the window: the connection is closed (recv gives end of file).
    try await receiver.send(sampleFix(2), epoch: 2, rate: 1)
    #expect(receive(client.fd).isEmpty)
    try await receiver.send(sampleFix(3), epoch: 3, rate: 1)
    // Plugged back at 4 s: a new connection to the same port gets epoch 5.
    try await receiver.send(sampleFix(4), epoch: 4, rate: 1)
    let again = try localSocket(tcpPort: port)
    defer { close(again.fd) }
    try await receiver.send(sampleFix(5), epoch: 5, rate: 1)
    let text = String(decoding: receive(again.fd), as: UTF8.self)
    #expect(text.hasPrefix("$G") && text.contains("RMC,120005.00,A"))
    let statistics = receiver.statistics
    #expect(statistics.epochsUnplugged == 2 && statistics.connectionsAccepted == 2)
    #expect(receiver.outputStatistics.faults.unplugs == 1)
  }

  /// UDP: one sentence per datagram, each complete with its CRLF.
  @Test func udpSendsOneSentencePerDatagram() async throws {
    let listener = try localSocket(tcpPort: nil)
    defer { close(listener.fd) }
    let receiver = try SimulatedNetworkReceiver(
      transport: .udp(host: "127.0.0.1", port: listener.port),
      output: try SimulatedOutput(baud: 38_400),
      clock: VirtualClock(autoAdvance: true))
    defer { receiver.stop() }
    try await receiver.send(sampleFix(0), epoch: 0, rate: 1)
    let expected = receiver.encoder.encode(sampleFix(0))
    var datagrams: [String] = []
    for _ in expected { datagrams.append(String(decoding: receive(listener.fd), as: UTF8.self)) }
    #expect(datagrams == expected)
    #expect(receiver.statistics.datagramsSent == expected.count)
  }
}
