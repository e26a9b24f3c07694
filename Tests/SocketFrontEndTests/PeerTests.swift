import Foundation
import Glibc
import LocationTestKit
import Testing

@testable import LocationProtocol
@testable import ServiceCore
@testable import SocketFrontEnd
@testable import LocationDaemon
import LocationModel
import SystemIO

/// Runs a Python client as uid/gid 65534 (nobody/nogroup) with the supplementary groups
/// `groups` (none by default), sending `request` then `start`, and returns the two reply lines.
private func runUnprivilegedClient(socketPath: String, groups: [UInt32] = []) async throws -> [String] {
  let script = """
    import socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sys.argv[1])
    s.sendall(b'{"cmd":"request","id":1}\\n{"cmd":"start","id":2}\\n')
    data = b''
    while data.count(b'\\n') < 2:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    sys.stdout.write(data.decode())
    """
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
  process.arguments = [
    "--reuid=65534", "--regid=65534",
    groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ","),
    "/usr/bin/python3", "-c", script, socketPath,
  ]
  let output = Pipe()
  process.standardOutput = output
  try await runToExit(process)
  let data = output.fileHandleForReading.readDataToEndOfFile()
  return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

@Suite("Peer credentials and authorization", .serialized)
struct PeerTests {
  @Test("an unprivileged peer outside the group is denied")
  func unprivilegedDenied() async throws {
    try #require(getuid() == 0, "needs root to switch to uid 65534")
    let fixture = try await ServiceFixture(group: "adm")
    let lines = try await runUnprivilegedClient(socketPath: fixture.path)
    try #require(lines.count == 2, "client output: \(lines)")
    let request = try JSONValue.parse(Array(lines[0].utf8))
    let start = try JSONValue.parse(Array(lines[1].utf8))
    #expect(request["code"] == "notAuthorized")
    #expect(request["id"] == .int(1))
    #expect(request["message"]?.stringValue?.contains("adm") == true)
    #expect(start["code"] == "notAuthorized")
    #expect(fixture.backend.startCount == 0)
    await fixture.stop()
  }

  @Test("an unprivileged peer whose group is the configured group is authorized")
  func groupMemberAuthorized() async throws {
    try #require(getuid() == 0, "needs root to switch to uid 65534")
    let fixture = try await ServiceFixture(group: "nogroup")
    let lines = try await runUnprivilegedClient(socketPath: fixture.path)
    try #require(lines.count == 2, "client output: \(lines)")
    #expect(try JSONValue.parse(Array(lines[0].utf8))["authorization"] == "authorized")
    #expect(try JSONValue.parse(Array(lines[1].utf8))["class"] == "TRACKING")
    await fixture.stop()
  }

  @Test("a peer whose supplementary groups include the group is authorized, as the kernel lets it connect")
  func supplementaryGroupAuthorized() async throws {
    try #require(getuid() == 0, "needs root to switch to uid 65534")
    // nobody is not in adm in the group database; the process carries it all the same (as one
    // of a login session started after `usermod -aG adm nobody` would).
    try #require(GroupDatabase.groupID(named: "adm") == 4)
    let fixture = try await ServiceFixture(group: "adm")
    let lines = try await runUnprivilegedClient(socketPath: fixture.path, groups: [4])
    try #require(lines.count == 2, "client output: \(lines)")
    #expect(try JSONValue.parse(Array(lines[0].utf8))["authorization"] == "authorized")
    #expect(try JSONValue.parse(Array(lines[1].utf8))["class"] == "TRACKING")
    await fixture.stop()
  }

  @Test("SO_PEERCRED reports this process for a local connection")
  func peerCredentials() async throws {
    let fixture = try ServerFixture()
    let client = try fixture.connect()
    var credentials: PeerCredentials? = nil
    for _ in 0..<100 {
      credentials = PeerCredentials.read(socket: client.fd)
      if credentials != nil { break }
    }
    #expect(credentials?.pid == getpid())
    #expect(credentials?.uid == getuid())
    #expect(credentials?.gid == getgid())
    // SO_PEERGROUPS: this process's supplementary groups.
    var own = [gid_t](repeating: 0, count: 1024)
    let count = getgroups(Int32(own.count), &own)
    try #require(count >= 0)
    #expect(credentials.map { Set($0.groups) } == Set(own.prefix(Int(count))))
    await fixture.stop()
  }

