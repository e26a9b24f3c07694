import Foundation
import LocationCore
import LocationTestKit
import NMEA
import Testing
import LocationModel

/// Writes `lines` (CR LF added where missing) to a temporary log, replays it at speed 0 to its
/// end, and returns the latitude of each location (NaN without one) and the warnings it sent.
func replayToEnd(_ lines: [String], name: String, unterminated last: String? = nil) async throws
  -> (latitudes: [Double], warnings: [String])
{
  let path = "/tmp/locationd-\(name)-\(getpid()).nmea"
  // `last`, when given, ends the log without a line end (a log cut off mid-sentence).
  let text = lines.map { $0.hasSuffix("\r\n") ? $0 : $0 + "\r\n" }.joined() + (last ?? "")
  #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
  defer { try? FileManager.default.removeItem(atPath: path) }
  let replay = ReplayBackend(
    source: NMEAFileSource(path: path), options: .init(path: path, speed: 0),
    clock: VirtualClock(), uri: "replay:\(path)")
  var events = replay.events.makeAsyncIterator()
  try await replay.start()
  var warnings: [String] = []
  var latitudes: [Double] = []
  loop: while let event = await events.next() {
    switch event {
    case .location(let location): latitudes.append(location.coordinate?.latitude ?? .nan)
    case .error(let message): warnings.append(message.replacingOccurrences(of: path, with: "LOG"))
    case .status(.endOfData, _): break loop
    default: continue
    }
  }
  await replay.stop()
  return (latitudes, warnings)
}

/// A log with sentences too short for their formatter among valid epochs: the replay skips and
/// reports them and delivers every epoch.
@Suite(.timeLimit(.minutes(3)))
struct ReplayShortSentenceTests {
  @Test func shortSentencesAmongValidEpochsAreSkippedAndEveryFixArrives() async throws {
    let encoder = NMEAEncoder()
    let short = ["$GPGSA", "$GPGSA*42", "$GNGSA", "$GPGGA,120000", "$GPRMC,,V", "$GPGSV,1"]
    var lines: [String] = []
    for epoch in 0..<20 {
      lines += encoder.encode(TestRoute.fix(epoch * 10))
      lines.append(short[epoch % short.count])
    }
    let (latitudes, warnings) = try await replayToEnd(lines, name: "short-sentences")
    let expected = (0..<20).map { TestRoute.fix($0 * 10).coordinate?.latitude ?? .nan }
    #expect(latitudes.count == 20)
    for (got, want) in zip(latitudes, expected) { #expect(abs(got - want) < 1e-6) }
    let warning = warnings.joined(separator: "; ")
    #expect(warning.contains("20 sentences rejected and skipped"), "\(warning)")
    // The short lines without '*' come from a source that sends checksums: they are counted by
    // their missing checksum, which is checked before the fields; "$GPGSA*42" is too short.
    #expect(warning.contains("missingChecksum=16 tooFewFields=4"), "\(warning)")
  }
}

/// Only regular files are replayed: a FIFO without a writer must not hold up the start (and every
/// client's start behind it), and a device has no end.
@Suite(.timeLimit(.minutes(3)))
struct ReplayInputKindTests {
  @Test func aFIFOOrADeviceIsRefusedAtOnceInsteadOfWaitedOn() throws {
    let fifo = "/tmp/locationd-replay-fifo-\(getpid())"
    unlink(fifo)
    #expect(mkfifo(fifo, 0o600) == 0)
    defer { unlink(fifo) }
    for path in [fifo, "/dev/zero", "/dev/null"] {
      #expect(throws: ReplayError.cannotOpen(
        path: path, errno: EINVAL, message: "not a regular file (replay reads NMEA log files)")
      ) {
        _ = try NMEAFileSource(path: path).open()
      }
    }
  }
}
