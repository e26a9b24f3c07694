import Foundation
import Glibc
import Testing

/// SplitMix64: a seeded generator so that a failing run can be repeated (the seed is printed).
struct SplitMix64: RandomNumberGenerator {
  var state: UInt64
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// The map state a sequence of operations leads to (what the daemon must have saved).
struct MapModel: Equatable {
  struct Item: Equatable {
    var id: String
    var lat: Double
    var lon: Double
    var title: String
  }
  var annotations: [Item] = []
  var zoom: Double?

  /// Operation `index`: every 7th sets the zoom, every 3rd removes the oldest annotation (when
  /// there is one), the others add or replace one of five ids.
  func request(_ index: Int) -> (command: String, members: JSONObject) {
    if index % 7 == 6 { return ("zoom", ["zoom": Double(index % 20)]) }
    if index % 3 == 2, let oldest = annotations.first {
      return ("remove", ["annotation": oldest.id])
    }
    let item = Self.item(index)
    return (
      "annotate",
      ["annotation": ["id": item.id, "lat": item.lat, "lon": item.lon, "title": item.title]]
    )
  }

  static func item(_ index: Int) -> Item {
    Item(
      id: "p\(index % 5)", lat: Double(index % 80) + 0.25, lon: Double(index % 170) - 0.5,
      title: "t\(index)")
  }

  /// The state after operation `index`.
  func applying(_ index: Int) -> MapModel {
    var next = self
    let (command, members) = request(index)
    switch command {
    case "zoom": next.zoom = members["zoom"] as? Double
    case "remove": next.annotations.removeFirst()
    default:
      let item = Self.item(index)
      if let position = next.annotations.firstIndex(where: { $0.id == item.id }) {
        next.annotations[position] = item
      } else {
        next.annotations.append(item)
      }
    }
    return next
  }

  /// The model of a saved `mapstate.json` (`annotations` and `viewport.zoom`).
  init(file object: JSONObject) {
    annotations = (object["annotations"] as? [JSONObject] ?? []).map {
      Item(
        id: $0["id"] as? String ?? "?", lat: $0["lat"] as? Double ?? .nan,
        lon: $0["lon"] as? Double ?? .nan,
        title: $0["title"] as? String ?? "?")
    }
    zoom = (object["viewport"] as? JSONObject)?["zoom"] as? Double
  }

  /// The model of a `map` reply (without the current-location annotation).
  init(map object: JSONObject) {
    self.init(file: [
      "annotations": (object["annotations"] as? [JSONObject] ?? []).filter {
        $0["id"] as? String != "location"
      }
    ])
    zoom = object["zoom"] as? Double
  }

  init() {}

  /// Compares annotations always, zoom only when both know it (a fresh map has its default zoom).
  func matches(_ other: MapModel) -> Bool {
    annotations == other.annotations && (zoom == nil || other.zoom == nil || zoom == other.zoom)
  }
}

extension EndToEnd {
  /// Issue 5, test 5: the map state survives SIGTERM and `kill -9`.
  @Suite("End to end: restart and persistence", .serialized)
  struct RestartEndToEndTests {
    @Test(
      "viewport, mode and annotations survive SIGTERM and a restart with the same state directory",
      .timeLimit(.minutes(3)))
    func survivesSIGTERM() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      var daemon = try DaemonProcess(scratch: scratch, backend: "simulate", name: "first")
      try await daemon.waitUntilReady()
      let client = try LineClient(path: daemon.socketPath)
      _ = try await client.require("request", class: "AUTHORIZATION")
      _ = try await client.require("setCenter", ["lat": 48.8566, "lon": 2.3522], class: "MAP")
      _ = try await client.require("zoom", ["zoom": 13.5], class: "MAP")
      _ = try await client.require("mode", ["mode": "follow"], class: "MAP")
      _ = try await client.require(
        "annotate", ["annotation": ["id": "a", "lat": 48.85, "lon": 2.29, "title": "Tower"]],
        class: "MAP")
      _ = try await client.require(
        "annotate",
        [
          "annotation": [
            "id": "b", "lat": 48.86, "lon": 2.33, "title": "Museum", "subtitle": "Rue",
            "kind": "poi",
          ]
        ],
        class: "MAP")
      _ = try await client.require(
        "annotate", ["annotation": ["id": "c", "lat": -33.9, "lon": 151.2, "title": "Gone"]],
        class: "MAP")
      _ = try await client.require(
        "annotate", ["annotation": ["id": "a", "lat": 48.8584, "lon": 2.2945, "title": "Eiffel"]],
        class: "MAP")
      let before = try await client.require("remove", ["annotation": "c"], class: "MAP")
      #expect((before["annotations"] as? [JSONObject])?.map { $0["id"] as? String } == ["a", "b"])

