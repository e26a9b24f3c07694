import Foundation
import MapState
import Synchronization
import Testing
import LocationModel

#if canImport(Glibc)
  import Glibc
#endif

/// Another user who can write the state directory, or a crash, leaves links, FIFOs and temporary
/// files where the daemon saves and loads its map state.
@Suite("Hostile state directory", .timeLimit(.minutes(3)))
struct HostileStateDirectoryTests {
  private func state(zoom: Double = 7) -> PersistedMapState {
    PersistedMapState(
      viewport: Viewport(center: Coordinate(latitude: 1, longitude: 2), zoom: zoom), mode: .none,
      annotations: [Annotation(id: "p", coordinate: Coordinate(latitude: 5, longitude: 6), title: "P")])
  }

  @Test func aLinkPlantedAtATemporaryNameIsNeverFollowed() throws {
    let directory = try temporaryDirectory()
    let outside = try temporaryDirectory()
    defer {
      try? FileManager.default.removeItem(atPath: directory)
      try? FileManager.default.removeItem(atPath: outside)
    }
    let victim = outside + "/victim"
    try Data("precious\n".utf8).write(to: URL(fileURLWithPath: victim))
    // The names a predictable writer would use: the process id, and a range around it.
    for pid in [getpid()] + Array((getpid() - 5)...(getpid() + 5)) {
      symlink(victim, directory + "/" + MapStateStore.temporaryPrefix + String(pid))
    }
    let store = MapStateStore(directory: directory, log: { _ in })
    try store.save(state())
    #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n")
    #expect(store.load() == state())
  }

  @Test func aFIFOPlantedAtATemporaryNameDoesNotHangTheSave() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    for pid in (getpid() - 5)...(getpid() + 5) {
      #expect(mkfifo(directory + "/" + MapStateStore.temporaryPrefix + String(pid), 0o600) == 0)
    }
    let store = MapStateStore(directory: directory, log: { _ in })
    let expected = state()
    // Opening a FIFO for writing waits for a reader: run the save where a hang can be seen.
    let saved = Mutex<Bool?>(nil)
    Thread.detachNewThread {
      let ok = (try? store.save(expected)) != nil
      saved.withLock { $0 = ok }
    }
    // Waits without holding a thread of the concurrency pool; 20 s only guards against a hang.
    let deadline = ContinuousClock.now + .seconds(20)
    while saved.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(saved.withLock { $0 } == true, "the save hung on a planted FIFO or failed")
    #expect(store.load() == expected)
  }

  @Test func aFIFOInPlaceOfTheStateFileDoesNotHangTheLoad() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MapStateStore(directory: directory, log: { _ in })
    #expect(mkfifo(store.path, 0o600) == 0)
    let log = LogCollector()
    // Without O_NONBLOCK and a regular-file check this open would wait for a writer forever.
    #expect(MapStateStore(directory: directory, log: log.sink).load() == nil)
    #expect(
      log.all.contains { $0.hasPrefix("map state file is not a regular file, starting with an empty map") },
      "\(log.all)")
    // Saving replaces the FIFO with a file.
    try store.save(state())
    #expect(store.load() == state())
  }

  @Test func aLinkInPlaceOfTheStateFileIsNotRead() throws {
    let directory = try temporaryDirectory()
    let outside = try temporaryDirectory()
    defer {
      try? FileManager.default.removeItem(atPath: directory)
      try? FileManager.default.removeItem(atPath: outside)
    }
    let elsewhere = MapStateStore(directory: outside, log: { _ in })
    try elsewhere.save(state(zoom: 12))
    let store = MapStateStore(directory: directory, log: { _ in })
    symlink(elsewhere.path, store.path)
    let log = LogCollector()
    #expect(MapStateStore(directory: directory, log: log.sink).load() == nil)
    #expect(log.all.contains { $0.contains("error=a symbolic link") }, "\(log.all)")
    try store.save(state(zoom: 3))
    // The link was replaced, the file it pointed to is untouched.
    #expect(elsewhere.load() == state(zoom: 12))
    #expect(store.load() == state(zoom: 3))
  }

  @Test func temporaryFilesLeftByACrashAreRemovedOnLoad() throws {
    let directory = try temporaryDirectory()
    let outside = try temporaryDirectory()
    defer {
      try? FileManager.default.removeItem(atPath: directory)
      try? FileManager.default.removeItem(atPath: outside)
    }
    let store = MapStateStore(directory: directory, log: { _ in })
    try store.save(state())
    let victim = outside + "/victim"
    try Data("keep".utf8).write(to: URL(fileURLWithPath: victim))
    for index in 0..<79 {
      try Data("{".utf8).write(
        to: URL(fileURLWithPath: directory + "/" + MapStateStore.temporaryPrefix + "\(index)"))
    }
    symlink(victim, directory + "/" + MapStateStore.temporaryPrefix + "link")
    #expect(mkfifo(directory + "/" + MapStateStore.temporaryPrefix + "fifo", 0o600) == 0)
    let log = LogCollector()
    #expect(MapStateStore(directory: directory, log: log.sink).load() == state())
    #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == [MapStateStore.fileName])
    #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep")
    #expect(log.all.contains { $0.contains("count=81") }, "\(log.all)")
  }

  @Test func aDirectoryOthersMayWriteIsRefused() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try MapStateStore.checkDirectory(directory)
    for mode: mode_t in [0o777, 0o775, 0o757, 0o1777] {
      chmod(directory, mode)
      #expect(throws: MapStoreError.self, "mode \(String(mode, radix: 8))") {
        try MapStateStore.checkDirectory(directory)
      }
      let store = MapStateStore(directory: directory, log: { _ in })
      do {
        try store.save(state())
        Issue.record("save into a mode \(String(mode, radix: 8)) directory succeeded")
      } catch {
        guard case .unsafeDirectory(_, let reason) = error else {
          Issue.record("unexpected error \(error)")
          continue
        }
        #expect(reason.contains("writable by group or others"))
      }
    }
    chmod(directory, 0o755)
    try MapStateStore.checkDirectory(directory)
  }

  @Test func aDirectoryOwnedByAnotherUserIsRefused() throws {
    try #require(geteuid() == 0, "needs root to give the directory away")
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    #expect(chown(directory, 65534, 65534) == 0)
    do {
      try MapStateStore.checkDirectory(directory)
      Issue.record("a directory owned by uid 65534 was accepted")
    } catch {
      guard case .unsafeDirectory(_, let reason) = error else {
        Issue.record("unexpected error \(error)")
        return
      }
      #expect(reason.contains("owned by uid 65534"))
    }
    // Root's own directories are trusted.
    #expect(chown(directory, 0, 0) == 0)
    try MapStateStore.checkDirectory(directory)
  }
}

