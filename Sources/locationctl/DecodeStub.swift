// Placeholder until Decode.swift provides `runDecode(arguments:)`; delete this file then.

/// Decodes NMEA 0183 input (not available in this build).
func runDecode(arguments: [String]) -> Int32 {
  writeError("locationctl: decode is not available in this build")
  return ExitCode.failure
}
