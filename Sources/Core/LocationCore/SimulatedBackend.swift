import GNSSSky
import Glibc
import Queues
import SystemIO
import NMEA
import Synchronization
import LocationModel

/// A simulated GPS as a ``LocationBackend``: follows a route at a given speed, with Gaussian
/// position noise, scripted outages and fix mode degradation, deterministic from a seed.
///
/// Epochs are produced by ``SimulatedFixGenerator`` and paced on the injected clock at the update
/// rate; fix times are the clock's wall time at start plus the elapsed simulation time. During an
/// outage no location is emitted and the status turns ``BackendStatus/noFix``; a scheduled
/// no-fix degradation emits mode-1 fixes (no position) and the same status.
public final class SimulatedBackend: LocationBackend {
  /// Settings from a `simulate` URI.
  public struct Options: Sendable, Hashable {
    /// A GPX file whose `rte`, `trk` or `wpt` points form the route; `nil` for the default loop.
    public var routeFile: String?
    /// Speed along the route, m/s (`0...1000`).
    public var speed: Double = 10
    /// Update rate, Hz (`1...10`).
    public var rate: Double = 1
    /// User equivalent range error, metres one sigma (`0...1000`): `noise` or `uere` in the URI.
    /// Position errors are DOP × this.
    public var noise: Double = 2.5
    /// Elevation mask, degrees (`0...90`).
    public var elevationMask: Double = 5
    /// A YUMA almanac file to use instead of the bundled one.
    public var almanacFile: String?
    /// The systems in the sky.
    public var systems: [GNSSSystem] = GNSSSystem.allCases
    /// How the receiver starts.
    public var start: ReceiverStart = .running
    /// Time to first fix range, seconds; `nil` for the start type's default.
    public var timeToFirstFix: ClosedRange<Double>?
    /// Reacquisition delay range after every satellite was lost, seconds.
    public var reacquisition: ClosedRange<Double> = ReceiverStart.hot.defaultTimeToFirstFix
    /// Obstruction per route leg.
    public var obstructions: [Int: Obstruction] = [:]
    /// UTC time of the first epoch, milliseconds since 1970; `nil` for the clock's time at start.
    public var startTime: Int64?
    /// Seed of the pseudo-random generator.
    public var seed: UInt64 = 1
    /// Ranges with no fix at all.
    public var outages: [SimulationOutage] = []
    /// Fix mode changes (3D, 2D, no fix).
    public var modeChanges: [SimulationModeChange] = []
    /// Altitude above MSL when the route has no elevations, metres.
    public var altitude: Double = 60
    /// NMEA 0183 version of the in-process serial link (`nmea=2.3|4.10|4.11`); `nil` unless set.
    public var nmea: NMEAVersion?
    /// Baud rate of the in-process serial link (`baud=`, one of ``SerialLinePacer/baudRates``).
    public var baud: Int?
    /// Faults injected on the in-process serial link (`faults=`, ``NMEAFaultSchedule`` syntax).
    public var faults: NMEAFaultSchedule?

    /// The serial link the fixes cross when any of `nmea`, `baud` or `faults` is set (the version
    /// defaults to 4.11, the rate to unpaced, the faults to none); `nil` otherwise.
    public var link: SimulatedNMEALink? {
      guard nmea != nil || baud != nil || faults != nil else { return nil }
      // `baud` was checked against the offered rates when parsed; an unchecked value is left out.
      let output =
        (try? SimulatedOutput(baud: baud, faults: faults ?? NMEAFaultSchedule()))
        ?? SimulatedOutput()
      return SimulatedNMEALink(version: nmea ?? .v4_11, output: output)
    }

    /// Creates default options (default loop, 10 m/s, 1 Hz, 2.5 m noise, seed 1).
    public init(routeFile: String? = nil) {
      self.routeFile = routeFile
    }

    static let parameterNames = [
      "rate", "speed", "noise", "uere", "seed", "outage", "mode", "altitude", "mask", "almanac", "systems",
      "start", "ttff", "reacquire", "obstruction", "time", "nmea", "baud", "faults",
    ]

    /// Latest time an `outage` or `mode` change may name, seconds since the start (about 31
    /// years); larger values do not fit a `Duration` and are refused.
    public static let maximumScheduleSeconds = 1_000_000_000.0

