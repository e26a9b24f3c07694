import Glibc
import SystemIO

// locationctl: a command-line client of locationd. Dispatches to one subcommand per request
// (Client*.swift) and to `decode` (Decode.swift).

SignalSequence.resetSignalMask()
SignalSequence.ignoreSIGPIPE()
let arguments = Array(CommandLine.arguments.dropFirst())
let status = dispatch(arguments)
// What print buffered is written now: output that was lost is an error, whatever the command.
flushOutput()
exit(status)
