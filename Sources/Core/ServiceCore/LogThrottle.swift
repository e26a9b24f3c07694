/// When an event that input from outside can repeat without end (a connect loop, a flood of
/// malformed messages, a failing disk) is worth a log line: a loop costs a handful of lines, and
/// the count each line carries says how many there were. Every front-end throttles with it.
public enum LogThrottle: Sendable, Equatable {
  /// The 1st, 2nd, 4th, 8th, 16th... occurrence: for refusals of whole clients, where the first
  /// few matter and a loop quickly becomes noise.
  case powersOfTwo
  /// The first `first` occurrences, then every `every`-th: for a stream of messages whose first
  /// reasons a user reads (each may differ) and whose later rate is what counts.
  case firstThenEvery(first: Int, every: Int)

  /// Whether the `count`-th occurrence (counted from 1) gets a line; `false` for a count below 1
  /// and, for ``firstThenEvery(first:every:)``, an `every` below 1 logs the first only.
  public func logs(_ count: Int) -> Bool {
    guard count >= 1 else { return false }
    switch self {
    case .powersOfTwo:
      return count & (count - 1) == 0
    case .firstThenEvery(let first, let every):
      return count <= first || (every >= 1 && count % every == 0)
    }
  }
}