    /// Parses `simulate[:ROUTE.gpx][?rate=HZ&speed=M_S&noise=M&seed=N&outage=S-E[,S-E]&mode=T:3d|2d|nofix[,...]&altitude=M]`
    /// and the sky settings `mask=DEG` (0-90), `almanac=PATH` (YUMA), `systems=gps,glonass,galileo,beidou`,
    /// `uere=M` (the same as `noise`), `start=running|cold|warm|hot`, `ttff=MIN-MAX` and
    /// `reacquire=MIN-MAX` (seconds, 0-3600), `obstruction=LEG:open|tunnel|canyon[:DEG][,...]`
    /// (leg `i` runs from waypoint `i` to the next; a canyon's walls, default 30°, run along the leg),
    /// `time=YYYY-MM-DDTHH:MM:SSZ` (UTC of the first epoch, years 1980-2079; default: now), and
    /// the serial link settings `nmea=2.3|4.10|4.11`, `baud=4800|9600|38400|115200` and
    /// `faults=SCHEDULE` (``NMEAFaultSchedule/parse(_:)``), which make the backend send every
    /// epoch through the NMEA encoder, the output stage and the decoder (``SimulatedNMEALink``).
    ///
    /// Times in `outage` and `mode` are seconds since the start, from 0 to
    /// ``maximumScheduleSeconds``.
    /// - Throws: ``BackendURIError`` naming the bad part.
    public static func parse(_ uri: String) throws(BackendURIError) -> Options {
      let parts = try BackendURIParts.parse(uri, scheme: "simulate", allowed: parameterNames)
      var options = Options(routeFile: parts.path)
      for (key, value) in parts.parameters {
        switch key {
        case "rate":
          options.rate = try BackendURIParts.double(
            value, key: key, range: 1...10, expected: "a rate in Hz within 1...10")
        case "speed":
          options.speed = try BackendURIParts.double(
            value, key: key, range: 0...1000, expected: "m/s within 0...1000")
        case "noise", "uere":
          options.noise = try BackendURIParts.double(
            value, key: key, range: 0...1000, expected: "metres within 0...1000")
        case "altitude":
          options.altitude = try BackendURIParts.double(
            value, key: key, range: -1000...100_000, expected: "metres within -1000...100000")
        case "mask":
          options.elevationMask = try BackendURIParts.double(
            value, key: key, range: 0...90, expected: "degrees within 0...90")
        case "almanac":
          guard !value.isEmpty else { throw .invalidValue(key: key, value: value, expected: "a YUMA file path") }
          options.almanacFile = value
        case "systems":
          var systems: [GNSSSystem] = []
          for name in value.split(separator: ",") {
            guard let system = GNSSSystem(rawValue: name.lowercased()), !systems.contains(system) else {
              throw .invalidValue(
                key: key, value: value, expected: "distinct names among gps, glonass, galileo, beidou")
            }
            systems.append(system)
          }
          guard !systems.isEmpty else {
            throw .invalidValue(key: key, value: value, expected: "at least one of gps, glonass, galileo, beidou")
          }
          options.systems = systems
        case "start":
          guard let start = ReceiverStart(rawValue: value.lowercased()) else {
            throw .invalidValue(key: key, value: value, expected: "running, cold, warm or hot")
          }
          options.start = start
        case "ttff", "reacquire":
          let bounds = value.split(separator: "-", omittingEmptySubsequences: false)
          guard (1...2).contains(bounds.count), let low = DecimalText.number(bounds[0]), let high = DecimalText.number(bounds[bounds.count - 1]),
            low.isFinite, high.isFinite, low >= 0, high >= low, high <= 3600
          else {
            throw .invalidValue(key: key, value: value, expected: "SECONDS or MIN-MAX seconds within 0...3600")
          }
          if key == "ttff" { options.timeToFirstFix = low...high } else { options.reacquisition = low...high }
        case "obstruction":
          let expected = "LEG:open|tunnel|canyon[:DEG] with LEG a waypoint index 0-99999 and DEG within 0...89"
          for item in value.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = item.split(separator: ":", omittingEmptySubsequences: false)
            guard pieces.count >= 2, let leg = DecimalText.wholeNumber(pieces[0], as: Int.self), (0...99_999).contains(leg) else {
              throw .invalidValue(key: key, value: String(item), expected: expected)
            }
            guard options.obstructions[leg] == nil else {
              throw .invalidValue(key: key, value: String(item), expected: "one setting per leg (leg \(leg) is given twice)")
            }
            switch (pieces[1].lowercased(), pieces.count) {
            case ("open", 2): options.obstructions[leg] = .openSky
            case ("tunnel", 2): options.obstructions[leg] = .tunnel
            case ("canyon", 2), ("canyon", 3):
              var wall = 30.0
              if pieces.count == 3 {
                guard let degrees = DecimalText.number(pieces[2]), (0...89).contains(degrees) else {
                  throw .invalidValue(key: key, value: String(item), expected: expected)
                }
                wall = degrees
              }
              // The street azimuth is filled in from the route in parameters().
              options.obstructions[leg] = .urbanCanyon(streetAzimuth: 0, wallElevation: wall)
            default: throw .invalidValue(key: key, value: String(item), expected: expected)
            }
          }
        case "time":
          let expected = "UTC as YYYY-MM-DDTHH:MM:SSZ, years 1980-2079"
          guard let time = UTCTime(iso8601: value, syntax: UTCTime.Syntax(acceptsLeapSecond: false)),
            (1980...2079).contains(time.date.year)
          else { throw .invalidValue(key: key, value: value, expected: expected) }
          options.startTime = time.milliseconds
        case "nmea":
          guard let version = NMEAVersion(rawValue: value) else {
            throw .invalidValue(key: key, value: value, expected: "2.3, 4.10 or 4.11")
          }
          options.nmea = version
        case "baud":
          guard let baud = DecimalText.wholeNumber(value, as: Int.self), SerialLinePacer.baudRates.contains(baud) else {
            throw .invalidValue(key: key, value: value, expected: "4800, 9600, 38400 or 115200")
          }
          options.baud = baud
        case "faults":
          do {
            options.faults = try NMEAFaultSchedule.parse(value)
          } catch {
            throw .invalidValue(key: key, value: value, expected: error.description)
          }
        case "seed":
          guard let seed = DecimalText.wholeNumber(value) else {
            throw .invalidValue(key: key, value: value, expected: "an unsigned 64-bit integer")
          }
          options.seed = seed
        case "outage":
          for range in value.split(separator: ",") {
            let bounds = range.split(separator: "-", omittingEmptySubsequences: false)
            // START < END is checked again on the Durations kept (within range, so converting
            // cannot trap): seconds closer than their resolution (1e-18 s) would make an outage
            // that ends where it begins.
            guard bounds.count == 2, let start = DecimalText.number(bounds[0]), let end = DecimalText.number(bounds[1]),
              start.isFinite, end.isFinite, start >= 0, end > start, end <= maximumScheduleSeconds,
              Duration.seconds(end) > Duration.seconds(start)
            else {
              throw .invalidValue(
                key: key, value: String(range),
                expected: "START-END in seconds, 0 <= START < END <= \(Int(maximumScheduleSeconds))")
            }
            options.outages.append(SimulationOutage(start: .seconds(start), end: .seconds(end)))
          }
        default:
          for change in value.split(separator: ",") {
            let pieces = change.split(separator: ":", omittingEmptySubsequences: false)
            let modes: [String: FixMode] = ["3d": .fix3D, "2d": .fix2D, "nofix": .noFix]
            guard pieces.count == 2, let at = DecimalText.number(pieces[0]), at >= 0, at <= maximumScheduleSeconds,
              let mode = modes[pieces[1].lowercased()]
            else {
              throw .invalidValue(
                key: key, value: String(change),
                expected: "SECONDS:3d|2d|nofix, SECONDS within 0...\(Int(maximumScheduleSeconds))")
            }
            options.modeChanges.append(SimulationModeChange(at: .seconds(at), mode: mode))
          }
        }
      }
      if let baud = options.baud, let problem = SerialLinePacer.epochBudgetProblem(baud: baud, rate: options.rate) {
        throw .invalidValue(key: "baud", value: String(baud), expected: "a baud rate that carries an epoch: \(problem)")
      }
      return options
    }

