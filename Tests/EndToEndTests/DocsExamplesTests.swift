import Foundation
import Glibc
import LocationTestKit
import NMEA
import Testing
import LocationModel

/// One example found in README.md or docs/*.md.
struct DocExample: CustomStringConvertible, Sendable {
  enum Kind: Sendable {
    /// A command line in a code block (indented, or fenced without language or as `sh`).
    case shell
    /// A command in an inline code span.
    case inline
    /// A fenced `json` block: requests (`{"cmd"...`) each followed by its documented replies, or
    /// documented messages alone.
    case json
  }

  var file: String
  var line: Int
  var kind: Kind
  /// The command (continuation lines joined), or the JSON block.
  var text: String
  /// For shell lines: the index of the code block (commands of one block form one session).
  var block: Int
  /// For inline commands: the rest of the paragraph or list item, where the output is described.
  var context: String

  var description: String { "\(file):\(line): \(text)" }
}

/// Finds the examples of the documentation, and says which of them a test cannot run and why.
enum DocExamples {
  /// The package root (this file is Tests/EndToEndTests/DocsExamplesTests.swift).
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

  /// README.md and every docs/*.md, relative to ``root``.
  static func files() throws -> [String] {
    let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs")
      .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    return ["README.md"] + docs
  }

  /// Words a documented command starts with; a code line starting otherwise (a URI syntax, a
  /// diagram) is not a command.
  static let commandWords = [
    "locationctl", "locationd", ".build/", "scripts/", "sudo ", "swift ", "gpsd ", "gpspipe",
    "systemctl", "apt-get",
  ]

  static func isCommand(_ text: String) -> Bool {
    for word in commandWords {
      let separated = word.hasSuffix("/") || word.hasSuffix(" ") ? word : word + " "
      if text == word || text.hasPrefix(separated) { return true }
    }
    return false
  }

  /// Every example in `file`.
  static func extract(_ file: String) throws -> [DocExample] {
    let lines = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
      .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    var examples: [DocExample] = []
    var block = 0
    var index = 0
    func shellLines(_ body: [(Int, String)]) {
      block += 1
      var pending: (Int, String)?
      for (number, raw) in body {
        let text = raw.trimmingCharacters(in: .whitespaces)
        if let (start, joined) = pending {
          if text.hasSuffix("\\") {
            pending = (start, joined + " " + text.dropLast().trimmingCharacters(in: .whitespaces))
          } else {
            pending = nil
            examples.append(
              DocExample(
                file: file, line: start, kind: .shell, text: joined + " " + text, block: block,
                context: ""))
          }
          continue
        }
        guard !text.isEmpty, !text.hasPrefix("#"), isCommand(text) else { continue }
        if text.hasSuffix("\\") {
          pending = (number, text.dropLast().trimmingCharacters(in: .whitespaces))
        } else {
          examples.append(
            DocExample(
              file: file, line: number, kind: .shell, text: text, block: block, context: ""))
        }
      }
    }
    while index < lines.count {
      let line = lines[index]
      if line.hasPrefix("```") {
        let language = line.dropFirst(3).trimmingCharacters(in: .whitespaces)
        var body: [(Int, String)] = []
        index += 1
        while index < lines.count, !lines[index].hasPrefix("```") {
          body.append((index + 1, lines[index]))
          index += 1
        }
        index += 1
        if language == "json" {
          examples.append(
            DocExample(
              file: file, line: body.first?.0 ?? index, kind: .json,
              text: body.map(\.1).joined(separator: "\n"), block: 0, context: ""))
        } else if ["", "sh", "bash", "shell"].contains(language) {
          shellLines(body)
        }
        continue
      }
      // An indented code block: four spaces after a blank line, outside a list.
      if line.hasPrefix("    "), index > 0,
        lines[index - 1].trimmingCharacters(in: .whitespaces).isEmpty
      {
        var body: [(Int, String)] = []
        while index < lines.count, lines[index].hasPrefix("    ") || lines[index].isEmpty {
          body.append((index + 1, lines[index]))
          index += 1
        }
        shellLines(body)
        continue
      }
      // Inline code spans that are commands; the context runs to the end of the paragraph or
      // list item.
      var context = line
      var next = index + 1
      while next < lines.count, !lines[next].trimmingCharacters(in: .whitespaces).isEmpty,
        !lines[next].hasPrefix("- "), !lines[next].hasPrefix("|"), !lines[next].hasPrefix("#")
      {
        context += "\n" + lines[next]
        next += 1
      }
      let spans = line.split(separator: "`", omittingEmptySubsequences: false)
      for (number, span) in spans.enumerated() where number % 2 == 1 {
        let text = String(span)
        guard isCommand(text), text.contains(" ") || text.hasPrefix("scripts/") else { continue }
        examples.append(
          DocExample(
            file: file, line: index + 1, kind: .inline, text: text, block: 0, context: context))
      }
      index += 1
    }
    return examples
  }

