import Foundation
import FoundationXML
import Glibc
import Testing

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  .deletingLastPathComponent()
  .deletingLastPathComponent().path

/// `scripts/install --geoclue` (and `--undo`) in a staging root, the unit drop-in under
/// `systemd-analyze verify`, and the D-Bus policy file enforced by a real dbus-daemon.
@Suite("Installing locationd as the system's GeoClue", .serialized, .timeLimit(.minutes(3)))
struct GeoClueInstallTests {
  static let stockActivation = "/usr/share/dbus-1/system-services/org.freedesktop.GeoClue2.service"
  static let ourActivation =
    "/usr/local/share/dbus-1/system-services/org.freedesktop.GeoClue2.service"
  static let policy = "/etc/dbus-1/system.d/org.freedesktop.GeoClue2.locationd.conf"
  static let dropIn = "/etc/systemd/system/locationd.service.d/geoclue.conf"
  static let stockText = """
    [D-BUS Service]
    Name=org.freedesktop.GeoClue2
    Exec=/usr/libexec/geoclue
    User=geoclue
    SystemdService=geoclue.service

    """

  static func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

  static func install(root: String, _ arguments: [String]) async throws -> ToolRun {
    let binaries = URL(fileURLWithPath: try Products.path("locationd")).deletingLastPathComponent()
    var environment = ProcessInfo.processInfo.environment
    environment["ROOT"] = root
    environment["BIN_DIR"] = binaries.path
    return try await runTool(
      packageRoot + "/scripts/install", arguments, environment: environment, timeout: 120)
  }

  @Test func installAndUndoInAStagingRoot() async throws {
    try #require(access("/usr/bin/dpkg-divert", X_OK) == 0, "dpkg-divert is missing")
    let scratch = try Scratch()
    defer { scratch.remove() }
    let root = scratch.file("root")
    try FileManager.default.createDirectory(
      atPath: root + "/usr/share/dbus-1/system-services", withIntermediateDirectories: true)
    try Self.stockText.write(toFile: root + Self.stockActivation, atomically: true, encoding: .utf8)

    let installed = try await Self.install(root: root, ["--geoclue"])
    try #require(installed.status == 0, "install: \(installed.stderr)")
    // Debian's activation file is diverted aside, unchanged; ours names locationd.service.
    #expect(Self.read(root + Self.stockActivation) == nil)
    #expect(Self.read(root + Self.stockActivation + ".geoclue") == Self.stockText)
    let ours = try #require(Self.read(root + Self.ourActivation))
    #expect(ours.contains("Name=org.freedesktop.GeoClue2\n"))
    #expect(ours.contains("SystemdService=locationd.service\n"))
    let diversions = Self.read(root + "/var/lib/dpkg/diversions") ?? ""
    #expect(diversions.contains(Self.stockActivation + "\n" + Self.stockActivation + ".geoclue\n"))
    // geoclue.service is masked; the drop-in names the installed binary and the bus.
    let mask = try? FileManager.default.destinationOfSymbolicLink(
      atPath: root + "/etc/systemd/system/geoclue.service")
    #expect(mask == "/dev/null")
    let dropIn = try #require(Self.read(root + Self.dropIn))
    #expect(dropIn.contains("BusName=org.freedesktop.GeoClue2\n"))
    #expect(dropIn.contains("ExecStart=/usr/local/bin/locationd "))
    #expect(dropIn.contains(" --dbus system\n"))
    #expect(
      Self.read(root + Self.policy)
        == Self.read(packageRoot + "/dbus/org.freedesktop.GeoClue2.locationd.conf"))

