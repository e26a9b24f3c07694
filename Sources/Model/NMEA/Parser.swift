import LocationModel
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
    case proprietary(SentenceName)
    /// A well-formed sentence of a formatter this package does not interpret (e.g. `RMB`, `TXT`).
    case unsupported(SentenceName)
  }

  /// The talker; `nil` for proprietary sentences.
  public var talker: TalkerID?
  /// Whether the sentence carried a checksum (which matched); `false` means unchecked.
  public var hasChecksum: Bool
  /// What the sentence says.
  public var payload: Payload
  /// The UTC time of day the sentence carries (GGA, RMC, GLL, GNS, ZDA, GST), milliseconds since
  /// midnight; `nil` for sentences without a time field or with an empty one.
  public var timeOfDay: Int32? = nil
}

extension UnsafeBufferPointer where Element == UInt8 {
  /// Calls `body` with the base address when the buffer holds at least `count` bytes.
  @inline(__always) fileprivate func withUnsafeBufferPointer_(_ count: Int, _ body: (UnsafePointer<UInt8>) -> Void) {
    if let base = baseAddress, self.count >= count { body(base) }
  }
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
    return try withUnsafeTemporaryAllocation(of: Int32.self, capacity: FieldReader.maximumFields * 2) {
      (storage) throws(NMEAError) -> NMEASentence in
      try parse(bytes, end: end, scratch: storage)
    }
  }

  /// Parses with caller-provided room for the field offsets (`2 * FieldReader.maximumFields`
  /// values), so that a decoder reuses one allocation for every sentence.
  static func parse(_ bytes: UnsafeBufferPointer<UInt8>, scratch: UnsafeMutableBufferPointer<Int32>) throws(NMEAError) -> NMEASentence {
    var end = bytes.count
    while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D || bytes[end - 1] == 0x20 { end -= 1 }
    guard end > 0, bytes[0] == 0x24 else { throw .notASentence }
    guard end <= NMEAFramer.maximumLineLength else { throw .tooLong(byteCount: end) }
    return try parse(bytes, end: end, scratch: scratch)
  }

  @inline(__always)
  private static func parse(
    _ bytes: UnsafeBufferPointer<UInt8>, end: Int, scratch storage: UnsafeMutableBufferPointer<Int32>
  ) throws(NMEAError) -> NMEASentence {
    do {
      let starts = UnsafeMutableBufferPointer(rebasing: storage[0..<FieldReader.maximumFields])
      let ends = UnsafeMutableBufferPointer(rebasing: storage[FieldReader.maximumFields..<(2 * FieldReader.maximumFields)])
      // One pass: the checksum (XOR of every byte between "$" and "*", NMEA 0183 v4.11 section
      // 5.2.1) and the field boundaries, relative to the byte after "$".
      var computed: UInt8 = 0
      var star = -1
      var fieldCount = 0
      var fieldStart = 0
      var i = 1
      // Eight bytes at a time: XOR into a word, record commas, stop at anything unusual.
      var word: UInt64 = 0
      bytes.withUnsafeBufferPointer_(end) { base in
        while i + 8 <= end {
          let w = SWAR.load(base + i)
          if SWAR.nonPrintableLanes(w) | SWAR.lanes(w, equalTo: 0x2A) != 0 { break }
          word ^= w
          var commas = SWAR.lanes(w, equalTo: 0x2C)
          while commas != 0 && fieldCount < FieldReader.maximumFields - 1 {
            let at = i + commas.trailingZeroBitCount / 8
            starts[fieldCount] = Int32(fieldStart)
            ends[fieldCount] = Int32(at - 1)
            fieldCount += 1
            fieldStart = at
            commas &= commas &- 1
          }
          i += 8
        }
      }
      word ^= word >> 32
      word ^= word >> 16
      word ^= word >> 8
      computed = UInt8(truncatingIfNeeded: word)
      while i < end {
        let c = bytes[i]
        if c == 0x2A {
          star = i
          break
        }
        guard c >= 0x20, c <= 0x7E else { throw .invalidCharacter }
        computed ^= c
        if c == 0x2C && fieldCount < FieldReader.maximumFields - 1 {
          starts[fieldCount] = Int32(fieldStart)
          ends[fieldCount] = Int32(i - 1)
          fieldCount += 1
          fieldStart = i
        }
        i += 1
      }
      let bodyEnd: Int
      let checked: Bool
      if star >= 0 {
        guard end - star == 3, let hi = FieldReader.hexDigit(bytes[star + 1]), let lo = FieldReader.hexDigit(bytes[star + 2])
        else {
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
      starts[fieldCount] = Int32(fieldStart)
      ends[fieldCount] = Int32(bodyEnd - 1)
      fieldCount += 1
      let body = UnsafeBufferPointer(rebasing: bytes[1..<bodyEnd])
      // Address field: "P" + manufacturer (proprietary) or a two-letter talker + three-letter formatter.
      let addressEnd = Int(ends[0])
      guard addressEnd >= 2 else { throw .malformedAddress }
      for k in 0..<addressEnd {
        let c = body[k]
        guard (0x41...0x5A).contains(c) || (0x30...0x39).contains(c) else { throw .malformedAddress }
      }
      if body[0] == 0x50 {  // "P"
        let name = SentenceName(UnsafeBufferPointer(rebasing: body[0..<addressEnd]))
        return NMEASentence(talker: nil, hasChecksum: checked, payload: .proprietary(name))
      }
      guard addressEnd == 5 else { throw .malformedAddress }
      let talker = TalkerID(body[0], body[1])
      let type: SentenceType
      switch (body[2], body[3], body[4]) {
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
        let name = SentenceName(UnsafeBufferPointer(rebasing: body[2..<5]))
        return NMEASentence(talker: talker, hasChecksum: checked, payload: .unsupported(name))
      }
      guard fieldCount >= type.minimumFieldCount else {
        throw .tooFewFields(type, count: fieldCount, minimum: type.minimumFieldCount)
      }
      let fields = FieldReader(bytes: body, starts: starts, ends: ends, count: fieldCount, type: type)
      let payload: NMEASentence.Payload
      var time: Int32?
      switch type {
      case .gga:
        let s = try GGA(fields)
        time = s.timeOfDay
        payload = .gga(s)
      case .rmc:
        let s = try RMC(fields)
        time = s.timeOfDay
        payload = .rmc(s)
      case .gll:
        let s = try GLL(fields)
        time = s.timeOfDay
        payload = .gll(s)
      case .gsa: payload = .gsa(try GSA(fields))
      case .gsv: payload = .gsv(try GSV(fields))
      case .vtg: payload = .vtg(try VTG(fields))
      case .zda:
        let s = try ZDA(fields)
        time = s.timeOfDay
        payload = .zda(s)
      case .gns:
        let s = try GNS(fields)
        time = s.timeOfDay
        payload = .gns(s)
      case .gst:
        let s = try GST(fields)
        time = s.timeOfDay
        payload = .gst(s)
      }
      return NMEASentence(talker: talker, hasChecksum: checked, payload: payload, timeOfDay: time)
    }
  }
}