    /// Builds the simulation parameters, reading the GPX route file and the almanac file when
    /// there are.
    ///
    /// - Throws: ``GPXError`` when the route file cannot be read or has no points, or when the
    ///   almanac file cannot be read or parsed (``GPXError/almanac(_:)`` with the
    ///   ``AlmanacError``, line number included), ``GPXError/obstructionBeyondRoute(leg:legs:)``
    ///   when an `obstruction` setting names a leg the route does not have.
    public func parameters() throws(GPXError) -> SimulationParameters {
      var route = SimulatedRoute.defaultLoop
      var obstructions: [Int: Obstruction] = [:]
      if let routeFile {
        let points = try GPXReader.points(contentsOf: routeFile)
        route = SimulatedRoute(gpx: points)
        // GPX <extensions><obstruction>: the leg from that point on; the URI's settings win.
        for (index, point) in points.enumerated() {
          if let obstruction = point.obstruction { obstructions[index] = obstruction }
        }
      }
      for (leg, obstruction) in self.obstructions { obstructions[leg] = obstruction }
      var almanac = GPSAlmanac.bundled
      if let almanacFile {
        do {
          almanac = try Self.readAlmanac(almanacFile)
        } catch {
          throw .almanac(error)
        }
      }
      let legs = route.waypoints.count
      if let beyond = self.obstructions.keys.filter({ $0 >= legs }).min() {
        throw .obstructionBeyondRoute(leg: beyond, legs: legs)
      }
      for (leg, obstruction) in obstructions {
        // A canyon's street runs along its leg.
        if case .urbanCanyon(_, let wall) = obstruction {
          let count = route.waypoints.count
          let a = route.waypoints[leg % count]
          let b = route.waypoints[(leg + 1) % count]
          var azimuth = Geodesic.inverse(a, b).initialAzimuth
          if azimuth < 0 { azimuth += 360 }  // degrees true, 0..<360
          obstructions[leg] = .urbanCanyon(streetAzimuth: azimuth.isFinite ? azimuth : 0, wallElevation: wall)
        }
      }
      return SimulationParameters(
        route: route, speed: speed, rate: rate, noiseSigma: noise, seed: seed, outages: outages,
        modeChanges: modeChanges, altitude: altitude,
        sky: SkyModel(almanac: almanac, systems: systems, elevationMask: elevationMask), start: start,
        timeToFirstFix: timeToFirstFix, reacquisition: reacquisition, obstructions: obstructions,
        startTime: startTime)
    }

