import Foundation
import Glibc
import SystemIO
import Testing

/// Pipes open in this process (`pipe:[inode]` targets under /proc/self/fd).
private func openPipes() -> Int {
  let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
  return names.filter { name in
    var target = [CChar](repeating: 0, count: 64)
    let length = readlink("/proc/self/fd/" + name, &target, target.count - 1)
    guard length > 0 else { return false }
    return String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self).hasPrefix("pipe:")
  }.count
}

@Suite("WorkerThread")
struct WorkerThreadTests {
  @Test("a stopped and released worker closes both ends of its wake pipe")
  func wakePipeIsClosed() async throws {
    // Other suites open and close pipes in parallel in this process (dozens at a time on a
    // loaded machine), so the check is on the growth after many workers: a leak of two
    // descriptors each would add 512.
    let before = openPipes()
    for _ in 0..<256 {
      let worker = try WorkerThread { worker in
        while !worker.isStopping { _ = worker.wait(for: [], timeoutNanoseconds: 1_000_000_000) }
      }
      worker.requestStop()
      await worker.waitUntilFinished()
    }
    let after = openPipes()
    #expect(after - before < 256, "\(after - before) more pipes after 256 workers")
  }
}
