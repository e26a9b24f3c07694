#if canImport(Glibc)
  import Glibc
#endif
import CLibFuzzer
import FuzzTargets

/// The target chosen on the command line; read by the libFuzzer callback, which cannot capture.
nonisolated(unsafe) private var selectedTarget = FuzzTarget.nmea

/// `locationd-fuzz TARGET [LIBFUZZER-OPTIONS] [CORPUS-DIR...]`: runs libFuzzer on one target of
/// ``FuzzTarget``. Built only by `scripts/fuzz` (with `-sanitize=fuzzer`); an input that breaks
/// an invariant prints the failure and aborts, which libFuzzer reports as a crash and saves.
@main
enum FuzzDriver {
  static func main() {
    let arguments = CommandLine.arguments
    guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[1]) else {
      let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
      writeError("usage: locationd-fuzz \(names) [libFuzzer options] [corpus directories]")
      exit(64)
    }
    selectedTarget = target
    var driverArguments: [UnsafeMutablePointer<CChar>?] = ([arguments[0]] + arguments.dropFirst(2)).map { strdup($0) }
    driverArguments.append(nil)
    var argc = Int32(driverArguments.count - 1)
    let status = driverArguments.withUnsafeMutableBufferPointer { buffer -> Int32 in
      var argv = buffer.baseAddress
      return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        do {
          try selectedTarget.check(bytes)
        } catch {
          writeError("locationd-fuzz \(selectedTarget.rawValue): invariant broken: \(error)")
          abort()
        }
        return 0
      }
    }
    exit(status)
  }
}

/// Writes `line` and a newline to standard error, unbuffered (the process may abort next).
private func writeError(_ line: String) {
  let bytes = Array((line + "\n").utf8)
  bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}
