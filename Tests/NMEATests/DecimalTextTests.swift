import Foundation
import LocationModel
import LocationProtocol
import NMEA
import Testing

@Suite("DecimalText: fixed decimals")
struct DecimalTextTests {
  @Test(arguments: [
    (1.5, 0, "2"), (2.5, 0, "3"), (-2.5, 0, "-3"), (0.125, 2, "0.13"), (-0.125, 2, "-0.13"),
    (48.137154, 6, "48.137154"), (-0.0, 3, "0.000"), (-0.0004, 3, "0.000"), (-0.0005, 3, "-0.001"),
    (0, 0, "0"), (0.000000001, 9, "0.000000001"), (123.456, 1, "123.5"), (7, 9, "7.000000000"),
  ])
  func writes(_ value: Double, _ places: Int, _ text: String) {
    #expect(DecimalText.fixed(value, places: places) == text)
    #expect(DecimalText.fixed(value, places: places, rounding: .addHalf) == text)
  }

  @Test func placesFromZeroToNine() {
    let expected = [
      "3", "3.1", "3.14", "3.142", "3.1416", "3.14159", "3.141593", "3.1415927", "3.14159265",
      "3.141592654",
    ]
    for places in 0...9 {
      #expect(DecimalText.fixed(Double.pi, places: places) == expected[places])
    }
    #expect(DecimalText.fixed(Double.pi, places: 12) == expected[9])
    #expect(DecimalText.fixed(Double.pi, places: -1) == expected[0])
  }

  @Test func theTwoRulesDifferOnlyHalfAnUlpBelowAHalf() {
    let justBelowHalf = 0.5.nextDown  // 0.49999999999999994
    #expect(DecimalText.fixed(justBelowHalf, places: 0) == "0")
    #expect(DecimalText.fixed(justBelowHalf, places: 0, rounding: .addHalf) == "1")
    #expect(DecimalText.fixed(-justBelowHalf, places: 0) == "0")
    #expect(DecimalText.fixed(-justBelowHalf, places: 0, rounding: .addHalf) == "-1")
    #expect(DecimalText.fixed(0.5, places: 0) == "1")
    #expect(DecimalText.fixed(0.5, places: 0, rounding: .addHalf) == "1")
  }

  @Test func nonFiniteAndHugeValuesHaveNoText() {
    for value in [
      Double.nan, -.nan, .infinity, -.infinity, 1e300, -1e300, 9e15, .greatestFiniteMagnitude,
    ] {
      #expect(DecimalText.fixed(value, places: 2) == nil)
      #expect(DecimalText.fixed(value, places: 2, rounding: .addHalf) == nil)
    }
    #expect(DecimalText.fixed(8_999_999_999_999_999, places: 0) == "8999999999999999")
    #expect(DecimalText.fixed(999_999_999_999_999.9, places: 0, limit: 1e15) == "1000000000000000")
    #expect(DecimalText.fixed(1e15, places: 0, limit: 1e15) == nil)
    #expect(DecimalText.fixed(1e14, places: 2, limit: 1e15) == nil)
  }

  @Test func callersKeepTheirPolicies() {
    #expect(NMEAEncoder.decimal(.nan, places: 1) == "")
    #expect(NMEAEncoder.decimal(1e300, places: 1) == "")
    #expect(NMEAEncoder.decimal(0.5.nextDown, places: 0) == "1")
    #expect(NMEAEncoder.decimal(-12.25, places: 1) == "-12.3")
  }

