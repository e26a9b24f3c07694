import Glibc
import LocationModel
import NMEA
import Synchronization
import SystemIO

/// The reading thread of one ``NMEAStreamBackend`` run: opens the source, decodes what it
/// sends, and reopens it when it comes back.
final class NMEAStreamReader: @unchecked Sendable {
  // @unchecked: after init everything is touched only by the reading thread; the queue and the
  // counters are thread-safe.
  private let endpoint: NMEAStreamEndpoint
  private let uri: String
  private let options: NMEAStreamBackend.Options
  private let queue: EventQueue<BackendEvent>
  private let counters: NMEAStreamCounterBox

  private var lastStatus: BackendStatus?
  private var lastDetail: String?
  private var decoder = NMEADecoder()
  private var noFixDeadline: UInt64?
  /// Statistics of the decoders of earlier connections, and what the warnings already told.
  private var reportedRejections: [NMEARejection: Int] = [:]
  private var nextRejectionReport: UInt64 = 0
  /// Bytes of the current connection, its first bytes, and whether "no NMEA" was said.
  private var connectionBytes = 0
  private var firstBytes: [UInt8] = []
  private var toldNoNMEA = false
  /// The epoch reported at its end of cycle, until the decoder emits it in the ordinary way.
  private var earlyEpoch: DecodedFix?
  /// When the epoch in progress, not yet reported, ends for silence (``Options/epochSilence``).
  private var epochSilenceDeadline: UInt64?
  private var buffer = [UInt8](repeating: 0, count: 1 << 16)

  init(
    endpoint: NMEAStreamEndpoint, uri: String, options: NMEAStreamBackend.Options,
    queue: EventQueue<BackendEvent>, counters: NMEAStreamCounterBox
  ) {
    self.endpoint = endpoint
    self.uri = uri
    self.options = options
    self.queue = queue
    self.counters = counters
  }

  static func nanoseconds(_ duration: Duration) -> UInt64 { MonotonicClock.nanoseconds(of: duration) }

  func run(_ thread: WorkerThread) {
    report(.connecting, "opening \(endpoint.sourceName)")
    switch endpoint.kind {
    case .serial(let path, let baud): runSerial(thread, path: path, baud: baud)
    case .tcp(let host, let port): runTCP(thread, host: host, port: port)
    case .udp(let host, let port): runUDP(thread, host: host, port: port)
    }
    finishConnection()
    report(.stopped, nil)
  }

  // MARK: Serial devices

  private func runSerial(_ thread: WorkerThread, path: String, baud: Int?) {
    let watch: PathWatch?
    do throws(SystemError) { watch = try PathWatch(path: path) } catch {
      watch = nil
      queue.post(.error("\(path): cannot watch its directory (\(error)); retrying every 5 s"))
    }
    var lastReason: String?
    while !thread.isStopping {
      let fd: Int32
      do throws(SystemError) { fd = try SerialPort.open(path) } catch {
        let reason = Self.openFailure(error, path: path)
        // Said once per absence, not at every change in the directory.
        if reason != lastReason || lastStatus != .deviceRemoved {
          lastReason = reason
          // A path that is there but not a device waits for one to take its place.
          let waiting = error.code == ENOTTY ? "a device at this path" : "it to appear"
          report(.deviceRemoved, "\(path): \(reason); waiting for \(waiting)")
        }
        waitForPath(thread, watch)
        continue
      }
      lastReason = nil
      let rate: Int
      var initial: [UInt8] = []
      if let baud {
        do throws(SystemError) { try SerialPort.setRate(fd, baud) } catch {
          close(fd)
          report(
            .deviceRemoved, "\(path): cannot set \(baud) baud: \(error); waiting for it to return")
          waitForPath(thread, watch)
          continue
        }
        rate = baud
      } else {
        switch detectRate(thread, fd: fd, path: path, watch: watch) {
        case .found(let found, let bytes):
          rate = found
          initial = bytes
        case .lost(let reason):
          let replaced = Self.isReplaced(fd: fd, path: path)
          close(fd)
          lose(path: path, reason: reason)
          if !replaced { waitForPath(thread, watch) }
          continue
        case .stopped:
          close(fd)
          return
        }
      }
      counters.value.withLock {
        $0.opens += 1
        $0.baud = rate
      }
      beginConnection()
      report(
        .connected, "reading \(path) at \(rate) baud" + (baud == nil ? " (found by baud=auto)" : "")
      )
      if !initial.isEmpty { consume(initial) }
      let reason = readStream(thread, fd: fd, watch: watch, path: path, idle: nil)
      let replaced = Self.isReplaced(fd: fd, path: path)
      close(fd)
      guard let reason else { return }
      lose(path: path, reason: reason)
      if !replaced { waitForPath(thread, watch) }
    }
  }