      #expect(await daemon.stop() == 0, "\(daemon.log)")
      #expect(daemon.log.contains("locationd: stopped"))
      #expect(access(daemon.socketPath, F_OK) != 0, "the socket file was left behind")
      let file = try #require(
        (try? Data(contentsOf: URL(fileURLWithPath: daemon.stateDirectory + "/mapstate.json")))
          .flatMap { try? JSONSerialization.jsonObject(with: $0) as? JSONObject },
        "no valid mapstate.json")
      #expect((file["annotations"] as? [JSONObject])?.count == 2)

      daemon = try DaemonProcess(scratch: scratch, backend: "simulate", name: "second")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let again = try LineClient(path: daemon.socketPath)
      _ = try await again.require("request", class: "AUTHORIZATION")
      let after = try await again.require("map", class: "MAP")
      for key in ["center", "zoom", "mode", "annotations", "rotation", "size", "span"] {
        #expect(
          jsonEqual(after[key], before[key]),
          "\(key): \(after[key].map { encodeLine(["v": $0]) } ?? "nil") after restart")
      }
      #expect((after["center"] as? JSONObject)?["lat"] as? Double == 48.8566)
      #expect(after["zoom"] as? Double == 13.5)
      #expect(after["mode"] as? String == "follow")
      let b = (after["annotations"] as? [JSONObject])?.last
      #expect(b?["subtitle"] as? String == "Rue" && b?["kind"] as? String == "poi")
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    @Test(
      "kill -9 at random moments while annotations change: mapstate.json is old or new valid JSON and the daemon restarts from it",
      .timeLimit(.minutes(3)))
    func survivesKill9() async throws {
      let seed = UInt64(wallClockSeed())
      print("kill -9 test seed \(seed)")
      var random = SplitMix64(state: seed)
      let scratch = try Scratch()
      defer { scratch.remove() }
      let statePath = scratch.file("state/mapstate.json")
      var model = MapModel()
      var nextOperation = 0
      var kills = 0
      var unreadable: [String] = []

      for round in 0..<6 {
        let daemon = try DaemonProcess(scratch: scratch, backend: "simulate", name: "round\(round)")
        try await daemon.waitUntilReady()
        // The restarted daemon serves what the file held.
        let client = try LineClient(path: daemon.socketPath)
        _ = try await client.require("request", class: "AUTHORIZATION")
        let served = MapModel(map: try await client.require("map", class: "MAP"))
        #expect(
          served.matches(model),
          "round \(round): the daemon serves \(served.annotations) but the file held \(model.annotations)"
        )

        // A writer keeps changing the map; a reader keeps parsing the file.
        let progress = OperationLog()
        let writer = Thread { [model, nextOperation] in
          var state = model
          var index = nextOperation
          while true {
            let (command, members) = state.request(index)
            progress.sending(index)
            guard let reply = client.callBlocking(command, members, timeout: 5),
              reply["class"] as? String == "MAP"
            else { break }
            state = state.applying(index)
            progress.acknowledged(index)
            index += 1
          }
          progress.finish()
        }
        let reader = FileWatcher(path: statePath)
        writer.start()
        reader.start()
        await pause(Double(UInt32.random(in: 30_000...300_000, using: &random)) / 1e6)
        daemon.signal(SIGKILL)
        let status = await daemon.waitForExit(timeout: 10)
        #expect(status == SIGKILL, "round \(round): exit \(String(describing: status))")
        kills += 1
        await progress.waitUntilFinished()
        unreadable += reader.stop()

        // The file is absent (nothing saved yet) or valid JSON holding the last acknowledged
        // state or the one after it (the request in flight may have been saved before the reply).
        let (acknowledged, sent) = progress.snapshot
        let firstOperation = nextOperation
        var afterAcknowledged = model
        if let last = acknowledged {
          for index in nextOperation...last {
            afterAcknowledged = afterAcknowledged.applying(index)
          }
        }
        let candidates = [afterAcknowledged] + (sent.map { [afterAcknowledged.applying($0)] } ?? [])
        if access(statePath, F_OK) != 0 {
          #expect(
            acknowledged == nil, "round \(round): mapstate.json missing after acknowledged changes")
        } else {
          let data = try Data(contentsOf: URL(fileURLWithPath: statePath))
          let object = try? JSONSerialization.jsonObject(with: data) as? JSONObject
          try #require(
            object != nil,
            "round \(round): mapstate.json is not valid JSON: \(String(decoding: data, as: UTF8.self))"
          )
          let saved = MapModel(file: object ?? [:])
          let position = candidates.firstIndex {
            $0.matches(saved) && (saved.zoom == $0.zoom || $0.zoom == nil)
          }
          #expect(
            position != nil,
            "round \(round): the file holds \(saved) but after operation \(acknowledged.map(String.init) ?? "none") it should be \(candidates)"
          )
          model = candidates[position ?? 0]
          nextOperation = (acknowledged.map { $0 + 1 } ?? nextOperation) + (position == 1 ? 1 : 0)
        }
        print(
          "round \(round): \((acknowledged ?? firstOperation - 1) - firstOperation + 1) changes acknowledged before kill -9, "
            + "\(sent == nil ? "none" : "one") in flight, the file held \(nextOperation - firstOperation)"
        )
      }
      #expect(kills == 6)
      #expect(unreadable.isEmpty, "a reader saw a broken mapstate.json: \(unreadable.prefix(3))")
      #expect(nextOperation > 6, "too few changes were made to test anything")

      // A last start from the surviving file, and a clean stop.
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate", name: "final")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let client = try LineClient(path: daemon.socketPath)
      _ = try await client.require("request", class: "AUTHORIZATION")
      #expect(MapModel(map: try await client.require("map", class: "MAP")).matches(model))
      #expect(await daemon.stop() == 0)
    }
  }
}

