import Foundation

/// The shared corpus of real NMEA 0183 receiver logs (`../shared/nmea` beside the package).
///
/// Tests read the logs in place; they are never copied into the package. When the corpus is
/// missing, ``isRequired`` (set when the environment has `CI=true`) makes that a failure;
/// elsewhere tests that need it are skipped with ``missingMessage``.
public enum NMEACorpus {
  /// The package's root directory, derived from this file's path.
  public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

  /// `../shared/nmea` relative to the package root.
  public static let directory: URL = packageRoot.deletingLastPathComponent()
    .appendingPathComponent("shared").appendingPathComponent("nmea")

  /// Whether the corpus directory exists.
  public static var isAvailable: Bool {
    var isDirectory: ObjCBool = false
    return FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) && isDirectory.boolValue
  }

  /// Whether a missing corpus must fail the run (`CI=true`).
  public static var isRequired: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

  /// The message printed when corpus tests are skipped.
  public static var missingMessage: String {
    "NMEA corpus not found at \(directory.path): corpus tests skipped"
  }

  /// Every log file (`*.log`, `*.txt`; not `*.chk` nor `SOURCES.md`), sorted by name.
  public static func logs() -> [URL] {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
    return names.filter { ($0.hasSuffix(".log") || $0.hasSuffix(".txt")) }
      .sorted().map { directory.appendingPathComponent($0) }
  }

  /// The logs that have gpsd's decoded output (`LOG.chk`) beside them.
  public static func logsWithGPSDOutput() -> [URL] {
    logs().filter { FileManager.default.fileExists(atPath: $0.path + ".chk") }
  }

  /// The logs without gpsd's output.
  public static func logsWithoutGPSDOutput() -> [URL] {
    logs().filter { !FileManager.default.fileExists(atPath: $0.path + ".chk") }
  }
}

/// Locates the package's built executables (`locationd`, `locationctl`) for tests that run them.
public enum BuiltProducts {
  /// The directory holding the test binary, which SwiftPM shares with the executables.
  public static var directory: URL {
    let argv0 = URL(fileURLWithPath: CommandLine.arguments.first ?? "")
    var candidates: [URL] = [argv0.deletingLastPathComponent()]
    // An .xctest bundle may sit one or more levels below the products directory.
    var url = argv0
    for _ in 0..<4 {
      url = url.deletingLastPathComponent()
      candidates.append(url)
    }
    candidates.append(NMEACorpus.packageRoot.appendingPathComponent(".build/debug"))
    for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.appendingPathComponent("locationctl").path) {
      return candidate
    }
    return NMEACorpus.packageRoot.appendingPathComponent(".build/debug")
  }

  /// The path of a built executable product.
  public static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}

/// gpsd 3.22's own NMEA regression logs with their expected output (`../shared/gpsd-regress`
/// beside the package; `test/daemon/` in gpsd's source).
///
/// Read in place, never copied into the package. As for ``NMEACorpus``, a missing directory is a
/// failure when the environment has `CI=true` and a skip elsewhere.
public enum GPSDRegressionCorpus {
  /// `../shared/gpsd-regress` relative to the package root, or the directory that the
  /// environment's `LOCATIOND_GPSD_REGRESS` names (another gpsd's `test/daemon/`, for instance,
  /// with the `.chk` files of that gpsd).
  public static let directory: URL = {
    if let other = ProcessInfo.processInfo.environment["LOCATIOND_GPSD_REGRESS"], !other.isEmpty {
      return URL(fileURLWithPath: other, isDirectory: true)
    }
    return NMEACorpus.packageRoot.deletingLastPathComponent()
      .appendingPathComponent("shared").appendingPathComponent("gpsd-regress")
  }()

  /// Whether the directory exists.
  public static var isAvailable: Bool {
    var isDirectory: ObjCBool = false
    return FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) && isDirectory.boolValue
  }

  /// The message printed when the suite is skipped.
  public static var missingMessage: String {
    "gpsd regression logs not found at \(directory.path): their comparison is skipped"
  }

  /// Every `*.log` that has gpsd's expected output (`LOG.chk`) beside it, sorted by name.
  public static func logsWithGPSDOutput() -> [URL] {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
    return names.filter { $0.hasSuffix(".log") }.sorted().map { directory.appendingPathComponent($0) }
      .filter { FileManager.default.fileExists(atPath: $0.path + ".chk") }
  }
}
