/// One parsed NMEA 0183 sentence.
public struct NMEASentence: Sendable, Hashable {
  /// The sentence's content, by formatter.
  public enum Payload: Sendable, Hashable {
    /// Fix data.
    case gga(GGA)
    /// Recommended minimum data.
    case rmc(RMC)
    /// Geographic position.
    case gll(GLL)
    /// DOP and active satellites.
    case gsa(GSA)
    /// Satellites in view.
    case gsv(GSV)
    /// Course and speed over ground.
    case vtg(VTG)
    /// Time and date.
    case zda(ZDA)
    /// Multi-constellation fix data.
    case gns(GNS)
    /// Pseudorange error statistics.
    case gst(GST)
    /// A proprietary sentence (`$P` + manufacturer code), recognised and not interpreted;
    /// holds the address (e.g. `PGRME`).
    case proprietary(String)
    /// A well-formed sentence of a formatter this package does not interpret (e.g. `RMB`, `TXT`).
    case unsupported(String)
  }

  /// The talker; `nil` for proprietary sentences.
  public var talker: TalkerID?
  /// Whether the sentence carried a checksum (which matched); `false` means unchecked.
  public var hasChecksum: Bool
  /// What the sentence says.
  public var payload: Payload
}

/// Parses single NMEA 0183 sentences (v4.11 layout, earlier versions accepted).
public enum NMEAParser {
  /// Parses one sentence from `$` to the end of the line (line end and trailing blanks allowed).
  ///
  /// - Throws: ``NMEAError`` describing why the text is not a valid sentence. A sentence
  ///   without `*hh` is accepted and reported with ``NMEASentence/hasChecksum`` `false`.
  public static func parse(_ line: String) throws(NMEAError) -> NMEASentence {
    var text = line
    let result: Result<NMEASentence, NMEAError> = text.withUTF8 { buffer in
      do throws(NMEAError) { return .success(try parse(buffer)) } catch { return .failure(error) }
    }
    return try result.get()
  }

  /// Parses one sentence held in `bytes` (from `$`; a trailing CR/LF and blanks are ignored).
  ///
  /// - Throws: ``NMEAError``, as ``parse(_:)-(String)``.
  public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(NMEAError) -> NMEASentence {
    var end = bytes.count
    while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D || bytes[end - 1] == 0x20 { end -= 1 }
    guard end > 0, bytes[0] == 0x24 else { throw .notASentence }
    guard end <= NMEAFramer.maximumLineLength else { throw .tooLong(byteCount: end) }
    // Checksum: XOR of every byte between "$" and "*" (NMEA 0183 v4.11 section 5.2.1).
    var computed: UInt8 = 0
    var star = -1
    var i = 1
    while i < end {
      let c = bytes[i]
      if c == 0x2A {
        star = i
        break
      }
      guard c >= 0x20, c <= 0x7E else { throw .invalidCharacter }
      computed ^= c
      i += 1
    }
    let bodyEnd: Int
    let checked: Bool
    if star >= 0 {
      guard end - star == 3, let hi = FieldReader.hexDigit(bytes[star + 1]), let lo = FieldReader.hexDigit(bytes[star + 2]) else {
        throw .malformedChecksum
      }
      let stated = hi << 4 | lo
      guard stated == computed else { throw .checksumMismatch(stated: stated, computed: computed) }
      bodyEnd = star
      checked = true
    } else {
      bodyEnd = end
      checked = false
    }
    let body = UnsafeBufferPointer(rebasing: bytes[1..<bodyEnd])
    // Address field: "P" + manufacturer (proprietary) or a two-letter talker + three-letter formatter.
    var addressEnd = 0
    while addressEnd < body.count, body[addressEnd] != 0x2C { addressEnd += 1 }
    guard addressEnd >= 2 else { throw .malformedAddress }
    for k in 0..<addressEnd {
      let c = body[k]
      guard (0x41...0x5A).contains(c) || (0x30...0x39).contains(c) else { throw .malformedAddress }
    }
    if body[0] == 0x50 {  // "P"
      let name = String(decoding: UnsafeBufferPointer(rebasing: body[0..<addressEnd]), as: UTF8.self)
      return NMEASentence(talker: nil, hasChecksum: checked, payload: .proprietary(name))
    }
    guard addressEnd == 5 else { throw .malformedAddress }
    let talker = TalkerID(body[0], body[1])
    let f0 = body[2]
    let f1 = body[3]
    let f2 = body[4]
    let type: SentenceType
    switch (f0, f1, f2) {
    case (0x47, 0x47, 0x41): type = .gga
    case (0x52, 0x4D, 0x43): type = .rmc
    case (0x47, 0x4C, 0x4C): type = .gll
    case (0x47, 0x53, 0x41): type = .gsa
    case (0x47, 0x53, 0x56): type = .gsv
    case (0x56, 0x54, 0x47): type = .vtg
    case (0x5A, 0x44, 0x41): type = .zda
    case (0x47, 0x4E, 0x53): type = .gns
    case (0x47, 0x53, 0x54): type = .gst
    default:
      let name = String(decoding: UnsafeBufferPointer(rebasing: body[2..<5]), as: UTF8.self)
      return NMEASentence(talker: talker, hasChecksum: checked, payload: .unsupported(name))
    }
    let payload: NMEASentence.Payload = try withUnsafeTemporaryAllocation(of: Int32.self, capacity: FieldReader.maximumFields * 2) {
      (storage) throws(NMEAError) -> NMEASentence.Payload in
      let starts = UnsafeMutableBufferPointer(rebasing: storage[0..<FieldReader.maximumFields])
      let ends = UnsafeMutableBufferPointer(rebasing: storage[FieldReader.maximumFields...])
      var fields = FieldReader(bytes: body, starts: starts, ends: ends)
      fields.type = type
      switch type {
      case .gga: return .gga(try GGA(fields))
      case .rmc: return .rmc(try RMC(fields))
      case .gll: return .gll(try GLL(fields))
      case .gsa: return .gsa(try GSA(fields))
      case .gsv: return .gsv(try GSV(fields))
      case .vtg: return .vtg(try VTG(fields))
      case .zda: return .zda(try ZDA(fields))
      case .gns: return .gns(try GNS(fields))
      case .gst: return .gst(try GST(fields))
      }
    }
    return NMEASentence(talker: talker, hasChecksum: checked, payload: payload)
  }
}