  /// Whether `path` now names another device than the open `fd`: the link or node was replaced
  /// in one step (a new link renamed over the old one, as udev and `ln -sfT` do), so there is
  /// nothing to wait for and the path is opened at once. A path that is gone, or that still names
  /// the same device (a hang-up), is waited for.
  static func isReplaced(fd: Int32, path: String) -> Bool {
    namesANode(path) && !stillPresent(fd: fd, path: path)
  }

  /// Whether `path` names a node now (following links).
  static func namesANode(_ path: String) -> Bool {
    var named = stat()
    return stat(path, &named) == 0
  }

  private func lose(path: String, reason: String) {
    finishConnection(endingEpoch: true)
    counters.value.withLock { $0.losses += 1 }
    report(.deviceRemoved, "\(path) removed (\(reason)); waiting for it to return")
  }

  /// Waits until the watched directory changes (the path may be back), or 5 s without a watch.
  private func waitForPath(_ thread: WorkerThread, _ watch: PathWatch?) {
    guard let watch else {
      thread.sleep(nanoseconds: 5_000_000_000)
      return
    }
    while !thread.isStopping {
      let ready = thread.wait(for: [.init(watch.fileDescriptor)], timeoutNanoseconds: nil)
      if ready.first?.any == true, watch.takeChanges() { return }
    }
  }

  enum Detection {
    case found(Int, [UInt8])
    case lost(String)
    case stopped
  }

  /// The order `baud=auto` tries: the common rates of NMEA receivers first.
  static let probeOrder = [9600, 4800, 115_200, 38400, 19200, 57600, 230_400, 460_800, 921_600]

  /// Tries each rate until two sentences with valid checksums arrive; keeps trying (reporting
  /// what was seen after each full round) while the device stays.
  private func detectRate(_ thread: WorkerThread, fd: Int32, path: String, watch: PathWatch?)
    -> Detection
  {
    var toldRound = false
    while !thread.isStopping {
      var seen: [String] = []
      for rate in Self.probeOrder {
        do throws(SystemError) { try SerialPort.setRate(fd, rate) } catch {
          return .lost("cannot set \(rate) baud: \(error)")
        }
        var probe = NMEADecoder()
        var bytes: [UInt8] = []
        let deadline = MonotonicClock.nanoseconds() + Self.nanoseconds(options.baudProbeWindow)
        while true {
          if thread.isStopping { return .stopped }
          let now = MonotonicClock.nanoseconds()
          if now >= deadline { break }
          let interests: [WorkerThread.Interest] =
            [.init(fd)] + (watch.map { [.init($0.fileDescriptor)] } ?? [])
          let ready = thread.wait(for: interests, timeoutNanoseconds: deadline - now)
          if ready.count > 1, ready[1].any, let watch, watch.takeChanges(),
            !Self.stillPresent(fd: fd, path: path)
          {
            return .lost(Self.lossOfNode(path))
          }
          guard let first = ready.first, first.any else { continue }
          let count: Int
          do throws(SystemError) { count = try SystemIO.read(fd, into: &buffer) } catch {
            if error.code == EAGAIN { continue }
            return .lost("read: \(error)")
          }
          if count == 0 { return .lost("hang-up") }
          let chunk = Array(buffer.prefix(count))
          if bytes.count < 1 << 16 { bytes.append(contentsOf: chunk) }
          probe.feed(chunk) { _ in }
          let checked = probe.statistics.accepted - probe.statistics.unchecked
          if checked >= 2 { return .found(rate, bytes) }
          // Garbage at this rate: no need to wait out the window.
          if bytes.count >= 1024 && checked == 0 && probe.statistics.read > 4 { break }
        }
        seen.append("\(rate): \(Self.describe(bytes: bytes, statistics: probe.statistics))")
      }
      if !toldRound {
        toldRound = true
        let text = "no NMEA 0183 from \(path) at any rate: " + seen.joined(separator: "; ")
        queue.post(.error(text))
        report(.noFix, text)
      }
    }
    return .stopped
  }