/// Annotation limits: the map cannot grow past what a client can receive.
@Suite("Annotation limits")
struct AnnotationLimitTests {
  private func annotation(_ index: Int, title: String = "") -> Annotation {
    Annotation(
      id: "a\(index)", coordinate: Coordinate(latitude: 1, longitude: Double(index % 180)),
      title: title)
  }

  @Test func countIsLimited() async throws {
    let service = MapStateService()
    for index in 0..<AnnotationLimits.maxCount { try await service.addAnnotation(annotation(index)) }
    do {
      try await service.addAnnotation(annotation(AnnotationLimits.maxCount))
      Issue.record("annotation beyond the count limit accepted")
    } catch {
      #expect(error == .limitExceeded(count: AnnotationLimits.maxCount + 1, bytes: 3890 + 5))
      #expect(error.description.contains("limits are 1000 annotations and 65536 bytes"))
    }
    #expect(await service.annotations.count == AnnotationLimits.maxCount)
    // Replacing one in place still works, and removing one makes room.
    try await service.addAnnotation(annotation(5, title: "moved"))
    try await service.removeAnnotation(id: "a0")
    try await service.addAnnotation(annotation(AnnotationLimits.maxCount))
    #expect(await service.annotations.count == AnnotationLimits.maxCount)
  }

  @Test func textBytesAreLimited() async throws {
    let service = MapStateService()
    // 200 annotations of 3-byte characters: 2 + 3 * 200 bytes each, 602 or 603 bytes.
    let title = String(repeating: "\u{20AC}", count: 200)
    var total = 0
    var index = 0
    while true {
      let next = annotation(index, title: title)
      if total + next.textByteCount > AnnotationLimits.maxTotalBytes {
        do {
          try await service.addAnnotation(next)
          Issue.record("annotation beyond the byte limit accepted at \(total) bytes")
        } catch {
          #expect(error == .limitExceeded(count: index + 1, bytes: total + next.textByteCount))
        }
        break
      }
      try await service.addAnnotation(next)
      total += next.textByteCount
      index += 1
    }
    #expect(index > 100)
    // A replacement that grows past the limit is refused and leaves the old one.
    let bigger = Annotation(
      id: "a0", coordinate: Coordinate(latitude: 1, longitude: 0),
      title: String(repeating: "x", count: 256), subtitle: String(repeating: "\u{20AC}", count: 256))
    await #expect(throws: MapStateError.self) { try await service.addAnnotation(bigger) }
    #expect(await service.annotations.first?.title == title)
  }

