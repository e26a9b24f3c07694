import Foundation
import Glibc
import LocationModel
import Testing

@Suite("UTCTime: ISO 8601 read and write")
struct UTCTimeTests {
  @Test(arguments: [
    (Int64(0), UTCTime.Fraction.milliseconds, "1970-01-01T00:00:00.000Z"),
    (1_795_985_710_250, .milliseconds, "2026-11-29T20:55:10.250Z"),
    (1_795_985_710_250, .none, "2026-11-29T20:55:10Z"),
    (1_795_985_710_250, .millisecondsUnlessZero, "2026-11-29T20:55:10.250Z"),
    (1_795_985_710_000, .millisecondsUnlessZero, "2026-11-29T20:55:10Z"),
    (-1, .milliseconds, "1969-12-31T23:59:59.999Z"),
    (-1, .none, "1969-12-31T23:59:59Z"),
    (951_782_400_000, .milliseconds, "2000-02-29T00:00:00.000Z"),
    (-62_167_219_200_000, .milliseconds, "0000-01-01T00:00:00.000Z"),
    (-62_167_219_200_001, .milliseconds, "-1-12-31T23:59:59.999Z"),
    (253_402_300_800_000, .milliseconds, "10000-01-01T00:00:00.000Z"),
  ])
  func writes(_ milliseconds: Int64, _ fraction: UTCTime.Fraction, _ text: String) {
    let time = UTCTime(milliseconds: milliseconds)
    #expect(time.iso8601(fraction: fraction) == text)
    var buffer: [UInt8] = [0x22]
    time.append(to: &buffer, fraction: fraction)
    #expect(buffer == [0x22] + Array(text.utf8))
  }

  /// The basic format names files (the store's `.rejected-` copies): gmtime_r's fields agree.
  @Test func basicFormatAgreesWithGmtime() {
    #expect(UTCTime(milliseconds: 1_795_985_710_250).iso8601Basic() == "20261129T205510Z")
    #expect(UTCTime(milliseconds: -1).iso8601Basic() == "19691231T235959Z")
    #expect(UTCTime(milliseconds: 253_402_300_800_000).iso8601Basic() == "100000101T000000Z")
    var generator: UInt64 = 0x5EED
    for _ in 0..<2_000 {
      generator = generator &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      let seconds = Int64(generator >> 31 % 8_000_000_000) - 2_000_000_000  // 1906 ... 2159
      var clock = time_t(seconds)
      var parts = tm()
      gmtime_r(&clock, &parts)
      let expected = String(
        format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
        parts.tm_hour, parts.tm_min, parts.tm_sec)
      #expect(UTCTime(milliseconds: seconds * 1000 + 999).iso8601Basic() == expected, "\(seconds)")
    }
  }