  /// Whether `path` still names the device open on `fd`.
  /// Why `path` could not be opened as a serial device, with what to do about the usual causes:
  /// another program holds it (`EBUSY`), this user may not open it (`EACCES`: the `dialout`
  /// group), or it is not a terminal (`ENOTTY`: a log file or a FIFO, which `replay:` reads).
  static func openFailure(_ error: SystemError, path: String) -> String {
    switch error.code {
    case EBUSY: return "\(error) (another program has it open)"
    case EACCES, EPERM:
      return "\(error) (serial devices belong to group dialout: run locationd as a member)"
    case ENOTTY:
      return "\(error): not a serial device (a terminal); an NMEA log file or a FIFO is read with "
        + "replay:\(path)"
    default: return error.description
    }
  }

  /// Why the open device no longer is `path`'s: its node was removed, or replaced by another.
  static func lossOfNode(_ path: String) -> String {
    namesANode(path) ? "node replaced by another device" : "node removed"
  }

  static func stillPresent(fd: Int32, path: String) -> Bool {
    var open = stat()
    var named = stat()
    guard fstat(fd, &open) == 0, stat(path, &named) == 0 else { return false }
    return open.st_rdev == named.st_rdev && open.st_ino == named.st_ino
      && open.st_dev == named.st_dev
  }

  // MARK: TCP

  private func runTCP(_ thread: WorkerThread, host: String, port: UInt16) {
    let name = endpoint.sourceName
    var delay = Self.nanoseconds(options.reconnectInitialDelay)
    let maximum = Self.nanoseconds(options.reconnectMaximumDelay)
    while !thread.isStopping {
      var failure = "no address"
      var connected: Int32?
      do throws(SystemError) {
        for address in try NetworkSocket.resolve(
          host: host, port: port, type: Int32(SOCK_STREAM.rawValue))
        {
          let fd: Int32
          do throws(SystemError) { fd = try NetworkSocket.startConnect(address) } catch {
            failure = error.description
            continue
          }
          let ready = thread.wait(
            for: [.init(fd, writable: true)], timeoutNanoseconds: 5_000_000_000)
          if thread.isStopping {
            close(fd)
            return
          }
          guard ready.first?.any == true else {
            failure = "connection timed out"
            close(fd)
            continue
          }
          do throws(SystemError) { try NetworkSocket.finishConnect(fd) } catch {
            failure = error.description
            close(fd)
            continue
          }
          connected = fd
          break
        }
      } catch {
        // NetworkSocket.resolve reports a name the resolver gave no address for as EHOSTUNREACH.
        failure =
          error.code == EHOSTUNREACH
          ? "cannot resolve \(host): the resolver gives no address for it" : "cannot resolve \(host): \(error)"
      }
      guard let fd = connected else {
        report(.disconnected, "\(name): \(failure); retrying in \(delay / 1_000_000) ms")
        thread.sleep(nanoseconds: delay)
        delay = min(delay * 2, maximum)
        continue
      }
      delay = Self.nanoseconds(options.reconnectInitialDelay)
      counters.value.withLock { $0.opens += 1 }
      beginConnection()
      report(.connected, "reading \(name)")
      let reason = readStream(
        thread, fd: fd, watch: nil, path: nil, idle: Self.nanoseconds(options.idleTimeout))
      close(fd)
      guard let reason else { return }
      finishConnection(endingEpoch: true)
      counters.value.withLock { $0.losses += 1 }
      report(
        .disconnected,
        "\(name): connection lost (\(reason)); reconnecting in \(delay / 1_000_000) ms")
      thread.sleep(nanoseconds: delay)
      delay = min(delay * 2, maximum)
    }
  }

  // MARK: UDP