  @Test("Authorizer: root always, the group as the peer's effective gid or one of its groups, unknown group denies")
  func authorizer() {
    #expect(
      Authorizer(groupName: nil).decide(for: PeerCredentials(pid: 1, uid: 0, gid: 0)).status
        == .authorized)
    #expect(
      Authorizer(groupName: nil).decide(for: PeerCredentials(pid: 1, uid: 65534, gid: 65534)).status
        == .denied)
    // nobody's primary group in the passwd entry is nogroup, but the process does not carry it:
    // the kernel would not let it open a 0660 socket of group nogroup either.
    let nogroup = Authorizer(groupName: "nogroup").decide(
      for: PeerCredentials(pid: 1, uid: 65534, gid: 1))
    #expect(nogroup == (.denied, "notInGroup"))
    #expect(
      Authorizer(groupName: "nogroup").decide(for: PeerCredentials(pid: 1, uid: 65534, gid: 1, groups: [4, 65534]))
        == (.authorized, "group"))
    // adm as a supplementary group of the process, though the database lists nobody in none.
    #expect(
      Authorizer(groupName: "adm").decide(for: PeerCredentials(pid: 1, uid: 65534, gid: 65534, groups: [4])).status
        == .authorized)
    #expect(
      Authorizer(groupName: "adm").decide(for: PeerCredentials(pid: 1, uid: 65534, gid: 65534, groups: [])).status
        == .denied)
    let missing = Authorizer(groupName: "no-such-group-xyz").decide(
      for: PeerCredentials(pid: 1, uid: 65534, gid: 65534))
    #expect(missing.status == .denied)
    #expect(missing.reason == "noSuchGroup")
    #expect(GroupDatabase.groupID(named: "root") == 0)
  }
}

