// mqtt-bench: the release locationd's MQTT front-end against a private Mosquitto.
//
// 1. Publish rate: a generated 1 Hz log of FIXES fixes replayed at speed 0 with
//    --mqtt-catch-up-rate 100000; a mosquitto_sub counts the messages. Rate = messages between
//    the first and the last arrival divided by the time between them (every message goes through
//    the durable queue, track.sqlite's outbox, before it is published).
// 2. Fleet view: locationd --mqtt-subscribe 'owntracks/+/+' while a generator (this program,
//    one MQTT connection) publishes DEVICES - 1 devices at 1 Hz each (OwnTracks locations on
//    owntracks/fleet/dN) and a probe device (owntracks/bench/probe). Over RUN seconds: locationd's CPU (utime+stime from /proc/PID/stat, %
//    of one core) and RSS (VmRSS); then update latency: a probe device moves PROBES times and a
//    socket client polls `map` every 2 ms until the probe's new position is shown: publish to
//    shown, median and maximum.
//
// Usage: mqtt-bench [--fixes 20000] [--devices 1000] [--run 30] [--probes 20] [--locationd PATH]
// The locationd used is the one beside this executable (swift build -c release).

import SystemIO
import BenchKit
import Foundation
import Glibc
import LocationTestKit
import MQTTFrontEnd
import OwnTracks

var fixes = 20_000
var devices = 1000
var runSeconds = 30.0
var probes = 20
var locationd = executableBesideThisProgram("locationd")
func usage() -> Never {
  print("usage: mqtt-bench [--fixes N] [--devices N] [--run SECONDS] [--probes N] [--locationd PATH]")
  exit(64)
}
var arguments = ArgumentScanner(Array(CommandLine.arguments.dropFirst()))
while let word = arguments.next() {
  // An option without its value (the last word) is ignored, as before.
  guard case .option(let flag) = word, let value = try? arguments.value() else {
    if case .option = word { break }
    usage()
  }
  switch flag {
  case "--fixes": fixes = Int(value) ?? fixes
  case "--devices": devices = Int(value) ?? devices
  case "--run": runSeconds = Double(value) ?? runSeconds
  case "--probes": probes = Int(value) ?? probes
  case "--locationd": locationd = value
  default: usage()
  }
}
signal(SIGPIPE, SIG_IGN)
// The probe is one of the devices: the others are devices - 1 (the map holds at most 1000).
let deviceCount = max(1, devices - 1)
let locationdPath = locationd

func lineCount(_ path: String) -> Int {
  guard let data = FileManager.default.contents(atPath: path) else { return 0 }
  return data.reduce(0) { $1 == 10 ? $0 + 1 : $0 }
}

func cpuSeconds(_ pid: pid_t) -> Double {
  guard let text = PrivateGPSD.procText("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return .nan }
  let fields = text[text.index(after: close)...].split(separator: " ")
  guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
  return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func rssMiB(_ pid: pid_t) -> Double {
  guard let text = PrivateGPSD.procText("/proc/\(pid)/status"),
    let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
    let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true)[1])
  else { return .nan }
  return kib / 1024
}

func writeLog(_ path: String, count: Int) throws {
  func checksum(_ body: String) -> String { String(format: "%02X", body.utf8.reduce(UInt8(0)) { $0 ^ $1 }) }
  var text = ""
  for index in 0..<count {
    let day = 1 + index / 86_400
    let second = index % 86_400
    let time = String(format: "%02d%02d%02d.00", second / 3600, second / 60 % 60, second % 60)
    let lat = String(format: "03%08.5f", 8.0 + Double(index % 50_000) * 0.0006)
    let rmc = "GPRMC,\(time),A,\(lat),N,10136.26400,E,2.0,0.0,\(String(format: "%02d", day))0326,,,A"
    let gga = "GPGGA,\(time),\(lat),N,10136.26400,E,1,08,0.9,60.0,M,7.0,M,,"
    text += "$\(rmc)*\(checksum(rmc))\r\n$\(gga)*\(checksum(gga))\r\n"
  }
  try text.write(toFile: path, atomically: true, encoding: .utf8)
}

func waitFor(_ seconds: Double, _ condition: () -> Bool) -> Bool {
  let deadline = MonotonicClock.seconds() + seconds
  while MonotonicClock.seconds() < deadline {
    if condition() { return true }
    usleep(2_000)
  }
  return condition()
}

