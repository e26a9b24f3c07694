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
      return
        "baud rate \(baud) is not one of \(SerialLinePacer.baudRates.map(String.init).joined(separator: ", "))"
    }
  }
}

/// The pty a simulated receiver writes to.
struct PTYHandle: Sendable {
  /// The master descriptor, -1 while unplugged.
  var master: Int32
  /// The slave device, e.g. `/dev/pts/3`.
  var slavePath: String
  /// Permission bits given to a reopened slave.
  var deviceMode: mode_t?
  /// Whether an `unplug` fault has closed the pty.
  var unplugged = false
}

/// Pseudo-terminal and link helpers of the simulated receiver.
extension SimulatedReceiver {
  /// The slave device the link points to, e.g. `/dev/pts/3`; a new one after an `unplug` fault
  /// window ends.
  public var slavePath: String { pty.withLock { $0.slavePath } }

  var master: Int32 { pty.withLock { $0.master } }

  /// Unplugs the device (an `unplug` fault window begins): closes the master, so the reader
  /// sees a hang-up, and removes the link if it still points to this pty. Counted once a window.
  func unplugDevice() {
    let closing = pty.withLock { handle -> (Int32, String)? in
      guard !handle.unplugged else { return nil }
      handle.unplugged = true
      defer { handle.master = -1 }
      return (handle.master, handle.slavePath)
    }
    guard let (fd, slave) = closing else { return }
    outputStage.countUnplug()
    var buffer = [CChar](repeating: 0, count: 256)
    let length = readlink(linkPath, &buffer, buffer.count - 1)
    if length > 0 {
      let target = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
      if target == slave { unlink(linkPath) }
    }
    close(fd)
  }

  /// Plugs the device back in (the window ended): a new pty, linked at the same path. A failure
  /// leaves it unplugged and is tried again at the next epoch.
  func replugDevice() {
    let (unplugged, mode) = pty.withLock { ($0.unplugged, $0.deviceMode) }
    guard unplugged, let (fd, slave) = try? Self.openPTY(deviceMode: mode, baud: output.baud) else {
      return
    }
    do {
      try Self.link(linkPath, to: slave)
    } catch {
      close(fd)
      return
    }
    pty.withLock { handle in
      handle.master = fd
      handle.slavePath = slave
      handle.unplugged = false
    }
    state.withLock { $0.readerPresent = false }
  }

  /// Whether the device is unplugged at `seconds` since the start, unplugging or plugging it
  /// back as the fault schedule says.
  func deviceUnplugged(at seconds: Double) -> Bool {
    if outputStage.output.faults.isUnplugged(at: seconds) {
      unplugDevice()
      outputStage.countUnpluggedEpoch()
      return true
    }
    replugDevice()
    return false
  }

  /// Opens a pty as ``init(linkPath:encoder:deviceMode:output:onWrite:)`` does: master
  /// non-blocking and close-on-exec, slave in raw mode at `baud` (9600 when `nil`) with `deviceMode`, no
  /// descriptor kept on the slave. Returns the master and the slave's path.
  static func openPTY(deviceMode: mode_t?, baud: Int?) throws(SimulatedReceiverError) -> (
    Int32, String
  ) {
    let masterFD = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)
    guard masterFD >= 0 else {
      let code = errno
      throw .openPTYFailed(errno: code, message: errorText(code))
    }
    var unlock: Int32 = 0
    var number: UInt32 = 0
    guard ioctl(masterFD, unlockPTY, &unlock) == 0, ioctl(masterFD, ptyNumber, &number) == 0 else {
      let code = errno
      close(masterFD)
      throw .openPTYFailed(errno: code, message: errorText(code))
    }
    let slaveName = "/dev/pts/\(number)"
    let slaveFD = open(slaveName, O_RDWR | O_NOCTTY | O_CLOEXEC)
    guard slaveFD >= 0 else {
      let code = errno
      close(masterFD)
      throw .openPTYFailed(errno: code, message: "\(slaveName): " + errorText(code))
    }
    var attributes = termios()
    if tcgetattr(slaveFD, &attributes) == 0 {
      cfmakeraw(&attributes)
      _ = cfsetispeed(&attributes, termiosSpeed(baud ?? 9600))
      _ = cfsetospeed(&attributes, termiosSpeed(baud ?? 9600))
      _ = tcsetattr(slaveFD, TCSANOW, &attributes)
    }
    if let deviceMode { _ = fchmod(slaveFD, deviceMode) }
    close(slaveFD)
    return (masterFD, slaveName)
  }

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

  /// The termios speed of one of ``SerialLinePacer/baudRates`` (9600 for any other).
  static func termiosSpeed(_ baud: Int) -> speed_t {
    switch baud {
    case 4800: return speed_t(B4800)
    case 38400: return speed_t(B38400)
    case 115_200: return speed_t(B115200)
    default: return speed_t(B9600)
    }
  }

  /// The rate the reader set on the slave (the master reports the slave's settings), in bits
  /// per second; `nil` when it cannot be read or is not a standard rate.
  static func readerRate(_ master: Int32) -> Int? {
    var attributes = termios()
    guard master >= 0, tcgetattr(master, &attributes) == 0 else { return nil }
    switch cfgetispeed(&attributes) {
    case speed_t(B4800): return 4800
    case speed_t(B9600): return 9600
    case speed_t(B19200): return 19200
    case speed_t(B38400): return 38400
    case speed_t(B57600): return 57600
    case speed_t(B115200): return 115_200
    case speed_t(B230400): return 230_400
    case speed_t(B460800): return 460_800
    case speed_t(B921600): return 921_600
    default: return nil
    }
  }

  /// `TIOCSPTLCK` (`_IOW('T', 0x31, int)`): lock or unlock the slave of a pty master.
  static let unlockPTY = UInt(0x4004_5431)
  /// `TIOCGPTN` (`_IOR('T', 0x30, unsigned int)`): the pty's number N in `/dev/pts/N`.
  static let ptyNumber = UInt(0x8004_5430)
}
