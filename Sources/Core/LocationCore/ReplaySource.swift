import NMEA
import SystemIO
import LocationModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Why a replay could not read its input.
public enum ReplayError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The log file could not be opened; `errno` and its `strerror` text.
  case cannotOpen(path: String, errno: Int32, message: String)
  /// Reading the log failed part-way.
  case readFailed(path: String, errno: Int32, message: String)
  /// A control value was out of range (negative speed, fraction outside `0...1`).
  case invalidControl(String)
  /// The input cannot be read again (standard input), so it cannot loop or seek backwards.
  case notRewindable(String)
  /// A control was given while the replay is stopped (no client tracks).
  case notRunning

  /// A one-line message for logs and error replies.
  public var description: String {
    switch self {
    case .cannotOpen(let path, let code, let message):
      return "cannot open \(path): \(message) (errno \(code))"
    case .readFailed(let path, let code, let message):
      return "cannot read \(path): \(message) (errno \(code))"
    case .invalidControl(let message): return "invalid replay control: \(message)"
    case .notRewindable(let name):
      return "\(name) cannot be read again (no loop, no seeking backwards)"
    case .notRunning:
      return
        "the replay is stopped: replay controls apply while some client tracks "
        + "(locationctl start or watch)"
    }
  }
}

/// A source of decoded epochs for ``ReplayBackend``, readable from the start again and again.
public protocol ReplaySource: Sendable {
  /// The file path, or `-` for standard input; goes into ``Provenance/source``.
  var name: String { get }
  /// Whether ``open()`` may be called more than once (false for standard input).
  var isRewindable: Bool { get }
  /// Opens a new cursor at the first epoch.
  ///
  /// - Throws: ``ReplayError/cannotOpen(path:errno:message:)``.
  func open() throws(ReplayError) -> any ReplayCursor
}

/// Reads epochs one by one from a ``ReplaySource``; used by one task at a time.
public protocol ReplayCursor: AnyObject {
  /// The next epoch in input order, or `nil` at the end of the input.
  ///
  /// - Throws: ``ReplayError/readFailed(path:errno:message:)``.
  func next() throws(ReplayError) -> DecodedFix?

  /// A one-line report of the sentences rejected (bad checksum, malformed...) since the last
  /// call, or `nil` when there were none; the replay sends it to clients as a warning. The
  /// default reports nothing.
  func takeRejectionReport() -> String?
}

extension ReplayCursor {
  /// Reports nothing.
  public func takeRejectionReport() -> String? { nil }
}

/// An NMEA 0183 log file (or standard input, path `-`), decoded with ``NMEADecoder`` in 64 KiB
/// chunks; memory stays bounded whatever the log's size.
public struct NMEAFileSource: ReplaySource {
  /// The file path, or `-` for standard input.
  public let name: String
  /// The GPS week-rollover floor, days since 1970-01-01 (``NMEADecoder/init(rolloverFloor:)``);
  /// `nil` keeps dates as recorded.
  public let rolloverFloor: Int?
  /// Bytes read per `read(2)` call.
  public static let chunkSize = 64 * 1024

  /// Creates a source for `path` (`-` reads standard input), with an optional week-rollover
  /// floor in days since 1970-01-01.
  public init(path: String, rolloverFloor: Int? = nil) {
    self.name = path
    self.rolloverFloor = rolloverFloor
  }

  /// Whether the source is a file (standard input cannot be read twice).
  public var isRewindable: Bool { name != "-" }

  /// Opens the file and returns a cursor at its first epoch.
  public func open() throws(ReplayError) -> any ReplayCursor {
    if name == "-" {
      return NMEAFileCursor(fd: 0, name: "standard input", owned: false, rolloverFloor: rolloverFloor)
    }
    // O_NONBLOCK: opening a FIFO without a writer would otherwise wait, with the replay's start
    // (and every client's start) behind it. Only a regular file is replayed: a pipe or a device
    // (/dev/zero, a serial line) has no end and no times to seek in; live receivers are gpsd's.
    let fd = Glibc.open(name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else {
      let code = errno
      throw .cannotOpen(path: name, errno: code, message: String(cString: strerror(code)))
    }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
      close(fd)
      throw .cannotOpen(path: name, errno: EINVAL, message: "not a regular file (replay reads NMEA log files)")
    }
    return NMEAFileCursor(fd: fd, name: name, owned: true, rolloverFloor: rolloverFloor)
  }
}

