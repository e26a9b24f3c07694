import LocationCore
import NMEA
import LocationModel

/// Checks the ``LocationBackend`` contract on a backend that produces fixes without outside help
/// (a replay, a simulation, gpsd fed by a test): returns the violations found, empty when it
/// conforms. Conformance suites call it as `#expect(await backendConformance(backend).isEmpty)`.
///
/// The contract checked: after `start()` locations arrive, each with ``Provenance/backend`` equal
/// to ``LocationBackend/uri``; `stop()` is followed by ``BackendStatus/stopped``; a second `stop()`
/// is harmless; `start()` after `stop()` produces locations again. `timeout` bounds each wait, in
/// real time: a guard against a hang (generous, since a loaded machine may run the backend's
/// tasks late), not a speed check.
public func backendConformance(
  _ backend: any LocationBackend, locations: Int = 3, timeout: Duration = .seconds(60)
) async -> [String] {
  let stream = backend.events
  return await withTaskGroup(of: [String]?.self) { group in
    group.addTask {
      var iterator = stream.makeAsyncIterator()
      var failures: [String] = []
      for round in 1...2 {
        do {
          try await backend.start()
        } catch {
          return failures + ["round \(round): start() threw \(error)"]
        }
        var received = 0
        while received < locations {
          guard let event = await iterator.next() else {
            return failures + ["round \(round): the event stream ended after \(received) locations"]
          }
          if case .location(let location) = event {
            received += 1
            if location.provenance.backend != backend.uri {
              failures.append(
                "round \(round): provenance.backend '\(location.provenance.backend)' is not the URI '\(backend.uri)'"
              )
            }
          }
        }
        await backend.stop()
        var stopped = false
        while !stopped, let event = await iterator.next() {
          if case .status(.stopped, _) = event { stopped = true }
        }
        if !stopped { failures.append("round \(round): no 'stopped' status after stop()") }
        await backend.stop()
      }
      return failures
    }
    group.addTask {
      try? await Task.sleep(for: timeout)
      return nil
    }
    let first = await group.next() ?? nil
    group.cancelAll()
    return first ?? ["timed out after \(timeout) waiting for the backend"]
  }
}
