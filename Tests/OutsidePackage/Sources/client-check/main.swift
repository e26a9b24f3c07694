import Glibc
import LocationClient

// Uses the public API as an application does: a client, its errors, the map model and its
// renderer. Exits 0 when everything behaves as documented without a daemon.

/// A map view of this package's own: the renderer protocol is implementable from outside.
@MainActor
final class ListRenderer: MapRenderer {
  var lines: [String] = []
  func setCenter(_ center: Coordinate, zoomLevel: Double) {
    lines.append("centre \(center.latitude) \(center.longitude) \(zoomLevel)")
  }
  func addOrReplaceAnnotation(_ annotation: Annotation) {
    lines.append("annotation \(annotation.id)")
  }
  func removeAnnotation(identifier: String) { lines.append("removed \(identifier)") }
}

@MainActor
func check() async -> Bool {
  let client = LocationClient(socketPath: "/nonexistent/locationd.sock", timeout: .seconds(2))
  do {
    _ = try await client.requestAuthorization()
    print("client-check: an answer without a daemon")
    return false
  } catch let error as LocationClientError where error.code == .noDaemon {
    print("client-check: \(error.code): \(error.message)")
  } catch {
    print("client-check: unexpected \(error)")
    return false
  }
  do {
    for try await location in client.locationUpdates { print(location.fix.coordinate as Any) }
    return false
  } catch let error as LocationClientError where error.code == .noDaemon {
  } catch {
    return false
  }
  // Every part of the API an application calls, as values (type-checked here).
  let _: () async throws -> Void = { try await client.startTracking() }
  let _: () async throws -> Void = { try await client.stopTracking() }
  let _: () async throws -> Location? = { try await client.initialLocation }
  let _: () async throws -> Location? = { try await client.currentLocation }
  let _: () async throws -> Location = { try await client.requestLocation(timeout: .seconds(5)) }
  let _: () async throws -> MapStateSnapshot = { try await client.mapState }
  let _: () async throws -> MapStateSnapshot = { try await client.center(on: nil) }
  let _: () async throws -> MapStateSnapshot = { try await client.setZoom(15) }
  let _: () async throws -> MapStateSnapshot = { try await client.setUserTrackingMode(.follow) }
  let _: () async throws -> MapStateSnapshot = {
    try await client.addAnnotation(
      identifier: "home", coordinate: Coordinate(latitude: 1, longitude: 2), title: "Home")
  }
  let _: () async throws -> MapStateSnapshot = {
    try await client.removeAnnotation(identifier: "home")
  }
  let _: () async throws -> ReplayStatus = { try await client.pauseReplay() }
  let _: () async throws -> ServiceStatus = { try await client.status() }
  let _: (Region) async throws -> Void = { try await client.monitor($0) }
  let _: () async throws -> Void = { try await client.stopMonitoring(identifier: "home") }
  let _: () async throws -> RegionState = { try await client.state(of: "home") }
  let _ = client.regionEvents
  let _ = client.mapChanges
  let _ = client.locationUpdates(everyFix: true)

  let renderer = ListRenderer()
  let recording = RecordingMapRenderer()
  let model = MapViewModel(client: client, zoomLevel: 14, renderer: renderer)
  model.attach(recording)
  model.centerOnCurrentLocation()
  model.setCenter(Coordinate(latitude: 48.1, longitude: 11.5))
  guard model.currentCoordinate == nil,
    model.mapCenter == Coordinate(latitude: 48.1, longitude: 11.5),
    renderer.lines == ["centre 48.1 11.5 14.0"], recording.centers.count == 1
  else {
    print("client-check: the model moved unexpectedly: \(renderer.lines)")
    return false
  }
  let status = await model.requestAuthorization()
  guard status == .notDetermined, model.lastError?.code == .noDaemon else { return false }
  print("client-check: ok")
  return true
}

if await check() == false { exit(1) }