  private func runUDP(_ thread: WorkerThread, host: String, port: UInt16) {
    let name = endpoint.sourceName
    var delay = Self.nanoseconds(options.reconnectInitialDelay)
    let maximum = Self.nanoseconds(options.reconnectMaximumDelay)
    while !thread.isStopping {
      let fd: Int32
      do throws(SystemError) {
        let addresses = try NetworkSocket.resolve(
          host: host, port: port, type: Int32(SOCK_DGRAM.rawValue), passive: true)
        guard let first = addresses.first else { throw SystemError(EINVAL) }
        fd = try NetworkSocket.bindDatagram(first)
      } catch {
        report(.disconnected, "\(name): cannot bind: \(error); retrying in \(delay / 1_000_000) ms")
        thread.sleep(nanoseconds: delay)
        delay = min(delay * 2, maximum)
        continue
      }
      counters.value.withLock { $0.opens += 1 }
      beginConnection()
      report(.connected, "receiving datagrams on \(name)")
      let reason = readDatagrams(thread, fd: fd)
      close(fd)
      guard let reason else { return }
      finishConnection(endingEpoch: true)
      report(.disconnected, "\(name): \(reason); retrying in \(delay / 1_000_000) ms")
      thread.sleep(nanoseconds: delay)
      delay = min(delay * 2, maximum)
    }
  }

  /// Reads datagrams until a stop (`nil`) or a receive error (its text); each datagram is fed
  /// to the decoder whole, at most ``NMEAStreamBackend/Options/datagramsPerRound`` per round.
  private func readDatagrams(_ thread: WorkerThread, fd: Int32) -> String? {
    while !thread.isStopping {
      let ready = thread.wait(for: [.init(fd)], timeoutNanoseconds: timerWait())
      if thread.isStopping { return nil }
      if ready.first?.any == true {
        for _ in 0..<options.datagramsPerRound {
          let received: (count: Int, truncated: Bool)?
          do throws(SystemError) { received = try NetworkSocket.receive(fd, into: &buffer) } catch {
            return "receive: \(error)"
          }
          guard let received else { break }
          counters.value.withLock {
            $0.datagrams += 1
            if received.truncated { $0.truncatedDatagrams += 1 }
          }
          consume(Array(buffer.prefix(received.count)))
        }
      }
      handleTimers()
    }
    return nil
  }

  // MARK: Streams

  /// Reads `fd` until a stop (`nil`) or the source is lost (why). `watch` and `path` check that
  /// a device node is still there; `idle` ends a connection that sends nothing for that long.
  private func readStream(
    _ thread: WorkerThread, fd: Int32, watch: PathWatch?, path: String?, idle: UInt64?
  )
    -> String?
  {
    var lastData = MonotonicClock.nanoseconds()
    while !thread.isStopping {
      var wait = timerWait()
      if let idle {
        let now = MonotonicClock.nanoseconds()
        let left = lastData + idle > now ? lastData + idle - now : 0
        wait = min(wait ?? left, left)
      }
      let interests: [WorkerThread.Interest] =
        [.init(fd)] + (watch.map { [.init($0.fileDescriptor)] } ?? [])
      let ready = thread.wait(for: interests, timeoutNanoseconds: wait)
      if thread.isStopping { return nil }
      if ready.count > 1, ready[1].any, let watch, watch.takeChanges(), let path,
        !Self.stillPresent(fd: fd, path: path)
      {
        return Self.lossOfNode(path)
      }
      if let first = ready.first, first.any {
        let count: Int
        do throws(SystemError) { count = try SystemIO.read(fd, into: &buffer) } catch {
          if error.code != EAGAIN { return "read: \(error)" }
          count = -1
        }
        if count == 0 { return path == nil ? "closed by the peer" : "hang-up" }
        if count > 0 {
          lastData = MonotonicClock.nanoseconds()
          consume(Array(buffer.prefix(count)))
        } else if first.isHangUp {
          return "hang-up"
        }
      }
      if let idle, MonotonicClock.nanoseconds() >= lastData + idle {
        return "no data for \(idle / 1_000_000_000) s"
      }
      handleTimers()
    }
    return nil
  }

