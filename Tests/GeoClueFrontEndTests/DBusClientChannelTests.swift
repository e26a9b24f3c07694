import LocationModel
import LocationProtocol
import ServiceCore
import Synchronization
import Testing

@testable import GeoClueFrontEnd

/// A D-Bus client as the service sees it: a watcher of the hub whose channel hands the typed fix
/// to the front-end and turns a revocation into the client's deactivation. No bus needed.
@Suite("GeoClue2: the D-Bus client's channel")
struct DBusClientChannelTests {
  @Test(
    "hub fixes reach the front-end typed; a revocation or the service closing deactivates once; a closed client gets nothing"
  )
  func fixesAndRevocation() {
    let fixes = Mutex<[Location]>([])
    let revocations = Mutex(0)
    let channel = DBusClientChannel(
      id: ConnectionNumber.next(), fix: { location in fixes.withLock { $0.append(location) } }
    ) { revocations.withLock { $0 += 1 } }
    var fix = Fix(mode: .fix3D)
    fix.coordinate = Coordinate(latitude: 48.1, longitude: 11.5)
    fix.time = 1_796_047_200_000
    let location = Location(
      fix: fix, provenance: Provenance(backend: "simulate", isSimulated: true))
    let tpv = EncodedEvent(
      Event(body: EventEncoding.tpv(location), coalescingKey: "TPV", location: location))
    #expect(channel.deliver(tpv))
    #expect(
      channel.deliver(EncodedEvent(.backend(uri: "simulate:", state: .connected, detail: nil))))
    #expect(fixes.withLock { $0 } == [location])

    channel.authorizationChanged(.authorized)
    #expect(revocations.withLock { $0 } == 0)
    channel.authorizationChanged(.denied)
    #expect(revocations.withLock { $0 } == 1)

    // The service closing the session deactivates the client too, once however often it closes.
    channel.close()
    #expect(!channel.isConnected)
    #expect(revocations.withLock { $0 } == 2)
    channel.close()
    #expect(!channel.deliver(tpv))
    channel.authorizationChanged(.denied)
    #expect(revocations.withLock { $0 } == 2, "a closed client is not deactivated again")
    #expect(fixes.withLock { $0 }.count == 1)
  }
}