let scratch = NSTemporaryDirectory() + "mqtt-bench-\(getpid())"
try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: scratch) }
let broker = try PrivateMosquitto()
let started = Task { try await broker.start() }
_ = await started.result
let brokerURI = "mqtt://127.0.0.1:\(broker.port)"

func startDaemon(_ name: String, _ extra: [String]) throws -> (pid_t, String, String) {
  let state = scratch + "/" + name + "-state"
  mkdir(state, 0o700)
  let socket = scratch + "/" + name + ".sock"
  let log = scratch + "/" + name + ".log"
  let pid = try spawn(
    locationdPath, ["--socket", socket, "--state-dir", state, "--group", "", "--mqtt", brokerURI] + extra,
    environment: [:], log: log)
  guard waitFor(30, { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("state=connected") }) else {
    throw BenchError("\(name) did not connect: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
  }
  return (pid, socket, log)
}

// 1. Publish rate.
let drive = scratch + "/drive.nmea"
try writeLog(drive, count: fixes)
let counted = scratch + "/counted.out"
let subscriber = try spawn(
  "/usr/bin/mosquitto_sub", ["-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", "owntracks/bench/rate", "-C", String(fixes)],
  environment: [:], log: counted)
usleep(300_000)
let (ratePID, _, _) = try startDaemon(
  "rate", ["--backend", "replay:\(drive)?speed=0", "--mqtt-topic", "owntracks/bench/rate", "--mqtt-catch-up-rate", "100000",
    // Not retained: the fleet round's subscription would otherwise see this device too.
    "--mqtt-retain", "off"])
_ = waitFor(600) { lineCount(counted) >= 1 }
let first = MonotonicClock.seconds()
let rateCPU0 = cpuSeconds(ratePID)
_ = waitFor(600) { lineCount(counted) >= fixes }
let last = MonotonicClock.seconds()
let received = lineCount(counted)
let rateCPU = cpuSeconds(ratePID) - rateCPU0
terminate(ratePID)
terminate(subscriber)
print("publish rate (replay at speed 0 -> track.sqlite outbox -> QoS 1 -> mosquitto_sub)")
print("  messages            \(received) of \(fixes)")
print("  rate                \(format(Double(received - 1) / (last - first), 0)) messages/s")
print("  locationd CPU       \(format(100 * rateCPU / (last - first), 0)) % of one core while publishing")

// 2. Fleet view.
let (fleetPID, fleetSocket, _) = try startDaemon(
  "fleet", ["--backend", "simulate", "--mqtt-topic", "owntracks/bench/viewer", "--mqtt-subscribe", "owntracks/+/+", "--mqtt-stale", "600"])
var generatorSettings = MQTTSettings(broker: try MQTTBrokerAddress(uri: brokerURI))
generatorSettings.topic = "owntracks/bench/generator"
generatorSettings.clientID = "mqtt-bench-generator"
generatorSettings.catchUpRate = 100_000
generatorSettings.retain = false
let generatorQueue = MemoryOutbox(limit: 1_000_000)
let generator = MQTTSession(
  options: MQTTSessionOptions(
    settings: generatorSettings, credentials: nil, maxPayloadBytes: 4096, lastWill: { _ in [] }, onMessage: { _, _, _ in },
    onState: { _ in }),
  outbox: generatorQueue)
try generator.start()
let stopGenerating = ManagedFlag()
let probeSent = ManagedProbe()
Thread.detachNewThread {
  // DEVICES messages per second, spread in 100 slices; the probe device moves on request.
  var tick = 0
  let slice = max(1, deviceCount / 100)
  var device = 0
  let startTime = MonotonicClock.seconds()
  // The probe reports first, so that it is among the devices the fleet's cap admits.
  let first = OwnTracksLocation(latitude: -40, longitude: 0, timestamp: Int64(time(nil)), trackerID: "PR")
  try? generatorQueue.append(topic: "owntracks/bench/probe", payload: first.encoded, retain: false)
  while !stopGenerating.isSet {
    let now = Int64(time(nil))
    for _ in 0..<slice {
      let location = OwnTracksLocation(
        latitude: 10 + Double(device) * 0.001, longitude: 20 + Double(tick % 1000) * 0.0001, timestamp: now, accuracy: 5,
        trackerID: "d\(device % 100)")
      try? generatorQueue.append(topic: "owntracks/fleet/d\(device)", payload: location.encoded, retain: false)
      device = (device + 1) % deviceCount
    }
    if let latitude = probeSent.takeRequest() {
      let location = OwnTracksLocation(latitude: latitude, longitude: 0, timestamp: now, trackerID: "PR")
      probeSent.markSent(at: MonotonicClock.seconds())
      try? generatorQueue.append(topic: "owntracks/bench/probe", payload: location.encoded, retain: false)
    }
    tick += 1
    let next = startTime + Double(tick) * 0.01
    let wait = next - MonotonicClock.seconds()
    if wait > 0 { usleep(UInt32(wait * 1e6)) }
  }
}
// Warm up until every device is on the map.
/// One reply line from the daemon's socket (blocking reads through FileHandle).
final class LineReader {
  let handle: FileHandle
  var buffer = Data()
  init(_ fd: Int32) { handle = FileHandle(fileDescriptor: fd, closeOnDealloc: false) }
  func line() -> String? {
    while true {
      if let newline = buffer.firstIndex(of: 10) {
        let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
        buffer.removeSubrange(buffer.startIndex...newline)
        return line
      }
      let data = handle.availableData
      if data.isEmpty { return nil }
      buffer.append(data)
    }
  }
}
guard let client = connectUnix(fleetSocket), sendLine(client, "{\"cmd\":\"request\"}\n") else {
  print("cannot connect to the fleet daemon")
  terminate(fleetPID)
  generator.stop()
  broker.stop()
  exit(1)
}
let reader = LineReader(client)
_ = reader.line()
@MainActor func mapAnnotations(_ fd: Int32) -> [[String: Any]] {
  guard sendLine(fd, "{\"cmd\":\"map\"}\n"), let line = reader.line(),
    let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
  else { return [] }
  return object["annotations"] as? [[String: Any]] ?? []
}
probeSent.request(-40)
_ = waitFor(120) { mapAnnotations(client).count >= devices + 1 }  // and the current location
let shown = mapAnnotations(client).count
let cpu0 = cpuSeconds(fleetPID)
let window0 = MonotonicClock.seconds()
sleepSeconds(runSeconds)
let cpu = cpuSeconds(fleetPID) - cpu0
let window = MonotonicClock.seconds() - window0
let rss = rssMiB(fleetPID)
var latencies: [Double] = []
for index in 0..<probes {
  let latitude = -40 - Double(index + 1) * 0.01
  probeSent.request(latitude)
  let seen = waitFor(10) {
    mapAnnotations(client).contains { ($0["id"] as? String) == FleetRoster.identifier(topic: "owntracks/bench/probe") && abs(($0["lat"] as? Double ?? 0) - latitude) < 1e-9 }
  }
  if seen, let sent = probeSent.sentAt { latencies.append((MonotonicClock.seconds() - sent) * 1000) }
  usleep(200_000)
}
stopGenerating.set()
generator.stop()
close(client)
let log = (try? String(contentsOfFile: scratch + "/fleet.log", encoding: .utf8)) ?? ""
terminate(fleetPID)
latencies.sort()
print("fleet view (\(devices) devices at 1 Hz each, one generator connection)")
print("  annotations shown   \(shown)")
print("  locationd CPU       \(format(100 * cpu / window, 1)) % of one core over \(format(window, 0)) s")
print("  locationd RSS       \(format(rss, 1)) MiB")
print(
  "  update latency      median \(format(latencies.isEmpty ? .nan : latencies[latencies.count / 2], 1)) ms, max \(format(latencies.last ?? .nan, 1)) ms (\(latencies.count) of \(probes) probes; publish -> shown by `map`, 2 ms polling)")
for line in log.split(separator: "\n").filter({ $0.contains("mqttFleetRejected") }).prefix(3) {
  print("  map refused: \(line)")
}
broker.stop()

/// A flag set once from another thread.
final class ManagedFlag: @unchecked Sendable {
  private let lock = NSLock()
  private var value = false
  var isSet: Bool { lock.withLock { value } }
  func set() { lock.withLock { value = true } }
}

/// The probe hand-over between the measuring loop and the generator thread.
final class ManagedProbe: @unchecked Sendable {
  private let lock = NSLock()
  private var requested: Double?
  private var sent: Double?
  func request(_ latitude: Double) { lock.withLock { requested = latitude; sent = nil } }
  func takeRequest() -> Double? { lock.withLock { defer { requested = nil }; return requested } }
  func markSent(at time: Double) { lock.withLock { sent = time } }
  var sentAt: Double? { lock.withLock { sent } }
}
