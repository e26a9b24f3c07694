import Glibc
import LocationDaemon
import LocationModel
import LocationProtocol
import ServiceCore
import SocketFrontEnd
import SystemIO

// Configuration and wiring live in LocationDaemon.Daemon so that tests can reach them.
//
// The daemon runs on the concurrency pool and the main thread only waits for it to exit. A
// top-level `await` would hand the main thread to dispatch_main(), which ends it with
// pthread_exit: glibc then loads libgcc_s to unwind that thread's stack, and the unwind tables
// it reads stay resident (about 0.8 MB of the idle daemon's memory, see scripts/rss-breakdown).
// Nothing in the daemon runs on the main queue or the main actor.
// Before any other thread exists: every thread inherits the main thread's mask, and the main
// thread, which never ends, is the one that can always take SIGTERM.
SignalSequence.resetSignalMask()
Task.detached {
  let status = await Daemon.main(
    arguments: Array(CommandLine.arguments.dropFirst()),
    environment: ProcessInfoEnvironment.current())
  exit(status)
}
while true { pause() }
