#if canImport(Glibc)
  import Glibc
#endif
import LocationCore
import LocationModel
import NMEA
import Foundation
import Synchronization
import SystemIO

// `core-bench sky [SECONDS] [RECEIVERS]`: the simulated receiver's cost.
//   1. Epochs per second the fix generator (orbits, look angles, DOPs, noise) plus the NMEA
//      encoder produce on one thread, for GPS alone and for GPS + GLONASS + Galileo + BeiDou:
//      how much faster than real time a 10 Hz simulation can run for tests.
//   2. RECEIVERS (default 1 and 20) simulated pty receivers at 10 Hz, each with a reader thread
//      draining its pty, for SECONDS (default 10): process CPU time (getrusage) per receiver, as
//      a percentage of one core, and the receivers one core would carry.
// Build with -c release.

// cpuSeconds() is in Simulator.swift.

/// Runs the sky benchmark; returns the exit status.
func skyBenchmark(arguments: [String]) -> Int32 {
  let duration = arguments.count > 0 ? Double(arguments[0]) ?? 10 : 10
  let receiverCounts = arguments.count > 1 ? arguments[1].split(separator: ",").compactMap { Int($0) } : [1, 20]
  let start: Int64 = 1_776_000_000_000
  for (label, uri) in [("GPS", "simulate?rate=10&systems=gps"), ("4 GNSS", "simulate?rate=10")] {
    guard let parameters = try? SimulatedBackend.Options.parse(uri).parameters() else { return 1 }
    var generator = SimulatedFixGenerator(parameters: parameters, startTime: start)
    let encoder = NMEAEncoder(talker: .multiGNSS, sentences: [.rmc, .vtg, .gga, .gsa, .gsv, .zda])
    var bytes: [UInt8] = []
    bytes.reserveCapacity(4096)
    var epochs = 0
    var total = 0
    let began = MonotonicClock.seconds()
    while MonotonicClock.seconds() - began < 3 {
      for _ in 0..<100 {
        guard let epoch = generator.next() else { return 1 }
        bytes.removeAll(keepingCapacity: true)
        encoder.encode(epoch.fix, into: &bytes)
        total += bytes.count
      }
      epochs += 100
    }
    let rate = Double(epochs) / (MonotonicClock.seconds() - began)
    print(
      "generator+encoder \(label): \(Int(rate)) epochs/s (\(Int(rate / 10))x real time at 10 Hz), "
        + "\(total / max(1, epochs)) bytes/epoch")
  }
  for count in receiverCounts {
    var receivers: [SimulatedReceiver] = []
    var readers: [Int32] = []
    let stop = Atomic<Bool>(false)
    for index in 0..<count {
      let link = "/tmp/core-bench-sky-\(getpid())-\(index)"
      guard let parameters = try? SimulatedBackend.Options.parse("simulate?rate=10&seed=\(index + 1)").parameters(),
        let receiver = try? SimulatedReceiver(
          linkPath: link, encoder: NMEAEncoder(talker: .multiGNSS, sentences: [.rmc, .vtg, .gga, .gsa, .gsv, .zda]))
      else {
        print("cannot create receiver \(index)")
        return 1
      }
      let fd = open(receiver.slavePath, O_RDONLY | O_NOCTTY)
      guard fd >= 0 else { return 1 }
      readers.append(fd)
      let generator = Mutex(SimulatedFixGenerator(parameters: parameters, startTime: start))
      do {
        try receiver.start(rate: 10) { _ in generator.withLock { $0.next()?.fix } }
      } catch {
        print("cannot start receiver \(index): \(error)")
        return 1
      }
      receivers.append(receiver)
    }
    // One reader thread drains every pty (poll), as gpsd would.
    let fds = readers
    let drained = Atomic<Int>(0)
    let reader = Thread {
      var polls = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
      var buffer = [UInt8](repeating: 0, count: 65_536)
      while !stop.load(ordering: .relaxed) {
        guard poll(&polls, nfds_t(polls.count), 100) > 0 else { continue }
        for index in polls.indices where polls[index].revents != 0 {
          let got = read(polls[index].fd, &buffer, buffer.count)
          if got > 0 { drained.add(got, ordering: .relaxed) }
        }
      }
    }
    reader.start()
    let cpuBefore = cpuSeconds()
    let wallBefore = MonotonicClock.seconds()
    usleep(UInt32(duration * 1_000_000))
    let cpu = cpuSeconds() - cpuBefore
    let wall = MonotonicClock.seconds() - wallBefore
    stop.store(true, ordering: .relaxed)
    for receiver in receivers { receiver.stop() }
    usleep(200_000)
    for fd in readers { close(fd) }
    let written = receivers.reduce(0) { $0 + $1.statistics.epochsWritten }
    let perReceiver = cpu / wall / Double(count) * 100
    print(
      "\(count) receivers at 10 Hz for \(Int(wall)) s: \(written) epochs written, "
        + "\(drained.load(ordering: .relaxed)) bytes read, CPU \(String(perReceiver.rounded(toPlaces: 3)))% of one core per receiver "
        + "(reader included), about \(Int(100 / max(perReceiver, 1e-9))) receivers per core")
  }
  return 0
}