  /// Nanoseconds until the next timer (the no-fix deadline, the end of a silent epoch).
  private func timerWait() -> UInt64? {
    let now = MonotonicClock.nanoseconds()
    guard let deadline = [noFixDeadline, epochSilenceDeadline].compactMap({ $0 }).min() else { return nil }
    return deadline > now ? deadline - now : 0
  }

  private func beginConnection() {
    decoder = NMEADecoder(liveWithRolloverFloor: endpoint.rolloverFloor)
    earlyEpoch = nil
    epochSilenceDeadline = nil
    reportedRejections = [:]
    connectionBytes = 0
    firstBytes = []
    toldNoNMEA = false
    noFixDeadline = MonotonicClock.nanoseconds() + Self.nanoseconds(options.noFixTimeout)
  }

  /// Adds the connection's decoder counters to the totals. When the connection broke
  /// (`endingEpoch`), the epoch its whole sentences began is reported first; a sentence the loss
  /// cut is not decoded. A stop drops it.
  private func finishConnection(endingEpoch: Bool = false) {
    if endingEpoch {
      var emitted = 0
      decoder.endEpoch { decoded in
        if deliver(decoded) { emitted += 1 }
      }
      counters.value.withLock { $0.locations += emitted }
    }
    earlyEpoch = nil
    epochSilenceDeadline = nil
    reportRejections(force: true)
    let statistics = decoder.statistics
    counters.value.withLock { totals in
      totals.sentences.read += statistics.read
      totals.sentences.accepted += statistics.accepted
      totals.sentences.unchecked += statistics.unchecked
      totals.sentences.proprietary += statistics.proprietary
      totals.sentences.unsupported += statistics.unsupported
      for (reason, count) in statistics.rejected {
        totals.sentences.rejected[reason, default: 0] += count
      }
    }
    decoder = NMEADecoder(liveWithRolloverFloor: endpoint.rolloverFloor)
    noFixDeadline = nil
  }

  /// Decodes `bytes` and posts the locations they complete.
  private func consume(_ bytes: [UInt8]) {
    connectionBytes += bytes.count
    if firstBytes.count < 32 { firstBytes.append(contentsOf: bytes.prefix(32 - firstBytes.count)) }
    var emitted = 0
    let sentencesBefore = decoder.statistics.accepted + decoder.statistics.unchecked
    decoder.feed(bytes) { decoded in
      if deliver(decoded) { emitted += 1 }
    }
    // The receiver's cycle ended (learned as gpsd learns it): report the epoch now rather than
    // when the next one begins, one epoch interval later.
    if earlyEpoch == nil, let early = decoder.epochAtCycleEnd() {
      earlyEpoch = early
      emitted += 1
      emit(early)
    }
    // An epoch still unreported ends if the source then sends no further sentence: bytes that
    // complete none (line ends, noise, the start of a sentence) do not put the deadline off.
    if earlyEpoch != nil || !decoder.hasEpochInProgress {
      epochSilenceDeadline = nil
    } else if epochSilenceDeadline == nil
      || decoder.statistics.accepted + decoder.statistics.unchecked != sentencesBefore
    {
      epochSilenceDeadline = MonotonicClock.nanoseconds() + Self.nanoseconds(options.epochSilence)
    }
    counters.value.withLock {
      $0.bytes += bytes.count
      $0.locations += emitted
    }
    if !toldNoNMEA, decoder.statistics.accepted == 0, connectionBytes >= options.noNMEAByteCount {
      toldNoNMEA = true
      let text =
        "no NMEA 0183 from \(endpoint.sourceName): "
        + Self.describe(bytes: firstBytes, statistics: decoder.statistics, total: connectionBytes)
      queue.post(.error(text))
      report(.noFix, text)
    }
    reportRejections(force: false)
  }

  /// Emits an epoch the decoder ended, unless it was already reported early with this very
  /// value; whether it was emitted.
  private func deliver(_ decoded: DecodedFix) -> Bool {
    if let early = earlyEpoch {
      earlyEpoch = nil
      if early == decoded { return false }
    }
    emit(decoded)
    return true
  }