/// A seed from the wall clock (printed, so a failing run can be repeated).
func wallClockSeed() -> UInt64 {
  var spec = timespec()
  clock_gettime(CLOCK_REALTIME, &spec)
  return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
}

/// What the writer thread has sent and had acknowledged.
final class OperationLog: @unchecked Sendable {
  private let lock = NSLock()
  private var lastSent: Int?
  private var lastAcknowledged: Int?
  private var finished = false

  func sending(_ index: Int) { lock.withLock { lastSent = index } }
  func acknowledged(_ index: Int) { lock.withLock { lastAcknowledged = index } }
  func finish() { lock.withLock { finished = true } }
  func waitUntilFinished() async {
    while !lock.withLock({ finished }) { await pause(0.002) }
  }

  /// The last acknowledged operation and the one in flight (sent, not acknowledged), if any.
  var snapshot: (acknowledged: Int?, inFlight: Int?) {
    lock.withLock { (lastAcknowledged, lastSent == lastAcknowledged ? nil : lastSent) }
  }
}

/// Reads and parses a file over and over on its own thread; collects every unparsable read.
final class FileWatcher: @unchecked Sendable {
  private let lock = NSLock()
  private var stopped = false
  private var broken: [String] = []
  private var reads = 0
  private let done = DispatchSemaphore(value: 0)
  let path: String

  init(path: String) { self.path = path }

  func start() {
    Thread { [self] in
      while !lock.withLock({ stopped }) {
        if let data = FileManager.default.contents(atPath: path) {
          if (try? JSONSerialization.jsonObject(with: data)) == nil {
            lock.withLock { broken.append(String(decoding: data.prefix(200), as: UTF8.self)) }
          }
          lock.withLock { reads += 1 }
        }
        usleep(500)
      }
      done.signal()
    }.start()
  }

  /// Stops and returns the unparsable contents seen.
  func stop() -> [String] {
    lock.withLock { stopped = true }
    done.wait()
    return lock.withLock { broken }
  }
}

extension EndToEnd {
  @Suite("End to end: state directory checks")
  struct StateDirectoryEndToEndTests {
    @Test("a --state-dir that is a file (78) or cannot be created (73) stops locationd at start")
    func unusableStateDirectory() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let file = scratch.file("not-a-directory")
      #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
      for (index, (path, code)) in [(file, Int32(78)), (scratch.file("missing/parent"), 73)]
        .enumerated()
      {
        let daemon = try DaemonProcess(
          scratch: scratch, backend: nil, name: "state\(index)",
          socketPath: scratch.file("s\(index).sock"), stateDirectory: path)
        defer { daemon.cleanUp() }
        #expect(await daemon.waitForExit(timeout: 10) == code, "\(daemon.log)")
        #expect(!daemon.log.contains("usage:"), "usage printed for a bad directory")
        #expect(daemon.log.contains("--state-dir \(path) cannot be used"), "\(daemon.log)")
        #expect(access(scratch.file("s\(index).sock"), F_OK) != 0, "no socket is left behind")
      }
      // The file was not touched.
      #expect(try String(contentsOfFile: file, encoding: .utf8) == "x")
    }

