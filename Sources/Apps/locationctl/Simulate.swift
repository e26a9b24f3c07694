import Dispatch
import Glibc
import LocationCore
import LocationModel
import NMEA
import Synchronization
import SystemIO

let simulateUsage = """
  usage: locationctl simulate (--pty PATH | --output tcp://HOST:PORT | --output udp://HOST:PORT)
                             [--backend URI] [--rate HZ] [--nmea 2.3|4.10|4.11]
                             [--baud 4800|9600|38400|115200] [--faults SCHEDULE] [--talker GP|GN] [--zda]
    Simulated GPS hardware: creates a pseudo-terminal, links PATH to it and writes NMEA 0183
    at HZ epochs per second (1-10, default 1), as a serial receiver does.
    Start gpsd on it with: gpsd -N -n PATH
    --output URI    instead of a pty: a TCP server on HOST:PORT (gpsd -N -n tcp://HOST:PORT)
                    or UDP datagrams to HOST:PORT, one sentence each (gpsd -N -n udp://HOST:PORT)
    --backend URI   where the fixes come from: simulate[...] (default simulate?rate=HZ) or
                    replay:LOG.nmea[?speed=1&loop=true]
    --nmea VERSION  the NMEA 0183 version followed (default 4.11): RMC, VTG, GNS (4.10+), GGA,
                    GSA per system, GSV per system, GST, ZDA; see docs/simulator.md
    --baud RATE     pace the bytes as a serial line at RATE (8N1) carries them; an epoch that
                    does not fit loses its last sentences (one warning). Default: unpaced
    --faults SCHEDULE  inject faults, e.g. checksum:0.01,bitflip:0.001,drop:0.01,truncate:0.01,
                    garbage:0.005,stuck@120-180,seed=7 (see docs/simulator.md)
    --talker GP|GN  unversioned output with this talker for the position sentences (RMC, VTG,
                    GGA, GSA, GSV, and ZDA with --zda), as before --nmea existed
    --device-mode OCTAL  permissions of the pty (e.g. 666 for a gpsd that drops privileges)
    Sky and receiver (added to a simulate backend URI; see docs/simulator.md):
    --mask DEG      elevation mask, 0-90 (default 5)
    --start TYPE    running (default), cold, warm or hot start
    --almanac PATH  a YUMA almanac instead of the bundled one
    --uere M        range error, metres one sigma (default 2.5)
    --seed N        seed of the noise
    --systems LIST  gps,glonass,galileo,beidou (default all four)
    --time UTC      time of the first epoch, YYYY-MM-DDTHH:MM:SSZ (default now)
    Runs until interrupted (SIGINT/SIGTERM) or the backend ends; then removes PATH.

  """

