/// Exponential backoff between connection attempts: 1 s, 2 s, 4 s ... up to ``maximum``; reset
/// after a successful connection.
public struct Backoff: Sendable, Hashable {
  /// First delay, seconds (1).
  public var initial: Double
  /// Longest delay, seconds (the `mqtt-reconnect-max` setting, default 5).
  public var maximum: Double
  private var attempt = 0

  /// Creates the policy.
  public init(initial: Double = 1, maximum: Double = 5) {
    self.initial = initial
    self.maximum = maximum
  }

  /// The delay before the next attempt, seconds; each call doubles the next one up to ``maximum``.
  public mutating func next() -> Double {
    let delay = min(maximum, initial * Double(1 << min(attempt, 30)))
    attempt += 1
    return delay
  }

  /// Starts again from ``initial`` (after a connection was accepted).
  public mutating func reset() { attempt = 0 }
}

/// A token bucket: at most ``rate`` messages per second, bursts of at most ``burst``. Bounds how
/// fast the queue drains after a reconnect, so that a long outage does not flood the broker and
/// the subscribers.
public struct RateLimiter: Sendable, Hashable {
  /// Messages per second, `> 0`.
  public var rate: Double
  /// Largest burst, messages, `>= 1`.
  public var burst: Double
  private var tokens: Double
  private var last: Double?

  /// Creates a full bucket.
  public init(rate: Double, burst: Double? = nil) {
    self.rate = max(rate, 0.001)
    self.burst = max(1, burst ?? max(1, rate / 10))
    tokens = self.burst
  }

  /// How many messages may go now (`now` in seconds on any monotonic clock); take them with ``take(_:)``.
  public mutating func available(now: Double) -> Int {
    if let last { tokens = min(burst, tokens + (now - last) * rate) }
    last = now
    return Int(tokens)
  }

  /// Spends `count` tokens.
  public mutating func take(_ count: Int) { tokens -= Double(count) }
}
