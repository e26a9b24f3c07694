extension AsyncStream.Continuation where Element: Sendable {
  /// Yields `element` into a stream created with `.bufferingOldest(n)`, waiting (without losing
  /// it) while the buffer is full: the producer slows to the consumer's pace instead of growing
  /// memory. Returns early when the calling task is cancelled or the stream has terminated.
  func yieldWithBackPressure(_ element: Element) async {
    var element = element
    var attempts = 0
    while true {
      switch yield(element) {
      case .enqueued, .terminated:
        return
      case .dropped(let refused):
        element = refused
        if Task.isCancelled { return }
        attempts += 1
        if attempts < 64 {
          await Task.yield()
        } else {
          try? await Task.sleep(for: .microseconds(200))
        }
      @unknown default:
        return
      }
    }
  }
}
