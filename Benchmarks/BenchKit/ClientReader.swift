// The clients' reader: one thread, edge-triggered epoll over every client of the daemons measured.
//
// It does as little as it can while fixes arrive: one recv per readiness straight into the
// client's preallocated buffer, the receive time noted with the byte count. Lines are split and
// parsed only after the run, so that parsing one client's TPV does not delay the receive time of
// the next. It sleeps in epoll_wait between fixes, as a client would, unless told to poll.

import CLinux
import Glibc
import SystemIO

/// Reads many client sockets on the calling thread and keeps every byte with the time of the
/// recv(2) that brought it, for benchmarks that time fixes from a daemon to its clients.
public final class ClientReader {
  /// The clock of the receive times.
  public enum Clock: Sendable {
    /// CLOCK_MONOTONIC, ns (``MonotonicClock/nanoseconds()``).
    case monotonic
    /// CLOCK_REALTIME, ns since 1970 (``WallClock/nanoseconds()``).
    case realtime
  }

  /// The connected sockets, one per client, in the order given.
  public let fds: [Int32]
  /// Bytes kept per client.
  private let capacity: Int
  private let storage: UnsafeMutableRawBufferPointer
  private var filled: [Int]
  /// Every recv: (client, end offset in its buffer, receive time in ns).
  private var receipts: [(client: Int32, end: Int32, at: UInt64)] = []
  /// `receipts` split by client, made on first use after the last pump or forget.
  private var receiptsByClient: [[(end: Int, at: UInt64)]]?
  private let epoll: Int32
  private var closed = false
  private let clock: Clock
  private let spin: Bool
  private var events = [epoll_event](repeating: epoll_event(), count: 256)
  /// Receives that found a client's buffer full (their bytes were dropped).
  public private(set) var overflowed = 0

  /// Takes over `fds` (made non-blocking; closed by ``closeConnections()`` or when the reader
  /// goes) with room for `capacity` bytes (> 0) per client; receive times are read from `clock`.
  /// `spin` polls epoll without sleeping (the daemon's own latency without the reader's wake-up).
  /// `expectedReceipts` sizes the list of receives up front. Throws ``BenchError`` when epoll
  /// cannot be set up.
  public init(
    fds: [Int32], capacity: Int, clock: Clock = .monotonic, spin: Bool = false,
    expectedReceipts: Int? = nil
  ) throws(BenchError) {
    self.fds = fds
    self.capacity = max(capacity, 1)
    self.clock = clock
    self.spin = spin
    storage = UnsafeMutableRawBufferPointer.allocate(
      byteCount: self.capacity * max(fds.count, 1), alignment: 16)
    // Touched now, so that no page fault lands in the middle of a fix's arrivals.
    storage.initializeMemory(as: UInt8.self, repeating: 0)
    filled = [Int](repeating: 0, count: fds.count)
    receipts.reserveCapacity(expectedReceipts ?? fds.count * 2048)
    epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    guard epoll >= 0 else {
      storage.deallocate()
      throw BenchError("epoll_create1: \(String(cString: strerror(errno)))")
    }
    for (index, fd) in fds.enumerated() {
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      var event = epoll_event()
      event.events = EPOLLIN.rawValue | EPOLLET.rawValue
      event.data.u64 = UInt64(index)
      guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else {
        let message = "epoll_ctl: \(String(cString: strerror(errno)))"
        close(epoll)
        storage.deallocate()
        throw BenchError(message)
      }
    }
  }

  deinit {
    closeConnections()
    storage.deallocate()
  }

  /// Closes every client socket and the epoll instance; what was received stays readable.
  public func closeConnections() {
    guard !closed else { return }
    closed = true
    for fd in fds { close(fd) }
    close(epoll)
  }

  private func now() -> UInt64 {
    switch clock {
    case .monotonic: return MonotonicClock.nanoseconds()
    case .realtime: return UInt64(clamping: WallClock.nanoseconds())
    }
  }

  /// Reads whatever arrives until the monotonic clock passes `deadline` (ns,
  /// ``MonotonicClock/nanoseconds()``); returns at once after ``closeConnections()``.
  public func pump(until deadline: UInt64) {
    guard !closed else { return }
    receiptsByClient = nil
    while MonotonicClock.nanoseconds() < deadline {
      let ready = epoll_wait(epoll, &events, Int32(events.count), spin ? 0 : 20)
      guard ready > 0 else { continue }
      for event in events[0..<Int(ready)] {
        let index = Int(event.data.u64)
        guard index < fds.count else { continue }
        while true {
          let room = capacity - filled[index]
          guard room > 0, let base = storage.baseAddress else {
            overflowed += 1
            // Drop what does not fit; the client's count then shows fewer fixes.
            var sink = [UInt8](repeating: 0, count: 65_536)
            while recv(fds[index], &sink, sink.count, 0) > 0 {}
            break
          }
          let bytes = recv(fds[index], base + index * capacity + filled[index], room, 0)
          guard bytes > 0 else { break }
          let at = now()
          filled[index] += bytes
          receipts.append((Int32(index), Int32(filled[index]), at))
          // Less than asked for: the socket is drained (the next data is a new edge).
          if bytes < room { break }
        }
      }
    }
  }

  /// The bytes client `index` (checked by the caller) received.
  private func received(_ index: Int) -> UnsafeMutableRawBufferPointer {
    UnsafeMutableRawBufferPointer(
      rebasing: storage[(index * capacity)..<(index * capacity + filled[index])])
  }

  /// Clears what the clients received so far (the warm-up), keeping an incomplete last line.
  public func forget() {
    for index in fds.indices {
      let bytes = received(index)
      var keep = bytes.count
      if let lastNewline = bytes.lastIndex(of: 0x0A) { keep = bytes.count - (lastNewline + 1) }
      if keep > 0, let base = bytes.baseAddress {
        memmove(base, base + (bytes.count - keep), keep)
      }
      filled[index] = keep
    }
    receipts.removeAll(keepingCapacity: true)
    receiptsByClient = nil
  }

  /// Calls `body` with every complete line (without its newline) client `index` received since
  /// the last ``forget()`` and the time (ns, of the reader's clock) of the recv that brought its
  /// newline. Does nothing for an index outside `fds`.
  public func forEachLine(ofClient index: Int, _ body: (ArraySlice<UInt8>, UInt64) -> Void) {
    guard fds.indices.contains(index) else { return }
    let byClient: [[(end: Int, at: UInt64)]]
    if let receiptsByClient {
      byClient = receiptsByClient
    } else {
      var split = [[(end: Int, at: UInt64)]](repeating: [], count: fds.count)
      for receipt in receipts { split[Int(receipt.client)].append((Int(receipt.end), receipt.at)) }
      receiptsByClient = split
      byClient = split
    }
    let ends = byClient[index]
    let bytes = Array(received(index))
    var receipt = 0
    var start = 0
    while start < bytes.count, let newline = bytes[start...].firstIndex(of: 0x0A) {
      let line = bytes[start..<newline]
      start = newline + 1
      while receipt < ends.count && ends[receipt].end < start { receipt += 1 }
      guard receipt < ends.count else { return }
      body(line, ends[receipt].at)
    }
  }
}
