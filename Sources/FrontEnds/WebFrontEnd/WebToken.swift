import Glibc
import SystemIO

/// The secret that authorizes writes and location reads over HTTP: 32 random bytes as 64
/// lowercase hex digits, stored in ``fileName`` in the state directory with mode 0600.
///
/// A new token is made at every start. The file is written as the map state is
/// (``AtomicFile``): a temporary file with an unpredictable name created with
/// `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted link or file is never followed or reused), mode 0600
/// from creation, `fsync`, `rename`d over ``fileName``, then the directory `fsync`ed. Whoever can read it (the daemon's user and root) can use the web API:
/// `locationctl web` reads it and prints the page's URL with the token after `#`.
public enum WebToken {
  /// `http-token`, in the state directory.
  public static let fileName = "http-token"

  /// A fresh token from the system's random source (`getrandom(2)`).
  public static func generate() -> String {
    var random = SystemRandomNumberGenerator()
    var text = ""
    for _ in 0..<4 {
      let word = random.next()
      let hex = String(word, radix: 16)
      text += String(repeating: "0", count: 16 - hex.count) + hex
    }
    return text
  }

  /// Writes `token` (and a newline) to `directory`/``fileName``, replacing the file atomically.
  ///
  /// - Throws: ``SystemError`` of the failed step (open, write, fsync, rename, the directory's
  ///   fsync).
  public static func write(_ token: String, directory: String) throws(SystemError) {
    do throws(AtomicFile.Failure) {
      try AtomicFile.replace(fileName, inDirectory: directory, with: Array((token + "\n").utf8), mode: 0o600)
    } catch {
      throw SystemError(error.code)
    }
  }

  /// Whether `given` equals `token`, comparing every byte whatever the first difference (no
  /// timing hint about how much of a guess was right).
  public static func matches(_ given: String, _ token: String) -> Bool {
    let a = Array(given.utf8)
    let b = Array(token.utf8)
    guard a.count == b.count, !b.isEmpty else { return false }
    var difference: UInt8 = 0
    for index in 0..<a.count { difference |= a[index] ^ b[index] }
    return difference == 0
  }
}