  /// Commands a test does not run, by prefix, with the reason.
  static let notRunnable: [(prefix: String, reason: String)] = [
    ("scripts/test", "runs this whole test suite"),
    ("sudo udevadm", "reloads the machine's udev rules for a receiver this machine does not have"),
    ("sudo adduser", "adds a user of the machine to a group"),
    ("scripts/fuzz", "builds with -sanitize=fuzzer and fuzzes for minutes; CI runs it as a step of its own"),
    ("scripts/sanitize", "rebuilds the tests under the sanitizers; CI runs it as a step of its own"),
    ("scripts/tsan-suppressions.txt", "a file the sanitizer script reads, not a command"),
    (".build/fuzz/release/locationd-fuzz", "exists after scripts/fuzz; FuzzTargetsTests replay the same corpus"),
    (".build/fuzz-asan/release/", "exists after FUZZ_SANITIZER=address scripts/fuzz"),
    (
      "scripts/run",
      "installs packages and builds before it runs locationd on the simulated backend with locationctl watch, which this test runs directly"
    ),
    (
      "sudo scripts/install",
      "installs into /usr/local and systemd; SystemdUnitTests verify the units"
    ),
    ("scripts/install", "installs into /usr/local and systemd; SystemdUnitTests verify the units"),
    (
      "swift build",
      "a release build of a benchmark: minutes, and benchmarks print figures rather than test"
    ),
    ("swift test", "runs a test suite"),
    (
      "systemctl",
      "needs systemd as init; SystemdEndToEndTests send SIGHUP as systemctl reload does"
    ),
    (".build/release/nmea-bench", "a benchmark: prints figures"),
    (".build/release/core-bench", "a benchmark: prints figures"),
    (".build/release/daemon-bench", "a benchmark: prints figures"),
    (".build/release/gpsd-bench", "a benchmark: prints figures"),
    (".build/release/relay-bench", "a benchmark: prints figures"),
    ("scripts/geoclue-bench", "a benchmark: prints figures"),
    ("scripts/rss-breakdown", "a measurement of a release build: prints figures"),
    (
      "scripts/order-functions",
      "profiles a release build under valgrind for a minute and rewrites link/locationd.order"
    ),
    ("scripts/geoclue-memory", "a measurement of minutes: prints figures"),
    (
      "scripts/compare-profiles",
      "a measurement against gpsd through gpsfake (gpsd-clients), minutes per hundred logs: prints figures"
    ),
    (".build/release/mqtt-bench", "a benchmark: prints figures"),
    ("locationd --mqtt", "needs a broker; MQTTEndToEndTests run locationd against a private mosquitto"),
    (
      "gpsd ",
      "needs gpsd on the simulated pty; GPSDEndToEndTests and SimulateCommandTests run that path"
    ),
    (
      "gpspipe",
      "needs gpsd on the simulated pty; GPSDEndToEndTests and SimulateCommandTests run that path"
    ),
    ("locationctl simulate", "needs gpsd reading the pty; SimulateCommandTests run it"),
    (
      "locationd --backend gpsd",
      "needs gpsd; GPSDEndToEndTests run locationd against a private gpsd"
    ),
    ("locationctl [", "a synopsis with placeholders, not a command"),
    ("locationd --http", "serves HTTP; scripts/web-test runs it in a browser"),
    ("locationctl web", "needs locationd --http; scripts/web-test runs it"),
    ("scripts/web-test", "runs the browser tests (Chromium); scripts/test runs it"),
    ("scripts/web-bench", "a benchmark: prints figures"),
    (
      "locationctl COMMAND",
      "a synopsis with placeholders; every COMMAND --help is tested in ControlClientTests"
    ),
  ]

