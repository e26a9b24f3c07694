import LocationTestKit
import Testing

/// The parsing the benchmarks rely on: `/proc` files, TPV lines, `--clients` lists.
struct BenchmarkParsingTests {
  @Test func cpuTicksAreFields14And15AfterACommandNameWithSpacesAndParentheses() throws {
    // proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    // cmajflt utime stime ...
    let stat = "4242 (gps d) x) S 1 4242 4242 0 -1 4194560 120 0 0 0 731 205 0 0 20 0 1 0 99 1 2"
    let ticks = try #require(ProcessSample.cpuTicks(stat: stat))
    #expect(ticks.user == 731)
    #expect(ticks.system == 205)
    #expect(ProcessSample.cpuTicks(stat: "4242 (gpsd) S 1 4242") == nil)
    #expect(ProcessSample.cpuTicks(stat: "no parenthesis here") == nil)
  }

  @Test func statusFieldsAreReadInKilobytes() {
    let status = "Name:\tgpsd\nVmHWM:\t    4712 kB\nVmRSS:\t    4608 kB\nRssAnon:\t     512 kB\n"
    #expect(ProcessSample.kilobytes(status: status, field: "VmRSS") == 4608)
    #expect(ProcessSample.kilobytes(status: status, field: "VmHWM") == 4712)
    #expect(ProcessSample.kilobytes(status: status, field: "RssAnon") == 512)
    #expect(ProcessSample.kilobytes(status: status, field: "VmSwap") == nil)
  }

  @Test func aTPVLineGivesItsTimeInMilliseconds() {
    let gpsd = Array(
      #"{"class":"TPV","device":"/tmp/gps0","mode":3,"time":"2026-03-14T12:00:01.300Z","lat":48.1}"#
        .utf8)
    #expect(TPVLine.isTPV(gpsd[...]))
    #expect(TPVLine.time(gpsd[...]) == TestRoute.start + 1_300)
    // A slice that does not start at index 0, as a client's buffer gives it.
    let buffer = Array("{\"class\":\"SKY\"}\n".utf8) + gpsd
    let line = buffer[16...]
    #expect(TPVLine.isTPV(line))
    #expect(TPVLine.time(line) == TestRoute.start + 1_300)
    let sky = Array(#"{"class":"SKY","time":"2026-03-14T12:00:01.300Z"}"#.utf8)
    #expect(!TPVLine.isTPV(sky[...]))
    #expect(TPVLine.time(Array(#"{"class":"TPV","mode":1}"#.utf8)[...]) == nil)
    #expect(TPVLine.time(Array(#"{"class":"TPV","time":"2026-03-14T12:00"#.utf8)[...]) == nil)
  }

  @Test func clientListsTakeCountsAndMax() throws {
    #expect(
      try BenchmarkClientCount.parseList("10, 50,max") == [.count(10), .count(50), .gpsdLimit])
    #expect(BenchmarkClientCount.gpsdLimit.resolved(gpsdLimit: 64) == 64)
    #expect(BenchmarkClientCount.count(10).resolved(gpsdLimit: 64) == 10)
    for (list, entry) in [
      ("10,0", "0"), ("", ""), ("5000", "5000"), ("10,,50", ""), ("ten", "ten"),
    ] {
      do {
        _ = try BenchmarkClientCount.parseList(list)
        Issue.record("\"\(list)\" was accepted")
      } catch {
        #expect(error.entry == entry, "\(list)")
      }
    }
  }
}
