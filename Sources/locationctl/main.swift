import Glibc
import LocationProtocol
import ServiceCore
import SocketTransport
import LocationDaemon
import LocationModel

// locationctl: a command-line client of locationd. Dispatches to one subcommand per request
// (Client*.swift) and to `decode` (Decode.swift).

signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
exit(dispatch(arguments))