  @Test func aStateFileBeyondTheLimitsLoadsWhatFits() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let annotations = (0..<1500).map { annotation($0, title: "t") }
    var state = PersistedMapState(viewport: .default, mode: .follow, annotations: [])
    state.annotations = annotations
    let store = MapStateStore(directory: directory, log: { _ in })
    try Data(state.fileContents).write(to: URL(fileURLWithPath: store.path))
    let log = LogCollector()
    let loaded = try #require(MapStateStore(directory: directory, log: log.sink).load())
    #expect(loaded.mode == .follow)
    #expect(loaded.annotations == Array(annotations.prefix(AnnotationLimits.maxCount)))
    #expect(log.all.count == 1)
    #expect(log.all.first?.contains("loading 1000 of 1500") == true, "\(log.all)")
    // The full file is kept aside for the administrator.
    let kept = try Data(
      contentsOf: URL(fileURLWithPath: directory + "/" + MapStateStore.rejectedFileName))
    #expect(try PersistedMapState(fileContents: Array(kept)).annotations.count == 1500)
  }

  @Test func aMemberGivenTwiceIsRefused() throws {
    let text = #"{"version":1,"viewport":{},"viewport":{}}"#
    #expect(throws: MapStateDecodingError(path: "viewport", reason: "duplicate member: give each member once")) {
      try PersistedMapState(fileContents: Array(text.utf8))
    }
  }

  @Test func aSecondBadStartKeepsTheFirstRejectedFile() throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/" + MapStateStore.fileName
    var lines: [String] = []
    for start in 0..<2 {
      try Data("not json \(start)".utf8).write(to: URL(fileURLWithPath: path))
      let log = LogCollector()
      #expect(MapStateStore(directory: directory, log: log.sink).load() == nil)
      lines += log.all
    }
    #expect(lines.count == 2)
    #expect(lines.first?.hasSuffix("keptAs=\(MapStateStore.rejectedFileName)") == true, "\(lines)")
    #expect(lines.last?.hasSuffix("keptAs=\(MapStateStore.rejectedFileName).1") == true, "\(lines)")
    let first = try String(contentsOfFile: directory + "/" + MapStateStore.rejectedFileName, encoding: .utf8)
    let second = try String(
      contentsOfFile: directory + "/" + MapStateStore.rejectedFileName + ".1", encoding: .utf8)
    #expect(first == "not json 0")
    #expect(second == "not json 1")
    // A planted link is moved aside too, and the line says where.
    symlink("/etc/passwd", path)
    let log = LogCollector()
    #expect(MapStateStore(directory: directory, log: log.sink).load() == nil)
    #expect(log.all.first?.hasSuffix("keptAs=\(MapStateStore.rejectedFileName).2") == true, "\(log.all)")
  }

  @Test func formatCharactersAreRefused() async throws {
    let service = MapStateService()
    for text in ["\u{202E}evil", "a\u{200B}b", "x\u{2066}y", "\u{FEFF}", "line\u{2028}break", "para\u{2029}graph"] {
      await #expect(throws: MapStateError.self) {
        try await service.addAnnotation(
          Annotation(id: text, coordinate: Coordinate(latitude: 0, longitude: 0), title: "t"))
      }
      for field in ["title", "subtitle", "kind"] {
        let annotation = Annotation(
          id: "ok", coordinate: Coordinate(latitude: 0, longitude: 0),
          title: field == "title" ? text : "t", subtitle: field == "subtitle" ? text : nil,
          kind: field == "kind" ? text : nil)
        await #expect(throws: MapStateError.controlCharacters(field: field)) {
          try await service.addAnnotation(annotation)
        }
      }
    }
    // The message shows the character instead of applying it.
    let message = MapStateError.invalidIdentifier("x", reason: "").description
    #expect(message.contains("x"))
    do {
      try Annotation.validateIdentifier("gpx\u{202E}txt.exe")
    } catch {
      #expect(error.description.contains("gpx\\u{202e}txt.exe"))
    }
    // An identifier of only white space cannot be told apart from none in a list.
    for blank in [" ", "\u{3000}", " \u{A0} "] {
      #expect(throws: MapStateError.invalidIdentifier(blank, reason: "blank (only white space)")) {
        try Annotation.validateIdentifier(blank)
      }
    }
    #expect(await service.annotations.isEmpty)
  }
}

