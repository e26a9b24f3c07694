import Glibc
import LocationModel
import NMEA
import SystemIO

/// The writer thread: paces the epochs, writes them to the pty master, watches for readers and
/// discards what they send. Runs on the one thread ``SimulatedReceiver/start(rate:fix:)`` starts.
extension SimulatedReceiver {
  enum Source: Sendable {
    case closure(@Sendable (Double) -> Fix?)
    case queue
  }

  func begin(rate: Double) throws(SimulatedReceiverError) {
    guard rate >= 1, rate <= 10 else { throw .invalidRate(rate) }
    let alreadyStarted = state.withLock { state -> Bool in
      if state.started || state.stopped { return true }
      state.started = true
      return false
    }
    if alreadyStarted { throw .alreadyStarted }
  }

  func startThread(rate: Double, source: Source) {
    let period = UInt64(1_000_000_000 / rate)
    do {
      try SystemIO.startThread { [self] in self.run(period: period, source: source) }
    } catch {
      finish()
    }
  }

  func run(period: UInt64, source: Source) {
    let origin = MonotonicClock.nanoseconds()
    var epoch: UInt64 = 0
    while true {
      let deadline = origin + epoch * period
      // Sleep until the epoch's deadline, discarding what the reader writes meanwhile.
      while true {
        if state.withLock({ $0.stopped }) { return finish() }
        let now = MonotonicClock.nanoseconds()
        if now >= deadline { break }
        waitForInput(timeoutNanoseconds: deadline - now)
      }
      switch source {
      case .closure(let make):
        let seconds = Double(epoch) * Double(period) / 1e9
        if deviceUnplugged(at: seconds) {
          // The device is gone: nothing is written, as from a receiver without power.
        } else if let fix = make(seconds) {
          write(outgoingFix(fix, at: seconds), period: period)
        } else {
          state.withLock { $0.statistics.epochsSilent += 1 }
        }
      case .queue:
        // Take the next fix from the sequence, waiting for it if needed.
        var next: Fix?? = nil
        while next == nil {
          if state.withLock({ $0.stopped }) { return finish() }
          let (item, ended) = state.withLock { state -> (Fix??, Bool) in
            if !state.pending.isEmpty { return (state.pending.removeFirst(), false) }
            return (nil, state.finished)
          }
          if ended { return finish() }
          if let item { next = item } else { waitForInput(timeoutNanoseconds: 500_000_000) }
        }
        let seconds = Double(epoch) * Double(period) / 1e9
        if !deviceUnplugged(at: seconds), let fix = next ?? nil {
          write(outgoingFix(fix, at: seconds), period: period)
        }
      }
      epoch += 1
    }
  }

  func write(_ fix: Fix, period: UInt64) {
    let sentences = encoder.encode(fix)
    var bytes = outgoingBytes(sentences, interval: .nanoseconds(Int64(period)))
    // A reader whose line is set to another rate than the receiver's receives what its UART
    // makes of the signal: noise, as on a real serial line.
    if let baud = output.baud, let rate = Self.readerRate(master), rate != baud {
      bytes = SerialLinePacer.misread(bytes, sentAt: baud, readAt: rate)
    }
    guard hasReader() else {
      // Nobody has the device open: a serial line with no listener loses the data.
      state.withLock { $0.statistics.epochsWithoutReader += 1 }
      return
    }
    drainInput()
    let startedAt = MonotonicClock.nanoseconds()
    var offset = 0
    var dropped = false
    // At a baud rate: each 10 ms tick releases what the line carries by then (SerialLinePacer).
    var writes: [(tick: Int, bytes: Range<Int>)] = [(0, 0..<bytes.count)]
    if let baud = output.baud, let pacer = try? SerialLinePacer(baud: baud) {
      writes = pacer.schedule(byteCount: bytes.count)
    }
    for (tick, range) in writes where !dropped {
      let due = startedAt + UInt64(tick) * 10_000_000
      while true {
        if state.withLock({ $0.stopped }) { break }
        let now = MonotonicClock.nanoseconds()
        if now >= due { break }
        waitForInput(timeoutNanoseconds: due - now)
      }
      while offset < range.upperBound {
        // nil: EAGAIN (buffer full: nobody reading); an error: EIO. Either drops the rest of
        // this epoch.
        guard
          let written = try? SystemIO.writeSome(
            master, Array(bytes[0..<range.upperBound]), from: offset)
        else {
          dropped = true
          break
        }
        offset += written
      }
    }
    let finishedAt = MonotonicClock.nanoseconds()
    state.withLock { state in
      state.statistics.bytesWritten += offset
      if dropped {
        state.statistics.epochsDropped += 1
      } else {
        state.statistics.epochsWritten += 1
      }
    }
    if !dropped {
      onWrite?(
        WrittenEpoch(fix: fix, sentences: sentences, startedAt: startedAt, finishedAt: finishedAt))
    }
  }