    /// The largest almanac file read, in bytes (1 MiB; a full YUMA almanac is about 25 KiB).
    public static let maximumAlmanacBytes = 1 << 20

    /// Reads and parses a YUMA almanac file (at most ``maximumAlmanacBytes``; a regular file
    /// only; UTF-8, a leading byte order mark ignored).
    /// - Throws: ``AlmanacError``.
    public static func readAlmanac(_ path: String) throws(AlmanacError) -> GPSAlmanac {
      let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
      guard fd >= 0 else { throw .unreadable(path: path, message: String(cString: strerror(errno))) }
      defer { close(fd) }
      var info = stat()
      guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
        throw .unreadable(path: path, message: "not a regular file")
      }
      let bytes: [UInt8]
      do {
        bytes = try SystemIO.readToEnd(fd, limit: maximumAlmanacBytes)
      } catch {
        switch error {
        case .tooLarge: throw .unreadable(path: path, message: "larger than 1 MiB")
        case .system(let failure): throw .unreadable(path: path, message: failure.description)
        }
      }
      let text = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...]
      return try GPSAlmanac.parseYUMA(String(decoding: text, as: UTF8.self))
    }
  }

  /// The backend URI.
  public let uri: String
  /// Every event for the backend's whole life; one consumer.
  public let events: BackendEvents
  /// The simulation's parameters.
  public let parameters: SimulationParameters
  /// The backend's one queue: locations wait beyond 1024 unread (the simulation can wait, so
  /// nothing is dropped); statuses never wait.
  private let queue = EventQueue<BackendEvent>(capacity: 1024, overflow: .waitForSpace)
  private let clock: any LocationClock
  private let source: String?
  private let runTask = Mutex<Task<Void, Never>?>(nil)
  /// The serial link the fixes cross, `nil` to hand the generator's fixes over directly.
  public let link: SimulatedNMEALink?
  private let linkStatistics = Mutex((decoder: NMEAStatistics(), output: SimulatedOutputStatistics()))

  /// Creates a simulated GPS with `parameters` on `clock`; `source` names the route file; with
  /// `link`, every epoch crosses that serial link (encoded, paced, faulted, decoded).
  public init(
    parameters: SimulationParameters, clock: any LocationClock = SystemClock(),
    uri: String = "simulate",
    source: String? = nil,
    link: SimulatedNMEALink? = nil
  ) {
    self.parameters = parameters
    self.clock = clock
    self.uri = uri
    self.source = source
    self.link = link
    events = BackendEvents(queue)
  }

  /// What the link's decoder has counted so far (sentences read, accepted, rejected by reason);
  /// zero without a link.
  public var decoderStatistics: NMEAStatistics { linkStatistics.withLock { $0.decoder } }

  /// What the link's output stage has done so far (faults injected, sentences cut by the baud
  /// rate, epochs unplugged); zero without a link.
  public var outputStatistics: SimulatedOutputStatistics { linkStatistics.withLock { $0.output } }

  /// Creates a simulated GPS from URI options (reads the GPX route file now).
  ///
  /// - Throws: ``GPXError``.
  public convenience init(
    options: Options, clock: any LocationClock = SystemClock(), uri: String = "simulate"
  )
    throws(GPXError)
  {
    self.init(
      parameters: try options.parameters(), clock: clock, uri: uri, source: options.routeFile,
      link: options.link)
  }

  deinit {
    queue.finish()
  }

  /// Starts the simulation from its first epoch (the generator restarts from the seed).
  public func start() async throws {
    runTask.withLock { task in
      guard task == nil else { return }
      // The run's timeline begins now, not when its task first runs: a clock that moves on in
      // between (a virtual clock in a test, a loaded machine) finds the epochs already due.
      let startInstant = clock.now
      let startTime = parameters.startTime ?? clock.wallTimeMilliseconds
      task = Task { [self] in await run(startInstant: startInstant, startTime: startTime) }
    }
  }

  /// Stops the simulation, waits for it to end, then reports ``BackendStatus/stopped``.
  public func stop() async {
    let task = runTask.withLock { task in
      let current = task
      task = nil
      return current
    }
    guard let task else { return }
    task.cancel()
    await task.value
    // A status is never held back by a full queue.
    queue.post(.status(.stopped, detail: nil))
  }

  private func run(startInstant: Duration, startTime: Int64) async {
    // One run is one segment of the simulation's own timeline (its start time and clock).
    let segment = Provenance.nextTimelineSegment()
    var generator = SimulatedFixGenerator(parameters: parameters, startTime: startTime)
    var lastStatus = BackendStatus.connected
    // A route of one point (or one point repeated) stands still whatever the speed.
    let speed = parameters.route.length > 0 ? parameters.speed : 0
    queue.post(
      .status(.connected, detail: "simulating \(source ?? "the default loop") at \(speed) m/s"))
    var wire = link.map { SimulatedWire($0) }
    while !Task.isCancelled, let epoch = generator.next() {
      do {
        try await clock.sleep(until: startInstant + epoch.elapsed)
      } catch {
        break
      }
      let seconds = Double(epoch.elapsed.components.seconds) + Double(epoch.elapsed.components.attoseconds) / 1e18
      let unplugged = link?.output.faults.isUnplugged(at: seconds) ?? false
      let status: BackendStatus =
        epoch.inOutage || unplugged || !epoch.fix.mode.hasPosition ? .noFix : .connected
      if status != lastStatus {
        lastStatus = status
        let detail: String
        if epoch.inOutage {
          detail = "outage"
        } else if unplugged {
          detail = "device unplugged"
        } else if status == .noFix {
          detail = "no fix"
        } else {
          detail = "fix mode \(epoch.fix.mode.rawValue)"
        }
        queue.post(.status(status, detail: detail))
      }
      if epoch.inOutage { continue }
      if var current = wire {
        let fixes: [DecodedFix]
        do {
          fixes = try await current.carry(
            epoch.fix, at: seconds, unplugged: unplugged, start: startInstant + epoch.elapsed,
            interval: generator.period, clock: clock)
        } catch {
          break
        }
        wire = current
        linkStatistics.withLock { $0 = (current.decoder.statistics, current.stage.statistics) }
        for decoded in fixes {
          let location = Location(
            fix: decoded.fix,
            provenance: Provenance(
              backend: uri, source: source, line: decoded.line, isSimulated: true, timelineSegment: segment))
          await queue.push(.location(location))
        }
        continue
      }
      let location = Location(
        fix: epoch.fix,
        provenance: Provenance(
          backend: uri, source: source, line: nil, isSimulated: true, timelineSegment: segment))
      await queue.push(.location(location))
    }
  }
}