  /// Why `example` is not run, or `nil` when it is.
  static func skipReason(_ example: DocExample, in all: [DocExample]) -> String? {
    if let rule = notRunnable.first(where: { example.text.hasPrefix($0.prefix) }) {
      return rule.reason
    }
    // A command of a shell session whose other commands cannot run (gpsd on the pty) belongs to
    // that session.
    guard example.kind == .shell else { return nil }
    for other in all where other.kind == .shell && other.file == example.file {
      guard other.block == example.block else { continue }
      let text = other.text
      if notRunnable.contains(where: { text.hasPrefix($0.prefix) }) {
        return "part of the session of \(text), which cannot run here"
      }
    }
    return nil
  }
}

extension EndToEnd {
  @Suite("End to end: every example of the README and docs", .serialized)
  struct DocsExamplesTests {
    /// A generated NMEA log: 600 epochs at 1 Hz (RMC, GGA, GSA, GSV, VTG).
    static func writeLog(_ path: String) throws {
      let encoder = NMEAEncoder()
      var text = ""
      for index in 0..<600 {
        for sentence in encoder.encode(TestRoute.fix(index, periodMilliseconds: 1000)) {
          text += sentence.hasSuffix("\r\n") ? sentence : sentence + "\r\n"
        }
      }
      try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// The top-level and nested member names of a documented JSON object, where it is complete
    /// JSON; `nil` when the docs abbreviate it with `...`.
    static func documented(_ text: String) -> JSONObject? {
      guard !text.contains("...") else { return nil }
      return parseObject(text)
    }

    /// Differences between the member names of a documented object and a real one, recursively
    /// for objects and the first element of arrays; values are not compared.
    static func shapeDifferences(documented: Any, actual: Any, path: String = "") -> [String] {
      if let doc = documented as? JSONObject {
        guard let real = actual as? JSONObject else { return ["\(path): not an object"] }
        var differences: [String] = []
        let docKeys = Set(doc.keys).subtracting(["id"])
        let realKeys = Set(real.keys).subtracting(["id"])
        for key in docKeys.subtracting(realKeys).sorted() {
          differences.append("\(path)\(key): documented, not sent")
        }
        // A TPV's members vary with the fix and the backend: the documented ones must be there.
        if doc["class"] as? String != "TPV" {
          for key in realKeys.subtracting(docKeys).sorted() {
            differences.append("\(path)\(key): sent, not documented")
          }
        }
        for key in docKeys.intersection(realKeys).sorted() {
          if let value = doc[key], let other = real[key], !(value is NSNull), !(other is NSNull) {
            differences += shapeDifferences(
              documented: value, actual: other, path: path + key + ".")
          }
        }
        return differences
      }
      if let doc = documented as? [Any], let first = doc.first {
        guard let real = actual as? [Any] else { return ["\(path): not an array"] }
        // The element with the same `id` (annotations), else the first.
        let id = (first as? JSONObject)?["id"] as? String
        let match =
          real.first { ($0 as? JSONObject)?["id"] as? String == id && id != nil } ?? real.first
        guard let other = match else { return [] }
        return shapeDifferences(documented: first, actual: other, path: path + "[0].")
      }
      return []
    }

    /// Splits a documented JSON block into messages (a message may span lines).
    static func messages(_ block: String) -> [String] {
      var messages: [String] = []
      for line in block.split(separator: "\n") {
        let text = line.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("{") || messages.isEmpty {
          messages.append(text)
        } else {
          messages[messages.count - 1] += text
        }
      }
      return messages
    }

    @Test("the LocationClient example of README.md and docs/client.md is the one the outside package builds")
    func clientExampleIsBuilt() throws {
      let built = try String(
        contentsOfFile: DocExamples.root + "/Tests/OutsidePackage/Sources/readme-example/main.swift", encoding: .utf8)
      for file in ["README.md", "docs/client.md"] {
        let text = try String(contentsOfFile: DocExamples.root + "/" + file, encoding: .utf8)
        let blocks = text.components(separatedBy: "```swift\n").dropFirst().compactMap {
          $0.components(separatedBy: "```").first
        }
        let example = try #require(blocks.first { $0.contains("import LocationClient") }, "\(file) has no example")
        // A first comment line naming the file (docs/client.md) is not part of the code.
        let code = example.split(separator: "\n", omittingEmptySubsequences: false)
          .filter { !$0.hasPrefix("// Sources/") }.joined(separator: "\n")
        #expect(code == built, "\(file)'s example differs from Tests/OutsidePackage/Sources/readme-example/main.swift")
      }
    }

    @Test(
      "every example command and JSON exchange in README.md and docs/*.md runs and has the documented shape",
      .timeLimit(.minutes(3)))
    func everyExample() async throws {
      let examples = try DocExamples.files().flatMap { try DocExamples.extract($0) }
      #expect(examples.filter { $0.kind != .json }.count >= 20, "the extraction found too little")
      #expect(examples.filter { $0.kind == .json }.count >= 15, "the extraction found too little")

      let scratch = try Scratch()
      defer { scratch.remove() }
      let log = scratch.file("drive.nmea")
      try Self.writeLog(log)
      let products = URL(fileURLWithPath: try Products.path("locationctl"))
        .deletingLastPathComponent().path
      // Shifted timestamps: the fixes look like today's in the examples' output. `track = all`:
      // the track examples need a store, and a replay is recorded only then.
      let daemon = try DaemonProcess(
        scratch: scratch, backend: "replay:\(log)?speed=1&loop=true&timestamps=shifted", extra: ["--track", "all"])
      defer { daemon.cleanUp() }
      try await daemon.waitUntilReady()
      var environment = ProcessInfo.processInfo.environment
      environment["PATH"] = products + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
      environment["LOCATIOND_SOCKET"] = daemon.socketPath
      // locationctl track reads the store in this daemon's state directory.
      environment["LOCATIOND_STATE_DIR"] = daemon.stateDirectory
      // The examples assume a tracking daemon with a fix.
      #expect(try await locationctl(daemon.socketPath, ["start"]).status == 0)
      #expect(
        try await waitUntil(timeout: 30) {
          (try await locationctl(daemon.socketPath, ["status"]).stdout).contains("\"current\":{")
        })

      var ran: [String] = []
      var skipped: [String] = []
      // Shell sessions (a code block that starts a locationd) run against their own daemon.
      let sessions = Dictionary(
        grouping: examples.filter { $0.kind == .shell }, by: { "\($0.file)#\($0.block)" })
      for example in examples where example.kind != .json {
        if let reason = DocExamples.skipReason(example, in: examples) {
          skipped.append("\(example): \(reason)")
          continue
        }
        if example.kind == .shell, let session = sessions["\(example.file)#\(example.block)"],
          session.first?.text.contains("locationd ") == true,
          session.first?.text.hasPrefix("locationctl") == false
        {
          if example.line == session.first?.line {
            try await runSession(session, log: log, products: products, scratch: scratch)
            ran += session.map(\.description)
          }
          continue
        }
        try await runCommand(example, log: log, environment: environment, scratch: scratch)
        ran.append(example.description)
      }
      // A watching connection keeps the backend tracking while the exchanges start and stop
      // tracking for their own user.
      let tracker = try LineClient(path: daemon.socketPath)
      defer { tracker.close() }
      try await tracker.authorizeAndWatch(coalesce: true)
      for example in examples where example.kind == .json {
        try await checkExchange(example, daemon: daemon)
        ran.append(example.description)
      }
      #expect(ran.count >= 25, "ran only \(ran.count): \(ran)")
      // The list of what cannot run, for the record of a failing run.
      print("docs examples not run:\n  " + skipped.joined(separator: "\n  "))
      #expect(await daemon.stop() == 0, "\(daemon.log)")
    }