/// `locationctl simulate --pty PATH ...`: simulated GPS hardware fed by a backend. Exit status 0
/// when interrupted or when the backend's fixes end, 1 when the pty or backend cannot start, 64
/// on bad usage.
func runSimulate(arguments: [String]) -> Int32 {
  var path: String?
  var network: SimulatedTransport?
  var backendURI: String?
  var rate = 1.0
  var talker: TalkerID?
  var version = NMEAVersion.v4_11
  var baud: Int?
  var faults = NMEAFaultSchedule()
  var explicitNMEA = false
  var explicitFaults = false
  var sentences = NMEAEncoder.SentenceSet.standard
  var deviceMode: mode_t?
  var skySettings: [(key: String, value: String)] = []
  // `--name=VALUE` or `--name VALUE` (ArgumentScanner); a separate word that starts with -- is
  // never a value (OptionValue).
  var scanner = ArgumentScanner(arguments)
  func value(_ name: String) -> String? {
    do {
      return try scanner.value()
    } catch {
      writeError("locationctl simulate: \(error) (try --help)")
      return nil
    }
  }
  while let word = scanner.next() {
    let argument: String
    switch word {
    case .option(let name): argument = name
    case .operand(let operand): argument = operand
    case .endOfOptions: argument = "--"
    }
    if scanner.hasJoinedValue, ["--help", "--zda"].contains(argument) {
      writeError("locationctl simulate: \(argument) takes no value (try --help)")
      return ExitCode.usage.rawValue
    }
    switch argument {
    case "-h", "--help":
      print(simulateUsage, terminator: "")
      return ExitCode.success.rawValue
    case "--pty":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      path = text
    case "--output":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      guard let transport = SimulatedTransport(uri: text) else {
        let problem = SimulatedTransport.problem(with: text) ?? ""
        writeError("locationctl simulate: --output \(text): \(problem)")
        return ExitCode.usage.rawValue
      }
      network = transport
    case "--backend":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      backendURI = text
    case "--rate":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      guard let number = DecimalText.number(text), (1...10).contains(number) else {
        writeError("locationctl simulate: --rate must be a number of epochs per second in 1...10")
        return ExitCode.usage.rawValue
      }
      rate = number
    case "--talker":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      guard let choice = TalkerID(letters: text.uppercased()), choice == .gps || choice == .multiGNSS else {
        writeError("locationctl simulate: --talker must be GP or GN")
        return ExitCode.usage.rawValue
      }
      talker = choice
    case "--nmea":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      guard let choice = NMEAVersion(rawValue: text) else {
        writeError("locationctl simulate: --nmea must be 2.3, 4.10 or 4.11")
        return ExitCode.usage.rawValue
      }
      version = choice
      explicitNMEA = true
    case "--baud":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      guard let number = Int(text), SerialLinePacer.baudRates.contains(number) else {
        writeError("locationctl simulate: --baud must be 4800, 9600, 38400 or 115200")
        return ExitCode.usage.rawValue
      }
      baud = number
    case "--faults":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      do {
        faults = try NMEAFaultSchedule.parse(text)
        explicitFaults = true
      } catch {
        writeError("locationctl simulate: --faults: \(error)")
        return ExitCode.usage.rawValue
      }
    case "--zda":
      sentences.insert(.zda)
    case "--device-mode":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      guard let mode = mode_t(text, radix: 8), mode <= 0o777 else {
        writeError("locationctl simulate: --device-mode must be octal permissions such as 666")
        return ExitCode.usage.rawValue
      }
      deviceMode = mode
    case "--mask", "--start", "--almanac", "--uere", "--seed", "--systems", "--time":
      guard let text = value(argument) else { return ExitCode.usage.rawValue }
      guard !text.isEmpty, !text.contains("&"), !text.contains("?") else {
        writeError("locationctl simulate: \(argument) needs a value without '&' or '?'")
        return ExitCode.usage.rawValue
      }
      skySettings.append((String(argument.dropFirst(2)), text))
    default:
      writeError("locationctl simulate: unknown argument \(argument) (try --help)")
      return ExitCode.usage.rawValue
    }
  }
  if let baud, let problem = SerialLinePacer.epochBudgetProblem(baud: baud, rate: rate) {
    writeError("locationctl simulate: --baud \(baud) with --rate: \(problem)")
    return ExitCode.usage.rawValue
  }
  if path != nil && network != nil {
    writeError("locationctl simulate: --pty and --output exclude each other (try --help)")
    return ExitCode.usage.rawValue
  }
  guard let path = path ?? network?.description else {
    writeError("locationctl simulate: one of --pty PATH or --output URI is required (try --help)")
    return ExitCode.usage.rawValue
  }
  // --nmea, --baud and --faults set the output stage's link; the same keys in --backend's URI
  // build a second link inside the backend, in series with it: both given is refused rather than
  // one of them seeming to be ignored. (--rate and the URI's rate= are the output's epoch rate
  // and the backend's fix rate: they go together.)
  if let backendURI, let query = backendURI.split(separator: "?", maxSplits: 1).dropFirst().first {
    let keys = Set(query.split(separator: "&").map { String($0.prefix { $0 != "=" }) })
    let given: [(option: String, key: String, set: Bool)] = [
      ("--baud", "baud", baud != nil), ("--nmea", "nmea", explicitNMEA),
      ("--faults", "faults", explicitFaults),
    ]
    for (option, key, set) in given where set && keys.contains(key) {
      writeError(
        "locationctl simulate: \(option) and \(key)= in --backend both set the \(key): give one of them")
      return ExitCode.usage.rawValue
    }
  }
  var uri =
    backendURI ?? "simulate?rate=\(rate == rate.rounded() ? String(Int(rate)) : String(rate))"
  if !skySettings.isEmpty {
    guard uri.hasPrefix("simulate") else {
      writeError("locationctl simulate: sky settings (--mask, --start, ...) need a simulate backend")
      return ExitCode.usage.rawValue
    }
    let query = skySettings.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
    uri += (uri.contains("?") ? "&" : "?") + query
  }
  let backend: any LocationBackend
  do {
    backend = try LocalBackendFactory.make(uri: uri)
  } catch {
    writeError("locationctl simulate: \(error)")
    return ExitCode.usage.rawValue
  }
  let encoder =
    talker.map { NMEAEncoder(talker: $0, sentences: sentences) } ?? NMEAEncoder(version: version)
  if let network {
    return runNetworkSimulate(
      transport: network, backend: backend, uri: uri, rate: rate, encoder: encoder, baud: baud, faults: faults)
  }
  let receiver: SimulatedReceiver
  do {
    receiver = try SimulatedReceiver(
      linkPath: path, encoder: encoder, deviceMode: deviceMode,
      output: try SimulatedOutput(baud: baud, faults: faults))
  } catch {
    writeError("locationctl simulate: \(error)")
    return ExitCode.failure.rawValue
  }

  // Fixes of the backend's location events, in order, until a replay reaches the end of its
  // log; status events go to standard error. Pulled one per epoch, so a fast source waits.
  let fixes = simulatedFixes(backend)
  let status = Atomic<Int32>(ExitCode.success.rawValue)
  let done = DispatchSemaphore(value: 0)
  let task = Task {
    guard await startSimulatedBackend(backend, uri: uri, status: status) else {
      receiver.stop()
      done.signal()
      return
    }
    do {
      try receiver.start(rate: rate, fixes: fixes)
    } catch {
      writeError("locationctl simulate: \(error)")
      status.store(ExitCode.failure.rawValue, ordering: .relaxed)
      receiver.stop()
    }
    writeError(
      "locationctl simulate: NMEA 0183 at \(rate) Hz from \(uri) on \(receiver.slavePath), linked at \(path)"
        + "; run: gpsd -N -n \(path)")
    await receiver.waitUntilFinished()
    await backend.stop()
    done.signal()
  }

  // SIGINT/SIGTERM: stop writing and remove the link.
  waitUntilSignalled(done) { receiver.stop() }
  task.cancel()
  let statistics = receiver.statistics
  writeError(
    "locationctl simulate: \(statistics.epochsWritten) epochs written, "
      + "\(statistics.epochsWithoutReader) without a reader, \(statistics.epochsDropped) dropped, "
      + "\(statistics.bytesWritten) bytes"
      + (faults.isEmpty ? "" : "; \(receiver.outputStatistics.faults.summary)"))
  return status.load(ordering: .relaxed)
}

/// Blocks until `done` is signalled; SIGINT or SIGTERM meanwhile call `onSignal` (which should
/// lead to `done`). Catching the signals ends when this returns.
func waitUntilSignalled(_ done: DispatchSemaphore, onSignal: @escaping @Sendable () -> Void) {
  let signals = SignalSequence.stream([SIGINT, SIGTERM])
  let signalTask = Task {
    for await _ in signals { onSignal() }
  }
  done.wait()
  // Ends the iteration, which stops catching the signals.
  signalTask.cancel()
}
