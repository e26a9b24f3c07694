/// The one scanner of command lines that locationd, locationctl and the benchmark programs use.
///
/// It reads the words of a command line (without the program name) one at a time and tells
/// options, operands and the end of options apart; the program decides which options it knows
/// and which of them take a value, and words its own messages (usage, exit status) from the
/// scanner's ``Failure``s. The rules (POSIX utility syntax guidelines, GNU long options):
/// - a word that starts with `--` and has more after it is an option: `--name` or
///   `--name=value` (split at the first `=`; the value may be empty, `--name=`);
/// - `--` alone ends the options: every later word is an operand, even one that starts
///   with `--`;
/// - every other word is an operand, including `-` (standard input), a negative number and
///   short forms such as `-h` (programs that accept `-h` look for that operand themselves);
/// - an option's value is written joined (`--name=VALUE`) or as the next word, which is never
///   a word that starts with `--` (``OptionValue``): `--group --backend X` lacks a value.
///
/// Words are Swift strings: a command-line argument that is not valid UTF-8 reaches a program
/// with each bad byte replaced by U+FFFD (`CommandLine.arguments`), and is scanned as such.
/// A repeated option is returned each time it appears; ``Parsed`` keeps the last value.
public struct ArgumentScanner: Sendable {
  /// One word of the command line, as the scanner classified it.
  public enum Word: Sendable, Hashable {
    /// An option as written before any `=`, dashes included (`--socket`); its joined value, if
    /// any, is read with ``value()``.
    case option(String)
    /// An operand: a word that is not an option, or any word after `--`.
    case operand(String)
    /// `--`: the end of the options.
    case endOfOptions
  }

  /// Why a command line cannot be used; programs turn it into their own message and status.
  public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
    /// An option the program does not know: the whole word as written (`--bogus=1`, `--=`).
    case unknownOption(String)
    /// An option that needs a value has none after it.
    case missingValue(option: String)
    /// The word after an option starts with `--`, so it is not taken as its value.
    case optionAsValue(option: String, next: String)
    /// An option without a value was given one: the option and the whole word (`--json`,
    /// `--json=1`).
    case unexpectedValue(option: String, written: String)

    /// A sentence that says what is wrong and what to write instead.
    public var description: String {
      switch self {
      case .unknownOption(let option):
        return "unknown option \(option)"
      case .missingValue(let option):
        return OptionValue.Problem.missing(option: option).description
      case .optionAsValue(let option, let next):
        return OptionValue.Problem.looksLikeOption(option: option, next: next).description
      case .unexpectedValue(let option, _):
        return "option \(option) takes no value"
      }
    }
  }

  /// The words being scanned.
  public let arguments: [String]
  /// The index of the next word to read.
  public private(set) var index = 0
  private var optionsEnded = false
  /// The last option returned by ``next()`` and its joined value.
  private var current: (option: String, joined: String?)?

  /// Scans `arguments`, the command line without the program name.
  public init(_ arguments: [String]) {
    self.arguments = arguments
  }

  /// Whether every word has been read.
  public var isAtEnd: Bool { index >= arguments.count }

  /// The next word, or `nil` at the end.
  public mutating func next() -> Word? {
    guard arguments.indices.contains(index) else {
      current = nil
      lastWord = nil
      return nil
    }
    let word = arguments[index]
    index += 1
    current = nil
    lastWord = word
    if optionsEnded { return .operand(word) }
    if word == "--" {
      optionsEnded = true
      return .endOfOptions
    }
    guard word.hasPrefix("--") else { return .operand(word) }
    if let (name, value) = OptionValue.joined(word), name != "--" {
      current = (name, value)
      return .option(name)
    }
    current = (word, nil)
    return .option(word)
  }

  /// The value of the option ``next()`` just returned: its joined value, else the next word
  /// (which is then consumed).
  ///
  /// - Throws: ``Failure/missingValue(option:)`` when nothing follows (or no option was just
  ///   read), ``Failure/optionAsValue(option:next:)`` when the next word starts with `--`.
  public mutating func value() throws(Failure) -> String {
    guard let current else { throw .missingValue(option: "") }
    if let joined = current.joined { return joined }
    do {
      let value = try OptionValue.separate(current.option, in: arguments, at: index)
      index += 1
      self.current = (current.option, value)
      return value
    } catch {
      switch error {
      case .missing(let option): throw .missingValue(option: option)
      case .looksLikeOption(let option, let next): throw .optionAsValue(option: option, next: next)
      }
    }
  }

  /// Checks that the option ``next()`` just returned was written without a value.
  ///
  /// - Throws: ``Failure/unexpectedValue(option:written:)`` for `--flag=...`.
  public func noValue() throws(Failure) {
    if let current, let joined = current.joined {
      throw .unexpectedValue(option: current.option, written: current.option + "=" + joined)
    }
  }

  /// The word ``next()`` just returned, as written (`--name=value` whole).
  public private(set) var lastWord: String?

  /// Whether the option ``next()`` just returned carries a joined value (`--name=value`).
  public var hasJoinedValue: Bool { current?.joined != nil }

  /// Every word not read yet, consumed; an operand list, for a program that hands the rest of
  /// its command line to a subcommand.
  public mutating func rest() -> [String] {
    let words = Array(arguments[min(index, arguments.count)...])
    index = arguments.count
    current = nil
    lastWord = nil
    return words
  }

  /// A whole command line scanned against the options a program knows.
  public struct Parsed: Sendable, Hashable {
    /// The value of each option that takes one, by name as written (`--socket`); the last
    /// value when an option is repeated.
    public var values: [String: String] = [:]
    /// The options without a value that were given.
    public var flags: Set<String> = []
    /// Every option in command-line order with its value (`nil` for a flag), repeats included.
    public var options: [Option] = []
    /// The operands in order, those after `--` included (the `--` itself is not).
    public var operands: [String] = []
    /// Whether `--` was given.
    public var endedOptions = false

    /// One option as given.
    public struct Option: Sendable, Hashable {
      /// The name as written, dashes included.
      public var name: String
      /// The value; `nil` for a flag.
      public var value: String?
    }
  }

  /// Scans a whole command line: options named in `valued` take a value, those in `flags` none.
  ///
  /// - Parameters:
  ///   - arguments: the command line without the program name.
  ///   - valued: options that take a value, dashes included (`["--socket"]`).
  ///   - flags: options without a value (`["--json"]`).
  /// - Throws: ``Failure``: the first unknown option, missing value or unexpected value, in
  ///   command-line order.
  public static func parse(_ arguments: [String], valued: Set<String> = [], flags: Set<String> = [])
    throws(Failure) -> Parsed
  {
    var scanner = ArgumentScanner(arguments)
    var parsed = Parsed()
    while let word = scanner.next() {
      switch word {
      case .endOfOptions:
        parsed.endedOptions = true
      case .operand(let operand):
        parsed.operands.append(operand)
      case .option(let name) where valued.contains(name):
        let value = try scanner.value()
        parsed.values[name] = value
        parsed.options.append(.init(name: name, value: value))
      case .option(let name) where flags.contains(name):
        try scanner.noValue()
        parsed.flags.insert(name)
        parsed.options.append(.init(name: name, value: nil))
      case .option(let name):
        throw .unknownOption(scanner.lastWord ?? name)
      }
    }
    return parsed
  }
}