  /// gpsd writes its TPV and SKY numbers with printf's `%.Nf`: the TPV writer writes the same
  /// text for random values of every magnitude and for exact halves (`20.5625` at 3 places is
  /// `20.562`), but for the sign of a value that rounds to zero.
  @Test func theTPVWriterWritesWhatPrintfWrites() {
    var generator = SplitMix(seed: 24)
    var cases: [(Double, Int)] = [(20.5625, 3), (-14.8325, 3), (2.675, 2), (0.0005, 3), (0.125, 2), (0.375, 2), (2.5, 0), (3.5, 0)]
    for _ in 0..<20_000 {
      let places = Int(generator.next() % 10)
      let exponent = Double(Int(generator.next() % 27) - 8)  // 1e-8 ... 1e18
      cases.append(((Double(generator.next() % 2_000_001) - 1_000_000) / 1_000_000 * pow10(exponent), places))
      // An exact half at `places`: a multiple of 1/16 written to 3 places or fewer ends in 5 there.
      let sixteenths = Double(Int(generator.next() % 2_000_001) - 1_000_000) / 16
      cases.append((sixteenths, Int(generator.next() % 4)))
    }
    // Beyond 9 × 10^18 once scaled the writer falls back to Swift's shortest form (its own test).
    for (value, places) in cases where abs(value) * pow10(Double(places)) < 9e18 {
      var tpv: [UInt8] = []
      GPSDJSON.appendFixed(value, decimals: places, to: &tpv)
      var printf = String(format: "%.\(places)f", value)
      if printf.hasPrefix("-"), printf.allSatisfy({ $0 == "-" || $0 == "0" || $0 == "." }) { printf.removeFirst() }
      #expect(String(decoding: tpv, as: UTF8.self) == printf, "\(value) at \(places) places")
    }
  }

  /// The TPV writer and the track exports write through ``DecimalText/digits``: the TPV's texts
  /// are printf's (gpsd's) and the exports' those of the writer it replaced (kept here as a
  /// reference) for every value, huge and non-finite ones included.
  @Test func digitsWriteWhatTheReplacedWritersWrote() {
    var generator = SplitMix(seed: 2412)
    var values: [Double] = [
      .nan, .infinity, -.infinity, 0, -0.0, 0.5.nextDown, -0.5.nextDown, 0.5, 9e15, 8.9e18, 9e18, 9.1e18,
      -9e18, 1e19, 1e300, -1e300, 999_999_999.9999, 1e9, -1e9, 0.000_000_000_5, 123_456_789.987_654_321,
    ]
    for _ in 0..<20_000 {
      let exponent = Double(Int(generator.next() % 30) - 11)  // 1e-11 ... 1e18
      values.append((Double(generator.next() % 2_000_001) - 1_000_000) / 1_000_000 * pow10(exponent))
    }
    for value in values {
      for places in 0...9 {
        var tpv: [UInt8] = []
        GPSDJSON.appendFixed(value, decimals: places, to: &tpv)
        #expect(String(decoding: tpv, as: UTF8.self) == Reference.tpv(value, places), "\(value) at \(places) places")
        var export: [UInt8] = []
        if abs(value) < 1e9, let digits = DecimalText.digits(value, places: places, rounding: .addHalf) {
          digits.write(trimmingZeros: true) { export.append($0) }
        } else {
          export = Array("0".utf8)
        }
        #expect(String(decoding: export, as: UTF8.self) == Reference.export(value, places), "\(value) at \(places) places")
      }
    }
  }

  @Test func digitsHoldTheRoundedValue() {
    #expect(DecimalText.digits(-12.345, places: 2) == .init(negative: true, units: 1235, places: 2))
    #expect(DecimalText.digits(-0.004, places: 2) == .init(negative: false, units: 0, places: 2))
    #expect(DecimalText.digits(1e17, places: 0)?.units == 100_000_000_000_000_000)
    #expect(DecimalText.digits(9e18, places: 0) == nil)
    #expect(DecimalText.digits(.nan, places: 0) == nil)
    #expect(DecimalText.digits(5, places: 1, limit: 50) == nil)
    var text: [UInt8] = []
    DecimalText.Digits(negative: true, units: 1_200, places: 3).write(trimmingZeros: true) { text.append($0) }
    #expect(String(decoding: text, as: UTF8.self) == "-1.2")
    text = []
    DecimalText.Digits(negative: false, units: 7_000, places: 3).write(trimmingZeros: true) { text.append($0) }
    #expect(String(decoding: text, as: UTF8.self) == "7")
    text = []
    DecimalText.Digits(negative: false, units: 7, places: 3).write { text.append($0) }
    #expect(String(decoding: text, as: UTF8.self) == "0.007")
  }