    /// Runs one command with `sh -c` and checks the shape the docs give its output.
    func runCommand(
      _ example: DocExample, log: String, environment: [String: String], scratch: Scratch
    ) async throws {
      var command = example.text.replacingOccurrences(of: ".build/release/", with: "")
      if command.hasPrefix("locationctl decode") || command.hasPrefix("locationctl --json decode") {
        command += " < \(log)"
      }
      let watching = command.contains(" watch")
      if watching {
        // watch runs until interrupted: take its first lines.
        let out = scratch.file(
          "watch-\(example.file.replacingOccurrences(of: "/", with: "-"))-\(example.line).out")
        let child = try Child(
          "/bin/sh", ["-c", "exec " + command], environment: environment, stdout: out,
          stderr: scratch.file("watch.err"))
        defer {
          kill(child.pid, SIGTERM)
          _ = child.waitForExitBlocking(timeout: 5)
        }
        var lines: [String] = []
        let deadline = now() + 30
        while true {
          lines = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
          if lines.count >= 4 || now() >= deadline { break }
          await pause(0.05)
        }
        #expect(lines.count >= 4, "\(example): \(lines)")
        try checkOutput(example, lines: lines)
        return
      }
      let run = try await runTool("/bin/sh", ["-c", command], environment: environment)
      #expect(run.status == 0, "\(example): exit \(run.status): \(run.stderr)")
      #expect(!run.stdout.isEmpty, "\(example): no output")
      try checkOutput(example, lines: run.lines)
      if command.hasPrefix("locationd --help") {
        for code in ExitCodeTable.codes {
          #expect(run.stdout.contains("\n  \(code)  "), "\(example): exit status \(code) missing")
        }
      }
      if command.contains("center -- -33.9 151.2") {
        #expect(run.stdout.contains("center: -33.900000, 151.200000"), "\(run.stdout)")
      }
    }

