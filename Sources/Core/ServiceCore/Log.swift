import Glibc
import SystemIO
import Synchronization

/// Logging to standard error, one line per event: `locationd: EVENT key=value key=value`.
///
/// systemd's journal collects standard error. Values containing spaces, quotes, `=`, control
/// characters (Unicode Cc, C1 included) or format characters (Cf, e.g. U+202E) are written in
/// double quotes with `\"`, `\\` and `\n` escaped, other control characters as `\xHH` and format
/// characters as `\u{HHHH}`, so each event stays one line, shows what it holds, and `key=value`
/// pairs can be split by a simple parser.
public enum Log {
  private static let lock = Mutex(())
  private static let prefix = Mutex("locationd")
  private static let observers = Mutex<(next: UInt64, all: [UInt64: @Sendable (String) -> Void])>((1, [:]))

  /// Sets the program name written before every event (default `locationd`).
  public static func setProgramName(_ name: String) {
    prefix.withLock { $0 = name }
  }

  /// Writes one event line. `event` is a constant camelCase name such as `clientConnected`.
  public static func event(_ event: String, _ metadata: KeyValuePairs<String, String> = [:]) {
    var line = prefix.withLock { $0 } + ": " + event
    for (key, value) in metadata {
      line += " " + key + "=" + quote(bounded(value))
    }
    let observing = observers.withLock { $0.all.isEmpty ? [] : Array($0.all.values) }
    for observer in observing { observer(line) }
    line += "\n"
    lock.withLock { _ in
      try? SystemIO.writeAll(2, line)
    }
  }

  /// Also gives every event line written from now on (as written, without the program name's
  /// prefix removed and without the newline) to `observer`, on the thread that logs it, until
  /// ``removeObserver(_:)``: for checking log lines in-process. Lines of every part of the
  /// process arrive, so an observer filters what it looks for.
  ///
  /// - Returns: the number that removes it.
  public static func addObserver(_ observer: @escaping @Sendable (String) -> Void) -> UInt64 {
    observers.withLock { observers in
      let id = observers.next
      observers.next += 1
      observers.all[id] = observer
      return id
    }
  }

  /// Stops giving lines to the observer ``addObserver(_:)`` returned `id` for.
  public static func removeObserver(_ id: UInt64) {
    _ = observers.withLock { $0.all.removeValue(forKey: id) }
  }

  /// Most bytes of UTF-8 of one value in a log line (a topic or id from outside can be 64 KiB):
  /// 1,024; a longer value is cut at a character boundary and ends with `...(N bytes)`.
  public static let maxValueBytes = 1024

  /// `value`, cut to at most ``maxValueBytes`` bytes (whole characters) with its full size.
  static func bounded(_ value: String) -> String {
    let bytes = value.utf8.count
    guard bytes > maxValueBytes else { return value }
    var kept = ""
    var used = 0
    for scalar in value.unicodeScalars {
      let size = String(scalar).utf8.count
      guard used + size <= maxValueBytes else { break }
      kept.unicodeScalars.append(scalar)
      used += size
    }
    return kept + "...(\(bytes) bytes)"
  }

  /// A value as written in an event line: bare when safe, otherwise quoted and escaped.
  public static func quote(_ value: String) -> String {
    let needsQuotes =
      value.isEmpty
      || value.utf8.contains {
        $0 <= 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "=") || $0 == 0x7F
      }
      || value.unicodeScalars.contains {
        $0.properties.generalCategory == .control || $0.properties.generalCategory == .format
      }
    guard needsQuotes else { return value }
    var result = "\""
    for scalar in value.unicodeScalars {
      switch scalar {
      case "\"": result += "\\\""
      case "\\": result += "\\\\"
      case "\n": result += "\\n"
      case "\r": result += "\\r"
      case "\t": result += "\\t"
      default:
        if scalar.properties.generalCategory == .control {
          result += "\\x" + String(scalar.value, radix: 16)
        } else if scalar.properties.generalCategory == .format {
          result += "\\u{" + String(scalar.value, radix: 16) + "}"
        } else {
          result.unicodeScalars.append(scalar)
        }
      }
    }
    return result + "\""
  }
}
