/// Exit statuses of locationd and locationctl: 0 for success, C's `EXIT_FAILURE` (1) for a
/// failure with no more specific code, and otherwise BSD `sysexits.h`, one code per kind of
/// failure, so that a script or systemd (`RestartPreventExitStatus=`) can tell a typo from a
/// missing file from a busy socket.
///
/// Each program documents the codes it uses (`locationd --help`, `locationctl --help`); the
/// values are the same wherever they appear.
public enum ExitCode: Int32, Sendable, CaseIterable {
  /// Success: a clean shutdown (SIGTERM, SIGINT), `--help`, or a command that did what it was
  /// asked.
  case success = 0
  /// `EXIT_FAILURE` (C standard): a failure with no `sysexits.h` kind; locationctl's error reply
  /// or unreachable daemon.
  case failure = 1
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
}
