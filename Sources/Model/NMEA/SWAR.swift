import LocationModel
/// Eight-bytes-at-a-time tests ("SIMD within a register") for the framer and parser hot loops.
///
/// Each mask has 0x80 set in exactly the byte lanes that match (no false positives), so callers
/// can find the first match with `trailingZeroBitCount / 8` on a little-endian load.
enum SWAR {
  static let ones: UInt64 = 0x0101_0101_0101_0101
  static let high: UInt64 = 0x8080_8080_8080_8080
  static let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

  /// 0x80 in every lane whose byte is zero.
  @inline(__always) static func zeroLanes(_ v: UInt64) -> UInt64 {
    ~(((v & low7) &+ low7) | v | low7)
  }

  /// 0x80 in every lane equal to `byte`.
  @inline(__always) static func lanes(_ v: UInt64, equalTo byte: UInt8) -> UInt64 {
    zeroLanes(v ^ (ones &* UInt64(byte)))
  }

  /// 0x80 in every lane outside printable ASCII (below 0x20 or above 0x7E).
  @inline(__always) static func nonPrintableLanes(_ v: UInt64) -> UInt64 {
    // Lanes with bit 7 set are above 0x7E. For the others, adding 0x60 (no carry can leave the
    // lane: at most 0x7F + 0x60) sets bit 7 exactly when the byte is at least 0x20.
    let belowSpace = ~((v & low7) &+ (ones &* 0x60)) & high
    return (v & high) | belowSpace | lanes(v, equalTo: 0x7F)
  }

  @inline(__always) static func load(_ p: UnsafePointer<UInt8>) -> UInt64 {
    UInt64(littleEndian: UnsafeRawPointer(p).loadUnaligned(as: UInt64.self))
  }
}
