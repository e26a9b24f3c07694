// Command-line flags.

import BenchKit
import Foundation
import LocationTestKit
import SystemIO

let usage = """
  usage: relay-bench [--clients 10,50,MAX] [--seconds S] [--warmup S] [--json] [--direct] [--locationd PATH]
    --clients   client counts per daemon; MAX is the most clients gpsd accepts (measured)
    --seconds   measurement window per count (default 20)
    --warmup    seconds after the clients connect before measuring (default 3)
    --json      print one JSON object instead of the markdown table (progress goes to stderr)
    --direct    locationd reads a simulated receiver of its own with serial:PTY (docs/receivers.md)
                instead of gpsd's through gpsd://: each daemon reads its own receiver
    --locationd the daemon to run (default: the locationd beside this executable)
  Needs /usr/sbin/gpsd (or $GPSD); runs its own, never the system one.
  """

struct Settings {
  var clientCounts: [BenchmarkClientCount] = [.count(10), .count(50), .gpsdLimit]
  var seconds = 20.0
  var warmup = 3.0
  var json = false
  var direct = false
  var locationd = executableBesideThisProgram("locationd")

  init(_ arguments: [String]) {
    var scanner = ArgumentScanner(arguments)
    func value() -> String {
      do { return try scanner.value() } catch {
        switch error {
        case .missingValue(let option): fail("\(option) needs a value\n\(usage)", status: 64)
        default: fail("\(error.description)\n\(usage)", status: 64)
        }
      }
    }
    func seconds(_ name: String) -> Double {
      guard let number = Double(value()), number > 0, number.isFinite, number <= 3600 else {
        fail("\(name) takes seconds within (0, 3600]", status: 64)
      }
      return number
    }
    while let word = scanner.next() {
      let argument: String
      switch word {
      case .option(let name) where !scanner.hasJoinedValue || !["--json", "--direct", "--help"].contains(name):
        argument = name
      case .option, .endOfOptions: argument = scanner.lastWord ?? "--"
      case .operand(let operand): argument = operand
      }
      switch argument {
      case "--clients":
        do {
          clientCounts = try BenchmarkClientCount.parseList(value())
        } catch {
          fail(error.description, status: 64)
        }
      case "--seconds": self.seconds = seconds("--seconds")
      case "--warmup": warmup = seconds("--warmup")
      case "--json": json = true
      case "--direct": direct = true
      case "--locationd": locationd = value()
      case "-h", "--help":
        print(usage)
        exit(0)
      default: fail("unknown argument \(scanner.lastWord ?? argument)\n\(usage)", status: 64)
      }
    }
  }
}