  private func emit(_ decoded: DecodedFix) {
    let provenance = Provenance(
      backend: uri, source: endpoint.sourceName, isSimulated: false,
      rolloverWeeks: decoded.rolloverWeeks == 0 ? nil : decoded.rolloverWeeks)
    if decoded.fix.mode.hasPosition {
      noFixDeadline = MonotonicClock.nanoseconds() + Self.nanoseconds(options.noFixTimeout)
      if lastStatus != .connected {
        report(.connected, "receiving fixes from \(endpoint.sourceName)")
      }
    } else if lastStatus != .noFix {
      report(.noFix, "\(endpoint.sourceName) reports no fix")
    }
    queue.post(.location(Location(fix: decoded.fix, provenance: provenance)))
  }

  private func handleTimers() {
    if let deadline = epochSilenceDeadline, MonotonicClock.nanoseconds() >= deadline {
      epochSilenceDeadline = nil
      if earlyEpoch == nil, let pending = decoder.epochInProgress() {
        earlyEpoch = pending
        emit(pending)
        counters.value.withLock { $0.locations += 1 }
      }
    }
    if let deadline = noFixDeadline, MonotonicClock.nanoseconds() >= deadline {
      noFixDeadline = nil
      if lastStatus != .noFix {
        report(
          .noFix,
          "no fix from \(endpoint.sourceName) for \(Self.nanoseconds(options.noFixTimeout) / 1_000_000) ms"
        )
      }
    }
    reportRejections(force: false)
  }

  /// At most one warning every 10 s with the sentences rejected since the last one.
  private func reportRejections(force: Bool) {
    let now = MonotonicClock.nanoseconds()
    guard force || now >= nextRejectionReport else { return }
    let rejected = decoder.statistics.rejected
    var parts: [String] = []
    var total = 0
    for reason in NMEARejection.allCases {
      let new = (rejected[reason] ?? 0) - (reportedRejections[reason] ?? 0)
      if new > 0 {
        parts.append("\(reason.rawValue)=\(new)")
        total += new
      }
    }
    guard total > 0 else { return }
    reportedRejections = rejected
    nextRejectionReport = now + 10_000_000_000
    queue.post(
      .error(
        "\(endpoint.sourceName): \(total) sentence\(total == 1 ? "" : "s") rejected and skipped ("
          + parts.joined(separator: " ") + ")"))
  }

  /// What a stream without NMEA looked like: byte count, candidate sentences and why they were
  /// refused, the first bytes in hexadecimal, and the protocol they suggest.
  static func describe(bytes: [UInt8], statistics: NMEAStatistics, total: Int? = nil) -> String {
    let count = total ?? bytes.count
    if count == 0 { return "nothing received" }
    var text =
      "\(count) bytes, \(statistics.read) candidate sentences, \(statistics.accepted) valid"
    let reasons = NMEARejection.allCases.compactMap { reason in
      statistics.rejected[reason].map { "\(reason.rawValue)=\($0)" }
    }
    if !reasons.isEmpty { text += " (" + reasons.joined(separator: " ") + ")" }
    let head = bytes.prefix(16).map { byte in
      let hex = String(byte, radix: 16)
      return hex.count == 1 ? "0" + hex : hex
    }
    text += "; first bytes " + head.joined(separator: " ")
    if let guess = protocolGuess(bytes) { text += " (" + guess + ")" }
    return text
  }

  /// The binary protocol whose sync bytes appear in `bytes`, if any.
  static func protocolGuess(_ bytes: [UInt8]) -> String? {
    for index in bytes.indices.dropLast() {
      let pair = (bytes[index], bytes[index + 1])
      if pair == (0xB5, 0x62) {
        return "u-blox UBX binary: switch the receiver to NMEA or use gpsd"
      }
      if pair == (0xA0, 0xA2) { return "SiRF binary: switch the receiver to NMEA or use gpsd" }
    }
    return nil
  }

  /// Posts a state change. The same trouble said again in the same words is not repeated; said
  /// with news (a longer retry delay, "no NMEA" after "no fix"), it is, so that the state's
  /// detail is always the latest.
  private func report(_ status: BackendStatus, _ detail: String?) {
    if status == lastStatus, detail == lastDetail,
      status == .disconnected || status == .deviceRemoved || status == .noFix
    {
      return
    }
    lastStatus = status
    lastDetail = detail
    queue.post(.status(status, detail: detail))
  }
}