    /// `--json` output is one object per line with a `class`, carrying every `"member":` the
    /// surrounding text names; text output has no error.
    func checkOutput(_ example: DocExample, lines: [String]) throws {
      guard example.text.contains("--json") else {
        #expect(!lines.contains { $0.hasPrefix("locationctl:") }, "\(example): \(lines)")
        return
      }
      let objects = lines.compactMap(parseObject)
      #expect(objects.count == lines.count, "\(example): a line is not a JSON object: \(lines)")
      #expect(objects.allSatisfy { $0["class"] is String }, "\(example)")
      // Member names the docs give for this output, e.g. `"backendActive":true|false`.
      let named = Set(
        example.context.matches(of: /"([A-Za-z]+)":/).map { String($0.output.1) })
      var present: Set<String> = []
      func collect(_ value: Any) {
        if let object = value as? JSONObject {
          for (key, member) in object {
            present.insert(key)
            collect(member)
          }
        } else if let array = value as? [Any] {
          array.forEach(collect)
        }
      }
      objects.forEach(collect)
      for name in named.sorted() where !present.contains(name) {
        Issue.record("\(example): the docs name \"\(name)\" but the output has no such member")
      }
    }

    /// A code block that starts locationd and then runs locationctl against it (README's replay
    /// example): the daemon with its paths moved into the scratch directory and the log
    /// replaced by a generated one; watch runs in the background while the next command runs.
    func runSession(
      _ session: [DocExample], log: String, products: String, scratch: Scratch
    ) async throws {
      // Each session its own files: a daemon of an earlier session still shutting down must not
      // be taken for this one (its log says ready) nor hold the state directory.
      let name = "session-\(session.first?.file.replacingOccurrences(of: "/", with: "-") ?? "")-\(session.first?.line ?? 0)"
      let socket = scratch.file(name + ".sock")
      func localize(_ text: String) -> String {
        var text = text.replacingOccurrences(of: ".build/release/", with: products + "/")
        if let match = text.firstMatch(of: /--socket (\S+)/) {
          text = text.replacingOccurrences(of: String(match.output.1), with: socket)
        }
        if let match = text.firstMatch(of: /--state-dir (\S+)/) {
          text = text.replacingOccurrences(
            of: String(match.output.1), with: scratch.file(name + "-state"))
        }
        if let match = text.firstMatch(of: /replay:([^?"]+)/) {
          text = text.replacingOccurrences(of: String(match.output.1), with: log)
        }
        return text
      }
      let daemonCommand = try #require(session.first)
      let daemonLog = scratch.file(name + ".log")
      let daemon = try Child(
        "/bin/sh", ["-c", "exec " + localize(daemonCommand.text)], stdout: daemonLog,
        stderr: daemonLog)
      defer {
        kill(daemon.pid, SIGTERM)
        _ = daemon.waitForExitBlocking(timeout: 5)
      }
      #expect(
        await waitUntil(timeout: 30) {
          ((try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "").contains("ready")
        }, "\(daemonCommand): \((try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "")")
      var watcher: Child?
      defer {
        if let watcher {
          kill(watcher.pid, SIGTERM)
          _ = watcher.waitForExitBlocking(timeout: 5)
        }
      }
      for example in session.dropFirst() {
        let command = localize(example.text)
        if command.hasSuffix(" watch") {
          let out = scratch.file(name + "-watch.out")
          watcher = try Child("/bin/sh", ["-c", "exec " + command], stdout: out, stderr: out)
          // Text events until the first fix (a line with a position and the fix mode).
          #expect(
            await waitUntil(timeout: 30) {
              ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("3D")
            }, "\(example): \((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")")
          let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
          #expect(text.contains(" N ") && text.contains("3D"), "\(example): \(text)")
          continue
        }
        let run = try await runTool("/bin/sh", ["-c", command])
        #expect(run.status == 0, "\(example): exit \(run.status): \(run.stderr)")
        if command.hasSuffix("replay pause") {
          #expect(
            run.stdout.hasPrefix("replay: paused, speed 10.0x, at "), "\(example): \(run.stdout)")
        }
      }
    }

