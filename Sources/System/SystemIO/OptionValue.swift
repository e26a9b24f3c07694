/// The one rule locationd and locationctl apply to an option's value on the command line.
///
/// A value is written `--name VALUE` or `--name=VALUE`. A separate word that starts with `--`
/// is never taken as a value: `--group --backend X` means that `--group` lacks its value, not
/// that the group is called `--backend` (and `X` an unknown option). A value that really starts
/// with `--` is written joined: `--group=--x`. Other values that start with one `-` (a negative
/// number, `-` for standard input) are values as usual.
public enum OptionValue {
  /// Why the word after an option cannot be its value.
  public enum Problem: Error, Sendable, Hashable, CustomStringConvertible {
    /// Nothing follows the option.
    case missing(option: String)
    /// The next word starts with `--`: it is an option (or `--`, the end of options).
    case looksLikeOption(option: String, next: String)

    /// A sentence that says what to write instead.
    public var description: String {
      switch self {
      case .missing(let option):
        return "option \(option) needs a value"
      case .looksLikeOption(let option, let next):
        return
          "option \(option) needs a value, but \(next) follows it; write \(option)=\(next) for a value that starts with --"
      }
    }
  }

  /// Splits `--name=value` into `("--name", "value")`; `nil` for a word without `=`.
  public static func joined(_ word: String) -> (name: String, value: String)? {
    guard let equals = word.firstIndex(of: "=") else { return nil }
    return (String(word[..<equals]), String(word[word.index(after: equals)...]))
  }

  /// The value written after `option` at `arguments[index]`, when it may be one.
  ///
  /// - Parameters:
  ///   - option: the option as written (`--group`), for the message.
  ///   - arguments: the command line; `index` may be past its end.
  /// - Throws: ``Problem/missing(option:)`` when nothing follows,
  ///   ``Problem/looksLikeOption(option:next:)`` when the next word starts with `--`.
  public static func separate(_ option: String, in arguments: [String], at index: Int)
    throws(Problem) -> String
  {
    guard arguments.indices.contains(index) else { throw .missing(option: option) }
    let next = arguments[index]
    guard !next.hasPrefix("--") else { throw .looksLikeOption(option: option, next: next) }
    return next
  }
}