    @Test("an unsafe --state-dir stops locationd with 78 and says how to make it safe")
    func unsafeStateDirectory() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let unsafe = scratch.file("open")
      #expect(mkdir(unsafe, 0o755) == 0 && chmod(unsafe, 0o777) == 0)
      let daemon = try DaemonProcess(
        scratch: scratch, backend: nil, name: "unsafe", socketPath: scratch.file("u.sock"),
        stateDirectory: unsafe)
      defer { daemon.cleanUp() }
      #expect(await daemon.waitForExit(timeout: 10) == 78, "\(daemon.log)")
      #expect(daemon.log.contains("chmod go-w \(unsafe)"), "\(daemon.log)")
      // Not the hint for a directory that cannot be created.
      #expect(!daemon.log.contains("whose parent exists"), "\(daemon.log)")
    }
  }

  @Suite("End to end: locationd exit statuses")
  struct ExitStatusEndToEndTests {
    /// Runs locationd with `arguments` until it exits.
    func run(_ arguments: [String]) async throws -> ToolRun {
      try await runTool(try Products.path("locationd"), arguments)
    }

    @Test("64 with usage only for a malformed command line; a distinct code for each other failure")
    func exitStatuses() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let file = scratch.file("regular")
      #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
      let dangling = scratch.file("dangling")
      #expect(symlink(scratch.file("nowhere"), dangling) == 0)
      let base = ["--state-dir", scratch.file("state"), "--group", ""]
      let socket = ["--socket", scratch.file("l.sock")]
      let cases: [(arguments: [String], status: Int32, says: String)] = [
        (["--no-such-flag"], 64, "unknown option"),
        (["--backend"], 64, "needs a value"),
        (["--help=1"], 64, "option --help takes no value"),
        (
          base + socket + ["--backend", "replay:/nonexistent/drive.nmea"], 66,
          "/nonexistent/drive.nmea"
        ),
        (
          base + socket + ["--backend", "simulate:/nonexistent/route.gpx"], 66,
          "/nonexistent/route.gpx"
        ),
        (
          base + socket + ["--config", "/nonexistent/locationd.conf"], 66,
          "/nonexistent/locationd.conf"
        ),
        (base + socket + ["--backend", "teleport"], 78, "unknown backend"),
        (base + socket + ["--backend", "simulate?speed=1&speed=2"], 78, "more than once"),
        (base + socket + ["--backend", "simulate?outage=0-1e300"], 78, "outage"),
        (base + socket + ["--backend", "simulate?mode=1e300:2d"], 78, "mode"),
        (base + socket + ["--backend", "replay:/dev/null?loop=true&loop=false"], 78, "more than once"),
        (
          base + socket + ["--backend", "gpsd://localhost?rollover-floor=none&rollover-floor=none"], 78,
          "more than once"
        ),
        (base + socket + ["--max-clients", "lots"], 78, "max-clients"),
        (
          ["--state-dir", scratch.file("nogroup-state"), "--group", "no-such-group-xyz"] + socket, 78,
          "group no-such-group-xyz does not exist"
        ),
        (base + ["--socket", file], 78, "is not a socket"),
        (["--state-dir", file, "--group", ""] + socket, 78, "not a directory"),
        (["--state-dir", scratch.file("a/b"), "--group", ""] + socket, 73, "cannot be used"),
        (base + ["--socket", scratch.file("x/y/l.sock")], 73, "cannot create directory"),
        // One status per kind, whatever stands in the way: a regular file or a dangling link
        // where a directory should be, for the socket's directory as for the state directory;
        // a directory where a log or route should be.
        (base + ["--socket", file + "/l.sock"], 73, "cannot create directory"),
        (base + ["--socket", dangling + "/l.sock"], 73, "cannot create directory"),
        (["--state-dir", file + "/sub", "--group", ""] + socket, 73, "cannot be used"),
        (["--state-dir", dangling + "/sub", "--group", ""] + socket, 73, "cannot be used"),
        (base + socket + ["--backend", "replay:\(scratch.path)"], 66, "is a directory"),
        (base + socket + ["--backend", "simulate:\(scratch.path)"], 66, "not a regular file"),
      ]
      for (arguments, status, says) in cases {
        let run = try await run(arguments)
        #expect(run.status == status, "\(arguments): \(run.status) \(run.stderr)")
        #expect(run.stderr.contains(says), "\(arguments): \(run.stderr)")
        #expect(
          run.stderr.contains("usage: locationd") == (status == 64),
          "\(arguments): usage shown wrongly: \(run.stderr)")
      }
      // An unknown group is found before anything is created.
      #expect(access(scratch.file("nogroup-state"), F_OK) != 0, "a refused start created its state directory")
      // A log the daemon's user may not read is missing input too (as nobody: root reads all).
      if geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") {
        let secret = scratch.file("secret.nmea")
        #expect(FileManager.default.createFile(atPath: secret, contents: Data("$GPRMC\n".utf8)))
        #expect(chmod(secret, 0o600) == 0 && chmod(scratch.path, 0o755) == 0)
        let unreadable = try await runTool(
          "/usr/bin/setpriv",
          ["--reuid=65534", "--regid=65534", "--clear-groups", try Products.path("locationd"), "--backend", "replay:\(secret)"]
            + base + socket)
        #expect(unreadable.status == 66, "\(unreadable.stderr)")
        #expect(unreadable.stderr.contains("Permission denied"), "\(unreadable.stderr)")
      }
      // Another server at the socket path: 69.
      let daemon = try DaemonProcess(scratch: scratch, backend: "simulate")
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      let busy = try await run(
        ["--socket", daemon.socketPath, "--state-dir", scratch.file("state2"), "--group", ""])
      #expect(busy.status == 69, "\(busy.stderr)")
      #expect(await daemon.stop() == 0)
      // --help prints the table and exits 0.
      let help = try await run(["--help"])
      #expect(help.status == 0)
      // The table stands apart from the usage text above it.
      #expect(help.stdout.contains("must exist).\n\nexit status:"), "\(help.stdout)")
      for code in ExitCodeTable.codes { #expect(help.stdout.contains("\n  \(code)  "), "\(code)") }
    }

    @Test("a setting from the config file that stops locationd at start is named at its file and line; a flag wins")
    func startFailuresNameTheConfigLine() async throws {
      let scratch = try Scratch()
      defer { scratch.remove() }
      let file = scratch.file("regular")
      #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
      let config = scratch.file("locationd.conf")
      let socket = "socket = \(scratch.file("l.sock"))\n"
      let state = "state-dir = \(scratch.file("state"))\n"
      let credentials = scratch.file("credentials")
      #expect(FileManager.default.createFile(atPath: credentials, contents: Data("u:p\n".utf8)))
      #expect(chmod(credentials, 0o644) == 0)
      let cases: [(file: String, status: Int32, says: String)] = [
        (
          socket + state + "group = \"\"\nmqtt = mqtt://127.0.0.1:1\nmqtt-credentials = \(credentials)\n", 78,
          "\(config):5: invalid mqtt-credentials"
        ),
        (socket + state + "group = \"\"\nnmea-socket = \(file)\n", 78, "\(config):4: "),
        ("# start\n" + socket + "group = \"\"\nstate-dir = \(file)\n", 78, "\(config):4: state-dir \(file) cannot be used"),
        (socket + state + "group = no-such-group-xyz\n", 78, "\(config):3: group no-such-group-xyz does not exist"),
        (state + "group = \"\"\nsocket = \(file)\n", 78, "\(config):3: \(file) exists and is not a socket"),
        (socket + state + "group = \"\"\nnmea-socket = \(scratch.file("l.sock"))\n", 78, "\(config):4: invalid nmea-socket"),
        (socket + state + "group = \"\"\nmqtt = mqtts://127.0.0.1\n", 78, "\(config):4: invalid mqtt"),
        (
          socket + state + "group = \"\"\nmqtt = mqtt://127.0.0.1\nmqtt-credentials = /nonexistent/mqtt\n", 66,
          "\(config):5: invalid mqtt-credentials"
        ),
      ]
      for (text, status, says) in cases {
        #expect(FileManager.default.createFile(atPath: config, contents: Data(text.utf8)))
        let run = try await run(["--config", config, "--backend", "simulate"])
        #expect(run.status == status, "\(text): \(run.status) \(run.stderr)")
        #expect(run.stderr.contains(says), "\(text): \(run.stderr)")
      }
      // The flag's value is the one in effect, and the message names the flag.
      #expect(FileManager.default.createFile(atPath: config, contents: Data((socket + "state-dir = /tmp\n").utf8)))
      let flagged = try await run(["--config", config, "--state-dir", file, "--group", ""])
      #expect(flagged.status == 78 && flagged.stderr.contains("--state-dir \(file) cannot be used"), "\(flagged.stderr)")
    }
  }
}

/// The codes the README and `locationd --help` document.
enum ExitCodeTable {
  static let codes = [0, 64, 66, 69, 71, 73, 78]
}
