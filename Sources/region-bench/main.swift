// region-bench: per-fix cost of the region monitor at 10, 1,000 and 100,000 regions.
print("region-bench: not yet")
