import LocationCore
import LocationModel
import LocationTestKit
import NMEA
import SystemIO

#if canImport(Glibc)
  import Glibc
#endif

// Usage: core-bench simulator [EPOCHS]
//   The simulated receiver's output side, for one multi-GNSS receiver (30 satellites, GST):
//   epochs per second of NMEA 4.11 encoding alone; of encoding + faults + baud cut; of the
//   whole send path (encoding, output stage, one UDP datagram per sentence) in virtual time;
//   and the CPU one receiver takes at 10 Hz in real time (UDP, 115200 baud pacing), over 5 s.

func simulatorFix(_ index: Int) -> Fix {
  SampleFixes.multiGNSS(
    time: 1_773_489_600_000 + Int64(index) * 100,
    coordinate: Coordinate(latitude: 48.137_154 + Double(index % 1000) * 1e-6, longitude: 11.575_382), glonass: 8)
}

func cpuSeconds() -> Double {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    + Double(usage.ru_stime.tv_sec)
    + Double(usage.ru_stime.tv_usec) / 1e6
}

/// A bound UDP socket on 127.0.0.1 (datagrams it does not read are dropped by the kernel).
func udpSink() -> (fd: Int32, port: UInt16)? {
  let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
  guard fd >= 0 else { return nil }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  let ok = withUnsafeMutablePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
    }
  }
  return ok ? (fd, UInt16(bigEndian: address.sin_port)) : nil
}

func simulatorBenchmark(epochs: Int) async -> Int32 {
  let fixes = (0..<1000).map(simulatorFix)
  let encoder = NMEAEncoder(version: .v4_11)
  var bytes = 0
  var start = MonotonicClock.seconds()
  for index in 0..<epochs {
    bytes += encoder.encode(fixes[index % 1000]).reduce(0) { $0 + $1.utf8.count }
  }
  let encodeRate = Double(epochs) / (MonotonicClock.seconds() - start)
  print(
    "encode NMEA 4.11 (30 satellites): \(Int(encodeRate)) epochs/s, \(bytes / epochs) bytes/epoch")

  guard
    let schedule = try? NMEAFaultSchedule.parse(
      "checksum:0.01,bitflip:0.001,drop:0.01,truncate:0.01,garbage:0.005"),
    let pacer = try? SerialLinePacer(baud: 38_400)
  else { return 1 }
  var injector = NMEAFaultInjector(schedule: schedule)
  var kept = 0
  start = MonotonicClock.seconds()
  for index in 0..<epochs {
    let lines = encoder.encode(fixes[index % 1000]).map { injector.apply(Array($0.utf8)) }.filter {
      !$0.isEmpty
    }
    let fitted = pacer.fit(lines, interval: .milliseconds(100))
    kept += pacer.schedule(byteCount: fitted.kept.reduce(0) { $0 + $1.count }).count
  }
  let stageRate = Double(epochs) / (MonotonicClock.seconds() - start)
  print(
    "encode + faults + 38400-baud cut and schedule: \(Int(stageRate)) epochs/s (\(kept / epochs) writes/epoch)"
  )

  guard let sink = udpSink(),
    let receiver = try? SimulatedNetworkReceiver(
      transport: .udp(host: "127.0.0.1", port: sink.port), encoder: encoder,
      output: try SimulatedOutput(faults: schedule), clock: VirtualClock(autoAdvance: true))
  else { return 1 }
  start = MonotonicClock.seconds()
  let sendEpochs = min(epochs, 100_000)
  for index in 0..<sendEpochs {
    try? await receiver.send(fixes[index % 1000], epoch: index, rate: 10)
  }
  let sendRate = Double(sendEpochs) / (MonotonicClock.seconds() - start)
  print(
    "send path (encode, output stage, UDP datagram per sentence), virtual time: \(Int(sendRate)) epochs/s, "
      + "\(Int(sendRate / 10))x real time at 10 Hz")
  receiver.stop()

  guard
    let paced = try? SimulatedNetworkReceiver(
      transport: .udp(host: "127.0.0.1", port: sink.port), encoder: encoder,
      output: try SimulatedOutput(baud: 115_200))
  else { return 1 }
  let cpuBefore = cpuSeconds()
  let wallBefore = MonotonicClock.seconds()
  let origin = paced.clock.now
  for index in 0..<50 {
    try? await paced.send(fixes[index % 1000], epoch: index, rate: 10, start: origin)
  }
  let cpu = cpuSeconds() - cpuBefore
  let wall = MonotonicClock.seconds() - wallBefore
  print(
    "one receiver at 10 Hz, 115200 baud, real time: \(Int(cpu / wall * 10_000)) per 10,000 of a core "
      + "(\(Int(cpu * 1000)) ms CPU in \(Int(wall * 1000)) ms)")
  close(sink.fd)
  return 0
}
