import Testing

/// The end-to-end tests: real `locationd` and `locationctl` binaries, real sockets, temporary
/// directories. Every test starts its own daemon on its own socket and stops it at the end.
///
/// All suites are nested here so that `.serialized` covers them together: tests that measure
/// timing (watchdog intervals, 100 watchers on schedule) never share the two cores with another
/// daemon of this suite.
@Suite("End to end", .serialized)
enum EndToEnd {}
