import Foundation
import Glibc
import Testing

/// Paths through a directory another user owns: that user could swap everything below it, so
/// the socket, the NMEA feed's socket and the state directory are refused there (exit 78).
@Suite(.timeLimit(.minutes(3)))
struct SecurePathEndToEndTests {
  @Test("a socket, NMEA socket or state directory below a directory of another user is refused")
  func belowAnotherUsersDirectory() async throws {
    guard geteuid() == 0 else { return }  // chown to another user needs root
    let scratch = try Scratch()
    defer { scratch.remove() }
    let theirs = scratch.file("theirs")
    let inner = theirs + "/inner"
    #expect(mkdir(theirs, 0o755) == 0 && mkdir(inner, 0o755) == 0)
    #expect(chown(theirs, 65534, 65534) == 0)
    let ours = scratch.file("ours")
    #expect(mkdir(ours, 0o755) == 0)
    let base = ["--group", "", "--track", "off", "--backend", "simulate"]
    let cases: [[String]] = [
      ["--socket", inner + "/s.sock", "--state-dir", ours + "/state1"],
      ["--socket", ours + "/s2.sock", "--state-dir", inner + "/state"],
      ["--socket", ours + "/s3.sock", "--state-dir", ours + "/state3", "--nmea-socket", inner + "/nmea.sock"],
    ]
    for arguments in cases {
      let run = try await runTool(try Products.path("locationd"), base + arguments, timeout: 30)
      #expect(run.status == 78, "\(arguments): \(run)")
      #expect(run.stderr.contains(theirs) && run.stderr.contains("uid 65534"), "\(arguments): \(run.stderr)")
    }
    // A link on the way that another user owns is refused the same way.
    let link = scratch.file("link")
    #expect(symlink(ours, link) == 0)
    #expect(lchown(link, 65534, 65534) == 0)
    let linked = try await runTool(
      try Products.path("locationd"), base + ["--socket", link + "/sub/s.sock", "--state-dir", ours + "/state4"],
      timeout: 30)
    #expect(linked.status == 78, "\(linked)")
    #expect(linked.stderr.contains("symbolic link owned by uid 65534"), "\(linked.stderr)")
    // The state directory itself a link that another user owns: refused too.
    #expect(mkdir(ours + "/real", 0o755) == 0)
    let stateLink = scratch.file("state-link")
    #expect(symlink(ours + "/real", stateLink) == 0)
    #expect(lchown(stateLink, 65534, 65534) == 0)
    let linkedState = try await runTool(
      try Products.path("locationd"), base + ["--socket", ours + "/s5.sock", "--state-dir", stateLink], timeout: 30)
    #expect(linkedState.status == 78, "\(linkedState)")
    #expect(linkedState.stderr.contains("symbolic link owned by uid 65534"), "\(linkedState.stderr)")
    // Neither a trailing slash (lstat then follows the link) nor a root-owned link to it hides it.
    let chain = scratch.file("chain")
    #expect(symlink(stateLink, chain) == 0)
    for (index, arguments) in [
      ["--state-dir", stateLink + "/"], ["--state-dir", stateLink + "//"], ["--state-dir", chain],
      ["--state-dir", chain + "/sub"], ["--socket", chain + "/s.sock"], ["--nmea-socket", chain + "/n.sock"],
    ].enumerated() {
      let socketArguments = arguments.first == "--socket" ? [] : ["--socket", ours + "/c\(index).sock"]
      let stateArguments = arguments.first == "--state-dir" ? [] : ["--state-dir", ours + "/c\(index)"]
      let refused = try await runTool(
        try Products.path("locationd"), base + socketArguments + stateArguments + arguments, timeout: 30)
      #expect(refused.status == 78, "\(arguments): \(refused)")
      #expect(refused.stderr.contains("symbolic link owned by uid 65534"), "\(arguments): \(refused.stderr)")
    }
    #expect(access(ours + "/real/sub", F_OK) != 0, "a directory was created through another user's link")
    // A state directory below a directory others may write is refused before it is created,
    // with what to do.
    let open = scratch.file("open")
    #expect(mkdir(open, 0o755) == 0 && chmod(open, 0o777) == 0)
    let refused = try await runTool(
      try Products.path("locationd"), base + ["--socket", ours + "/s6.sock", "--state-dir", open + "/child"], timeout: 30)
    #expect(refused.status == 78, "\(refused)")
    #expect(refused.stderr.contains("chmod go-w \(open)"), "\(refused.stderr)")
    #expect(access(open + "/child", F_OK) != 0, "the refused state directory was created")
  }
}
