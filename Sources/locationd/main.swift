import Glibc
import LocationProtocol
import ServiceCore
import SocketTransport
import LocationDaemon
import LocationModel

// Configuration and wiring live in LocationDaemon.Daemon so that tests can reach them.
let status = await Daemon.main(
  arguments: Array(CommandLine.arguments.dropFirst()),
  environment: ProcessInfoEnvironment.current())
exit(status)
