import Foundation
import Glibc
import LocationCore
import MapState
import ServiceCore

/// A temporary directory removed by `remove()`; mode 0755 so an unprivileged peer can reach sockets in it.
public struct TemporaryDirectory: Sendable {
  /// The directory's absolute path, below `/tmp`.
  public let path: String

  /// Creates a new directory `/tmp/locationd-test-XXXXXX` (mkdtemp(3)), mode 0755.
  ///
  /// - Throws: ``TestError`` when mkdtemp fails.
  public init() throws {
    var template = Array("/tmp/locationd-test-XXXXXX".utf8CString)
    guard let result = mkdtemp(&template) else { throw TestError("mkdtemp failed") }
    path = String(cString: result)
    chmod(path, 0o755)
  }

  /// Removes the directory and everything in it; a failure is ignored.
  public func remove() {
    try? FileManager.default.removeItem(atPath: path)
  }
}

/// A test's own failure, described by its message.
public struct TestError: Error, CustomStringConvertible {
  /// What failed, in words.
  public var description: String
  /// Creates the error with `description`.
  public init(_ description: String) { self.description = description }
}

/// The real service (``LocationService`` over a ``FakeBackend``, its ``AuthorizationAuthority``
/// deciding by `group`, its map state under a temporary directory), built but not started.
public struct ServiceParts: Sendable {
  /// The temporary directory that holds the map state (`state/`); the caller removes it.
  public let directory: TemporaryDirectory
  /// The backend the service's manager runs.
  public let backend: FakeBackend
  /// The authority that decides `request` by group membership.
  public let authority: AuthorizationAuthority
  /// The service, not started.
  public let service: LocationService

  /// Builds the parts; `group` is the group whose members are authorized (`nil`: everyone).
  ///
  /// - Throws: ``TestError`` when the temporary directory cannot be made.
  public init(group: String?) throws {
    directory = try TemporaryDirectory()
    backend = FakeBackend()
    authority = AuthorizationAuthority(Authorizer(groupName: group))
    let map = MapStateService(store: MapStateStore(directory: directory.path + "/state") { _ in })
    service = LocationService(
      manager: LocationManager(backend: backend), map: map, backend: backend, authority: authority)
  }
}

/// Runs `process` and waits for it to exit without blocking a thread (its output must fit a pipe).
///
/// - Throws: what `Process.run()` throws when the executable cannot be started.
public func runToExit(_ process: Process) async throws {
  let (exited, continuation) = AsyncStream.makeStream(of: Void.self)
  process.terminationHandler = { _ in continuation.finish() }
  try process.run()
  for await _ in exited {}
}

/// Waits until `condition` holds or `timeout` passes (a guard against a hang, long because a
/// test task on a loaded 2-core machine may not run for seconds); returns whether it held.
///
/// For a condition that reads state without `await` (and need not be `Sendable`); the
/// overload with an `async` condition is in FakeBackend.swift.
public func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now + timeout
  while ContinuousClock.now < deadline {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(5))
  }
  return condition()
}
