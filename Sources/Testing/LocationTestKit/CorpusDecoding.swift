import Foundation
import NMEA
import LocationModel

extension NMEACorpus {
  /// Paths of the corpus logs (``logs()`` as file-system paths).
  public static var logPaths: [String] { logs().map(\.path) }

  /// Decodes the file at `path` with ``NMEADecoder`` in one pass: the fixes `locationctl decode`
  /// prints, one TPV per fix, with their line numbers.
  ///
  /// - Throws: the `Data(contentsOf:)` error when the file cannot be read.
  public static func decode(path: String) throws -> [DecodedFix] {
    try decodeWithStatistics(path: path).fixes
  }

  /// ``decode(path:)`` with the decoder's counters (rejected sentences by reason, ...).
  public static func decodeWithStatistics(path: String) throws
    -> (fixes: [DecodedFix], statistics: NMEAStatistics)
  {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    var decoder = NMEADecoder()
    var fixes: [DecodedFix] = []
    data.withUnsafeBytes { raw in decoder.feed(raw) { fixes.append($0) } }
    decoder.finish { fixes.append($0) }
    return (fixes, decoder.statistics)
  }
}
