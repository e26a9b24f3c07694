import LocationModel
import LocationProtocol
import ServiceCore
import SocketTransport

/// `locationd`'s exit statuses, after BSD `sysexits.h`: one code per kind of failure, so that a
/// script or systemd (`RestartPreventExitStatus=`) can tell a typo from a missing file from a
/// busy socket.
public enum ExitCode: Int32, Sendable, CaseIterable {
  /// A clean shutdown (SIGTERM, SIGINT), or `--help`.
  case success = 0
  /// `EX_USAGE`: the command line itself is malformed (an unknown option, an option without its
  /// value); the usage text follows the message.
  case usage = 64
  /// `EX_NOINPUT`: a file named in the configuration does not exist, cannot be read or is not a
  /// regular file (a directory, say): the `--config` file, a replay log, a GPX route.
  case noInput = 66
  /// `EX_UNAVAILABLE`: something locationd needs is not there or not free: another server
  /// listens at the socket path, or a library (libxml2) cannot be loaded.
  case unavailable = 69
  /// `EX_OSERR`: a system call failed unexpectedly (socket, bind, listen).
  case osError = 71
  /// `EX_CANTCREAT`: the socket's directory or the state directory cannot be created (its parent
  /// is missing, a regular file or a dangling link stands where a directory should be, or
  /// permission is denied).
  case cannotCreate = 73
  /// `EX_CONFIG`: a setting cannot be used (from a flag or the config file): a malformed config
  /// line, a bad backend URI or value, an unknown group, a `--state-dir` that is not a directory,
  /// a `--socket` path that exists and is not a socket.
  case configuration = 78

  /// The table for `--help` and the README, one line per code.
  public static let table = """
    exit status:
      0   clean shutdown (SIGTERM, SIGINT) or --help
      64  bad command line: unknown option or option without value (usage follows)
      66  missing or unreadable input: --config file, replay log, GPX route (also a directory)
      69  unavailable: another server listens at the socket path, or libxml2 is missing
      71  a system call failed (socket, bind, listen)
      73  cannot create the socket's directory or the state directory (missing parent, a file or
          dangling link in the way, permission)
      78  configuration error: bad value or backend URI, malformed config line, unknown group,
          --state-dir not a directory, --socket path that is not a socket

    """
}

extension ConfigurationError {
  /// The exit status for this error (see ``ExitCode``).
  public var exitCode: ExitCode {
    switch self {
    case .unknownFlag, .missingValue, .unexpectedValue: return .usage
    case .unreadableFile, .missingInput: return .noInput
    case .unavailable: return .unavailable
    case .invalidValue, .invalidBackend, .invalidLine: return .configuration
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
