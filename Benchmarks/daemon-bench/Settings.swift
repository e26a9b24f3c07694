// Command-line flags, progress and failure messages.

import BenchKit
import Foundation
import Glibc
import SystemIO

struct Settings {
  var clientCounts = [100, 1000]
  var runSeconds = 15.0
  var idleSeconds = 10.0
  var gpsdFixes = 1000
  /// The clients' reader polls instead of sleeping in epoll_wait (see the header).
  var spin = false
  /// Print the N fixes whose last client waited longest.
  var slowest = 0
  var locationd = executableBesideThisProgram("locationd")

  init(_ arguments: [String]) {
    var scanner = ArgumentScanner(arguments)
    func value() -> String {
      do { return try scanner.value() } catch {
        switch error {
        case .missingValue(let option): fail("\(option) needs a value")
        default: fail(error.description)
        }
      }
    }
    while let word = scanner.next() {
      let argument: String
      switch word {
      case .option(let name) where !scanner.hasJoinedValue || !["--spin", "--help"].contains(name): argument = name
      case .option, .endOfOptions: argument = scanner.lastWord ?? "--"
      case .operand(let operand): argument = operand
      }
      switch argument {
      case "--clients":
        clientCounts = value().split(separator: ",").compactMap { Int($0) }.filter {
          $0 > 0 && $0 <= 4096
        }
        if clientCounts.isEmpty { fail("--clients takes counts within 1...4096, e.g. 100,1000") }
      case "--run": runSeconds = positive(value(), "--run")
      case "--idle": idleSeconds = positive(value(), "--idle")
      case "--gpsd-fixes":
        guard let count = Int(value()), count >= 0 else { fail("--gpsd-fixes takes a count >= 0") }
        gpsdFixes = count
      case "--locationd": locationd = value()
      case "--spin": spin = true
      case "--slowest":
        guard let count = Int(value()), count >= 0 else { fail("--slowest takes a count >= 0") }
        slowest = count
      case "-h", "--help":
        say(
          "usage: daemon-bench [--clients 100,1000] [--run S] [--idle S] [--gpsd-fixes N] [--spin] [--slowest N] [--locationd PATH]"
        )
        exit(0)
      default: fail("unknown argument \(scanner.lastWord ?? argument)")
      }
    }
  }

  private func positive(_ text: String, _ name: String) -> Double {
    guard let number = Double(text), number > 0, number.isFinite else {
      fail("\(name) takes seconds > 0")
    }
    return number
  }
}

/// Prints a line and flushes, so that progress shows when the output is a file or a pipe.
func say(_ line: String) {
  print(line)
  fflush(nil)
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("daemon-bench: \(message)\n".utf8))
  exit(64)
}

/// What `body` returns; when it throws, its message goes through ``fail(_:)``.
func orFail<Value>(_ body: () throws(BenchError) -> Value) -> Value {
  do { return try body() } catch { fail(error.description) }
}
