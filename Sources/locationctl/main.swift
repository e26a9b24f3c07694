import Glibc
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "decode" {
  exit(runDecode(arguments: Array(arguments.dropFirst())))
}
writeError("usage: locationctl decode [--sky] [FILE|-]\n")
exit(64)
