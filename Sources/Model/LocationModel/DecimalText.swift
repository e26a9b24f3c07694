/// Numbers as fixed-point decimal text: exactly `places` digits after the point, never an
/// exponent, no negative zero (a value that rounds to zero is written without its sign). The one
/// writer of fixed decimals: gpsd's TPV and SKY, NMEA fields, the track exports, the CLI's lines
/// and the map renderers.
///
/// Non-finite values (NaN, ±infinity) and magnitudes whose scaled value reaches `limit` have no
/// such text: the writer returns `nil` and each caller says what they become (NMEA writes an
/// empty field, TPV `null`, the track exports `0`, the renderers `0` or Swift's shortest form), so
/// that policy is always explicit.
public enum DecimalText {
  /// How the magnitude scaled by 10^places becomes an integer.
  public enum Rounding: Sendable, Hashable {
    /// `Double.rounded()` of the scaled magnitude: the nearest integer, halves away from zero,
    /// decided on the exact scaled value (`0.49999999999999994` stays 0).
    case halfAwayFromZero
    /// The scaled magnitude plus 0.5, truncated (the C idiom `(long)(x + 0.5)`, as the NMEA
    /// encoder rounds): the same but for values within half an ulp below a half, where the
    /// addition itself rounds up (`0.49999999999999994` becomes 1).
    case addHalf
    /// C's `printf("%.Nf")` (glibc): the value's exact binary expansion rounded to the nearest,
    /// an exact half to the even neighbour (`20.5625` to 3 places is `20.562`, `2.675`, stored
    /// as 2.67499999999999982236431605997495353221893310546875, is `2.67`), decided without the
    /// rounding error of the scaling (an error-free product by fused multiply-add). gpsd writes
    /// its JSON so. Unlike printf, a value that rounds to zero is written without its sign.
    case nearestEven
  }

  /// The largest `limit` of the text form: below 9 × 10^15 every rounded scaled value is an
  /// exact integer in a `Double` (the spacing of doubles there is 1) and fits an `Int64`.
  public static let exactLimit = 9.0e15

  /// The largest `limit` of ``digits(_:places:rounding:limit:)``: below 9 × 10^18 every rounded
  /// scaled value fits a `UInt64`. Between ``exactLimit`` and it, a `Double` holds only some
  /// integers, and the digits are those of the `Double` the scaled value rounds to.
  public static let integerLimit = 9.0e18

  /// A value as fixed-point digits: `units` / 10^`places`, with its sign.
  public struct Digits: Sendable, Hashable {
    /// The value is below zero and does not round to zero (so no negative zero is written).
    public var negative: Bool
    /// The magnitude times 10^``places``, rounded.
    public var units: UInt64
    /// Digits after the point, 0...9.
    public var places: Int

    /// The digits `units` / 10^`places` (`places` 0...9), negative when `negative`.
    @inlinable public init(negative: Bool, units: UInt64, places: Int) {
      self.negative = negative
      self.units = units
      self.places = places
    }

    /// Hands `emit` the ASCII text: the sign, the whole part, then the point and exactly
    /// ``places`` digits (none, and no point, when ``places`` is 0). With `trimmingZeros`, the
    /// fraction's trailing zeros are dropped, and the point with them when nothing is left
    /// (`12.5`, `12`: xsd:decimal's and JSON's shortest fixed form). Allocates nothing.
    @inlinable public func write(trimmingZeros: Bool = false, _ emit: (UInt8) -> Void) {
      if negative { emit(UInt8(ascii: "-")) }
      let scale = DecimalText.powerOfTen(places)
      DecimalText.writeUnsigned(units / scale, emit)
      var fraction = units % scale
      var width = places
      if trimmingZeros {
        guard fraction != 0 else { return }
        while fraction % 10 == 0 {
          fraction /= 10
          width -= 1
        }
      }
      guard width > 0 else { return }
      emit(UInt8(ascii: "."))
      DecimalText.writeUnsigned(fraction, width: width, emit)
    }
  }

  /// `value` as fixed-point digits with `places` (clamped to 0...9) decimals, rounded by
  /// `rounding`; `nil` when `value` is not finite or its magnitude times 10^places (before
  /// rounding) is `limit` or more; a `limit` above ``integerLimit`` counts as ``integerLimit``.
  /// The allocation-free form, for writers that fill a buffer (gpsd's TPV, the track exports).
  @inlinable public static func digits(
    _ value: Double, places: Int, rounding: Rounding = .halfAwayFromZero, limit: Double = integerLimit
  ) -> Digits? {
    let places = min(max(places, 0), 9)
    guard value.isFinite else { return nil }
    let magnitude = abs(value) * Double(powerOfTen(places))
    guard magnitude < min(limit, integerLimit) else { return nil }
    let units: UInt64
    switch rounding {
    case .halfAwayFromZero: units = UInt64(magnitude.rounded())
    case .addHalf: units = UInt64(magnitude + 0.5)
    case .nearestEven: units = nearestEvenUnits(abs(value), scale: Double(powerOfTen(places)), product: magnitude)
    }
    return Digits(negative: value < 0 && units != 0, units: units, places: places)
  }