/// The serial link between a simulated receiver and its reader, run in-process: the `simulate`
/// URI's `nmea`, `baud` and `faults` settings.
///
/// Each epoch's fix is encoded in ``version`` (``NMEAEncoder/init(version:)``), passes the same
/// output stage as the simulated hardware of `locationctl simulate` (``SimulatedOutput``: the
/// `stuck` windows, the per-sentence faults of ``NMEAFaultInjector``, the baud rate's cut of
/// ``SerialLinePacer/fit(_:interval:)``), is released on ``SerialLinePacer``'s 10 ms ticks on the
/// backend's clock, and is read back by an ``NMEADecoder``: the backend reports the fixes the
/// decoder completes, as a daemon reading that receiver's serial line would. A fix therefore
/// arrives when the decoder ends its epoch (at the next epoch's first sentence), carries what NMEA
/// carries (rounded fields, gpsd's `eph` model), and faulty sentences are rejected and counted in
/// ``SimulatedBackend/decoderStatistics``. During an `unplug` window nothing is sent and the
/// backend reports no fix ("device unplugged").
public struct SimulatedNMEALink: Sendable, Hashable {
  /// The NMEA 0183 version the encoder follows.
  public var version: NMEAVersion
  /// The baud rate and the faults.
  public var output: SimulatedOutput

