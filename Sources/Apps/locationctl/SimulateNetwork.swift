import Dispatch
import Glibc
import LocationCore
import LocationModel
import NMEA
import Synchronization
import SystemIO

/// The fixes of a backend's location events, in order, until a replay reaches the end of its
/// log; status events go to standard error.
func simulatedFixes(_ backend: any LocationBackend) -> some AsyncSequence<Fix, Never> & Sendable {
  backend.events.prefix { event in
    if case .status(.endOfData, _) = event {
      writeError("locationctl simulate: the replay reached the end of its log")
      return false
    }
    return true
  }.compactMap { event -> Fix? in
    switch event {
    case .location(let location): return location.fix
    case .status(let status, let detail):
      writeError(
        "locationctl simulate: backend \(status.rawValue)" + (detail.map { ": \($0)" } ?? ""))
      return nil
    case .error(let message):
      writeError("locationctl simulate: backend error: \(message)")
      return nil
    }
  }
}

/// Starts `backend` (named `uri` in messages) for `locationctl simulate`; when it cannot start,
/// writes why to standard error, stores the failure exit status in `status` and returns false.
func startSimulatedBackend(_ backend: any LocationBackend, uri: String, status: borrowing Atomic<Int32>) async -> Bool {
  do {
    try await backend.start()
    return true
  } catch {
    writeError("locationctl simulate: cannot start \(uri): \(error)")
    status.store(ExitCode.failure.rawValue, ordering: .relaxed)
    return false
  }
}

/// `locationctl simulate --output tcp://HOST:PORT|udp://HOST:PORT`: the simulated receiver on a
/// network transport until interrupted or the backend ends. Exit status as ``runSimulate(arguments:)``.
func runNetworkSimulate(
  transport: SimulatedTransport, backend: any LocationBackend, uri: String, rate: Double,
  encoder: NMEAEncoder,
  baud: Int?, faults: NMEAFaultSchedule
) -> Int32 {
  let receiver: SimulatedNetworkReceiver
  do {
    receiver = try SimulatedNetworkReceiver(
      transport: transport, encoder: encoder,
      output: try SimulatedOutput(baud: baud, faults: faults))
  } catch {
    writeError("locationctl simulate: \(error)")
    return ExitCode.failure.rawValue
  }
  let status = Atomic<Int32>(ExitCode.success.rawValue)
  let done = DispatchSemaphore(value: 0)
  let task = Task {
    guard await startSimulatedBackend(backend, uri: uri, status: status) else {
      done.signal()
      return
    }
    writeError(
      "locationctl simulate: NMEA 0183 at \(rate) Hz from \(uri) on \(receiver.transport); run: gpsd -N -n \(receiver.transport)"
    )
    await receiver.run(rate: rate, fixes: simulatedFixes(backend))
    await backend.stop()
    done.signal()
  }
  waitUntilSignalled(done) { task.cancel() }
  receiver.stop()
  let statistics = receiver.statistics
  let injected = receiver.outputStatistics
  writeError(
    "locationctl simulate: \(statistics.epochsSent) epochs sent, \(statistics.bytesSent) bytes, "
      + "\(statistics.connectionsAccepted) connections"
      + (statistics.connectionsRefused > 0
        ? " (\(statistics.connectionsRefused) refused: no descriptor to spare)" : "")
      + ", \(statistics.datagramsSent) datagrams, "
      + "\(injected.sentencesCut) sentences cut by the baud rate"
      + (faults.isEmpty ? "" : "; \(injected.faults.summary)"))
  return status.load(ordering: .relaxed)
}
