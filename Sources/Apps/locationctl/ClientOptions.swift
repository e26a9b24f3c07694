import Glibc
import LocationClient
import LocationProtocol
import SystemIO

/// Options shared by every client subcommand.
struct ClientOptions {
  /// The daemon's socket (`--socket`, else `$LOCATIOND_SOCKET`, else the default path).
  var socketPath: String
  /// Whether to print one JSON object per line instead of text (`--json`).
  var json = false
  /// Seconds to wait for the daemon to accept the connection and to answer each request
  /// (`--timeout`, default 30); `nil` waits without limit (`--timeout 0`). Events that `watch`
  /// waits for are not bounded by it.
  var timeout: Double? = 30
}

/// A usage error: the message says what to do; exit status 64.
struct UsageError: Error {
  var message: String
  init(_ message: String) { self.message = message }
}

let usageText = """
  usage: locationctl [--socket PATH] [--json] [--timeout S] COMMAND [ARGUMENTS]

  commands:
    request                       ask for authorization (root or the locationd group)
    start [--distance-filter M] [--min-interval S] [--accuracy M]
                                  start location updates
    stop                          stop location updates
    status                        authorization, what tracks for your user and why (start,
                                  watches on any connection), whether the backend runs,
                                  backend state, initial and current location
    location [--wait S]           initial and current location; --wait: a fix on request: tracks
                                  until the first fix, prints it and stops (exit 1 after S seconds
                                  without one)
    watch [--every]               track on this connection and print events until interrupted or
                                  locationd stops (exit 0); as text, map changes only when what
                                  the map shows changed (--every: every fix, never coalesced
                                  when the terminal is slow)
    center [LAT LON]              center the map on the current location, or on LAT LON
                                  (LAT LON turns follow or followWithHeading to none)
    zoom LEVEL                    set the map zoom level (0...22; turns following to none)
    mode none|follow|followWithHeading
                                  set the map's user-tracking mode
    annotate ID LAT LON [TITLE] [--subtitle TEXT] [--kind KIND]
                                  add or replace an annotation
    remove ID                     remove an annotation
    map [--geojson|--svg]         print the map state (JSON by default)
    replay pause|resume|seek SECONDS|speed FACTOR|step [EPOCHS]
                                  control a replay backend
    region add ID circle LAT LON RADIUS|add ID polygon FILE.geojson|-|remove ID|
           list [--after ID] [--limit N]|state ID
                                  monitor regions: add (or replace) a circle (metres) or a
                                  GeoJSON polygon (- reads standard input), with [--dwell S]
                                  [--title T] [--no-entry] [--no-exit]; watch prints REGION
                                  enter, exit and dwell events
    web                           print the map page's URL with its token (locationd --http)
    track export [--since TIME] [--until TIME] [--format gpx|geojson|csv] [--gap S]
                 [--source live|simulated|all] [--state-dir DIR|--store FILE] [FILE|-]
                                  the recorded track (TIME: ISO 8601 or Unix seconds; --gap: new
                                  segment after S seconds without a fix, default 300); GPX carries
                                  speed and course in Garmin's TrackPointExtension v2
    track stats [--since TIME] [--until TIME] [--source live|simulated|all]
                [--state-dir DIR|--store FILE]
                                  points, geodesic distance, duration, first and last time
    track clear [--state-dir DIR|--store FILE]
                                  delete the recorded fixes
                                  (every track command reads the store file, no daemon needed:
                                  --store FILE, else DIR/track.sqlite with DIR from --state-dir,
                                  $LOCATIOND_STATE_DIR or /var/lib/locationd)
    decode [--sky] [--rollover-floor DATE] [FILE|-]
                                  decode NMEA 0183 into gpsd TPV (and SKY) lines (no daemon needed)
    simulate --pty PATH [--rate HZ] [--backend URI]
                                  simulated GPS hardware: NMEA 0183 on a pty for gpsd

  options:
    --socket PATH   locationd's socket (default $LOCATIOND_SOCKET or /run/locationd/locationd.sock)
    --json          print one JSON object per line
    --timeout S     seconds to wait for locationd to accept and answer each request
                    (default 30; 0 waits for ever); events of watch are not bounded
    --              end of options: what follows are operands (center -- -33.9 151.2)
  COMMAND --help prints that command's usage.
  exit status: 0 success, 1 error reply or daemon unreachable, 64 bad usage (also
  arguments too long for one request), 66 a polygon file that cannot be read

  """

