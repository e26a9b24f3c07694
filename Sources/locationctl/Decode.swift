#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import NMEA

/// `locationctl decode [--sky] [FILE|-]`: decodes an NMEA 0183 log into gpsd TPV (and SKY) JSON
/// lines on standard output, streaming in 64 KiB chunks; prints the sentence counters on standard
/// error at the end. Exit status 0, 1 when the input cannot be read or holds no NMEA sentence
/// (empty, or another format such as GPX: "no NMEA sentences found in FILE"), 64 on bad usage.
func runDecode(arguments: [String]) -> Int32 {
  var sky = false
  var path: String?
  for argument in arguments {
    switch argument {
    case "--sky": sky = true
    case "-h", "--help":
      print("usage: locationctl decode [--sky] [FILE|-]\n  Decodes NMEA 0183 into gpsd TPV JSON lines (and SKY with --sky).")
      return 0
    default:
      if argument.hasPrefix("-") && argument != "-" {
        writeError("locationctl decode: unknown option \(argument) (try --help)")
        return 64
      }
      guard path == nil else {
        writeError("locationctl decode: give one FILE or - for standard input")
        return 64
      }
      path = argument
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

  var decoder = NMEADecoder()
  var output: [UInt8] = []
  output.reserveCapacity(1 << 17)
  let emit: (DecodedFix) -> Void = { decoded in
    GPSDJSON.appendTPV(decoded.fix, to: &output)
    output.append(0x0A)
    if sky {
      GPSDJSON.appendSKY(decoded.fix, to: &output)
      output.append(0x0A)
    }
  }
  let chunkSize = 1 << 18
  let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
  defer { chunk.deallocate() }
  var bytesRead = 0
  while true {
    let n = read(fd, chunk.baseAddress, chunkSize)
    if n < 0 {
      if errno == EINTR { continue }
      writeError("locationctl decode: read error: \(String(cString: strerror(errno)))")
      return 1
    }
    if n == 0 { break }
    bytesRead += n
    decoder.feed(UnsafeRawBufferPointer(rebasing: chunk[0..<n]), emit)
    if output.count >= 1 << 16 {
      guard writeAll(1, output) else { return 1 }
      output.removeAll(keepingCapacity: true)
    }
  }
  decoder.finish(emit)
  guard writeAll(1, output) else { return 1 }
  writeError("locationctl decode: \(decoder.statistics.summary)")
  if decoder.statistics.accepted == 0 {
    let name = path.map { $0 == "-" ? "standard input" : $0 } ?? "standard input"
    writeError(
      "locationctl decode: no NMEA sentences found in \(name)"
        + (bytesRead == 0
          ? " (it is empty)" : " (\(bytesRead) bytes read; is it an NMEA 0183 log?)"))
    return 1
  }
  return 0
}

/// Writes all of `bytes` to `fd`, retrying on partial writes and EINTR; `false` on failure.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
  bytes.withUnsafeBytes { raw in
    var offset = 0
    while offset < raw.count {
      let n = write(fd, raw.baseAddress.map { $0 + offset }, raw.count - offset)
      if n < 0 {
        if errno == EINTR { continue }
        return false
      }
      offset += n
    }
    return true
  }
}
