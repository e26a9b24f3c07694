import Glibc
import LocationServer

// Configuration and wiring live in LocationServer.Daemon so that tests can reach them.
let status = await Daemon.main(
  arguments: Array(CommandLine.arguments.dropFirst()),
  environment: ProcessInfoEnvironment.current())
exit(status)
