import Glibc

extension SystemIO {
  /// Runs `body` on a new detached POSIX thread, outside Swift's cooperative pool: for loops that
  /// block in system calls (`epoll_wait`, `poll`, `clock_nanosleep`) and must not hold one of
  /// the pool's few threads.
  ///
  /// The closure is retained until the thread has run it (or released at once when the thread
  /// could not be created); nothing is shared with the caller beyond what `body` captures.
  ///
  /// - Throws: ``SystemError`` with `pthread_create`'s error number (`EAGAIN` when the process
  ///   is out of threads, `ENOMEM`); `body` then never runs.
  public static func startThread(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
      &thread, nil,
      { argument in
        guard let argument else { return nil }
        Unmanaged<ThreadBody>.fromOpaque(argument).takeRetainedValue().body()
        return nil
      }, box)
    guard result == 0 else {
      Unmanaged<ThreadBody>.fromOpaque(box).release()
      throw SystemError(result)
    }
    pthread_detach(thread)
  }
}

/// A closure boxed for `pthread_create`'s one pointer argument.
private final class ThreadBody {
  let body: @Sendable () -> Void
  init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
