import Glibc
import LocationClient
import Observation
import SystemIO

// location-map: the seed app's map screen as a terminal program, on LocationClient's
// MapViewModel. Keys (each followed by Enter): r request authorization, s start, x stop,
// c centre on me, f follow, n none, q quit. Prints the initial and current coordinate and the
// map centre as they change.
//
//   location-map [--socket PATH] [--once] [--fixes N]
//
// --once asks for authorization, prints it and exits (0 authorized, 1 denied or unreachable);
// --fixes N requests authorization, starts tracking, prints until N fixes came, then exits 0.

/// Draws the map as lines of text.
@MainActor
final class TerminalRenderer: MapRenderer {
  func setCenter(_ center: Coordinate, zoomLevel: Double) {
    say("map: centre \(text(center)) at zoom \(zoomLevel)")
  }
  func addOrReplaceAnnotation(_ annotation: Annotation) {
    say(
      "map: annotation \(annotation.id) at \(text(annotation.coordinate)) \"\(annotation.title)\"")
  }
  func removeAnnotation(identifier: String) { say("map: annotation \(identifier) removed") }
}

/// A coordinate as `lat, lon` with 6 decimals (about 0.1 m), or `none`.
func text(_ coordinate: Coordinate?) -> String {
  guard let coordinate else { return "none" }
  func fixed(_ value: Double) -> String {
    let scaled = (value * 1_000_000).rounded()
    let sign = scaled < 0 ? "-" : ""
    let magnitude = Int64(abs(scaled))
    let fraction = String(magnitude % 1_000_000)
    return
      "\(sign)\(magnitude / 1_000_000).\(String(repeating: "0", count: 6 - fraction.count))\(fraction)"
  }
  return "\(fixed(coordinate.latitude)), \(fixed(coordinate.longitude))"
}

/// Prints a line at once (the output may be a pipe), written straight to the descriptor: going
/// through stdio, `fflush(nil)` would wait for standard input's lock, which the thread blocked in
/// `readLine()` holds until the next key, and so hold up the main actor and every change printed
/// on it.
func say(_ line: String) {
  try? SystemIO.writeAll(STDOUT_FILENO, line + "\n")
}

/// Prints the coordinates each time one of them changes, through Observation.
@MainActor
func printChanges(of model: MapViewModel, onFix: @escaping @MainActor () -> Void) {
  withObservationTracking {
    _ = (model.initialCoordinate, model.currentCoordinate, model.mapCenter)
  } onChange: {
    Task { @MainActor in
      say(
        "initial: \(text(model.initialCoordinate))  current: \(text(model.currentCoordinate))  centre: \(text(model.mapCenter))"
      )
      onFix()
      printChanges(of: model, onFix: onFix)
    }
  }
}

/// Standard input's lines, read on a thread of their own.
func inputLines() -> AsyncStream<String> {
  let (lines, continuation) = AsyncStream<String>.makeStream()
  do {
    try SystemIO.startThread {
      while let line = readLine() { continuation.yield(line) }
      continuation.finish()
    }
  } catch {
    continuation.finish()
  }
  return lines
}

@main
@MainActor
struct LocationMap {
  static func main() async {
    var arguments = Array(CommandLine.arguments.dropFirst())
    var socket = LocationClient.defaultSocketPath
    var once = false
    var fixes: Int?
    while !arguments.isEmpty {
      let argument = arguments.removeFirst()
      switch argument {
      case "--socket" where !arguments.isEmpty: socket = arguments.removeFirst()
      case "--once": once = true
      case "--fixes" where !arguments.isEmpty:
        guard let count = Int(arguments.removeFirst()), count > 0 else {
          say("location-map: --fixes needs a count above 0")
          exit(64)
        }
        fixes = count
      default:
        say("usage: location-map [--socket PATH] [--once] [--fixes N]")
        exit(64)
      }
    }
    let client = LocationClient(socketPath: socket, timeout: .seconds(10))
    let model = MapViewModel(client: client, renderer: TerminalRenderer())

    let status = await model.requestAuthorization()
    say("authorization: \(status.rawValue)")
    if let error = model.lastError { say("location-map: \(error.message)") }
    if once { exit(status == .authorized ? 0 : 1) }

    if let fixes {
      var seen = 0
      printChanges(of: model) {
        seen += 1
        if seen >= fixes { exit(0) }
      }
      await model.startTracking()
      while model.isTracking {
        await Task.yield()
        try? await Task.sleep(for: .milliseconds(50))
      }
      say("location-map: \(model.lastError?.message ?? "the updates ended")")
      exit(1)
    }

    printChanges(of: model) {}
    say("keys: r request, s start, x stop, c centre on me, f follow, n none, q quit")
    for await line in inputLines() {
      switch String(line.filter { !$0.isWhitespace }) {
      case "r": say("authorization: \(await model.requestAuthorization().rawValue)")
      case "s": await model.startTracking()
      case "x": model.stopTracking()
      case "c": model.centerOnCurrentLocation()
      case "f": model.setUserTrackingMode(.follow)
      case "n": model.setUserTrackingMode(.none)
      case "q": exit(0)
      default: say("keys: r request, s start, x stop, c centre on me, f follow, n none, q quit")
      }
      if let error = model.lastError { say("location-map: \(error.message)") }
    }
  }
}
