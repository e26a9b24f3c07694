#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import FoundationEssentials
import NMEA

/// The shared NMEA 0183 corpus (`../shared/nmea` relative to the package root), never copied into
/// the repository.
public enum NMEACorpus {
  /// The corpus directory, found by walking up from `filePath` to the directory holding
  /// `Package.swift`; `nil` when the package root cannot be found.
  public static func directory(filePath: String = #filePath) -> String? {
    var url = URL(fileURLWithPath: filePath).deletingLastPathComponent()
    while url.path != "/" && !url.path.isEmpty {
      if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
        return url.deletingLastPathComponent().appendingPathComponent("shared/nmea").path
      }
      url = url.deletingLastPathComponent()
    }
    return nil
  }

  /// Whether `CI=true` is set: then a missing corpus is a failure, not a skip.
  public static var isRequired: Bool {
    ProcessInfo.processInfo.environment["CI"] == "true"
  }

  /// Paths of the corpus logs (every file but `*.chk` checksums and `*.md` notes), sorted;
  /// empty when the corpus is missing.
  public static func logs(filePath: String = #filePath) -> [String] {
    guard let directory = directory(filePath: filePath),
      let names = try? FileManager.default.contentsOfDirectory(atPath: directory)
    else { return [] }
    return names.filter { !$0.hasSuffix(".chk") && !$0.hasSuffix(".md") && !$0.hasPrefix(".") }
      .sorted().map { directory + "/" + $0 }
  }

  /// Decodes the file at `path` with ``NMEADecoder`` in one pass (what `locationctl decode`
  /// prints, one TPV per fix).
  ///
  /// - Throws: `CocoaError` when the file cannot be read.
  public static func decode(path: String) throws -> [DecodedFix] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    var decoder = NMEADecoder()
    var fixes: [DecodedFix] = []
    data.withUnsafeBytes { raw in decoder.feed(raw) { fixes.append($0) } }
    decoder.finish { fixes.append($0) }
    return fixes
  }
}
