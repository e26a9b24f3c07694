import CLinux

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The file descriptors a process keeps free for its own work, so that clients cannot take the
/// last ones.
///
/// A process that runs out of descriptors fails in places no error reply reaches: a state file
/// cannot be saved, a log line cannot be backtraced, and Dispatch's thread-pool monitor, which
/// opens `/proc/<tid>/stat` once a second while work is queued, stops the whole process when that
/// `open(2)` fails. So every front-end that accepts connections checks here after each accept
/// and refuses the new connection, with an error reply where its protocol has one, when fewer
/// than ``count`` descriptors are left free below the soft `RLIMIT_NOFILE` limit.
///
/// The count is exact: the entries of `/proc/self/fd` (about 6 µs with 10 descriptors open,
/// 27 µs with 100), so descriptors a parent left open at high numbers, or ones the process opened
/// after its clients took the low numbers, count as much as any. When too few are free and the
/// soft limit is below the hard one, the soft limit is raised first, at most to `FD_SETSIZE`
/// (1024: libraries that wait with `select(2)` cannot watch a higher number).
public enum DescriptorReserve {
  /// Descriptors kept free below the soft `RLIMIT_NOFILE` limit: 16 (a state save takes two, the
  /// track database up to four, Dispatch's monitor one, a backtrace a few).
  public static let count: Int32 = 16

  /// `true` when at least ``count`` descriptors are free below the soft `RLIMIT_NOFILE` limit
  /// (after raising it toward the hard limit when that is needed and allowed); `true` when the
  /// limit is unlimited or the count cannot be read. Call it after an `accept(2)`: the new
  /// descriptor is then counted.
  public static func isKept() -> Bool { locationd_free_descriptors(count) >= Int(count) }

  /// Why this process has fewer than `needed` descriptors free below the soft `RLIMIT_NOFILE`
  /// limit (after raising it as ``isKept()`` does), as a sentence for the start-up error; `nil`
  /// when it has them, or when the limit is unlimited or the count cannot be read.
  public static func shortage(needing needed: Int32) -> String? {
    let available = locationd_free_descriptors(needed)
    guard available < Int(needed), let soft = softLimit() else { return nil }
    let open = Int(locationd_open_descriptor_count())
    return "only \(max(0, available)) file descriptors are free (\(open) open, its own and any the program "
      + "that started it left open, under the limit of \(soft)); locationd needs \(needed) free: raise "
      + "the limit (ulimit -n, LimitNOFILE= in the unit)"
  }

  /// The soft `RLIMIT_NOFILE` limit, or `nil` when it is unlimited or cannot be read.
  public static func softLimit() -> Int64? {
    var limit = rlimit()
    #if canImport(Glibc)
      let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
      let resource = RLIMIT_NOFILE
    #endif
    // RLIM_INFINITY is all ones.
    guard getrlimit(resource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
    return Int64(clamping: limit.rlim_cur)
  }
}