  @Test func numbersAreReadInDecimalNotationOnly() {
    let accepted: [(String, Double)] = [
      ("12", 12), ("-0.5", -0.5), ("+3", 3), (".5", 0.5), ("5.", 5), ("1e3", 1000), ("2.5E-2", 0.025), ("0", 0),
      ("-0", 0), ("1.7976931348623157e308", .greatestFiniteMagnitude), ("0e-400", 0), ("0.000", 0),
    ]
    for (text, value) in accepted {
      #expect(DecimalText.number(text) == value, "\(text)")
    }
    for text in [
      "", " 1", "1 ", "0x10", "0x1p3", "inf", "-infinity", "nan", "NaN", "1e", "e3", ".", "-", "+.", "1e+",
      "1.2.3", "1e400", "-1e400", "1e-400", "-2.5e-330", "١٢", "5abc", String(repeating: "1", count: 65),
    ] {
      #expect(DecimalText.number(text) == nil, "\(text.debugDescription)")
    }
  }

  @Test func wholeNumbersAreDigitsOnly() {
    #expect(DecimalText.wholeNumber("0") == 0)
    #expect(DecimalText.wholeNumber("9600") == 9600)
    #expect(DecimalText.wholeNumber("18446744073709551615") == .max)
    #expect(DecimalText.wholeNumber("18446744073709551615", as: Int.self) == nil)
    #expect(DecimalText.wholeNumber("65535", as: UInt16.self) == 65535)
    #expect(DecimalText.wholeNumber("65536", as: UInt16.self) == nil)
    for text in ["", "+10", "-1", "1.0", "1e3", " 1", "0x10", "18446744073709551616", "٣"] {
      #expect(DecimalText.wholeNumber(text) == nil, "\(text)")
    }
  }

  private func pow10(_ exponent: Double) -> Double {
    var result = 1.0
    for _ in 0..<Int(abs(exponent)) { result *= 10 }
    return exponent < 0 ? 1 / result : result
  }
}

/// SplitMix64: a small seeded generator, so that a failure repeats.
private struct SplitMix {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// The fixed-decimal writers of the TPV writer and the track exports before they wrote through
/// ``DecimalText/digits`` (as they were, on strings): the references their output is held to.
private enum Reference {
  static func tpv(_ value: Double, _ decimals: Int) -> String {
    guard value.isFinite else { return "null" }
    let d = min(max(decimals, 0), 9)
    var scale = 1.0
    for _ in 0..<d { scale *= 10 }
    guard abs(value) * scale < 9.0e18 else { return value.description }
    // printf's text (gpsd's), without the sign of a value that rounds to zero.
    var text = String(format: "%.\(d)f", value)
    if text.hasPrefix("-"), text.allSatisfy({ $0 == "-" || $0 == "0" || $0 == "." }) { text.removeFirst() }
    return text
  }

  static func export(_ value: Double, _ digits: Int) -> String {
    let digits = min(max(digits, 0), 9)
    var divisor: UInt64 = 1
    for _ in 0..<digits { divisor *= 10 }
    guard value.isFinite, abs(value) < 1e9 else { return "0" }
    let scaled = abs(value) * Double(divisor) + 0.5
    guard scaled < 9.2e18 else { return "0" }
    var units = UInt64(scaled.rounded(.towardZero))
    var text = value < 0 && units != 0 ? "-" : ""
    text += String(units / divisor)
    units %= divisor
    guard units != 0 else { return text }
    var width = digits
    while units % 10 == 0 {
      units /= 10
      width -= 1
    }
    let fraction = String(units)
    return text + "." + String(repeating: "0", count: width - fraction.count) + fraction
  }
}
