// The clients' reader: one thread, edge-triggered epoll over every client of both daemons.
//
// As in daemon-bench, it does as little as it can while fixes arrive: one recv per readiness
// straight into the client's preallocated buffer, the receive time noted with the byte count.
// Lines are split and parsed only after the run, so that parsing one client's TPV does not delay
// the receive time of the next. It sleeps in epoll_wait between fixes, as a client would.

import CLinux
import Glibc

final class ClientReader {
  /// The connected sockets, one per client, in the order given.
  let fds: [Int32]
  /// Bytes kept per client.
  private let capacity: Int
  private let storage: UnsafeMutableRawBufferPointer
  private var filled: [Int]
  /// Every recv: (client, end offset in its buffer, CLOCK_MONOTONIC ns).
  private var receipts: [(client: Int32, end: Int32, at: UInt64)] = []
  private let epoll: Int32
  private var events = [epoll_event](repeating: epoll_event(), count: 256)
  /// Receives that found a client's buffer full (their bytes were dropped).
  private(set) var overflowed = 0

  /// Takes over `fds` (made non-blocking); room for `capacity` bytes per client.
  init(fds: [Int32], capacity: Int) {
    self.fds = fds
    self.capacity = capacity
    storage = UnsafeMutableRawBufferPointer.allocate(
      byteCount: capacity * max(fds.count, 1), alignment: 16)
    // Touched now, so that no page fault lands in the middle of a fix's arrivals.
    storage.initializeMemory(as: UInt8.self, repeating: 0)
    filled = [Int](repeating: 0, count: fds.count)
    receipts.reserveCapacity(fds.count * 2048)
    epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    guard epoll >= 0 else { fail("epoll_create1: \(String(cString: strerror(errno)))") }
    for (index, fd) in fds.enumerated() {
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      var event = epoll_event()
      event.events = EPOLLIN.rawValue | EPOLLET.rawValue
      event.data.u64 = UInt64(index)
      guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else {
        fail("epoll_ctl: \(String(cString: strerror(errno)))")
      }
    }
  }

  deinit {
    for fd in fds { close(fd) }
    close(epoll)
    storage.deallocate()
  }

  /// Reads whatever arrives until the monotonic clock passes `deadline` (ns).
  func pump(until deadline: UInt64) {
    while monotonicNanoseconds() < deadline {
      let ready = epoll_wait(epoll, &events, Int32(events.count), 20)
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
          let at = monotonicNanoseconds()
          filled[index] += bytes
          receipts.append((Int32(index), Int32(filled[index]), at))
          // Less than asked for: the socket is drained (the next data is a new edge).
          if bytes < room { break }
        }
      }
    }
  }

  /// The bytes client `index` received.
  private func received(_ index: Int) -> UnsafeMutableRawBufferPointer {
    UnsafeMutableRawBufferPointer(
      rebasing: storage[(index * capacity)..<(index * capacity + filled[index])])
  }

  /// Clears what the clients received so far (the warm-up), keeping an incomplete last line.
  func forget() {
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
  }

  /// Calls `body` with every complete line client `index` received since the last ``forget()``
  /// and the monotonic time (ns) of the recv that brought its newline.
  func forEachLine(ofClient index: Int, _ body: (ArraySlice<UInt8>, UInt64) -> Void) {
    let times = receipts.lazy.filter { Int($0.client) == index }.map {
      (end: Int($0.end), at: $0.at)
    }
    let ends = Array(times)
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
