import LocationCore
import NMEA
import Testing

@testable import GPSDBackend
import LocationModel

@Suite struct LiveEventBufferTests {
  private func location(_ index: Int) -> BackendEvent {
    var fix = Fix(mode: .fix3D)
    fix.time = Int64(index)
    return .location(
      Location(fix: fix, provenance: Provenance(backend: "gpsd://test", isSimulated: false)))
  }

  @Test func slowConsumerLosesOldestLocationsButNoStatus() async {
    let buffer = LiveEventBuffer(locationCapacity: 10)
    buffer.push(.status(.connecting, detail: nil))
    for index in 0..<25 {
      buffer.push(location(index))
      if index == 5 { buffer.push(.status(.noFix, detail: "a")) }
      if index == 6 { buffer.push(.status(.connected, detail: "b")) }
    }
    buffer.push(.status(.stopped, detail: nil))
    buffer.finish()
    var statuses: [BackendStatus] = []
    var times: [Int64] = []
    for await event in buffer.stream {
      switch event {
      case .status(let status, _): statuses.append(status)
      case .location(let location): times.append(location.fix.time ?? -1)
      case .error: break
      }
    }
    #expect(statuses == [.connecting, .noFix, .connected, .stopped])
    #expect(times == Array(15..<25), "the newest 10 locations, in order")
    #expect(buffer.dropped == 15)
  }

  @Test func waitingConsumerGetsEventsAsTheyArrive() async {
    let buffer = LiveEventBuffer(locationCapacity: 4)
    let reader = Task {
      var count = 0
      for await _ in buffer.stream { count += 1 }
      return count
    }
    for index in 0..<3 {
      try? await Task.sleep(for: .milliseconds(5))
      buffer.push(location(index))
    }
    buffer.finish()
    #expect(await reader.value == 3)
    #expect(buffer.dropped == 0)
  }

  @Test func cancellingTheConsumerEndsTheStream() async {
    let buffer = LiveEventBuffer(locationCapacity: 4)
    let reader = Task {
      var count = 0
      for await _ in buffer.stream { count += 1 }
      return count
    }
    try? await Task.sleep(for: .milliseconds(20))
    reader.cancel()
    #expect(await reader.value == 0)
  }
}
