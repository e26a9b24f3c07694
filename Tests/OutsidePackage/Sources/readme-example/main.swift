import LocationClient

let client = LocationClient()                      // /run/locationd/locationd.sock
if try await client.requestAuthorization() == .authorized {
  for try await location in client.locationUpdates { // tracks while the loop runs
    print(location.fix.coordinate as Any)
  }
}