    let undone = try await Self.install(root: root, ["--geoclue", "--undo"])
    try #require(undone.status == 0, "undo: \(undone.stderr)")
    #expect(Self.read(root + Self.stockActivation) == Self.stockText)
    #expect(Self.read(root + Self.stockActivation + ".geoclue") == nil)
    for path in [
      Self.ourActivation, Self.policy, Self.dropIn, "/etc/systemd/system/geoclue.service",
    ] {
      #expect(access(root + path, F_OK) != 0, "\(path) is still there")
    }
    #expect(!(Self.read(root + "/var/lib/dpkg/diversions") ?? "").contains(Self.stockActivation))
    // locationd itself stays installed.
    #expect(access(root + "/usr/local/bin/locationd", X_OK) == 0)
  }

  @Test func undoWithoutGeoClueIsAUsageError() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let run = try await Self.install(root: scratch.file("root"), ["--undo"])
    #expect(run.status == 64)
  }

  /// locationd.service with the drop-in passes `systemd-analyze verify` without a word.
  @Test func unitWithTheDropInVerifies() async throws {
    let analyze = "/usr/bin/systemd-analyze"
    try #require(access(analyze, X_OK) == 0, "systemd-analyze is missing: run scripts/setup")
    let scratch = try Scratch()
    defer { scratch.remove() }
    let daemon = try Products.path("locationd")
    let service = try #require(Self.read(packageRoot + "/systemd/locationd.service"))
    let dropIn = try #require(Self.read(packageRoot + "/systemd/locationd.service.d/geoclue.conf"))
    #expect(dropIn.contains("ExecStart=/usr/local/bin/locationd "))
    try FileManager.default.createDirectory(
      atPath: scratch.file("locationd.service.d"), withIntermediateDirectories: true)
    try service.replacingOccurrences(of: "/usr/local/bin/locationd", with: daemon)
      .write(toFile: scratch.file("locationd.service"), atomically: true, encoding: .utf8)
    try dropIn.replacingOccurrences(of: "/usr/local/bin/locationd", with: daemon)
      .write(
        toFile: scratch.file("locationd.service.d/geoclue.conf"), atomically: true, encoding: .utf8)
    try FileManager.default.copyItem(
      atPath: packageRoot + "/systemd/locationd.socket", toPath: scratch.file("locationd.socket"))
    let run = try await runTool(
      analyze,
      ["verify", "--man=no", scratch.file("locationd.service"), scratch.file("locationd.socket")])
    #expect(run.status == 0)
    #expect(
      run.stdout + run.stderr == "", "systemd-analyze verify said: \(run.stdout)\(run.stderr)")
  }

  /// The policy file is well-formed XML (FoundationXML's parser).
  @Test func policyIsWellFormedXML() throws {
    let data = try Data(
      contentsOf: URL(
        fileURLWithPath: packageRoot + "/dbus/org.freedesktop.GeoClue2.locationd.conf"))
    let parser = XMLParser(data: data)
    #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
  }

  /// A system-type bus that denies owning names by default, with `policy` (a file path) included.
  static func systemBusConfiguration(socket: String, include policy: String?) -> String {
    """
    <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
     "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
    <busconfig>
      <type>system</type>
      <listen>unix:path=\(socket)</listen>
      <auth>EXTERNAL</auth>
      <policy context="default">
        <allow user="*"/>
        <deny own="*"/>
        <deny send_type="method_call"/>
        <allow send_destination="org.freedesktop.DBus"/>
        <allow send_type="signal"/>
        <allow send_requested_reply="true" send_type="method_return"/>
        <allow send_requested_reply="true" send_type="error"/>
        <allow receive_type="method_call"/>
        <allow receive_type="method_return"/>
        <allow receive_type="error"/>
        <allow receive_type="signal"/>
      </policy>
    \(policy.map { "  <include>\($0)</include>" } ?? "")
    </busconfig>

    """
  }

  /// The policy as dbus-daemon enforces it: its user may own org.freedesktop.GeoClue2 and
  /// another unprivileged user may not. The file's user `locationd` is replaced by `nobody` here
  /// (this machine may have no locationd user); without the file nobody may own the name either.
  @Test(arguments: [true, false])
  func policyLetsOnlyItsUserOwnTheName(withPolicy: Bool) async throws {
    try requireNobodyClient(python: false)
    let scratch = try Scratch()
    defer { scratch.remove() }
    let policy = try #require(
      Self.read(packageRoot + "/dbus/org.freedesktop.GeoClue2.locationd.conf"))
    #expect(policy.contains("<policy user=\"locationd\">"))
    try policy.replacingOccurrences(
      of: "<policy user=\"locationd\">", with: "<policy user=\"nobody\">"
    )
    .write(toFile: scratch.file("policy.conf"), atomically: true, encoding: .utf8)
    try Self.systemBusConfiguration(
      socket: scratch.file("bus"), include: withPolicy ? scratch.file("policy.conf") : nil
    ).write(toFile: scratch.file("bus.conf"), atomically: true, encoding: .utf8)
    let bus = try Child(
      "/usr/bin/dbus-daemon",
      ["--config-file=" + scratch.file("bus.conf"), "--nofork", "--print-address"],
      stdout: scratch.file("address"), stderr: scratch.file("dbus.log"))
    defer {
      kill(bus.pid, SIGKILL)
      _ = bus.waitForExitBlocking(timeout: 10)
    }
    let printed = await waitUntil { (Self.read(scratch.file("address")) ?? "").contains("\n") }
    try #require(
      printed, "dbus-daemon printed no address: \(Self.read(scratch.file("dbus.log")) ?? "")")
    let address = try #require(Self.read(scratch.file("address"))?.split(separator: "\n").first)
    func requestName(as credentials: [String]) async throws -> ToolRun {
      try await runTool(
        "/usr/bin/setpriv",
        credentials + [
          "/usr/bin/dbus-send", "--bus=" + address, "--print-reply", "--dest=org.freedesktop.DBus",
          "/", "org.freedesktop.DBus.RequestName", "string:org.freedesktop.GeoClue2", "uint32:0",
        ])
    }
    let nobody = try await requestName(as: nobodyCredentials)
    let other = try await requestName(as: ["--reuid=1", "--regid=1", "--clear-groups"])
    if withPolicy {
      #expect(nobody.status == 0 && nobody.stdout.contains("uint32 1"), "\(nobody.stderr)")
    } else {
      #expect(nobody.status != 0 && nobody.stderr.contains("AccessDenied"), "\(nobody.stdout)")
    }
    #expect(other.status != 0 && other.stderr.contains("AccessDenied"), "\(other.stdout)")
  }
}