/// Runs the subcommand named by `arguments` and returns the exit status.
func dispatch(_ arguments: [String]) -> Int32 {
  var options = ClientOptions(
    socketPath: getenv("LOCATIOND_SOCKET").map { String(cString: $0) }
      ?? ServiceSocket.defaultPath)
  var rest: [String] = []
  var command: String?
  var scanner = ArgumentScanner(arguments)
  // The value of the global option just read (OptionValue's rule, its message on failure).
  func value() throws -> String {
    do { return try scanner.value() } catch { throw UsageError(error.description) }
  }
  do {
    // Global options may come before or after the command name (not after `decode`); after the
    // command, `--` ends the options (POSIX utility syntax guideline 10). Every word the
    // command takes is handed to it as written.
    while let word = scanner.next() {
      let written = scanner.lastWord ?? ""
      switch word {
      case .endOfOptions where command != nil:
        rest.append(written)
        rest += scanner.rest()
      case .option("--json") where !scanner.hasJoinedValue: options.json = true
      case .option("--timeout"): options.timeout = try parseTimeout(try value())
      case .option("--socket"):
        options.socketPath = try value()
        guard !options.socketPath.isEmpty else { throw UsageError("--socket needs a path") }
      case .option("--help") where scanner.hasJoinedValue:
        guard command != nil else { throw UsageError("unknown option \(written)") }
        rest.append(written)
      case .operand("-h"), .operand("help"), .option("--help"):
        if command == nil {
          print(usageText, terminator: "")
          return ExitCode.success.rawValue
        }
        rest.append(written)
      case .operand(let operand) where command == nil && !operand.hasPrefix("-"):
        command = operand
        if operand == "decode" { rest = scanner.rest() }
      case .operand, .option, .endOfOptions:
        guard command != nil else { throw UsageError("unknown option \(written)") }
        rest.append(written)
      }
    }
    guard let command else { throw UsageError("give a command, e.g. locationctl status") }
    if command == "decode" { return runDecode(arguments: rest) }
    if command == "simulate" { return runSimulate(arguments: rest) }
    guard let run = clientCommands[command] else {
      throw UsageError("unknown command \(command)")
    }
    let beforeOperands = rest.prefix { $0 != "--" }
    if beforeOperands.contains("-h") || beforeOperands.contains("--help") {
      print(commandUsage(command), terminator: "")
      return ExitCode.success.rawValue
    }
    // Commands with options of their own (ArgumentList) see `--`; the others take operands only.
    if !commandsWithOptions.contains(command), let end = rest.firstIndex(of: "--") {
      rest.remove(at: end)
    }
    return try run(rest, options)
  } catch let error as UsageError {
    writeError("locationctl: \(error.message)")
    writeError("Run locationctl --help for usage.")
    return ExitCode.usage.rawValue
  } catch let error as ClientError {
    writeError("locationctl: \(error.message)")
    return error.exitCode.rawValue
  } catch let error as LocationClientError {
    writeError("locationctl: \(error.message)")
    // Arguments too long for one request line were never sent: the command line is at fault.
    return (error.code == .lineTooLong ? ExitCode.usage : ExitCode.failure).rawValue
  } catch {
    writeError("locationctl: \(error)")
    return ExitCode.failure.rawValue
  }
}

/// The value of `--timeout`: seconds in 0...86400, 0 for no limit.
///
/// - Throws: ``UsageError`` for anything else.
func parseTimeout(_ text: String) throws -> Double? {
  guard let seconds = DecimalText.number(text), (0...86_400).contains(seconds) else {
    throw UsageError("--timeout must be seconds within 0...86400 (0 waits for ever), got \(text)")
  }
  return seconds == 0 ? nil : seconds
}

/// Commands whose arguments go through ``ArgumentList`` (which understands `--` itself).
let commandsWithOptions: Set<String> = ["start", "location", "annotate", "map", "region", "track"]

/// The usage of one command: its entry in ``usageText`` with the global options.
func commandUsage(_ command: String) -> String {
  var entry: [Substring] = []
  var inEntry = false
  for line in usageText.split(separator: "\n", omittingEmptySubsequences: false) {
    // An entry starts at two spaces of indentation; its continuation lines are indented more.
    let isEntryStart = line.hasPrefix("  ") && !line.hasPrefix("   ")
    if isEntryStart {
      let name = line.dropFirst(2).prefix { $0 != " " }
      inEntry = name == command
    } else if !line.hasPrefix("   ") {
      inEntry = false
    }
    if inEntry { entry.append(line) }
  }
  // "zoom LEVEL      set the map zoom level": the synopsis, then the description lines.
  var lines: [String] = []
  for (number, line) in entry.enumerated() {
    let text = line.drop { $0 == " " }
    if number == 0, let gap = text.firstRange(of: "   ") {
      lines.append("usage: locationctl [--socket PATH] [--json] [--timeout S] " + text[..<gap.lowerBound])
      lines.append("  " + text[gap.upperBound...].drop { $0 == " " })
    } else if number == 0 {
      lines.append("usage: locationctl [--socket PATH] [--json] [--timeout S] " + text)
    } else {
      lines.append("  " + text)
    }
  }
  return lines.joined(separator: "\n") + "\n"
}

