import LocationCore
import ServiceCore
import SocketFrontEnd
import SystemIO

extension ExitCode {
  /// The table of the codes locationd uses, for its `--help` and docs/configuration.md, one line per code.
  public static let table = """
    exit status:
      0   clean shutdown (SIGTERM, SIGINT) or --help
      64  bad command line: unknown option, option without value or followed by another option
          (write --option=--value for a value that starts with --; usage follows)
      66  missing or unreadable input: --config file, replay log, GPX route, mqtt-credentials
          file, mqtt-ca-file of an mqtts broker (each also when a directory is given)
      69  unavailable: another server listens at the socket path, or libxml2 is missing
      71  a system call failed (socket, bind, listen), or too few file descriptors are free:
          locationd needs 32 below its limit (ulimit -n, LimitNOFILE=)
      73  cannot create the socket's directory or the state directory (missing parent, a file or
          dangling link in the way, permission), or another locationd holds the state directory
          (its PID is named)
      78  configuration error: bad value or backend URI, malformed config line, unknown group,
          --state-dir not a directory, --socket path that is not a socket

    """
}

extension ConfigurationError {
  /// The exit status for this error (see ``ExitCode``).
  public var exitCode: ExitCode {
    switch self {
    case .unknownFlag, .missingValue, .optionAsValue, .unexpectedValue: return .usage
    case .unreadableFile, .missingInput: return .noInput
    case .unavailable: return .unavailable
    case .invalidValue, .invalidBackend, .invalidLine: return .configuration
    case .inFile(_, _, let error): return error.exitCode
    }
  }
}

extension ListenError {
  /// The exit status for this error (see ``ExitCode``).
  public var exitCode: ExitCode {
    switch self {
    case .pathTooLong, .notASocket, .noSuchGroup, .invalidActivatedSocket: return .configuration
    case .cannotCreateDirectory: return .cannotCreate
    case .alreadyListening: return .unavailable
    case .systemCall: return .osError
    }
  }
}

extension BackendCreationError {
  /// The exit status for this error (see ``ExitCode``).
  public var exitCode: ExitCode {
    switch kind {
    case .invalid: return .configuration
    case .missingInput: return .noInput
    case .unavailable: return .unavailable
    }
  }
}
