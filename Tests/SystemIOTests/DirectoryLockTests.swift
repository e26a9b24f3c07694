import Glibc
import Testing

@testable import SystemIO

@Suite("DirectoryLock")
struct DirectoryLockTests {
  func temporaryDirectory() throws -> String {
    var template = Array("/tmp/locationd-lock-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { buffer -> UnsafeMutablePointer<CChar>? in
      guard let base = buffer.baseAddress else { return nil }
      return mkdtemp(base)
    }
    try #require(made != nil)
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  func remove(_ directory: String) {
    unlink(directory + "/" + DirectoryLock.fileName)
    unlink(directory + "/link.lock")
    rmdir(directory)
  }

  @Test("a second lock on the directory is refused with the holder's PID; released, it can be taken")
  func oneOwner() throws {
    let directory = try temporaryDirectory()
    defer { remove(directory) }
    var first: DirectoryLock? = try DirectoryLock(directory: directory)
    #expect(throws: DirectoryLockError.held(path: directory + "/locationd.lock", pid: getpid())) {
      _ = try DirectoryLock(directory: directory)
    }
    let message = "\(DirectoryLockError.held(path: "/x/locationd.lock", pid: 42))"
    #expect(message.hasPrefix("process 42 holds /x/locationd.lock: another locationd uses this state directory"))
    withExtendedLifetime(first) {}
    first = nil
    let again = try DirectoryLock(directory: directory)
    #expect(again.path == directory + "/locationd.lock")
  }

  @Test("a link planted as the lock file is refused, not followed")
  func plantedLink() throws {
    let directory = try temporaryDirectory()
    defer { remove(directory) }
    #expect(symlink(directory + "/link.lock", directory + "/" + DirectoryLock.fileName) == 0)
    #expect(throws: DirectoryLockError.unusable(path: directory + "/locationd.lock", error: SystemError(ELOOP))) {
      _ = try DirectoryLock(directory: directory)
    }
    #expect(access(directory + "/link.lock", F_OK) != 0)
  }

  @Test("the PID in the file is read only as 1 to 10 decimal digits within Int32")
  func pidParsing() {
    #expect(DirectoryLock.parsePID(Array("1234\n".utf8)) == 1234)
    #expect(DirectoryLock.parsePID(Array("2147483647".utf8)) == Int32.max)
    #expect(DirectoryLock.parsePID(Array("2147483648".utf8)) == nil)
    #expect(DirectoryLock.parsePID(Array("0\n".utf8)) == nil)
    #expect(DirectoryLock.parsePID(Array("-5\n".utf8)) == nil)
    #expect(DirectoryLock.parsePID(Array("12a\n".utf8)) == nil)
    #expect(DirectoryLock.parsePID(Array("".utf8)) == nil)
    #expect(DirectoryLock.parsePID(Array("99999999999".utf8)) == nil)
  }
}
