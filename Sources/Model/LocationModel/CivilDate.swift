/// Proleptic Gregorian calendar arithmetic (days since 1970-01-01), after H. Hinnant's
/// `days_from_civil` / `civil_from_days` algorithms.
public enum CivilDate {
  /// Days since 1970-01-01 for a Gregorian date; `month` 1-12, `day` 1-31.
  public static func days(year: Int, month: Int, day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146097 + doe - 719468
  }

  /// The Gregorian (year, month 1-12, day 1-31) of a day count since 1970-01-01.
  public static func civil(days: Int) -> (year: Int, month: Int, day: Int) {
    let z = days + 719468
    let era = (z >= 0 ? z : z - 146096) / 146097
    let doe = z - era * 146097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }

  /// The Gregorian (year, month 1-12, day 1-31) of the UTC day that holds `milliseconds` since
  /// 1970-01-01T00:00:00Z (any value: times before 1970 fall on the day they are in, not the one
  /// after).
  public static func civil(milliseconds: Int64) -> (year: Int, month: Int, day: Int) {
    UTCTime(milliseconds: milliseconds).date
  }

  /// Number of days in `month` (1-12) of `year`, Gregorian leap years included.
  public static func daysIn(month: Int, year: Int) -> Int {
    switch month {
    case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
  }
}

extension CivilDate {
  /// Days since 1970-01-01 of an ISO 8601 calendar date `YYYY-MM-DD` (Gregorian, years
  /// 1980-2079: the years an NMEA two-digit year names here, so that no date moved forward by
  /// 1024 weeks passes year 9999); `nil` for anything else. Reads the week-rollover floor of the
  /// CLI and URIs.
  public static func days(iso text: String) -> Int? {
    guard let time = UTCTime(iso8601: text, syntax: .date), (1980...2079).contains(time.date.year) else { return nil }
    return Int(time.day)
  }
}
