extension CivilDate {
  /// Days since 1970-01-01 of an ISO 8601 calendar date `YYYY-MM-DD` (Gregorian, years
  /// 1980-2079: the years an NMEA two-digit year names here, so that no date moved forward by
  /// 1024 weeks passes year 9999); `nil` for anything else. Reads the week-rollover floor of the
  /// CLI and URIs.
  public static func days(iso text: String) -> Int? {
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
      parts.allSatisfy({ $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
      let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
      (1980...2079).contains(year), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day)
    else { return nil }
    return days(year: year, month: month, day: day)
  }
}
