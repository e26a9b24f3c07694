import Glibc
import SystemIO

// locationctl: a command-line client of locationd. Dispatches to one subcommand per request
// (Client*.swift) and to `decode` (Decode.swift).

SignalSequence.resetSignalMask()
SignalSequence.ignoreSIGPIPE()
let arguments = Array(CommandLine.arguments.dropFirst())
exit(dispatch(arguments))