  /// `value` with exactly `places` (clamped to 0...9) decimals, rounded by `rounding`; `nil` when
  /// `value` is not finite or its magnitude times 10^places (before rounding) is `limit` or more;
  /// a `limit` above ``exactLimit`` counts as ``exactLimit``.
  public static func fixed(
    _ value: Double, places: Int, rounding: Rounding = .halfAwayFromZero, limit: Double = exactLimit
  ) -> String? {
    guard let digits = digits(value, places: places, rounding: rounding, limit: min(limit, exactLimit))
    else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(28)
    digits.write { bytes.append($0) }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// `x` × `scale` (`x` ≥ 0 and finite, `scale` a power of ten up to 10^9, `product` their
  /// rounded product, below ``integerLimit``) rounded to the nearest integer, an exact half to
  /// even. The exact product is `product + error`, where `error` (from a fused multiply-add, and
  /// exact) is at most half a unit in the last place of `product`. Below 2^52 every half-integer
  /// is a multiple of that unit, so the distance of `product` from the candidate midpoint is exact
  /// and, when not zero, at least one unit: `error` decides only when `product` is the midpoint.
  /// From 2^52 up `product` is a whole number and `error` is rounded onto it.
  @inlinable static func nearestEvenUnits(_ x: Double, scale: Double, product: Double) -> UInt64 {
    let error = (-product).addingProduct(x, scale)  // fused: exact
    guard product < 4_503_599_627_370_496 else {  // 2^52
      let whole = error.rounded(.down)
      let fraction = error - whole  // exact: 0 ≤ fraction < 1
      var units = Int64(product) + Int64(whole)
      if fraction > 0.5 || (fraction == 0.5 && units % 2 != 0) { units += 1 }
      return UInt64(max(units, 0))
    }
    var floor = product.rounded(.down)
    if floor == product && error < 0 { floor -= 1 }
    let fromMidpoint = product - (floor + 0.5)  // exact: multiples of the unit of product
    let above: Bool
    if fromMidpoint != 0 {
      above = fromMidpoint > 0
    } else if error != 0 {
      above = error > 0
    } else {
      above = floor.truncatingRemainder(dividingBy: 2) == 1  // a tie: to the even neighbour
    }
    return UInt64(max(floor, 0)) + (above ? 1 : 0)
  }

  /// 10^`exponent` for 0...9 (1 otherwise): a switch, so that an inlined call with a constant
  /// exponent folds to a constant.
  @inlinable static func powerOfTen(_ exponent: Int) -> UInt64 {
    switch exponent {
    case 1: return 10
    case 2: return 100
    case 3: return 1000
    case 4: return 10_000
    case 5: return 100_000
    case 6: return 1_000_000
    case 7: return 10_000_000
    case 8: return 100_000_000
    case 9: return 1_000_000_000
    default: return 1
    }
  }

  /// Hands `emit` the decimal digits of `value`, most significant first, with leading zeros up
  /// to `width` digits (at most 20 digits in all, `UInt64.max`'s count). The digits are taken
  /// from the right by division by the constant 10 and held four bits each in two words, so
  /// that neither an array nor a division by a variable is needed.
  @inlinable static func writeUnsigned(_ value: UInt64, width: Int = 1, _ emit: (UInt8) -> Void) {
    var low: UInt64 = 0
    var high: UInt64 = 0
    var count = 0
    var rest = value
    repeat {
      high = high << 4 | low >> 60
      low = low << 4 | rest % 10
      rest /= 10
      count += 1
    } while (rest > 0 || count < width) && count < 20
    for _ in 0..<count {
      emit(UInt8(ascii: "0") | UInt8(truncatingIfNeeded: low & 0xF))
      low = low >> 4 | high << 60
      high >>= 4
    }
  }

  /// The value of `text` written in plain decimal notation, the one form numbers take in flags,
  /// config files and URI parameters: an optional sign, digits with an optional point and
  /// fraction (`12`, `-0.5`, `.5`, `5.`), an optional exponent (`1e3`, `2.5E-2`). `nil` for
  /// anything else (hexadecimal `0x10` and `0x1p3`, `inf`, `nan`, spaces, an empty text, more
  /// than 64 characters), for a value beyond a `Double`'s range (`1e400`), so a caller's range
  /// check sees only finite numbers, and for one too small for it (`1e-400`): a value that is
  /// not zero must not read as 0, which often means "none" or "for ever".
  public static func number(_ text: some StringProtocol) -> Double? {
    let bytes = Array(text.utf8)
    guard (1...64).contains(bytes.count) else { return nil }
    var index = 0
    func digits() -> Int {
      let start = index
      while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
      return index - start
    }
    if bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") { index += 1 }
    let mantissaStart = index
    var mantissa = digits()
    if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
      index += 1
      mantissa += digits()
    }
    guard mantissa > 0 else { return nil }
    let nonZero = bytes[mantissaStart..<index].contains { (UInt8(ascii: "1")...UInt8(ascii: "9")).contains($0) }
    if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
      index += 1
      if index < bytes.count, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") { index += 1 }
      guard digits() > 0 else { return nil }
    }
    guard index == bytes.count, let value = Double(String(decoding: bytes, as: UTF8.self)), value.isFinite,
      value != 0 || !nonZero
    else { return nil }
    return value
  }

  /// The value of `text` written as an unsigned decimal integer, digits only (`0`, `9600`): the
  /// form of counts, ports, rates and seeds in flags, config files and URI parameters. `nil` for
  /// anything else (a sign, `+10` included, a point, an exponent, spaces, an empty text) and for
  /// a value beyond `UInt64`.
  public static func wholeNumber(_ text: some StringProtocol) -> UInt64? {
    guard !text.isEmpty, text.utf8.count <= 20,
      text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
    else { return nil }
    return UInt64(text)
  }

  /// ``wholeNumber(_:)`` as an `Integer` (`Int`, `UInt16`...): `nil` too when the value does not
  /// fit it, so that no caller converts with a trap.
  public static func wholeNumber<Integer: FixedWidthInteger>(_ text: some StringProtocol, as type: Integer.Type)
    -> Integer?
  {
    wholeNumber(text).flatMap { Integer(exactly: $0) }
  }
}