  @Test func extremesWriteWithoutTrapping() {
    #expect(
      UTCTime(milliseconds: .max).iso8601(fraction: .milliseconds)
        == "292278994-08-17T07:12:55.807Z")
    #expect(
      UTCTime(milliseconds: .min).iso8601(fraction: .milliseconds)
        == "-292275055-05-16T16:47:04.192Z")
    #expect(UTCTime(seconds: .max).milliseconds == .max)
    #expect(UTCTime(seconds: .min).milliseconds == .min)
    #expect(UTCTime(seconds: 1_556_712_000).milliseconds == 1_556_712_000_000)
  }

  @Test func secondsAndDaysRoundTowardThePast() {
    #expect(UTCTime(milliseconds: -1).seconds == -1)
    #expect(UTCTime(milliseconds: -1000).seconds == -1)
    #expect(UTCTime(milliseconds: 1999).seconds == 1)
    #expect(UTCTime(milliseconds: -1).day == -1)
    #expect(UTCTime(milliseconds: -1).millisecondOfDay == 86_399_999)
    #expect(UTCTime(milliseconds: 86_400_000).day == 1)
    let date = UTCTime(milliseconds: 1_773_491_719_250).date
    #expect(date.year == 2026 && date.month == 3 && date.day == 14)
  }

  @Test(arguments: [
    ("2026-11-29T20:55:10.000Z", Int64(1_795_985_710_000)),
    ("2026-11-29T20:55:10Z", 1_795_985_710_000),
    ("1970-01-01T00:00:00.5Z", 500),
    ("2024-02-29T23:59:59.999999Z", 1_709_251_199_999),
    ("2016-12-31T23:59:60Z", 1_483_228_800_000),
    ("0000-01-01T00:00:00Z", -62_167_219_200_000),
    ("9999-12-31T23:59:59.123456789Z", 253_402_300_799_123),
    ("1969-12-31T23:59:59.999Z", -1),
  ])
  func readsTPVTimes(_ text: String, _ milliseconds: Int64) {
    #expect(UTCTime(iso8601: text, syntax: .tpv)?.milliseconds == milliseconds)
    #expect(UTCTime(iso8601: text, syntax: .rfc3339)?.milliseconds == milliseconds)
  }

  @Test(arguments: [
    "", "2026", "2026-11-29T20:55", "2026-11-29T20:55:1", "2026-11-29T20:55:10",
    "2026-11-29T20:55:10.Z",
    "2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
    "2026-11-29T24:00:00Z", "2026-11-29T20:60:00Z", "2026-11-29T20:55:61Z", "12026-11-29T20:55:10Z",
    "+2026-11-29T20:55:10Z", "２０２６-11-29T20:55:10Z", "2026-11-29T2٠:55:10Z",
    "2026-11-29T20:55:10Zx",
    "2026-11-29T20:55:10Z ", " 2026-11-29T20:55:10Z", "2026-11-29T20:55:10.1234567890Z",
    "2026-11-29t20:55:10Z", "2026-11-29T20:55:10z", "2026-11-29 20:55:10Z",
    "2026-11-29T20:55:10+02:00",
    "2026-11-29T20:55:10,5Z", "2026-11-29", "2026-11-29T20:55Z", "2026-11-29T20:55:10.-5Z",
  ])
  func tpvRefuses(_ text: String) {
    #expect(UTCTime(iso8601: text, syntax: .tpv) == nil)
  }

  @Test(arguments: [
    ("2019-05-01T14:00:00+02:00", Int64(1_556_712_000_000)),
    ("2019-05-01T07:30:00-0430", 1_556_712_000_000),
    ("2019-05-01 12:00Z", 1_556_712_000_000),
    ("2019-05-01t12:00:00z", 1_556_712_000_000),
    ("2019-05-01T12:00:00,25Z", 1_556_712_000_250),
    ("2019-05-01T12:00:00.2599999999999Z", 1_556_712_000_259),
    ("2019-05-01", 1_556_668_800_000),
  ])
  func rfc3339Reads(_ text: String, _ milliseconds: Int64) {
    #expect(UTCTime(iso8601: text, syntax: .rfc3339)?.milliseconds == milliseconds)
  }

  @Test(arguments: [
    "2019-05-01T12:00:00", "2019-05-01T12:00:00+24:00", "2019-05-01T12:00:00+02:60",
    "2019-05-01T12:00:00+2",
    "2019-05-01T12:00:00+02:00:00", "2019-05-01T", "2019-05-01T12Z", "2019-05-01T12:00.5Z",
  ])
  func rfc3339Refuses(_ text: String) {
    #expect(UTCTime(iso8601: text, syntax: .rfc3339) == nil)
  }

  @Test func fractionLimitsDifferBySyntax() {
    let nineteen = "2026-11-29T20:55:10." + String(repeating: "9", count: 19) + "Z"
    let twenty = "2026-11-29T20:55:10." + String(repeating: "9", count: 20) + "Z"
    #expect(UTCTime(iso8601: nineteen, syntax: .tpv) == nil)
    #expect(UTCTime(iso8601: nineteen, syntax: .tpvLongFraction)?.milliseconds == 1_795_985_710_999)
    #expect(UTCTime(iso8601: twenty, syntax: .tpvLongFraction) == nil)
  }

  @Test func leapSecondsAreAnOption() {
    let noLeap = UTCTime.Syntax(acceptsLeapSecond: false)
    #expect(UTCTime(iso8601: "2016-12-31T23:59:60Z", syntax: noLeap) == nil)
    #expect(
      UTCTime(iso8601: "2016-12-31T23:59:59Z", syntax: noLeap)?.milliseconds == 1_483_228_799_000)
    #expect(UTCTime(iso8601: "2016-12-31T23:59:59.5Z", syntax: noLeap) == nil)
  }

  @Test func dateSyntaxTakesADateAlone() {
    #expect(UTCTime(iso8601: "2019-04-07", syntax: .date)?.day == 17_993)
    #expect(UTCTime(iso8601: "2019-04-07T00:00:00Z", syntax: .date) == nil)
    #expect(UTCTime(iso8601: "2019-4-07", syntax: .date) == nil)
    #expect(CivilDate.days(iso: "2019-04-07") == 17_993)
    #expect(CivilDate.days(iso: "1979-12-31") == nil)
    #expect(CivilDate.days(iso: "2080-01-01") == nil)
  }

  @Test func writtenTextReadsBack() {
    for milliseconds: Int64 in [
      -62_167_219_200_000, -1, 0, 1, 1_795_985_710_250, 253_402_300_799_999,
    ] {
      let text = UTCTime(milliseconds: milliseconds).iso8601(fraction: .milliseconds)
      #expect(UTCTime(iso8601: text, syntax: .tpv)?.milliseconds == milliseconds)
    }
  }
}
