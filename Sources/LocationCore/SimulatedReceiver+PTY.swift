import Glibc

/// Why the simulated GPS hardware could not start.
public enum SimulatedReceiverError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The rate is outside 1...10 Hz.
  case invalidRate(Double)
  /// The pseudo-terminal could not be created (`/dev/ptmx`); `errno` and its text.
  case openPTYFailed(errno: Int32, message: String)
  /// The link path exists and is not a symbolic link (a regular file, a directory, a device):
  /// it is never overwritten.
  case pathIsNotASymlink(path: String)
  /// Creating or replacing the symbolic link failed; `errno` and its text.
  case linkFailed(path: String, errno: Int32, message: String)
  /// `start` was called twice.
  case alreadyStarted
  /// The baud rate is not one a simulated receiver offers (``SerialLinePacer/baudRates``).
  case invalidBaudRate(Int)
  /// A network transport could not be opened (socket, bind, listen, connect); `errno` and its text.
  case networkFailed(transport: String, errno: Int32, message: String)

  /// A one-line explanation.
  public var description: String {
    switch self {
    case .invalidRate(let rate): return "rate \(rate) Hz is outside 1...10 Hz"
    case .openPTYFailed(let code, let message):
      return "cannot create a pseudo-terminal: \(message) (errno \(code))"
    case .pathIsNotASymlink(let path):
      return "\(path) exists and is not a symbolic link; refusing to replace it"
    case .linkFailed(let path, let code, let message):
      return "cannot link \(path): \(message) (errno \(code))"
    case .alreadyStarted: return "the simulated receiver is already running"
    case .networkFailed(let transport, let code, let message):
      return "cannot open \(transport): \(message) (errno \(code))"
    case .invalidBaudRate(let baud):
      return "baud rate \(baud) is not one of \(SerialLinePacer.baudRates.map(String.init).joined(separator: ", "))"
    }
  }
}

/// Pseudo-terminal and link helpers of the simulated receiver.
extension SimulatedReceiver {
  static func link(_ path: String, to target: String) throws(SimulatedReceiverError) {
    var info = stat()
    if lstat(path, &info) == 0 {
      guard info.st_mode & S_IFMT == S_IFLNK else { throw .pathIsNotASymlink(path: path) }
    }
    // Create under a temporary name, then rename over the old link: atomic for readers.
    let temporary = path + ".tmp-\(getpid())"
    unlink(temporary)
    guard symlink(target, temporary) == 0 else {
      let code = errno
      throw .linkFailed(path: path, errno: code, message: errorText(code))
    }
    guard rename(temporary, path) == 0 else {
      let code = errno
      unlink(temporary)
      throw .linkFailed(path: path, errno: code, message: errorText(code))
    }
  }

  static func errorText(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "error \(code)" }
    return String(cString: text)
  }

  /// `TIOCSPTLCK` (`_IOW('T', 0x31, int)`): lock or unlock the slave of a pty master.
  static let unlockPTY = UInt(0x4004_5431)
  /// `TIOCGPTN` (`_IOR('T', 0x30, unsigned int)`): the pty's number N in `/dev/pts/N`.
  static let ptyNumber = UInt(0x8004_5430)

  /// `CLOCK_MONOTONIC` now, in nanoseconds.
  public static func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
  }
}