  /// Whether some process has the slave side open. The master reports `POLLHUP` while no
  /// descriptor of the slave is open (the simulator keeps none). When the last reader has just
  /// left, what it did not read is flushed, so the next reader starts with fresh epochs.
  func hasReader() -> Bool {
    var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
    _ = poll(&descriptor, 1, 0)
    let hungUp = descriptor.revents & Int16(POLLHUP) != 0
    let flush = state.withLock { state -> Bool in
      defer { state.readerPresent = !hungUp }
      return hungUp && state.readerPresent
    }
    if flush { flushUnread() }
    return !hungUp
  }

  /// Discards what was written but not read: opens the slave briefly and flushes its input queue.
  func flushUnread() {
    let fd = open(slavePath, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { return }
    var queued: Int32 = 0
    if ioctl(fd, UInt(FIONREAD), &queued) == 0, queued > 0 {
      state.withLock { $0.statistics.bytesUnread += Int(queued) }
    }
    tcflush(fd, TCIFLUSH)
    close(fd)
  }

  /// Waits for the timeout, or until the reader writes to the device or ``stop()`` wakes the
  /// thread. While nobody has the device open the master reports a hang-up at once, so only the
  /// wake pipe is watched then: the wait costs no CPU either way.
  func waitForInput(timeoutNanoseconds: UInt64) {
    var check = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
    _ = poll(&check, 1, 0)
    let readerPresent = check.revents & Int16(POLLHUP) == 0
    var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
    if readerPresent { fds.append(pollfd(fd: master, events: Int16(POLLIN), revents: 0)) }
    // Without a reader, look again at least every 100 ms for one that opens the device.
    let cap: UInt64 = readerPresent ? 1_000_000_000 : 100_000_000
    let milliseconds = Int32((min(timeoutNanoseconds, cap) + 999_999) / 1_000_000)
    let ready = poll(&fds, nfds_t(fds.count), milliseconds)
    guard ready > 0 else { return }
    if fds[0].revents != 0 {
      var scratch = [UInt8](repeating: 0, count: 64)
      while read(wakeRead, &scratch, scratch.count) > 0 {}
    }
    if fds.count > 1 {
      if fds[1].revents & Int16(POLLIN) != 0 {
        drainInput()
      } else if fds[1].revents != 0 {
        // The reader left during the wait (POLLHUP): pause briefly rather than poll again at once.
        var request = timespec(tv_sec: 0, tv_nsec: Int(min(timeoutNanoseconds, 10_000_000)))
        nanosleep(&request, nil)
      }
    }
  }

  func drainInput() {
    var scratch = [UInt8](repeating: 0, count: 1024)
    var total = 0
    while true {
      let count = read(master, &scratch, scratch.count)
      if count > 0 { total += count } else { break }
    }
    if total > 0 { state.withLock { $0.statistics.bytesDiscarded += total } }
  }

  func wake() {
    var byte: UInt8 = 1
    _ = Glibc.write(wakeWrite, &byte, 1)
  }

  /// Queues a fix from the async sequence; waits while one is already queued. Returns false once stopped.
  func enqueue(_ fix: Fix) async -> Bool {
    while true {
      let accepted = state.withLock { state -> Bool? in
        if state.stopped { return nil }
        if state.pending.count < 2 {
          state.pending.append(fix)
          return true
        }
        return false
      }
      switch accepted {
      case nil: return false
      case true?:
        wake()
        return true
      case false?:
        try? await Task.sleep(for: .milliseconds(20))
      }
    }
  }

  func enqueueEnd() {
    state.withLock { $0.finished = true }
    wake()
  }

  func finish() {
    let (waiters, closeNow) = state.withLock {
      state -> ([CheckedContinuation<Void, Never>], Bool) in
      let closeNow = !state.closed
      state.closed = true
      state.stopped = true
      defer { state.waiters = [] }
      return (state.waiters, closeNow)
    }
    if closeNow { closeDescriptors() }
    for waiter in waiters { waiter.resume() }
  }

  /// Removes the link and closes the pty. The wake pipe stays open until deinit: `wake()` may be
  /// called at any time (a second `stop()`, a late `enqueue`), and must never write to a number
  /// that has been closed and reused.
  func closeDescriptors() {
    // Remove the link only if it still points to our slave (someone may have replaced it).
    var buffer = [CChar](repeating: 0, count: 256)
    let length = readlink(linkPath, &buffer, buffer.count - 1)
    if length > 0 {
      let target = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
      if target == slavePath { unlink(linkPath) }
    }
    close(master)
  }
}
