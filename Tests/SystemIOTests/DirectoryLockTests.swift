import Glibc
import Testing

@testable import SystemIO

/// A new empty directory under /tmp.
func temporaryDirectory() throws -> String {
  var template = Array("/tmp/locationd-systemio-XXXXXX".utf8CString)
  let made = template.withUnsafeMutableBufferPointer { buffer -> UnsafeMutablePointer<CChar>? in
    guard let base = buffer.baseAddress else { return nil }
    return mkdtemp(base)
  }
  try #require(made != nil)
  return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

@Suite("DirectoryLock")
struct DirectoryLockTests {

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
    do {
      _ = try DirectoryLock(directory: directory)
      Issue.record("a link was accepted as the lock file")
    } catch {
      #expect("\(error)".contains("it is a symbolic link"), "\(error)")
    }
    #expect(access(directory + "/link.lock", F_OK) != 0)
    unlink(directory + "/" + DirectoryLock.fileName)
    #expect(mkfifo(directory + "/" + DirectoryLock.fileName, 0o600) == 0)
    do {
      _ = try DirectoryLock(directory: directory)
      Issue.record("a FIFO was accepted as the lock file")
    } catch {
      #expect("\(error)".contains("it is not a regular file"), "\(error)")
    }
  }

  @Test("the holder's PID comes from the kernel's lock table, whatever the file says")
  func holderFromTheKernel() throws {
    let directory = try temporaryDirectory()
    defer { remove(directory) }
    let first = try DirectoryLock(directory: directory)
    // Someone rewrote the file's text: the kernel still names this process.
    let fd = open(first.path, O_WRONLY | O_TRUNC | O_CLOEXEC)
    #expect(fd >= 0)
    _ = try? SystemIO.writeAll(fd, "12345\n")
    close(fd)
    #expect(throws: DirectoryLockError.held(path: first.path, pid: getpid())) {
      _ = try DirectoryLock(directory: directory)
    }
    let table = """
      1: POSIX  ADVISORY  WRITE 10461 fe:00:5382901 1073741824 1073742335
      2: FLOCK  ADVISORY  WRITE 777 08:11:42 0 EOF
      2: -> FLOCK  ADVISORY  WRITE 888 08:11:42 0 EOF
      3: FLOCK  ADVISORY  WRITE 999 08:11:43 0 EOF
      """
    #expect(DirectoryLock.holder(inLocks: table, major: 8, minor: 0x11, inode: 42) == 777)
    #expect(DirectoryLock.holder(inLocks: table, major: 8, minor: 0x11, inode: 44) == nil)
    #expect(DirectoryLock.holder(inLocks: "garbage\n: FLOCK\n", major: 8, minor: 0x11, inode: 42) == nil)
    withExtendedLifetime(first) {}
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

@Suite("AtomicFile")
struct AtomicFileTests {

  func contents(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    guard let count = try? SystemIO.read(fd, into: &buffer) else { return nil }
    return String(decoding: buffer.prefix(count), as: UTF8.self)
  }

  func names(_ directory: String) -> [String] {
    guard let stream = opendir(directory) else { return [] }
    defer { closedir(stream) }
    var names: [String] = []
    while let entry = readdir(stream) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
  }

  @Test("replaces the file whole with mode 0600 and leaves no temporary file; a failed step keeps the old file")
  func replaceAndFail() throws {
    let directory = try temporaryDirectory()
    defer {
      for name in names(directory) { unlink(directory + "/" + name) }
      rmdir(directory)
    }
    try AtomicFile.replace("state", inDirectory: directory, with: Array("one\n".utf8))
    try AtomicFile.replace("state", inDirectory: directory, with: Array("two\n".utf8))
    #expect(contents(directory + "/state") == "two\n")
    #expect(names(directory) == ["state"])
    var info = stat()
    #expect(stat(directory + "/state", &info) == 0 && info.st_mode & 0o777 == 0o600)
    let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { close(fd) }
    for step in ["open", "write", "fsync", "close", "rename"] {
      #expect(throws: AtomicFile.Failure.self) {
        try AtomicFile.replace(
          "state", in: fd, directoryPath: directory, with: Array("three\n".utf8),
          failureInjector: { $0 == step ? EIO : nil })
      }
      #expect(contents(directory + "/state") == "two\n", "after a failed \(step)")
      #expect(names(directory) == ["state"], "after a failed \(step)")
    }
    // The last step: the new file is in place, the failure is reported.
    #expect(throws: AtomicFile.Failure(step: "fsyncDirectory", path: directory, code: EIO)) {
      try AtomicFile.replace(
        "state", in: fd, directoryPath: directory, with: Array("four\n".utf8),
        failureInjector: { $0 == "fsyncDirectory" ? EIO : nil })
    }
    #expect(contents(directory + "/state") == "four\n")
    // A directory that is a link is refused.
    #expect(symlink(directory, directory + "/link") == 0)
    #expect(throws: AtomicFile.Failure(step: "openDirectory", path: directory + "/link", code: ENOTDIR)) {
      try AtomicFile.replace("state", inDirectory: directory + "/link", with: [])
    }
  }
}
