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
/// `open(2)` fails. So every front-end that accepts connections checks each new one here and
/// refuses it, with an error reply where its protocol has one, when it would leave fewer than
/// ``count`` descriptors below the soft `RLIMIT_NOFILE`.
///
/// The check reads the new descriptor's number: `accept(2)` and `open(2)` return the lowest free
/// number (POSIX), so every number below it is in use.
public enum DescriptorReserve {
  /// Descriptors kept free below the soft `RLIMIT_NOFILE` limit: 16 (a state save takes two, the
  /// track database up to four, Dispatch's monitor one, a backtrace a few).
  public static let count: Int32 = 16

  /// `true` when descriptor `fd`, just returned by `accept(2)` or `open(2)`, still leaves
  /// ``count`` descriptors free below the soft `RLIMIT_NOFILE` limit (read at each call, so a
  /// limit raised with `prlimit(1)` counts at once); `true` when the limit is unlimited or cannot
  /// be read; `false` for a negative `fd`.
  public static func leavesReserve(after fd: Int32) -> Bool {
    guard fd >= 0 else { return false }
    guard let soft = softLimit() else { return true }
    return Int64(fd) + 1 + Int64(count) <= soft
  }

  /// Why this process has fewer than `needed` descriptors free below the soft `RLIMIT_NOFILE`
  /// limit, as a sentence for the start-up error; `nil` when it has them, or when the limit is
  /// unlimited or cannot be read.
  ///
  /// Counts the open descriptors in `/proc/self/fd` (numbers above the limit included: they take
  /// no place below it, but a parent that leaves many open rarely leaves only those); without
  /// `/proc`, the lowest free number stands for the count.
  public static func shortage(needing needed: Int32) -> String? {
    guard let soft = softLimit() else { return nil }
    let probe = open("/dev/null", O_RDONLY | O_CLOEXEC)
    guard probe >= 0 else {
      return "no file descriptor is free (\(SystemError(errno))) under the limit of \(soft)"
        + Self.advice(needed)
    }
    close(probe)
    let inUse = openDescriptorCount() ?? Int64(probe)
    guard soft - inUse < Int64(needed) else { return nil }
    return "\(inUse) file descriptors are open at start and the limit is \(soft)" + Self.advice(needed)
  }

  private static func advice(_ needed: Int32) -> String {
    ": locationd needs \(needed) free; raise the limit (ulimit -n, LimitNOFILE= in the unit) or "
      + "close the descriptors the program that starts locationd leaves open"
  }

  /// The number of open descriptors: the entries of `/proc/self/fd`, less `.`, `..` (procfs
  /// lists both) and the one reading it.
  private static func openDescriptorCount() -> Int64? {
    guard let directory = opendir("/proc/self/fd") else { return nil }
    defer { closedir(directory) }
    var entries: Int64 = 0
    while readdir(directory) != nil { entries += 1 }
    return max(0, entries - 3)
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
