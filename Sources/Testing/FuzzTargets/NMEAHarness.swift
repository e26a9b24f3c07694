import LocationModel
import LocationProtocol
import NMEA

/// NMEA 0183 stream target: the bytes after the first are a receiver's output; the first byte
/// picks the chunk size (1-256 bytes) the stream is fed in, as `locationctl decode` and the
/// replay backend feed it.
///
/// Invariants:
/// - any chunking gives the same fixes and the same counters as one whole feed;
/// - the live decoder of the direct receivers (``NMEADecoder/init(liveWithRolloverFloor:)``)
///   emits the same, and the epochs it hands out at their end of cycle are in range;
/// - every TPV and SKY object written is strict JSON;
/// - latitude in [-90, 90], longitude in [-180, 180] (finite); a fix without a position mode
///   carries no coordinate; the time of day is within one day (a leap second included);
/// - fix times never decrease when the input's times of day never decrease under one date.
enum NMEAHarness {
  static func check(_ input: [UInt8]) throws(FuzzFailure) {
    guard let first = input.first else { return }
    let chunkSize = Int(first) + 1
    let stream = Array(input.dropFirst())

    let (whole, wholeStatistics) = decode(stream, chunkSize: max(stream.count, 1))
    let (chunked, chunkedStatistics) = decode(stream, chunkSize: chunkSize)
    try require(
      whole == chunked && wholeStatistics == chunkedStatistics,
      "chunk size \(chunkSize) changed the result: \(whole.count) fixes \(wholeStatistics.summary) vs \(chunked.count) fixes \(chunkedStatistics.summary)"
    )

    // The live decoder of the direct receivers (which learns which sentence ends an epoch and
    // hands the epoch out there) emits exactly what the plain decoder emits.
    let (live, liveStatistics, early) = decodeLive(stream, chunkSize: chunkSize)
    try require(
      live == chunked && liveStatistics == chunkedStatistics,
      "the live decoder changed the result: \(live.count) fixes vs \(chunked.count)")
    for decoded in early {
      if let c = decoded.fix.coordinate {
        try require(
          c.latitude.isFinite && (-90...90).contains(c.latitude) && c.longitude.isFinite
            && (-180...180).contains(c.longitude),
          "epoch at its end: coordinate out of range: \(c.latitude), \(c.longitude)")
      }
    }

    var previousTime: Int64?
    // Read from the input only once a second timed fix needs it (most inputs make one or none).
    var monotonic: Bool?
    for decoded in whole {
      let fix = decoded.fix
      var tpv: [UInt8] = []
      GPSDJSON.appendTPV(fix, to: &tpv)
      do { try StrictJSON.validate(tpv) } catch {
        throw FuzzFailure("TPV is not JSON (\(error)): \(tpv.escaped)")
      }
      var sky: [UInt8] = []
      GPSDJSON.appendSKY(fix, to: &sky)
      do { try StrictJSON.validate(sky) } catch {
        throw FuzzFailure("SKY is not JSON (\(error)): \(sky.escaped)")
      }
      if let c = fix.coordinate {
        try require(
          c.latitude.isFinite && (-90...90).contains(c.latitude) && c.longitude.isFinite
            && (-180...180).contains(c.longitude),
          "coordinate out of range: \(c.latitude), \(c.longitude) (line \(decoded.line))")
      }
      try require(
        fix.mode.hasPosition || fix.coordinate == nil,
        "mode \(fix.mode) fix carries a coordinate (line \(decoded.line))")
      if let tod = fix.timeOfDay {
        try require(
          (0..<86_401_000).contains(tod), "time of day \(tod) out of range (line \(decoded.line))")
      }
      if let time = fix.time {
        if let previousTime {
          if monotonic == nil { monotonic = inputTimesNonDecreasing(stream) }
          if monotonic == true {
            try require(
              time >= previousTime,
              "time went backwards: \(GPSDJSON.iso8601(milliseconds: previousTime)) then \(GPSDJSON.iso8601(milliseconds: time)) (line \(decoded.line)) although the input's did not"
            )
          }
        }
        previousTime = time
      }
    }
  }

  /// Decodes as a direct receiver does: a live decoder fed in chunks, asked after each chunk for
  /// the epoch that just ended. Returns what it emitted, its counters, and the early epochs.
  static func decodeLive(_ stream: [UInt8], chunkSize: Int) -> (
    [DecodedFix], NMEAStatistics, [DecodedFix]
  ) {
    var decoder = NMEADecoder(liveWithRolloverFloor: nil)
    var fixes: [DecodedFix] = []
    var early: [DecodedFix] = []
    stream.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        let end = min(offset + chunkSize, raw.count)
        decoder.feed(UnsafeRawBufferPointer(rebasing: raw[offset..<end])) { fixes.append($0) }
        if let ready = decoder.epochAtCycleEnd() { early.append(ready) }
        offset = end
      }
    }
    decoder.finish { fixes.append($0) }
    return (fixes, decoder.statistics, early)
  }

  static func decode(_ stream: [UInt8], chunkSize: Int) -> ([DecodedFix], NMEAStatistics) {
    var decoder = NMEADecoder()
    var fixes: [DecodedFix] = []
    stream.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        let end = min(offset + chunkSize, raw.count)
        decoder.feed(UnsafeRawBufferPointer(rebasing: raw[offset..<end])) { fixes.append($0) }
        offset = end
      }
    }
    decoder.finish { fixes.append($0) }
    return (fixes, decoder.statistics)
  }

  /// Whether the accepted sentences carry one date at most and their times of day never
  /// decrease. Conservative: a stream that crosses midnight or mixes dates is not checked for
  /// monotonic output, because which sentence's date applies to an epoch is then a judgement.
  static func inputTimesNonDecreasing(_ stream: [UInt8]) -> Bool {
    var framer = NMEAFramer()
    var date: Int?
    var lastTime: Int32?
    var monotonic = true
    let visit: (NMEAFramer.Event) -> Void = { event in
      guard monotonic, case .sentence(let bytes, _) = event,
        let sentence = try? NMEAParser.parse(bytes)
      else { return }
      var sentenceDate: Int?
      switch sentence.payload {
      case .rmc(let s): sentenceDate = s.date
      case .zda(let s): sentenceDate = s.date
      default: break
      }
      if let d = sentenceDate {
        if let current = date, d != current { monotonic = false }
        date = d
      }
      if let t = sentence.timeOfDay {
        if let last = lastTime, t < last { monotonic = false }
        lastTime = t
      }
    }
    stream.withUnsafeBytes { framer.feed($0, visit) }
    framer.finish(visit)
    return monotonic
  }
}