/// A save that fails must be visible, and retried.
@Suite("Save failures")
struct SaveFailureTests {
  @Test(arguments: ["open", "write", "fsync", "close", "rename", "fsyncDirectory"])
  func aFailedSaveIsReportedAndRetried(step: String) async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let failing = Mutex<Int32?>(ENOSPC)
    let store = MapStateStore(
      directory: directory, log: { _ in },
      failureInjector: { name in name == step ? failing.withLock { $0 } : nil })
    let service = MapStateService(store: store)
    try await service.setZoom(11)
    let failure = try #require(await service.unsavedChanges)
    #expect(failure.description.contains("No space left on device"))
    #expect(await service.snapshot.zoom == 11)
    // The disk works again: the next change saves both.
    failing.withLock { $0 = nil }
    try await service.addAnnotation(
      Annotation(id: "p", coordinate: Coordinate(latitude: 5, longitude: 6), title: "P"))
    #expect(await service.unsavedChanges == nil)
    let saved = try #require(MapStateStore(directory: directory, log: { _ in }).load())
    #expect(saved.viewport.zoom == 11)
    #expect(saved.annotations.map(\.id) == ["p"])
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: directory) == [MapStateStore.fileName])
  }

  @Test func shutdownRetriesAFailedSave() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let failing = Mutex<Int32?>(EIO)
    let store = MapStateStore(
      directory: directory, log: { _ in },
      failureInjector: { name in name == "write" ? failing.withLock { $0 } : nil })
    let service = MapStateService(store: store)
    try await service.setZoom(4)
    #expect(await service.saveIfNeeded() != nil)
    failing.withLock { $0 = nil }
    #expect(await service.saveIfNeeded() == nil)
    #expect(MapStateStore(directory: directory, log: { _ in }).load()?.viewport.zoom == 4)
  }
}

@Suite("Save failure log")
struct SaveFailureLogTests {
  @Test func aRepeatedFailureIsLoggedOnceAndTheRecoveryToo() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let failing = Mutex<Int32?>(ENOSPC)
    let log = LogCollector()
    let service = MapStateService(
      store: MapStateStore(
        directory: directory, log: log.sink,
        failureInjector: { step in step == "write" ? failing.withLock { $0 } : nil }))
    await service.setMode(.follow)
    for index in 0..<20 {
      await service.update(fix: fix(1, Double(index)))
      #expect(await service.savesSettled())
    }
    #expect(log.all.filter { $0.hasPrefix("map state not saved") }.count == 1, "\(log.all)")
    failing.withLock { $0 = nil }
    await service.update(fix: fix(2, 2))
    #expect(await service.savesSettled())
    #expect(log.all.last?.hasPrefix("map state saved again after an earlier failure") == true)
    #expect(await service.unsavedChanges == nil)
  }
}

@Suite("Saving off the fix path")
struct StalledDiskTests {
  @Test("a stalled disk holds up saves only: fixes and changes go on, the newest state is saved when the disk returns")
  func stalledDisk() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // The disk stalls in the middle of every save until the test lets it go (a frozen file system).
    let stalled = DispatchSemaphore(value: 0)
    let stalls = Mutex(0)
    let store = MapStateStore(
      directory: directory, log: { _ in },
      failureInjector: { step in
        if step == "write" {
          stalls.withLock { $0 += 1 }
          stalled.wait()
        }
        return nil
      })
    let service = MapStateService(store: store, replyWait: .milliseconds(10))
    await service.setMode(.follow)
    // 200 fixes while following: each is a change to save; none waits for the stalled disk.
    for index in 0..<200 { await service.update(fix: fix(10, Double(index) / 1000)) }
    try await service.setZoom(7)
    // The reply's wait is bounded: it answers although the save of this change has not finished.
    #expect(await service.unsavedChanges == nil)
    #expect(await service.savesSettled(timeout: .milliseconds(10)) == false)
    // One save is stalled (once the saver's thread has reached the disk; a hang guard, not a
    // timing assertion); the others were replaced by newer states while it waited.
    for _ in 0..<60_000 where stalls.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(1)) }
    #expect(stalls.withLock { $0 } == 1)
    stalled.signal()
    stalled.signal()
    #expect(await service.savesSettled(timeout: .seconds(60)))
    let saved = try #require(MapStateStore(directory: directory, log: { _ in }).load())
    #expect(saved.viewport.zoom == 7)
    #expect(saved.mode == .none)  // the zoom switched following off, and that state was saved
    // The stalled save, then at most one save of the newest state (none when the stalled save
    // had already taken it).
    #expect((1...2).contains(stalls.withLock { $0 }))
  }
}
