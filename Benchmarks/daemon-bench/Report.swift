// The figures: percentiles and the closing markdown table.

/// One line of the closing table: the figure, what was measured, the target ("" for none).
typealias Figure = (figure: String, measured: String, target: String)

/// The value at percentile `p` (0...100) of `sorted`: the element at rank p/100 × (count − 1),
/// rounded; NaN when empty.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
  guard !sorted.isEmpty else { return .nan }
  let rank = Int((p / 100 * Double(sorted.count - 1)).rounded())
  return sorted[min(max(rank, 0), sorted.count - 1)]
}

/// Prints the figures as a markdown table after a blank line.
func printTable(_ table: [Figure]) {
  say("")
  say("| figure | measured | target |")
  say("|---|---|---|")
  for (figure, measured, target) in table { say("| \(figure) | \(measured) | \(target) |") }
}
