import SystemIO
import LocationModel
import LocationProtocol
// nmea-bench: decodes a generated NMEA 0183 log with `locationctl decode` and with gpsd's
// `gpsdecode` (Debian gpsd-clients) in the same run, and prints sentences per second, their ratio
// and peak RSS. A benchmark, not a test: it prints figures.
//
//   swift build -c release && .build/release/nmea-bench [--sentences N] [--runs R] [--file PATH]
#if canImport(Glibc)
  import Glibc
#endif
import NMEA

struct Options {
  var sentences = 1_000_000
  var runs = 5
  var file = "/tmp/locationd-nmea-bench.nmea"
  var longFactor = 5
  var locationctl: String?
}

func usage() -> Never {
  print("usage: nmea-bench [--sentences N] [--runs R] [--file PATH] [--long-factor K] [--locationctl PATH]")
  exit(64)
}

var options = Options()
var args = ArgumentScanner(Array(CommandLine.arguments.dropFirst()))
while let word = args.next() {
  switch word {
  case .option("--sentences"): options.sentences = (try? args.value()).flatMap { Int($0) } ?? { usage() }()
  case .option("--runs"): options.runs = (try? args.value()).flatMap { Int($0) } ?? { usage() }()
  case .option("--file"): options.file = (try? args.value()) ?? { usage() }()
  case .option("--long-factor"): options.longFactor = (try? args.value()).flatMap { Int($0) } ?? { usage() }()
  case .option("--locationctl"): options.locationctl = (try? args.value()) ?? { usage() }()
  default: usage()
  }
}

// MARK: Log generation (GGA, RMC, GSA, 3 x GSV, VTG per epoch at 1 Hz, a car driving a circle)

func checksum(_ body: String) -> String {
  let sum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
  let hex = Array("0123456789ABCDEF")
  return "$\(body)*\(hex[Int(sum >> 4)])\(hex[Int(sum & 15)])\r\n"
}

func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }

func fixed(_ v: Double, _ decimals: Int) -> String {
  var out: [UInt8] = []
  GPSDJSON.appendFixed(v, decimals: decimals, to: &out)
  return String(decoding: out, as: UTF8.self)
}

func angle(_ value: Double, degreesWidth: Int) -> String {
  let a = abs(value)
  let d = Int(a)
  let m = (a - Double(d)) * 60
  var degrees = "\(d)"
  while degrees.count < degreesWidth { degrees = "0" + degrees }
  return degrees + (m < 10 ? "0" : "") + fixed(m, 5)
}

func generate(path: String, sentences: Int) -> Int {
  guard let file = fopen(path, "w") else {
    print("nmea-bench: cannot write \(path)")
    exit(1)
  }
  defer { fclose(file) }
  var written = 0
  var epoch = 0
  let startDay = CivilDate.days(year: 2026, month: 11, day: 29)
  while written < sentences {
    let t = 12 * 3600 + epoch
    let day = startDay + t / 86400
    let tod = t % 86400
    let (y, mo, d) = CivilDate.civil(days: day)
    let time = two(tod / 3600) + two(tod / 60 % 60) + two(tod % 60) + ".00"
    let date = two(d) + two(mo) + two(y % 100)
    let phase = Double(epoch) * 0.01
    let lat = 3.1386 + 0.01 * sin(phase)
    let lon = 101.6044 + 0.01 * cos(phase)
    let la = angle(lat, degreesWidth: 2) + ",N"
    let lo = angle(lon, degreesWidth: 3) + ",E"
    let course = fixed((Double(epoch).truncatingRemainder(dividingBy: 360)), 2)
    let speed = fixed(20 + 5 * sin(phase * 3), 2)
    var block = checksum("GPGGA,\(time),\(la),\(lo),1,09,0.9,\(fixed(50 + 10 * sin(phase), 1)),M,-7.1,M,,")
    block += checksum("GPRMC,\(time),A,\(la),\(lo),\(speed),\(course),\(date),,,A")
    block += checksum("GPGSA,A,3,02,05,07,09,13,15,18,21,30,,,,1.6,0.9,1.3")
    block += checksum("GPGSV,3,1,11,02,26,314,29,05,50,265,37,07,22,185,31,09,54,094,36")
    block += checksum("GPGSV,3,2,11,13,33,050,38,15,40,314,43,18,55,188,44,21,68,354,50")
    block += checksum("GPGSV,3,3,11,30,12,210,30,26,05,020,,29,03,100,")
    block += checksum("GPVTG,\(course),T,,M,\(speed),N,\(fixed((20 + 5 * sin(phase * 3)) * 1.852, 2)),K,A")
    fputs(block, file)
    written += 7
    epoch += 1
  }
  return written
}

