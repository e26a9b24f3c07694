import Foundation
import Testing

@testable import TrackStore

/// `status` shows the fixes queued for the disk: while a write the disk has not finished holds
/// the store, the recorder's `waiting` grows, and reading it never waits for the store.
@Suite struct RecorderWaitingTests {
  @Test(.timeLimit(.minutes(1))) func waitingCountsWhatAStalledStoreHoldsUp() throws {
    let store = try TrackStore(path: try temporaryDirectory() + "/track.sqlite")
    defer { store.close() }
    let recorder = TrackRecorder(store: store)
    let points = syntheticTrack(count: 6)
    let first = try #require(points.first)
    // The store's lock held here stands for a write a frozen disk has not finished.
    store.state.withLock { _ in
      recorder.record(first)
      // The recorder's queue takes the first fix and waits for the store (a hang guard, not a
      // timing: the test's time limit ends a recorder that never takes it).
      while recorder.waiting != 0 { usleep(1_000) }
      for point in points.dropFirst() { recorder.record(point) }
      #expect(recorder.waiting == 5)
      #expect(recorder.counters.recorded == 0)
    }
    recorder.flush()
    #expect(recorder.waiting == 0)
    #expect(recorder.counters.recorded == 6)
  }
}
