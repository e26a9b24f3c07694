import LocationModel
extension FieldReader {
  /// A field that NMEA 0183 defines as one letter (mode indicator, navigational status,
  /// direction): `nil` when empty; anything but a single uppercase letter `A`-`Z`, such as `A5D`
  /// (a field that ran into the next one when the `*` was lost), throws
  /// ``NMEAError/invalidField(_:index:name:value:)`` and so rejects the sentence.
  func letter(_ i: Int, _ name: String) throws(NMEAError) -> UInt8? {
    guard let c = try character(i, name) else { return nil }
    guard (0x41...0x5A).contains(c) else { throw invalid(i, name) }
    return c
  }
}
