import Glibc
import LocationModel
import LocationProtocol
import ServiceCore
import Synchronization
import Testing

@testable import NMEAFeedFrontEnd

/// An NMEA reader as the service sees it (its ``ClientChannel``), on a socket pair: fixes come
/// typed from the hub's TPV event, a revocation closes the reader, and its queue follows the kit's
/// drop rule at the feed's buffer limit. No thread, no clock.
@Suite("NMEA feed: the reader's channel")
struct NMEAReaderChannelTests {
  /// How many times the reader woke the feed's I/O thread.
  final class WakeCount: Sendable {
    let count = Mutex(0)
  }

  final class Pair {
    let reader: NMEAReader
    let peer: Int32
    let wakes = WakeCount()

    init(bufferLimit: Int = 1024) throws {
      var fds: [Int32] = [-1, -1]
      let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
      guard socketpair(AF_UNIX, kind, 0, &fds) == 0 else {
        throw FeedTestError("socketpair failed")
      }
      peer = fds[1]
      let wakes = self.wakes
      reader = NMEAReader(
        id: ConnectionNumber.next(), fd: fds[0], peer: PeerCredentials(pid: 1, uid: 0, gid: 0),
        bufferLimit: bufferLimit, encode: { NMEAFeedFrontEnd.sentences(for: $0) }
      ) { wakes.count.withLock { $0 += 1 } }
    }

    deinit {
      close(reader.fd)
      close(peer)
    }

    /// What the reader's socket holds for the peer now.
    func received() -> [UInt8] {
      var all: [UInt8] = []
      var buffer = [UInt8](repeating: 0, count: 65536)
      while true {
        let count = buffer.withUnsafeMutableBytes { recv(peer, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return all }
        all.append(contentsOf: buffer[0..<count])
      }
    }
  }

  static func hubEvent(_ latitude: Double) -> (EncodedEvent, Fix) {
    var fix = Fix(mode: .fix3D)
    fix.coordinate = Coordinate(latitude: latitude, longitude: 11.5)
    fix.time = 1_796_047_200_000
    fix.hdop = 0.9
    let location = Location(
      fix: fix, provenance: Provenance(backend: "simulate", isSimulated: true))
    let event = Event(body: EventEncoding.tpv(location), coalescingKey: "TPV", location: location)
    return (EncodedEvent(event), fix)
  }

  @Test("a hub fix is written as RMC and GGA once streaming; other events and the JSON are not")
  func writesTypedFixes() throws {
    let pair = try Pair()
    let (event, fix) = Self.hubEvent(48.1)
    #expect(pair.reader.deliver(event))
    #expect(pair.received().isEmpty, "not streaming before its session is open")
    pair.reader.startStreaming()
    #expect(pair.reader.deliver(event))
    #expect(
      pair.reader.deliver(EncodedEvent(.backend(uri: "simulate:", state: .connected, detail: nil))))
    #expect(pair.reader.send(.backend(uri: "simulate:", state: .connected, detail: nil)))
    let written = pair.received()
    #expect(written == NMEAFeedFrontEnd.sentences(for: fix))
    #expect(String(decoding: written, as: UTF8.self).hasPrefix("$GPRMC,"))
  }

  @Test("a revocation closes the reader; a grant does not")
  func revocationCloses() throws {
    let pair = try Pair()
    pair.reader.startStreaming()
    pair.reader.authorizationChanged(.authorized)
    #expect(pair.reader.isConnected)
    pair.reader.authorizationChanged(.denied)
    #expect(!pair.reader.isConnected)
    #expect(pair.reader.closeReason == "denied")
    #expect(pair.wakes.count.withLock { $0 } == 1, "the I/O thread is woken to close it")
    pair.reader.authorizationChanged(.denied)
    #expect(pair.wakes.count.withLock { $0 } == 1, "closing is asked once")
    #expect(!pair.reader.deliver(Self.hubEvent(48.2).0))
  }

  @Test("a reader that does not read is closed as slow when its queue would pass the buffer limit")
  func slowReaderDropRule() throws {
    let pair = try Pair(bufferLimit: 1024)
    pair.reader.startStreaming()
    // Fill the kernel's buffer, so that every fix is queued.
    let block = [UInt8](repeating: 0x20, count: 4096)
    while block.withUnsafeBytes({
      send(pair.reader.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
    }) > 0 {}
    let perFix = NMEAFeedFrontEnd.sentences(for: Self.hubEvent(48.1).1).count
    let fitting = 1024 / perFix
    for n in 0..<fitting {
      #expect(pair.reader.deliver(Self.hubEvent(48.1 + Double(n) * 1e-4).0))
      #expect(pair.reader.closeReason == nil, "fix \(n + 1) of \(fitting) fits")
    }
    #expect(pair.reader.hasQueued)
    _ = pair.reader.deliver(Self.hubEvent(49).0)
    #expect(pair.reader.closeReason == "slow")
    #expect(!pair.reader.isConnected)
  }
}
