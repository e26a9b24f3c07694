import Foundation
import LocationTestKit
@testable import NMEA
import Testing
import LocationModel

/// Input from serial lines is junk more often than not: none of it may crash the decoder, every
/// rejected sentence is counted, and memory stays bounded.
@Suite("NMEA hostile input")
struct HostileInputTests {
  /// Small fixtures: a hand-written epoch set plus the smallest corpus logs (each ≤ 5 KB, so that
  /// truncating and corrupting at every byte stays fast in a debug build).
  static func fixtures() -> [(String, [UInt8])] {
    var result: [(String, [UInt8])] = [
      (
        "hand-written",
        Array(
          (sentence("GPGGA,202640.000,4404.1306,N,12118.8515,W,2,10,0.98,1127.7,M,-19.6,M,0000,0000")
            + sentence("GPGSA,A,3,20,16,09,03,07,10,23,19,27,30,,,1.64,0.98,1.31")
            + sentence("GPGSV,1,1,02,09,88,089,31,07,60,281,44")
            + sentence("GPRMC,202640.000,A,4404.1306,N,12118.8515,W,0.03,225.97,130415,,,D")
            + sentence("GPVTG,225.97,T,,M,0.03,N,0.06,K,D") + sentence("GPZDA,202640.000,13,04,2015,,")
            + sentence("GNGNS,202640.000,4404.1306,N,12118.8515,W,DN,10,0.98,1127.7,-19.6,,")
            + sentence("GPGLL,4404.1306,N,12118.8515,W,202640.000,A,D")
            + sentence("GPGST,202640.000,17,6.6,4.4,90,4.4,6.6,7.4")).utf8)
      )
    ]
    for name in ["ublox-lea-5q.log", "garmin15x.log", "magellan-ec10.log", "beidou-bd.log"] {
      if let data = try? Data(contentsOf: NMEACorpus.directory.appendingPathComponent(name)) {
        result.append((name, Array(data)))
      }
    }
    return result
  }

  /// Every candidate sentence is either accepted or rejected with a reason.
  static func consistent(_ stats: NMEAStatistics) -> Bool {
    stats.read == stats.accepted + stats.rejectedTotal && stats.unchecked <= stats.accepted
  }

  @Test("random bytes: only counted rejections")
  func randomBytes() {
    var rng = SplitMix64(state: 42)
    var bytes = [UInt8](repeating: 0, count: 1 << 20)
    for i in bytes.indices {
      // Bias towards NMEA's own characters so that many candidate sentences get far into parsing.
      let r = rng.next()
      let alphabet = Array("$GPRMCGGA,*0123456789ABCDEF.NSEW\r\n".utf8)
      bytes[i] = r & 1 == 0 ? UInt8(truncatingIfNeeded: r >> 8) : alphabet[Int((r >> 8) % UInt64(alphabet.count))]
    }
    let (_, stats) = decode(bytes)
    #expect(Self.consistent(stats))
    #expect(stats.read > 1000)
    #expect(stats.rejectedTotal > 0)
  }

  // The two sweeps below take a minute of CPU in a debug build. They yield between positions so
  // that they share the concurrency pool's threads (two on a 2-core machine) with the tests that
  // run beside them, instead of holding one for the whole sweep.

  @Test("every fixture truncated at every byte")
  func truncated() async {
    for (name, bytes) in Self.fixtures() {
      let (full, _) = decode(bytes)
      for cut in 0...bytes.count {
        if cut % 32 == 0 { await Task.yield() }
        let (fixes, stats) = decode(Array(bytes[0..<cut]))
        if !Self.consistent(stats) || fixes.count > full.count + 1 {
          Issue.record("\(name) cut at \(cut): \(fixes.count) fixes, \(stats.summary)")
          break
        }
      }
    }
  }

