@testable import NMEA
import Testing
import LocationModel

@Suite("NMEA eight-byte scanning")
struct SWARTests {
  @Test("lane masks agree with byte-by-byte tests for every byte value in every lane")
  func lanesMatchBytes() {
    var rng = SplitMix64(state: 7)
    for value in 0...255 {
      for lane in 0..<8 {
        var bytes = (0..<8).map { _ in UInt8(truncatingIfNeeded: 0x30 + rng.next() % 0x40) }
        bytes[lane] = UInt8(value)
        let word = bytes.withUnsafeBufferPointer { SWAR.load($0.baseAddress!) }
        for (i, b) in bytes.enumerated() {
          let bit = UInt64(0x80) << (8 * UInt64(i))
          #expect((SWAR.nonPrintableLanes(word) & bit != 0) == (b < 0x20 || b > 0x7E))
          #expect((SWAR.lanes(word, equalTo: 0x2C) & bit != 0) == (b == 0x2C))
          #expect((SWAR.lanes(word, equalTo: 0x24) & bit != 0) == (b == 0x24))
        }
      }
    }
  }
}
