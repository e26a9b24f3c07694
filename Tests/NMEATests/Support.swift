import Foundation
import NMEA
import LocationModel

/// Adds `$`, the checksum and CR LF to a sentence body (`GPGGA,...`), computing the XOR here,
/// independently of the package's own checksum code.
func sentence(_ body: String, checksum: Bool = true, lowercase: Bool = false) -> String {
  guard checksum else { return "$\(body)\r\n" }
  let sum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
  var hex = String(sum, radix: 16, uppercase: !lowercase)
  if hex.count < 2 { hex = "0" + hex }
  return "$\(body)*\(hex)\r\n"
}

/// Decodes `text` in one chunk and returns the fixes and the decoder's statistics.
func decode(_ text: String) -> ([Fix], NMEAStatistics) {
  decode(Array(text.utf8))
}

/// Decodes `bytes` in chunks of `chunkSize` and returns the fixes and the statistics.
func decode(_ bytes: [UInt8], chunkSize: Int = 1 << 16) -> ([Fix], NMEAStatistics) {
  var decoder = NMEADecoder()
  var fixes: [Fix] = []
  var offset = 0
  bytes.withUnsafeBytes { raw in
    while offset < raw.count {
      let end = min(raw.count, offset + max(1, chunkSize))
      decoder.feed(UnsafeRawBufferPointer(rebasing: raw[offset..<end])) { fixes.append($0.fix) }
      offset = end
    }
  }
  decoder.finish { fixes.append($0.fix) }
  return (fixes, decoder.statistics)
}

/// Milliseconds since 1970 of a UTC date and time.
func utc(_ year: Int, _ month: Int, _ day: Int, _ h: Int, _ m: Int, _ s: Int, ms: Int = 0) -> Int64 {
  Int64(CivilDate.days(year: year, month: month, day: day)) * 86_400_000 + Int64(((h * 60 + m) * 60 + s) * 1000 + ms)
}

/// A deterministic pseudo-random generator (SplitMix64) so hostile-input tests repeat exactly.
struct SplitMix64: RandomNumberGenerator {
  var state: UInt64
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
