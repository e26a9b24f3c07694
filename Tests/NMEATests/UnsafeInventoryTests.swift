import Foundation
import Testing

/// docs/unsafe-code.md lists every site in Sources/ and Benchmarks/ that uses an unsafe pointer or
/// buffer, with the invariant that keeps it in bounds. A site added without a row (or a row left
/// for a site removed) fails here, so that the list cannot silently go stale.
@Suite("Unsafe-code inventory")
struct UnsafeInventoryTests {
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  /// The same pattern as scripts/unsafe-sites.
  static let pattern = try? NSRegularExpression(
    pattern: #"Unsafe[A-Za-z]*Pointer|withUnsafe|assumingMemoryBound|bindMemory|loadUnaligned|\.pointee|fromOpaque|OpaquePointer"#)

  /// Number of sites per file, keyed by the path below Sources/ ("Model/NMEA/Parser.swift") or
  /// Benchmarks/ ("BenchKit/Sockets.swift").
  static func sites() throws -> [String: Int] {
    let pattern = try #require(pattern)
    var counts: [String: Int] = [:]
    for sources in ["Sources", "Benchmarks"].map({ root.appendingPathComponent($0) }) {
      let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
      while let url = files?.nextObject() as? URL {
        guard url.pathExtension == "swift" else { continue }
        let text = try String(contentsOf: url, encoding: .utf8)
        let relative = String(url.path.dropFirst(sources.path.count + 1))
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
          if line.drop(while: { $0 == " " || $0 == "\t" }).hasPrefix("//") { continue }
          let string = String(line)
          if pattern.firstMatch(in: string, range: NSRange(string.startIndex..., in: string)) != nil {
            counts[relative, default: 0] += 1
          }
        }
      }
    }
    return counts
  }

  /// Lines listed per file in the document's tables: the first cell, `FILE:L1, L2, ...`.
  static func listed() throws -> [String: Int] {
    let text = try String(contentsOf: root.appendingPathComponent("docs/unsafe-code.md"), encoding: .utf8)
    var counts: [String: Int] = [:]
    for line in text.split(separator: "\n") where line.hasPrefix("| ") {
      let cell = line.dropFirst(2).prefix { $0 != "|" }.trimmingCharacters(in: .whitespaces)
      guard let colon = cell.firstIndex(of: ":"), cell[..<colon].hasSuffix(".swift") else { continue }
      let file = String(cell[..<colon])
      let lines = cell[cell.index(after: colon)...].split(separator: ",")
      counts[file, default: 0] += lines.count
    }
    return counts
  }

  @Test("every file's unsafe sites are listed in docs/unsafe-code.md, as many as there are")
  func inventoryMatchesSources() throws {
    let sites = try Self.sites()
    let listed = try Self.listed()
    #expect(sites.values.reduce(0, +) > 50, "the scan found too few sites: \(sites)")
    // A row names a file by its path below Sources/ or Benchmarks/ or, inside a module's section,
    // by its name.
    var unmatched = listed
    for (path, count) in sites.sorted(by: { $0.key < $1.key }) {
      let name = String(path.split(separator: "/").last ?? "")
      let key = unmatched[path] != nil ? path : name
      let documented = unmatched.removeValue(forKey: key)
      #expect(
        documented == count,
        "\(path): \(count) unsafe sites, \(documented.map(String.init) ?? "none") listed in docs/unsafe-code.md (scripts/unsafe-sites shows them)"
      )
    }
    #expect(unmatched.isEmpty, "docs/unsafe-code.md lists files without unsafe sites: \(unmatched)")
  }
}