  /// Creates a link (default: NMEA 4.11, unpaced, no faults).
  public init(version: NMEAVersion = .v4_11, output: SimulatedOutput = SimulatedOutput()) {
    self.version = version
    self.output = output
  }
}

/// The running state of a ``SimulatedNMEALink``: encoder, output stage and decoder.
struct SimulatedWire {
  let encoder: NMEAEncoder
  let stage: SimulatedOutputStage
  let pacer: SerialLinePacer?
  var decoder = NMEADecoder()
  var wasUnplugged = false

  init(_ link: SimulatedNMEALink) {
    encoder = NMEAEncoder(version: link.version)
    stage = SimulatedOutputStage(link.output)
    pacer = link.output.baud.flatMap { try? SerialLinePacer(baud: $0) }
  }

  /// Sends one epoch `seconds` after the start through the link, paced from `start` on `clock`,
  /// and returns the fixes the decoder completed.
  ///
  /// - Throws: `CancellationError` when cancelled while pacing.
  mutating func carry(
    _ fix: Fix, at seconds: Double, unplugged: Bool, start: Duration, interval: Duration,
    clock: any LocationClock
  ) async throws -> [DecodedFix] {
    if unplugged {
      // The device is gone: nothing is sent; a new plug-in starts a fresh stream.
      if !wasUnplugged { stage.countUnplug() }
      wasUnplugged = true
      stage.countUnpluggedEpoch()
      return []
    }
    wasUnplugged = false
    let outgoing = stage.outgoingFix(fix, at: seconds)
    let bytes = stage.outgoingLines(encoder.encode(outgoing), interval: interval).flatMap { $0 }
    var fixes: [DecodedFix] = []
    var decoder = self.decoder
    if let pacer {
      try await pacer.transmit(bytes, startingAt: start, clock: clock) { chunk in
        decoder.feed(Array(chunk)) { fixes.append($0) }
      }
    } else {
      decoder.feed(bytes) { fixes.append($0) }
    }
    self.decoder = decoder
    return fixes
  }
}