/// Flushes standard output. When its reader has gone (`EPIPE`: `locationctl watch | head -1`),
/// ends the program as `SIGPIPE` ends `cat`: a watch would otherwise go on with nobody reading,
/// and the pipeline would never end. Any other lost output (`ENOSPC`: `watch > log` on a full
/// disk, `status > /dev/full`) ends it with a message and status 1, never 0.
func flushOutput() {
  let code = StandardOutput.flush()
  guard code != 0 else { return }
  if code == EPIPE { endForBrokenPipe() }
  writeError("locationctl: cannot write the output: \(String(cString: strerror(code)))")
  exit(ExitCode.failure.rawValue)
}

/// Writes `bytes` to standard output: a reader that has gone ends the program as ``flushOutput()``
/// does.
///
/// - Throws: ``ClientError`` naming any other write error (`ENOSPC` on a full disk).
func writeOutput(_ bytes: [UInt8]) throws(ClientError) {
  do throws(SystemError) { try SystemIO.writeAll(1, bytes) } catch {
    if error.code == EPIPE { endForBrokenPipe() }
    throw ClientError("cannot write the output: \(error)")
  }
}

/// Ends the program by `SIGPIPE`, without a message (locationctl ignores the signal so that a
/// daemon that closes its socket gives an error instead of a silent death). Its status is what
/// shells show for `yes | head -1`: 141.
func endForBrokenPipe() -> Never {
  signal(SIGPIPE, SIG_DFL)
  raise(SIGPIPE)
  _exit(128 + SIGPIPE)
}

/// Writes a line to standard error, with ``terminalSafe(_:)`` applied: every error locationctl
/// prints (its own, and the daemon's messages, which may quote what a client sent) goes through
/// here, so none can move the cursor, recolour the terminal, forge a line or reorder text.
func writeError(_ message: String) {
  try? SystemIO.writeAll(2, terminalSafe(message) + "\n")
}

/// `text` with every character a terminal would act on instead of show written as an escape:
/// C0 controls (U+0000-U+001F, including newline and tab), DEL and the C1 controls (U+007F-U+009F)
/// as `\xHH`; the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E,
/// U+2066-U+2069: Unicode UAX #9) and the line and paragraph separators (U+2028, U+2029) as
/// `\u{HHHH}`. A backslash stays as it is. Other text, non-ASCII letters included, is unchanged.
func terminalSafe(_ text: String) -> String {
  func hex(_ value: UInt32, _ digits: Int) -> String {
    let string = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, digits - string.count)) + string
  }
  var result = ""
  result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
  for scalar in text.unicodeScalars {
    let value = scalar.value
    switch value {
    case 0x00...0x1F, 0x7F...0x9F:
      result += "\\x" + hex(value, 2)
    case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029:
      result += "\\u{" + hex(value, 4) + "}"
    default:
      result.unicodeScalars.append(scalar)
    }
  }
  return result
}

/// Splits `--name VALUE` options from positional arguments.
struct ArgumentList {
  var positional: [String] = []
  var values: [String: String] = [:]
  var flags: Set<String> = []

  /// - Parameters:
  ///   - valued: option names that take a value (`--distance-filter`).
  ///   - flags: option names without a value (`--svg`).
  /// - Throws: ``UsageError`` for unknown options or a missing value.
  init(_ arguments: [String], valued: Set<String> = [], flags allowedFlags: Set<String> = []) throws
  {
    let parsed: ArgumentScanner.Parsed
    do {
      parsed = try ArgumentScanner.parse(arguments, valued: valued, flags: allowedFlags)
    } catch {
      switch error {
      case .unknownOption(let written), .unexpectedValue(_, let written):
        throw UsageError("unknown option \(written)")
      case .missingValue, .optionAsValue:
        throw UsageError(error.description)
      }
    }
    positional = parsed.operands
    values = parsed.values
    flags = parsed.flags
  }

  /// The value of a numeric option, or `nil` when absent.
  ///
  /// - Throws: ``UsageError`` when the value is not a finite number.
  func number(_ name: String) throws -> Double? {
    guard let text = values[name] else { return nil }
    guard let value = DecimalText.number(text) else {
      throw UsageError("\(name) needs a number, got \(text)")
    }
    return value
  }
}

/// Parses a positional number argument.
///
/// - Throws: ``UsageError`` naming the argument.
func parseNumber(_ text: String, _ name: String) throws -> Double {
  guard let value = DecimalText.number(text) else {
    throw UsageError("\(name) must be a number, got \(text)")
  }
  return value
}

/// A failure of locationctl's own work (a file to read or write, a track store): its message
/// says what to do. Failures talking to locationd are ``LocationClientError``s.
struct ClientError: Error {
  var message: String
  /// The exit status: 1 by default; 66 (`noInput`) for a file named on the command line that
  /// cannot be read.
  var exitCode: ExitCode
  init(_ message: String, exitCode: ExitCode = .failure) {
    self.message = message
    self.exitCode = exitCode
  }
}
