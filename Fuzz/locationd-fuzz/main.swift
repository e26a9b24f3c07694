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
///
/// The target is also put in the environment (`LOCATIOND_FUZZ_TARGET`): libFuzzer runs `-merge=1`
/// and `-fork` in child processes started with its own options only, and those children find
/// their target there.
@main
enum FuzzDriver {
  static let environmentName = "LOCATIOND_FUZZ_TARGET"

  static func main() {
    let arguments = CommandLine.arguments
    let target: FuzzTarget
    let options: ArraySlice<String>
    if arguments.count >= 2, let named = FuzzTarget(rawValue: arguments[1]) {
      target = named
      options = arguments.dropFirst(2)
      setenv(environmentName, named.rawValue, 1)
    } else if let value = getenv(environmentName), let inherited = FuzzTarget(rawValue: String(cString: value)) {
      target = inherited
      options = arguments.dropFirst(1)
    } else {
      let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
      writeError("usage: locationd-fuzz \(names) [libFuzzer options] [corpus directories]")
      exit(64)
    }
    selectedTarget = target
    var driverArguments: [UnsafeMutablePointer<CChar>?] = ([arguments[0]] + options).map { strdup($0) }
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
