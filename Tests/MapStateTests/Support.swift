import MapState
import Synchronization
import LocationModel

/// A 3D fix at `latitude`, `longitude` (degrees) with an optional course over ground (degrees true).
func fix(_ latitude: Double, _ longitude: Double, course: Double? = nil) -> Fix {
  var fix = Fix(mode: .fix3D)
  fix.coordinate = Coordinate(latitude: latitude, longitude: longitude)
  fix.courseOverGround = course
  return fix
}

/// Collects log lines.
final class LogCollector: Sendable {
  private let lines = Mutex<[String]>([])
  var all: [String] { lines.withLock { $0 } }
  var sink: @Sendable (String) -> Void { { [self] line in lines.withLock { $0.append(line) } } }
}

/// Every event a stream delivers until the service finishes it.
func collect(_ stream: AsyncStream<MapEvent>) async -> [MapEvent] {
  var events: [MapEvent] = []
  for await event in stream { events.append(event) }
  return events
}