    /// Sends each documented request on an authorized connection and compares the reply's class
    /// (and error code) and member names with the documented reply; documented messages without
    /// a request are compared with the real message of that class.
    func checkExchange(_ example: DocExample, daemon: DaemonProcess) async throws {
      let client = try LineClient(path: daemon.socketPath)
      defer { client.close() }
      _ = try await client.require("request", class: "AUTHORIZATION")
      let messages = Self.messages(example.text)
      var index = 0
      while index < messages.count {
        let message = messages[index]
        index += 1
        guard let request = parseObject(message), request["cmd"] is String else {
          try await checkMessage(message, example: example, daemon: daemon)
          continue
        }
        var replies: [String] = []
        while index < messages.count, !messages[index].hasPrefix(#"{"cmd""#) {
          replies.append(messages[index])
          index += 1
        }
        try client.send(message + "\n")
        let id = request["id"] as? Int
        var reply: JSONObject?
        while let object = try await client.readObject(timeout: 10) {
          if object["id"] as? Int == id {
            reply = object
            break
          }
        }
        let actual = try #require(reply, "\(example): no reply to \(message)")
        guard let documentedText = replies.first else {
          #expect(actual["class"] as? String != "ERROR", "\(example): \(message) -> \(actual)")
          continue
        }
        let documentedClass = documentedText.firstMatch(of: /"class":"([A-Z]+)"/)?.output.1
        #expect(
          actual["class"] as? String == documentedClass.map(String.init),
          "\(example): \(message) -> \(encodeLine(actual))")
        if let documented = Self.documented(documentedText) {
          if documented["class"] as? String == "ERROR" {
            #expect(actual["code"] as? String == documented["code"] as? String, "\(example)")
          }
          let differences = Self.shapeDifferences(documented: documented, actual: actual)
          #expect(differences.isEmpty, "\(example): \(message): \(differences)")
        }
      }
    }

