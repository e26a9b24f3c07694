/// Numbers as fixed-point decimal text: exactly `places` digits after the point, never an
/// exponent, no negative zero (a value that rounds to zero is written without its sign). The one
/// writer of fixed decimals for NMEA fields, the CLI's lines and the map renderers.
///
/// Non-finite values (NaN, ±infinity) and magnitudes whose scaled value reaches `limit` have no
/// such text: the writer returns `nil` and each caller says what they become (NMEA writes an
/// empty field, the renderers `0` or Swift's shortest form), so that policy is always explicit.
public enum DecimalText {
  /// How the magnitude scaled by 10^places becomes an integer.
  public enum Rounding: Sendable, Hashable {
    /// `Double.rounded()` of the scaled magnitude: the nearest integer, halves away from zero,
    /// decided on the exact scaled value (`0.49999999999999994` stays 0).
    case halfAwayFromZero
    /// The scaled magnitude plus 0.5, truncated (the C idiom `(long)(x + 0.5)`, as gpsd and the
    /// NMEA encoder round): the same but for values within half an ulp below a half, where the
    /// addition itself rounds up (`0.49999999999999994` becomes 1).
    case addHalf
  }

  /// The largest `limit`: below 9 × 10^15 every rounded scaled value is an exact integer in a
  /// `Double` (the spacing of doubles there is 1) and fits an `Int64`.
  public static let exactLimit = 9.0e15

  /// `value` with exactly `places` (clamped to 0...9) decimals, rounded by `rounding`; `nil` when
  /// `value` is not finite or its magnitude times 10^places (before rounding) is `limit` or more;
  /// a `limit` above ``exactLimit`` counts as ``exactLimit``.
  public static func fixed(
    _ value: Double, places: Int, rounding: Rounding = .halfAwayFromZero, limit: Double = exactLimit
  ) -> String? {
    let places = min(max(places, 0), 9)
    var scale: Int64 = 1
    for _ in 0..<places { scale *= 10 }
    guard value.isFinite else { return nil }
    let magnitude = abs(value) * Double(scale)
    guard magnitude < min(limit, exactLimit) else { return nil }
    let units: Int64
    switch rounding {
    case .halfAwayFromZero: units = Int64(magnitude.rounded())
    case .addHalf: units = Int64(magnitude + 0.5)
    }
    let sign = value < 0 && units != 0 ? "-" : ""
    let whole = String(units / scale)
    guard places > 0 else { return sign + whole }
    let fraction = String(units % scale)
    return sign + whole + "." + String(repeating: "0", count: places - fraction.count) + fraction
  }
}