  @Test("every fixture corrupted at every byte")
  func corrupted() async {
    for (name, bytes) in Self.fixtures() {
      let (_, clean) = decode(bytes)
      var copy = bytes
      for i in bytes.indices {
        if i % 8 == 0 { await Task.yield() }
        let original = copy[i]
        for replacement: UInt8 in [original ^ 0x01, 0x00, 0x24, 0x2C, 0xFF] {
          copy[i] = replacement
          let (_, stats) = decode(copy)
          if !Self.consistent(stats) {
            Issue.record("\(name) corrupted at \(i) with \(replacement): \(stats.summary)")
            break
          }
          // One damaged byte can spoil at most the sentences it touches and, by adding or
          // removing a "$" or line end, split or join two of them.
          if stats.accepted + 2 < clean.accepted {
            Issue.record("\(name) byte \(i)=\(replacement) lost more than the touched sentences: \(stats.summary)")
            break
          }
        }
        copy[i] = original
      }
    }
  }

  @Test("a flipped bit inside a sentence is caught by the checksum")
  func checksumCatchesDamage() {
    let line = Array(sentence("GPRMC,202640.000,A,4404.1306,N,12118.8515,W,0.03,225.97,130415,,,D").utf8)
    for i in 1..<(line.count - 5) {  // between "$" and "*"
      var copy = line
      copy[i] ^= 0x02
      let (fixes, stats) = decode(copy)
      #expect(stats.accepted == 0, "damage at \(i) accepted")
      #expect(fixes.isEmpty)
    }
  }

  @Test("NUL bytes: skipped between sentences, reject the sentence they are inside")
  func nulBytes() {
    let good = sentence("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
    var bytes = [UInt8](repeating: 0, count: 100) + Array(good.utf8) + [UInt8](repeating: 0, count: 7)
    bytes += Array("$GPRMC,000346.03,A,4808".utf8) + [0, 0, 0] + Array("      \r\n".utf8)
    bytes += Array(sentence("GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,").utf8)
    let (fixes, stats) = decode(bytes)
    #expect(fixes.count == 2)
    #expect(stats.accepted == 2)
    #expect(stats.rejected[.invalidCharacter] == 1)
  }

  @Test("10 KB lines and endless lines are rejected with bounded memory")
  func longLines() {
    let good = sentence("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
    let long = "$GPGGA," + String(repeating: "1", count: 10_000) + "\r\n"
    let (fixes, stats) = decode(long + good + long)
    #expect(fixes.count == 1)
    #expect(stats.rejected[.tooLong] == 2)

    // 64 MiB without a single line end, fed in chunks: the framer keeps at most one line.
    var framer = NMEAFramer()
    let chunk = [UInt8](repeating: 0x41, count: 1 << 16)
    var rejected = 0
    chunk.withUnsafeBytes { raw in
      framer.feed(UnsafeRawBufferPointer(rebasing: raw[0..<1])) { _ in }
      var dollar: [UInt8] = [0x24]
      dollar.withUnsafeMutableBytes { d in framer.feed(UnsafeRawBufferPointer(d)) { _ in } }
      for _ in 0..<1024 {
        framer.feed(raw) { event in
          if case .rejected(.tooLong) = event { rejected += 1 }
        }
      }
    }
    #expect(rejected == 1)
    #expect(framer.bufferedByteCount <= NMEAFramer.maximumLineLength)
  }

  @Test("the same stream in chunks of 1, 2, 7, 82 and 4096 bytes gives the same fixes")
  func dripFeed() throws {
    for (name, bytes) in Self.fixtures() {
      let (reference, referenceStats) = decode(bytes)
      for size in [1, 2, 7, 82, 4096] {
        let (fixes, stats) = decode(bytes, chunkSize: size)
        #expect(fixes == reference, "\(name) in chunks of \(size)")
        #expect(stats == referenceStats, "\(name) in chunks of \(size)")
      }
    }
  }

  @Test("LF, CR LF and lone CR line ends all frame")
  func lineEnds() {
    let body = "GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"
    let crlf = sentence(body)
    let lf = crlf.replacingOccurrences(of: "\r\n", with: "\n")
    let cr = crlf.replacingOccurrences(of: "\r\n", with: "\r")
    // "\r\n" is one Character: dropLast(1) removes the whole line end.
    for text in [crlf, lf, cr, String(crlf.dropLast(1))] {
      let (fixes, stats) = decode(text)
      #expect(fixes.count == 1)
      #expect(stats.accepted == 1)
    }
  }
}
