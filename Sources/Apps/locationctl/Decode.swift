import LocationModel
import LocationProtocol
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import NMEA
import SystemIO

/// `locationctl decode [--sky] [--rollover-floor DATE] [FILE|-]`: decodes an NMEA 0183 log into
/// gpsd TPV (and SKY) JSON lines on standard output, streaming in 64 KiB chunks; prints the
/// sentence counters on standard error at the end. Exit status 0, 1 when the input cannot be
/// read or holds no NMEA sentence (empty, or another format such as GPX: "no NMEA sentences found
/// in FILE"), 64 on bad usage.
///
/// `--sky` also prints a SKY after each TPV, and a SKY alone for satellite sentences that no time
/// or fix sentence joins (a GSV-only capture: one per GSV cycle, as gpsdecode prints). `--` ends
/// the options.
///
/// `--rollover-floor YYYY-MM-DD` (or `--rollover-floor=YYYY-MM-DD`; once; years 1980-2079): dates
/// before it move forward in 1024-week steps until they are not (GPS week rollover); such a TPV
/// carries `"rolloverWeeks":N`. Without it (the default for recorded logs) dates are printed as
/// recorded.
func runDecode(arguments: [String]) -> Int32 {
  var sky = false
  var path: String?
  var floor: Int?
  var scanner = ArgumentScanner(arguments)
  var operandsOnly = false
  while let word = scanner.next() {
    let argument: String
    switch word {
    case .endOfOptions:
      // POSIX utility syntax guideline 10: what follows is an operand, even "-" or "-x".
      operandsOnly = true
      continue
    case .operand(let operand) where operandsOnly || operand == "-" || !operand.hasPrefix("-"):
      guard path == nil else {
        writeError("locationctl decode: give one FILE or - for standard input")
        return 64
      }
      path = operand
      continue
    case .operand(let operand): argument = operand
    case .option(let name) where name == "--rollover-floor" || !scanner.hasJoinedValue: argument = name
    case .option: argument = scanner.lastWord ?? ""
    }
    switch argument {
    case "--sky": sky = true
    case "--rollover-floor":
      guard floor == nil else {
        writeError("locationctl decode: --rollover-floor given twice")
        return 64
      }
      let value: String
      do { value = try scanner.value() } catch {
        writeError("locationctl decode: \(error), a date YYYY-MM-DD (1980 to 2079)")
        return 64
      }
      guard let day = CivilDate.days(iso: value) else {
        writeError("locationctl decode: --rollover-floor needs a date YYYY-MM-DD (1980 to 2079)")
        return 64
      }
      floor = day
    case "-h", "--help":
      print(
        "usage: locationctl decode [--sky] [--rollover-floor YYYY-MM-DD] [FILE|-]\n  Decodes NMEA 0183 into gpsd TPV JSON lines (and SKY with --sky, also for\n  satellite data without any time or fix sentence); -- ends the options;\n  dates before the rollover floor move forward by 1024 GPS weeks until they are not."
      )
      return 0
    default:
      writeError("locationctl decode: unknown option \(argument) (try --help)")
      return 64
    }
  }
  let fd: Int32
  if let path, path != "-" {
    fd = open(path, O_RDONLY)
    guard fd >= 0 else {
      writeError("locationctl decode: cannot open \(path): \(String(cString: strerror(errno)))")
      return 1
    }
  } else {
    fd = 0
  }
  defer { if fd != 0 { close(fd) } }

  var decoder = NMEADecoder(rolloverFloor: floor, skyOnlyEpochs: sky)
  var output: [UInt8] = []
  output.reserveCapacity(1 << 17)
  let emit: (DecodedFix) -> Void = { decoded in
    // Satellite data without any time or fix sentence: a SKY only, as gpsdecode prints.
    if decoded.isSkyOnly {
      GPSDJSON.appendSKY(decoded.fix, to: &output)
      output.append(0x0A)
      return
    }
    if decoded.rolloverWeeks != 0 {
      var tpv: [UInt8] = []
      GPSDJSON.appendTPV(decoded.fix, to: &tpv)
      let weeks = JSONMember("rolloverWeeks", .int(Int64(decoded.rolloverWeeks)))
      output.append(contentsOf: JSONValue.appending([weeks], toEncodedObject: tpv))
    } else {
      GPSDJSON.appendTPV(decoded.fix, to: &output)
    }
    output.append(0x0A)
    if sky {
      GPSDJSON.appendSKY(decoded.fix, to: &output)
      output.append(0x0A)
    }
  }
  var chunk = [UInt8](repeating: 0, count: 1 << 18)
  var bytesRead = 0
  while true {
    let n: Int
    do throws(SystemError) { n = try SystemIO.read(fd, into: &chunk) } catch {
      writeError("locationctl decode: read error: \(error)")
      return 1
    }
    if n == 0 { break }
    bytesRead += n
    chunk.withUnsafeBytes { decoder.feed(UnsafeRawBufferPointer(rebasing: $0.prefix(n)), emit) }
    if output.count >= 1 << 16 {
      do { try writeOutput(output) } catch {
        writeError("locationctl decode: \(error.message)")
        return 1
      }
      output.removeAll(keepingCapacity: true)
    }
  }
  decoder.finish(emit)
  do { try writeOutput(output) } catch {
    writeError("locationctl decode: \(error.message)")
    return 1
  }
  writeError("locationctl decode: \(decoder.statistics.summary)")
  if decoder.statistics.accepted == 0 {
    let name = path.map { $0 == "-" ? "standard input" : $0 } ?? "standard input"
    let rejected = decoder.statistics.rejectedTotal
    writeError(
      rejected > 0
        ? "locationctl decode: no valid NMEA sentences in \(name): all \(rejected) rejected (see the counts above)"
        : "locationctl decode: no NMEA sentences found in \(name)"
          + (bytesRead == 0
            ? " (it is empty)" : " (\(bytesRead) bytes read; is it an NMEA 0183 log?)"))
    return 1
  }
  return 0
}

