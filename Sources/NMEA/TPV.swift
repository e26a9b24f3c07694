/// Writes fixes as gpsd JSON protocol objects (TPV, SKY), one object per call, no newline.
public enum GPSDJSON {
  /// Appends `fix` as a gpsd TPV object to `buffer` (UTF-8 JSON, no trailing newline).
  public static func appendTPV(_ fix: Fix, to buffer: inout [UInt8]) {}
  /// Appends `fix`'s sky view as a gpsd SKY object to `buffer` (UTF-8 JSON, no trailing newline).
  public static func appendSKY(_ fix: Fix, to buffer: inout [UInt8]) {}
}