// MARK: Running a tool with its input from a file or a pipe, measuring time and peak RSS

struct Measurement {
  var seconds: Double
  var maxRSSKiB: Int
  var status: Int32
}

func now() -> Double { MonotonicClock.seconds() }

/// Runs `argv` with standard input from `inputPath` repeated `repeats` times (through a pipe when
/// more than once), standard output to /dev/null.
func run(_ argv: [String], inputPath: String, repeats: Int = 1) -> Measurement {
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  var pipeFDs: [Int32] = [-1, -1]
  if repeats == 1 {
    posix_spawn_file_actions_addopen(&actions, 0, inputPath, O_RDONLY, 0)
  } else {
    guard pipe(&pipeFDs) == 0 else { return Measurement(seconds: 0, maxRSSKiB: 0, status: -1) }
    posix_spawn_file_actions_adddup2(&actions, pipeFDs[0], 0)
    posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
    posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
  }
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
  var cArgs = argv.map { strdup($0) } + [nil]
  defer { for p in cArgs { free(p) } }
  var pid: pid_t = 0
  let start = now()
  let rc = posix_spawnp(&pid, argv[0], &actions, nil, &cArgs, environ)
  guard rc == 0 else {
    print("nmea-bench: cannot start \(argv[0]): \(String(cString: strerror(rc)))")
    return Measurement(seconds: 0, maxRSSKiB: 0, status: -1)
  }
  if repeats > 1 {
    close(pipeFDs[0])
    let fd = open(inputPath, O_RDONLY)
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 16, alignment: 16)
    for _ in 0..<repeats {
      lseek(fd, 0, SEEK_SET)
      while true {
        let n = read(fd, buffer, 1 << 16)
        if n <= 0 { break }
        var off = 0
        while off < n {
          let w = write(pipeFDs[1], buffer + off, n - off)
          if w <= 0 { break }
          off += w
        }
      }
    }
    buffer.deallocate()
    close(fd)
    close(pipeFDs[1])
  }
  var status: Int32 = 0
  var usage = rusage()
  wait4(pid, &status, 0, &usage)
  return Measurement(seconds: now() - start, maxRSSKiB: Int(usage.ru_maxrss), status: status)
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

let selfPath = CommandLine.arguments.first ?? "./nmea-bench"
let directory = selfPath.contains("/") ? String(selfPath[..<(selfPath.lastIndex(of: "/") ?? selfPath.endIndex)]) : "."
let locationctl = options.locationctl ?? directory + "/locationctl"
guard access(locationctl, X_OK) == 0 else {
  print("nmea-bench: \(locationctl) not found; build it first (swift build -c release)")
  exit(1)
}
let count = generate(path: options.file, sentences: options.sentences)
var st = stat()
stat(options.file, &st)
print("log: \(options.file), \(count) sentences (GGA, RMC, GSA, 3 GSV, VTG per epoch), \(st.st_size / 1_000_000) MB")

var rows: [(String, Double, Int)] = []
for (name, argv) in [("locationctl decode", [locationctl, "decode"]), ("gpsdecode", ["gpsdecode"])] {
  var times: [Double] = []
  var rss = 0
  for _ in 0..<options.runs {
    let m = run(argv, inputPath: options.file)
    if m.status != 0 { print("nmea-bench: \(name) exited with status \(m.status)") }
    times.append(m.seconds)
    rss = max(rss, m.maxRSSKiB)
  }
  let rate = Double(count) / median(times)
  rows.append((name, rate, rss))
  print("\(name): median of \(options.runs) runs \(fixed(median(times), 3)) s, \(Int(rate)) sentences/s, peak RSS \(fixed(Double(rss) / 1024, 1)) MB")
}
if rows.count == 2, rows[1].1 > 0 {
  print("ratio locationctl/gpsdecode: \(fixed(rows[0].1 / rows[1].1, 1))x")
}
let long = run([locationctl, "decode", "-"], inputPath: options.file, repeats: options.longFactor)
print(
  "streaming: \(count * options.longFactor) sentences through a pipe in \(fixed(long.seconds, 2)) s, peak RSS \(fixed(Double(long.maxRSSKiB) / 1024, 1)) MB (\(options.longFactor)x the log)"
)