@Suite("Listening socket", .serialized)
struct ListeningSocketTests {
  @Test(
    "creates the socket's directory and a 0660 socket; refuses a live one; replaces a stale one")
  func createAndStale() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.path + "/a/locationd.sock"
    let first = try ListeningSocket.create(path: path, group: "nogroup")
    var info = stat()
    #expect(lstat(path, &info) == 0)
    #expect(info.st_mode & 0o777 == 0o660)
    #expect(info.st_mode & S_IFMT == S_IFSOCK)
    #expect(info.st_gid == 65534)
    #expect(throws: ListenError.alreadyListening(path)) {
      try ListeningSocket.create(path: path, group: nil)
    }
    // Close without unlinking: a stale socket file remains.
    Glibc.close(first.fd)
    #expect(lstat(path, &info) == 0)
    // A child being spawned by a parallel test may hold a copy of the descriptor until its
    // exec closes it: retry briefly.
    var second: ListeningSocket?
    for _ in 0..<200 where second == nil {
      do {
        second = try ListeningSocket.create(path: path, group: nil)
      } catch .alreadyListening {
        usleep(10_000)
      }
    }
    try #require(second != nil)
    second?.close()
    #expect(lstat(path, &info) != 0)
    // The first socket created directory a; the second found it there and leaves it.
    #expect(first.createdDirectory == directory.path + "/a")
    #expect(second?.createdDirectory == nil)
    // first's descriptor was closed above, and its number may belong to another test by now:
    // first.close() would close that one. A socket that created its directory removes it on
    // close, seen on a third one.
    let third = try ListeningSocket.create(path: directory.path + "/b/locationd.sock", group: nil)
    #expect(third.createdDirectory == directory.path + "/b")
    third.close()
    #expect(lstat(directory.path + "/b", &info) != 0, "the created directory was left behind")
  }

  @Test("creates one missing directory level, never a whole path, as for the state directory")
  func missingParents() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.path + "/a/b/locationd.sock"
    #expect(throws: ListenError.cannotCreateDirectory(directory.path + "/a/b", errno: ENOENT)) {
      try ListeningSocket.create(path: path, group: nil)
    }
    var info = stat()
    #expect(lstat(directory.path + "/a", &info) != 0, "created \(directory.path)/a")
  }

  @Test("a reload's group applies to the socket file; a socket-activated one is left to systemd")
  func applyOwnership() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.path + "/s.sock"
    let socket = try ListeningSocket.create(path: path, group: nil)
    defer { socket.close() }
    var info = stat()
    // No group: root only, so only the owner may connect, as the service decides.
    #expect(lstat(path, &info) == 0 && info.st_gid == getegid() && info.st_mode & 0o777 == 0o600)
    #expect(try socket.applyOwnership(group: "nogroup"))
    #expect(lstat(path, &info) == 0 && info.st_gid == 65534 && info.st_mode & 0o777 == 0o660)
    #expect(try socket.applyOwnership(group: ""))
    #expect(lstat(path, &info) == 0 && info.st_gid == getegid() && info.st_mode & 0o777 == 0o600)
    #expect(throws: ListenError.noSuchGroup("no-such-group-xyz")) {
      try socket.applyOwnership(group: "no-such-group-xyz")
    }
    let activated = ListeningSocket(fd: -1, path: path, isActivated: true)
    #expect(try activated.applyOwnership(group: "nogroup") == false)
    #expect(lstat(path, &info) == 0 && info.st_gid == getegid())
  }

  @Test("a reload never changes the group of a file put in the socket's place")
  func ownershipOfAReplacedSocket() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.path + "/s.sock"
    let victim = directory.path + "/victim"
    #expect(FileManager.default.createFile(atPath: victim, contents: Data("x".utf8)))
    chmod(victim, 0o600)
    let socket = try ListeningSocket.create(path: path, group: nil)
    defer { socket.close() }
    var info = stat()
    // A symbolic link, then a hard link, to the victim in place of the socket file.
    for plant in [{ symlink(victim, path) }, { link(victim, path) }] {
      unlink(path)
      #expect(plant() == 0)
      #expect(throws: ListenError.systemCall("chown", path: path, errno: ENOTSOCK)) {
        try socket.applyOwnership(group: "nogroup")
      }
      #expect(stat(victim, &info) == 0 && info.st_gid == getegid() && info.st_mode & 0o777 == 0o600)
    }
    unlink(path)
  }

  @Test("refuses a path that is not a socket, and an unknown group")
  func refusals() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.path + "/file"
    _ = FileManager.default.createFile(atPath: path, contents: Data("x".utf8))
    #expect(throws: ListenError.notASocket(path)) {
      try ListeningSocket.create(path: path, group: nil)
    }
    #expect(throws: ListenError.noSuchGroup("no-such-group-xyz")) {
      try ListeningSocket.create(path: directory.path + "/s.sock", group: "no-such-group-xyz")
    }
  }

  @Test("a group name's control characters are escaped in the message, never written raw")
  func groupNameIsShownEscaped() {
    let message = ListenError.noSuchGroup("staff\tx\u{1B}[2J").description
    #expect(message == #"group staff\u{9}x\u{1B}[2J does not exist: create it (groupadd staff\u{9}x\u{1B}[2J) or change --group"#)
    #expect(!message.unicodeScalars.contains { $0.properties.generalCategory == .control })
  }

  @Test("adopts a passed listening socket and serves on it; rejects a non-listening one")
  func adopt() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.path + "/activated.sock"
    let made = try ListeningSocket.create(path: path, group: nil)
    let adopted = try ListeningSocket.adopt(fd: made.fd, path: "/run/locationd/locationd.sock")
    #expect(adopted.isActivated)
    #expect(adopted.path == path, "the bound address, not the configured path")
    let server = SocketServer(socket: adopted, handler: FakeHandler())
    try server.start()
    let client = try TestClient(path: path)
    #expect(try await client.roundTrip(#"{"cmd":"status"}"#)?["class"] == "STATUS")
    server.stop()
    await server.waitUntilStopped()
    var info = stat()
    #expect(lstat(path, &info) == 0, "an activated socket's file belongs to systemd and stays")
    let plain = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    defer { Glibc.close(plain) }
    #expect(throws: ListenError.invalidActivatedSocket(fd: plain)) {
      try ListeningSocket.adopt(fd: plain, path: path)
    }
  }

  @Test(
    "LISTEN_FDS/LISTEN_PID parsing",
    arguments: [
      (["LISTEN_FDS": "1", "LISTEN_PID": "42"], [Int32(3)]),
      (["LISTEN_FDS": "2", "LISTEN_PID": "42"], [3, 4]),
      (["LISTEN_FDS": "1"], [3]),
      (["LISTEN_FDS": "1", "LISTEN_PID": "43"], []),
      (["LISTEN_FDS": "0", "LISTEN_PID": "42"], []),
      (["LISTEN_FDS": "x", "LISTEN_PID": "42"], []),
      (["LISTEN_FDS": "1", "LISTEN_PID": "x"], []),
      ([:], []),
    ] as [([String: String], [Int32])])
  func listenFDs(environment: [String: String], expected: [Int32]) {
    #expect(SocketActivation.passedDescriptors(environment: environment, pid: 42) == expected)
  }
}