    /// A documented message without a request (an event, a refusal): compared with a real one.
    func checkMessage(_ text: String, example: DocExample, daemon: DaemonProcess) async throws {
      guard let documentedClass = text.firstMatch(of: /"class":"([A-Z]+)"/)?.output.1 else {
        Issue.record("\(example): not a JSON message: \(text)")
        return
      }
      let documented = Self.documented(text)
      switch documentedClass {
      case "ERROR":
        // A refusal needs a peer outside the group: TrackingEndToEndTests runs one; the code
        // must be a documented one.
        let code = try #require(
          text.firstMatch(of: /"code":"([A-Za-z]+)"/).map { String($0.output.1) }, "\(example)")
        let table = try String(
          contentsOfFile: DocExamples.root + "/docs/PROTOCOL.md", encoding: .utf8)
        #expect(table.contains("| `\(code)` |"), "\(example): code \(code) not in the table")
      case "WARNING":
        // A warning needs a damaged log: ReplayRejectionTests checks its text. Its shape:
        #expect(documented.map { Set($0.keys) } == ["class", "message"], "\(example)")
      case "SHUTDOWN":
        // Stopping the daemon would end this run: TrackingEndToEndTests sends SIGTERM to one
        // with a watcher and checks the event's reason. Its shape:
        #expect(documented.map { Set($0.keys) } == ["class", "reason"], "\(example)")
      case "AUTHORIZATION":
        // The event a reload sends to a connection whose authorization it changed needs a peer
        // outside the group (AuthorizationReloadEndToEndTests runs one); it is the `request`
        // reply without `id`.
        let client = try LineClient(path: daemon.socketPath)
        defer { client.close() }
        let reply = try await client.require("request", class: "AUTHORIZATION")
        if let documented {
          let differences = Self.shapeDifferences(documented: documented, actual: reply)
          #expect(differences.isEmpty, "\(example): \(differences)")
        }
      case "MAP":
        let client = try LineClient(path: daemon.socketPath)
        defer { client.close() }
        _ = try await client.require("request", class: "AUTHORIZATION")
        let map = try await client.require("map", class: "MAP")
        if let documented {
          let differences = Self.shapeDifferences(documented: documented, actual: map)
          #expect(differences.isEmpty, "\(example): \(differences)")
        }
      default:
        // An event: the first of that class on a watching connection.
        let client = try LineClient(path: daemon.socketPath)
        defer { client.close() }
        try await client.authorizeAndWatch(coalesce: true)
        if documentedClass == "BACKEND" {
          // A state change: pause and resume the replay.
          let control = try LineClient(path: daemon.socketPath)
          defer { control.close() }
          _ = try await control.require("request", class: "AUTHORIZATION")
          _ = try await control.require("replay", ["action": "pause"], class: "REPLAY")
          _ = try await control.require("replay", ["action": "resume"], class: "REPLAY")
        }
        let regionControl = try LineClient(path: daemon.socketPath)
        defer { regionControl.close() }
        if documentedClass == "REGION" {
          // A transition: a circle around the current location, entered within a few fixes.
          _ = try await regionControl.require("request", class: "AUTHORIZATION")
          let location = try await regionControl.require("location", class: "LOCATION")
          let current = try #require(location["current"] as? JSONObject, "\(example): no current location")
          let circle: JSONObject = ["lat": current["lat"] ?? 0, "lon": current["lon"] ?? 0, "radius": 300]
          _ = try await regionControl.require(
            "region", ["action": "add", "region": ["id": "docs-example", "circle": circle] as JSONObject],
            class: "REGION")
        }
        defer {
          if documentedClass == "REGION" {
            _ = regionControl.callBlocking("region", ["action": "remove", "region": "docs-example"])
          }
        }
        var event: JSONObject?
        let deadline = now() + 30
        while event == nil,
          let next = try await client.nextEvent(timeout: max(0.01, deadline - now()))
        {
          if next["class"] as? String == String(documentedClass) { event = next }
        }
        let actual = try #require(event, "\(example): no \(documentedClass) event")
        if let documented {
          // Values differ by backend (a gpsd TPV has no `line`): the documented members must
          // all be there.
          let missing = Set(documented.keys).subtracting(actual.keys)
          #expect(missing.isEmpty, "\(example): documented, not sent: \(missing.sorted())")
        }
      }
    }
  }
}
