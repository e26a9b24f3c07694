/// The fuzz targets: each feeds one input of arbitrary bytes through one input path of the
/// daemon and checks the invariants that path promises, not only that it returns.
///
/// The libFuzzer driver (`Fuzz/main.swift`, built by `scripts/fuzz`) calls ``check(_:)`` for
/// every generated input and aborts on a ``FuzzFailure``; the unit tests replay the committed
/// corpus (`Tests/FuzzCorpus/<target>/`) through the same function.
public enum FuzzTarget: String, Sendable, CaseIterable {
  /// NMEA 0183 byte stream: framing, parsing, epoch assembly, gpsd TPV/SKY writing.
  case nmea
  /// Request lines of the socket protocol: line splitting, JSON parsing, command decoding and
  /// the reply written for each line.
  case request
  /// GPX route files read through libxml2.
  case gpx
  /// The config file, backend URIs and the daemon's command line.
  case config
  /// The map-state file loaded at start.
  case mapstate
  /// The regions file (`regions.json`) loaded at start.
  case regions
  /// Another device's OwnTracks payload on the fleet view's subscription.
  case owntracks

  /// Runs one input through the target.
  ///
  /// - Parameter bytes: any bytes (libFuzzer keeps them under a few KiB by default).
  /// - Throws: ``FuzzFailure`` naming the invariant the input broke.
  public func check(_ bytes: [UInt8]) throws(FuzzFailure) {
    switch self {
    case .nmea: try NMEAHarness.check(bytes)
    case .request: try RequestHarness.check(bytes)
    case .gpx: try GPXHarness.check(bytes)
    case .config: try ConfigHarness.check(bytes)
    case .mapstate: try MapStateHarness.check(bytes)
    case .regions: try RegionsHarness.check(bytes)
    case .owntracks: try OwnTracksHarness.check(bytes)
    }
  }
}

/// An invariant a fuzz target found broken: which one, and the values that broke it.
public struct FuzzFailure: Error, Sendable, CustomStringConvertible {
  /// One line: the invariant and the offending values.
  public var description: String

  /// Creates a failure.
  public init(_ description: String) { self.description = description }
}

/// Throws a ``FuzzFailure`` with `message` unless `condition` holds.
@inline(__always)
func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzFailure) {
  if !condition { throw FuzzFailure(message()) }
}

extension Array where Element == UInt8 {
  /// The bytes as text for failure messages: printable ASCII kept, others as `\xNN`, at most
  /// 300 bytes.
  var escaped: String {
    var text = ""
    for b in prefix(300) {
      if b >= 0x20 && b < 0x7F && b != 0x5C {
        text.unicodeScalars.append(UnicodeScalar(b))
      } else {
        let hex = String(b, radix: 16)
        text += "\\x" + (hex.count == 1 ? "0" + hex : hex)
      }
    }
    return count > 300 ? text + "..." : text
  }
}

extension String {
  /// Whether `needle` occurs in the string as a run of the same UTF-8 bytes.
  ///
  /// The harnesses look for ASCII words in log lines and inputs; `contains(_:)` does that through
  /// the generic Character search of _StringProcessing, which took a sixth of the regions
  /// target's time. For ASCII needles the answers differ only where a combining mark follows the
  /// match in the text (a byte match, not a Character match).
  func containsBytes(_ needle: String) -> Bool {
    let text = Array(utf8)
    let word = Array(needle.utf8)
    guard let first = word.first else { return true }
    guard word.count <= text.count else { return false }
    var start = 0
    while start <= text.count - word.count {
      if text[start] == first && text[start..<(start + word.count)].elementsEqual(word) { return true }
      start += 1
    }
    return false
  }
}
