import SystemIO
import Testing

@Suite("MonotonicClock")
struct MonotonicClockTests {
  @Test func readingsNeverGoBackAndAgreeAcrossUnits() {
    var previous = MonotonicClock.nanoseconds()
    for _ in 0..<10_000 {
      let now = MonotonicClock.nanoseconds()
      #expect(now >= previous)
      previous = now
    }
    let before = MonotonicClock.nanoseconds()
    let micro = MonotonicClock.microseconds()
    let seconds = MonotonicClock.seconds()
    let duration = MonotonicClock.now()
    let after = MonotonicClock.nanoseconds()
    #expect(before / 1000 <= micro && micro <= after / 1000)
    #expect(Double(before) / 1e9 <= seconds && seconds <= Double(after) / 1e9)
    #expect(.nanoseconds(before) <= duration && duration <= .nanoseconds(after))
    #expect(before > 0)
  }

  @Test(arguments: [
    (Duration.zero, UInt64(0)), (.nanoseconds(1), 1), (.milliseconds(1500), 1_500_000_000),
    (.seconds(-1), 0), (.nanoseconds(-5), 0), (.seconds(Int64.max), UInt64.max),
    (.seconds(18_446_744_073), 18_446_744_073_000_000_000), (.seconds(18_446_744_074), UInt64.max),
  ])
  func convertsDurations(_ duration: Duration, _ nanoseconds: UInt64) {
    #expect(MonotonicClock.nanoseconds(of: duration) == nanoseconds)
  }
}
