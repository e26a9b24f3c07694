import LocationModel
// ZDA: Time and date (NMEA 0183 v4.11).
//
//         1         2  3  4    5  6
//  $--ZDA,hhmmss.ss,xx,xx,xxxx,xx,xx*hh
//
//  $GPZDA,202640.000,13,04,2015,,*54                                                        (MT3339)
//  $GNZDA,003956.00,12,04,2019,00,00*7D                                                      (ZED-F9P)

/// ZDA: UTC time and date with a four-digit year (NMEA 0183 v4.11).
public struct ZDA: Sendable, Hashable {
  /// Field 1: UTC time of day, milliseconds since midnight.
  public var timeOfDay: Int32?
  /// Fields 2-4: UTC date, days since 1970-01-01; `nil` unless day, month and year are all present.
  public var date: Int?

  init(_ f: FieldReader) throws(NMEAError) {
    timeOfDay = try f.timeOfDay(1)
    let day = try f.int(2, "day")
    let month = try f.int(3, "month")
    let year = try f.int(4, "year")
    if let day, let month, let year {
      guard (1...12).contains(month), (1980...2200).contains(year),
        (1...CivilDate.daysIn(month: month, year: year)).contains(day)
      else { throw f.invalid(2, "date") }
      date = CivilDate.days(year: year, month: month, day: day)
    }
  }
}