/// Cursor over a file descriptor: reads a chunk, decodes it, hands out the epochs it completed.
final class NMEAFileCursor: ReplayCursor {
  private let fd: Int32
  private let name: String
  private let owned: Bool
  private var decoder: NMEADecoder
  private var buffer = [UInt8](repeating: 0, count: NMEAFileSource.chunkSize)
  private var pending: [DecodedFix] = []
  private var index = 0
  private var atEnd = false
  /// Rejections already reported, and the line the decoder was reading at the last report (the
  /// first line the next chunk's report can be about).
  private var reported: [NMEARejection: Int] = [:]
  private var reportedLine = 1
  private var report: String?

  init(fd: Int32, name: String, owned: Bool, rolloverFloor: Int? = nil) {
    self.decoder = NMEADecoder(rolloverFloor: rolloverFloor)
    self.fd = fd
    self.name = name
    self.owned = owned
    pending.reserveCapacity(256)
  }

  deinit {
    if owned { close(fd) }
  }

  func next() throws(ReplayError) -> DecodedFix? {
    while index >= pending.count {
      if atEnd { return nil }
      // An endless input without a single epoch (a device such as /dev/zero) must not keep a
      // stopping replay here: give up between reads once the task is cancelled.
      if Task.isCancelled { return nil }
      pending.removeAll(keepingCapacity: true)
      index = 0
      let count: Int
      do throws(SystemError) { count = try SystemIO.read(fd, into: &buffer) } catch {
        throw .readFailed(path: name, errno: error.code, message: error.description)
      }
      if count == 0 {
        atEnd = true
        decoder.finish { pending.append($0) }
      } else {
        buffer.withUnsafeBytes { raw in
          decoder.feed(UnsafeRawBufferPointer(rebasing: raw[0..<count])) { pending.append($0) }
        }
      }
      noteRejections()
    }
    defer { index += 1 }
    return pending[index]
  }

  /// Turns the rejections of the chunk just decoded into one report (at most one per chunk, so
  /// a damaged log cannot flood the clients).
  private func noteRejections() {
    let rejected = decoder.statistics.rejected
    var parts: [String] = []
    var total = 0
    for reason in NMEARejection.allCases {
      let new = (rejected[reason] ?? 0) - (reported[reason] ?? 0)
      if new > 0 {
        parts.append("\(reason.rawValue)=\(new)")
        total += new
      }
    }
    let line = decoder.lineNumber
    defer {
      reported = rejected
      reportedLine = line
    }
    guard total > 0 else { return }
    // A sentence is judged at its line end, after which the decoder reads the next line; only
    // at the end of the input was the line being read itself judged (a last line without one).
    let last = max(reportedLine, atEnd ? line : line - 1)
    let lines = last == reportedLine ? "line \(last)" : "lines \(reportedLine)-\(last)"
    let text =
      "\(name) \(lines): \(total) sentence\(total == 1 ? "" : "s") rejected and skipped ("
      + parts.joined(separator: " ") + ")"
    report = report.map { $0 + "; " + text } ?? text
  }

  func takeRejectionReport() -> String? {
    defer { report = nil }
    return report
  }
}

/// Epochs already decoded, held in memory: for tests and for benchmarking the delivery path
/// without the decoder.
public struct DecodedFixesSource: ReplaySource {
  /// A label for ``Provenance/source``.
  public let name: String
  /// The epochs, in replay order.
  public let fixes: [DecodedFix]
  /// Always true: the array can be read again.
  public var isRewindable: Bool { true }

  /// Creates a source over `fixes`, labelled `name`.
  public init(name: String, fixes: [DecodedFix]) {
    self.name = name
    self.fixes = fixes
  }

  /// Returns a cursor at the first element.
  public func open() throws(ReplayError) -> any ReplayCursor {
    ArrayCursor(fixes: fixes)
  }
}

final class ArrayCursor: ReplayCursor {
  private let fixes: [DecodedFix]
  private var index = 0

  init(fixes: [DecodedFix]) { self.fixes = fixes }

  func next() throws(ReplayError) -> DecodedFix? {
    guard index < fixes.count else { return nil }
    defer { index += 1 }
    return fixes[index]
  }
}
