import Foundation
import Glibc
import LocationTestKit
import ServiceCore
import Testing

@testable import GeoClueFrontEnd

/// The tools this suite runs: a bus daemon and Python's GObject bindings (the D-Bus clients).
/// Absent outside CI, the suite is skipped; with CI=true it runs and fails.
private let busToolsPresent =
  (["/usr/bin/dbus-daemon", "/usr/bin/python3"] as [String]).allSatisfy { access($0, X_OK) == 0 }
  || ProcessInfo.processInfo.environment["CI"] == "true"

/// Five GDBus connections, one GeoClue client each (created, `DesktopId` set, started, in
/// order), then one step per `go-N` file in the control directory, each answered by a `done-N`
/// file holding JSON: 1 deletes client 0; 2 waits until client 1 is inactive (the service closed
/// its session), then closes connection 1; 3 stops client 2, then closes connection 2; 4 deletes
/// client 3 twice (the second finds none); 5 ends the script (client 4 is still started).
private let clientScript = #"""
  import json, os, sys, time
  from gi.repository import Gio, GLib
  address, control = sys.argv[1], sys.argv[2]
  NAME = "org.freedesktop.GeoClue2"
  MANAGER = "/org/freedesktop/GeoClue2/Manager"
  CLIENT = "org.freedesktop.GeoClue2.Client"
  PROPS = "org.freedesktop.DBus.Properties"
  flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION

  def call(connection, path, iface, method, args=None, reply=None):
      v = connection.call_sync(NAME, path, iface, method, args, GLib.VariantType(reply) if reply else None,
                               Gio.DBusCallFlags.NONE, 10000, None)
      return v.unpack() if v is not None else None

  def error_of(fn):
      try:
          fn()
          return None
      except GLib.Error as e:
          return Gio.DBusError.get_remote_error(e)

  def done(step, result):
      with open(os.path.join(control, "tmp"), "w") as f:
          json.dump(result, f)
      os.rename(os.path.join(control, "tmp"), os.path.join(control, "done-%d" % step))

  def wait(step):
      deadline = time.time() + 60
      while not os.path.exists(os.path.join(control, "go-%d" % step)):
          if time.time() > deadline:
              sys.exit("no go-%d within 60 s" % step)
          time.sleep(0.005)

  connections = [Gio.DBusConnection.new_for_address_sync(address, flags, None, None) for _ in range(5)]
  paths = []
  for connection in connections:
      path = call(connection, MANAGER, NAME + ".Manager", "CreateClient", None, "(o)")[0]
      call(connection, path, PROPS, "Set", GLib.Variant("(ssv)", (CLIENT, "DesktopId", GLib.Variant("s", "locationd-test"))))
      call(connection, path, CLIENT, "Start")
      paths.append(path)
  done(0, paths)

  wait(1)
  call(connections[0], MANAGER, NAME + ".Manager", "DeleteClient", GLib.Variant("(o)", (paths[0],)))
  done(1, {})

  wait(2)
  deadline = time.time() + 30
  active = True
  while active and time.time() < deadline:
      active = call(connections[1], paths[1], PROPS, "Get", GLib.Variant("(ss)", (CLIENT, "Active")), "(v)")[0]
      if active:
          time.sleep(0.01)
  connections[1].close_sync(None)
  done(2, {"active": active})

  wait(3)
  call(connections[2], paths[2], CLIENT, "Stop")
  connections[2].close_sync(None)
  done(3, {})

  wait(4)
  delete = lambda: call(connections[3], MANAGER, NAME + ".Manager", "DeleteClient", GLib.Variant("(o)", (paths[3],)))
  first = error_of(delete)
  second = error_of(delete)
  done(4, {"first": first, "second": second})

  wait(5)
  """#

@Suite(
  "GeoClue2: every way a client departs", .serialized, .timeLimit(.minutes(2)),
  .enabled(if: busToolsPresent, "dbus-daemon or python3 missing (run scripts/setup)"))
struct GeoClueDepartureTests {
  @Test(
    "every way a D-Bus client ends (deleted, its connection leaves after the service closed it or after Stop, deleted twice, the front-end stops) reaches the service exactly once"
  )
  func everyDepartureReportedOnce() async throws {
    let bus = try PrivateBus()
    let address = try await bus.start()
    let parts = try ServiceParts(group: nil)
    await parts.service.start()
    let log = DepartureLog(parts.service)
    let frontEnd = GeoClueFrontEnd(kind: .session, service: log, address: address)
    try await frontEnd.start()
    let control = try TemporaryDirectory()
    let script = control.path + "/clients.py"
    try clientScript.write(toFile: script, atomically: true, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = [script, address, control.path]
    let errors = control.path + "/stderr"
    _ = FileManager.default.createFile(atPath: errors, contents: nil)
    process.standardError = FileHandle(forWritingAtPath: errors)
    let run = Task { try await runToExit(process) }
    /// The JSON the script wrote for `step`, once it has.
    func finished(_ step: Int) async -> Any? {
      let path = control.path + "/done-\(step)"
      guard await eventually(timeout: .seconds(60), { access(path, R_OK) == 0 }),
        let data = FileManager.default.contents(atPath: path)
      else { return nil }
      return try? JSONSerialization.jsonObject(with: data)
    }
    func scriptErrors() -> String { (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "" }
    func go(_ step: Int) { _ = FileManager.default.createFile(atPath: control.path + "/go-\(step)", contents: Data()) }
    @Sendable func gone() -> [UInt64] { log.goneIDs }
    defer {
      if process.isRunning { process.terminate() }
      control.remove()
      bus.stop()
    }

    let paths = await finished(0) as? [String]
    #expect(paths?.count == 5, "\(scriptErrors())")
    #expect(await eventually { log.openedIDs.count == 5 })
    let ids = log.openedIDs
    #expect(Set(ids).count == 5)
    #expect(frontEnd.clientCount == 5)

    // Deleted.
    go(1)
    _ = await finished(1)
    #expect(await eventually { gone() == [ids[0]] })
    // The service closes its session (a revoked authorization), twice: it turns inactive and
    // stays until its connection leaves the bus.
    let closed = try #require(log.opened.withLock { $0.first { $0.id == ids[1] } })
    closed.close()
    closed.close()
    go(2)
    let second = await finished(2) as? [String: Any]
    #expect(second?["active"] as? Bool == false)
    #expect(await eventually { gone().count == 2 })
    #expect(gone().last == ids[1])
    // Stopped, then its connection leaves.
    go(3)
    _ = await finished(3)
    #expect(await eventually { gone().count == 3 })
    #expect(gone().last == ids[2])
    // Deleted twice: the second call finds no client, which is no error (as GeoClue).
    go(4)
    let fourth = await finished(4) as? [String: Any]
    #expect(fourth?["first"] is NSNull)
    #expect(fourth?["second"] is NSNull)
    #expect(await eventually { gone().count == 4 })
    #expect(frontEnd.clientCount == 1)
    // The last is started when the front-end stops.
    await frontEnd.stop()
    #expect(await eventually { gone().count == 5 })
    #expect(frontEnd.clientCount == 0)
    go(5)
    #expect(await eventually(timeout: .seconds(60)) { !process.isRunning })
    try await run.value
    #expect(process.terminationStatus == 0, "\(scriptErrors())")
    for _ in 0..<100 { await Task.yield() }
    #expect(gone().sorted() == ids.sorted(), "\(gone()) for \(ids)")
    await parts.service.shutdown(reason: "test")
    parts.directory.remove()
  }
}
