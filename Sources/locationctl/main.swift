import Glibc
import LocationServer

// locationctl: a command-line client of locationd. Dispatches to one subcommand per request
// (Client*.swift) and to `decode` (Decode.swift).

signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
exit(dispatch(arguments))
