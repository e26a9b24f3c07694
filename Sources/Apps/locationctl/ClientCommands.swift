import Glibc
import LocationModel
import LocationClient
import LocationProtocol
import SystemIO

/// Every client subcommand by name: arguments after the name, shared options -> exit status.
let clientCommands: [String: @Sendable ([String], ClientOptions) throws -> Int32] = [
  "request": runRequest,
  "start": runStart,
  "stop": runStop,
  "status": runStatus,
  "location": runLocation,
  "watch": runWatch,
  "center": runCenter,
  "zoom": runZoom,
  "mode": runMode,
  "annotate": runAnnotate,
  "remove": runRemove,
  "map": runMap,
  "replay": runReplay,
  "region": runRegion,
  "web": runWeb,
  "track": runTrack,
]

/// Prints a reply: the object without `id` in JSON mode, text otherwise; exit 0, or 1 for `ERROR`.
private func finish(_ reply: Message, _ options: ClientOptions, text: (JSONValue) -> String)
  -> Int32
{
  if reply["class"] == "ERROR" {
    if options.json { printJSON(reply) }
    let code = reply["code"]?.stringValue ?? "error"
    writeError("locationctl: \(code): \(reply["message"]?.stringValue ?? "")")
    return ExitCode.failure.rawValue
  }
  if options.json {
    printJSON(reply)
  } else {
    print(text(reply.value))
  }
  return ExitCode.success.rawValue
}

/// Prints a reply or event as received, on one line, without the request `id`.
func printJSON(_ message: Message) {
  print(String(decoding: message.rawWithoutID, as: UTF8.self))
}

/// Connects, asks for authorization, sends one command and prints its reply.
private func authorizedCall(
  _ options: ClientOptions, _ command: String, _ members: [JSONMember] = [],
  text: (JSONValue) -> String
) throws -> Int32 {
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  let authorization = try connection.call("request")
  if authorization["class"] == "ERROR" { return finish(authorization, options, text: { _ in "" }) }
  return finish(try connection.call(command, members), options, text: text)
}

func expectNoArguments(_ arguments: [String], _ command: String) throws {
  guard arguments.isEmpty else {
    throw UsageError("\(command) takes no arguments (got \(arguments.joined(separator: " ")))")
  }
}

func runRequest(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  try expectNoArguments(arguments, "request")
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  return finish(try connection.call("request"), options) {
    "authorization: \($0["authorization"]?.stringValue ?? "?")"
  }
}

func runStart(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  let list = try ArgumentList(
    arguments, valued: ["--distance-filter", "--min-interval", "--accuracy"])
  try expectNoArguments(list.positional, "start")
  var members: [JSONMember] = []
  if let value = try list.number("--distance-filter") {
    members.append(JSONMember("distanceFilter", .number(value)))
  }
  if let value = try list.number("--min-interval") {
    members.append(JSONMember("minInterval", .number(value)))
  }
  if let value = try list.number("--accuracy") {
    members.append(JSONMember("desiredAccuracy", .number(value)))
  }
  return try authorizedCall(options, "start", members, text: Format.tracking)
}

func runStop(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  try expectNoArguments(arguments, "stop")
  return try authorizedCall(options, "stop", text: Format.tracking)
}

func runStatus(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  try expectNoArguments(arguments, "status")
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  // Ask first so that `authorization` says authorized or denied; a refusal is not an error here.
  _ = try connection.call("request")
  return finish(try connection.call("status"), options, text: Format.status)
}

func runLocation(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  let list = try ArgumentList(arguments, valued: ["--wait"])
  try expectNoArguments(list.positional, "location")
  guard let wait = try list.number("--wait") else {
    return try authorizedCall(options, "location", text: Format.location)
  }
  guard wait > 0, wait <= 86_400 else { throw UsageError("--wait needs seconds within 0...86400, more than 0") }
  return try oneShotLocation(wait: wait, options)
}

/// `location --wait SECONDS`: one fix on request (CoreLocation's `requestLocation()`). Tracks
/// through a watch on its own connection, so tracking starts with it and stops when it ends,
/// whatever ends it; prints the first fix with a position (a TPV) and exits 0, or exits 1 when
/// none came within `wait` seconds.
private func oneShotLocation(wait: Double, _ options: ClientOptions) throws -> Int32 {
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  for command in ["request", "watch"] {
    let reply = try connection.call(command)
    if reply["class"] == "ERROR" { return finish(reply, options, text: { _ in "" }) }
  }
  let deadline = ContinuousClock.now + .milliseconds(Int64((wait * 1000).rounded(.up)))
  while true {
    guard let event = try connection.nextEvent(until: deadline) else {
      writeError("locationctl: no fix within \(DaemonConnection.seconds(wait)) (locationd answered, the backend gave no position)")
      return ExitCode.failure.rawValue
    }
    switch event["class"]?.stringValue {
    case "TPV" where event["lat"]?.doubleValue != nil && event["lon"]?.doubleValue != nil:
      if options.json { printJSON(event) } else { print(Format.fix(event.value)) }
      return ExitCode.success.rawValue
    case "ERROR", "SHUTDOWN":
      writeError("locationctl: no fix: \(Format.event(event.value))")
      return ExitCode.failure.rawValue
    case "BACKEND" where event["state"] == "endOfData":
      writeError("locationctl: no fix: the backend reached the end of its data")
      return ExitCode.failure.rawValue
    case "AUTHORIZATION" where event["authorization"] != "authorized":
      writeError("locationctl: locationd withdrew this client's authorization (its group changed)")
      return ExitCode.failure.rawValue
    default: continue
    }
  }
}

/// `watch [--every]`: authorizes and watches on its own connection, which tracks for as long as it
/// stays open (unlike `start`); `--every` asks for every fix instead of the newest when slow.
func runWatch(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  var every = false
  for argument in arguments {
    guard argument == "--every" else { throw UsageError("watch takes no arguments but --every") }
    every = true
  }
  let connection = try DaemonConnection(path: options.socketPath, timeout: options.timeout)
  let requests: [(String, [JSONMember])] = [("request", []), ("watch", every ? [JSONMember("coalesce", .bool(false))] : [])]
  for (command, members) in requests {
    let reply = try connection.call(command, members)
    if reply["class"] == "ERROR" { return finish(reply, options, text: { _ in "" }) }
  }
  var mapLines = MapLineFilter()
  while let event = try connection.nextEvent() {
    if options.json {
      printJSON(event)
    } else if event["class"] == "MAP" {
      // The map follows every fix while tracking: a line only when what a person sees changed.
      if mapLines.shouldPrint(event.value) { print(Format.event(event.value)) }
    } else {
      print(Format.event(event.value))
    }
    flushOutput()
    if event["class"] == "BACKEND", event["state"] == "endOfData" { return ExitCode.success.rawValue }
    if event["class"] == "SHUTDOWN" {
      // A stop by signal is the daemon's clean shutdown (systemctl stop, a restart): not a
      // failure of this command. A front-end that failed to start is one.
      let reason = event["reason"]?.stringValue ?? ""
      return reason.hasPrefix("SIG") ? ExitCode.success.rawValue : ExitCode.failure.rawValue
    }
    if event["class"] == "ERROR" { return ExitCode.failure.rawValue }
    if event["class"] == "AUTHORIZATION", event["authorization"] != "authorized" {
      // A reload of locationd's configuration took this user out of its group: nothing more comes.
      writeError("locationctl: locationd withdrew this client's authorization (its group changed)")
      return ExitCode.failure.rawValue
    }
  }
  writeError("locationctl: locationd closed the connection")
  return ExitCode.failure.rawValue
}

func runCenter(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  switch arguments.count {
  case 0: return try authorizedCall(options, "center", text: Format.map)
  case 2:
    let latitude = try parseNumber(arguments[0], "LAT")
    let longitude = try parseNumber(arguments[1], "LON")
    return try authorizedCall(
      options, "setCenter",
      [JSONMember("lat", .number(latitude)), JSONMember("lon", .number(longitude))],
      text: Format.map)
  default: throw UsageError("center takes no arguments (current location) or LAT LON in degrees")
  }
}

func runZoom(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  guard arguments.count == 1 else { throw UsageError("zoom takes one zoom level, 0...22") }
  let level = try parseNumber(arguments[0], "LEVEL")
  return try authorizedCall(options, "zoom", [JSONMember("zoom", .number(level))], text: Format.map)
}

func runMode(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  guard arguments.count == 1, UserTrackingMode(rawValue: arguments[0]) != nil else {
    throw UsageError("mode takes one of none, follow, followWithHeading")
  }
  return try authorizedCall(
    options, "mode", [JSONMember("mode", .string(arguments[0]))], text: Format.map)
}

func runAnnotate(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  let list = try ArgumentList(arguments, valued: ["--subtitle", "--kind"])
  guard (3...4).contains(list.positional.count) else {
    throw UsageError("annotate takes ID LAT LON [TITLE], e.g. annotate home 49.2827 -123.1207 Home")
  }
  let latitude = try parseNumber(list.positional[1], "LAT")
  let longitude = try parseNumber(list.positional[2], "LON")
  var annotation: [JSONMember] = [
    JSONMember("id", .string(list.positional[0])), JSONMember("lat", .number(latitude)),
    JSONMember("lon", .number(longitude)),
    JSONMember("title", .string(list.positional.count == 4 ? list.positional[3] : "")),
  ]
  if let subtitle = list.values["--subtitle"] {
    annotation.append(JSONMember("subtitle", .string(subtitle)))
  }
  if let kind = list.values["--kind"] { annotation.append(JSONMember("kind", .string(kind))) }
  return try authorizedCall(
    options, "annotate", [JSONMember("annotation", .object(annotation))], text: Format.map)
}

func runRemove(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  guard arguments.count == 1 else { throw UsageError("remove takes one annotation ID") }
  return try authorizedCall(
    options, "remove", [JSONMember("annotation", .string(arguments[0]))], text: Format.map)
}

func runMap(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  let list = try ArgumentList(arguments, flags: ["--geojson", "--svg"])
  try expectNoArguments(list.positional, "map")
  guard list.flags.count <= 1 else { throw UsageError("give at most one of --geojson and --svg") }
  let format: MapFormat =
    list.flags.contains("--svg") ? .svg : list.flags.contains("--geojson") ? .geojson : .json
  return try authorizedCall(
    options, "map", [JSONMember("format", .string(format.rawValue))], text: Format.map)
}

func runReplay(_ arguments: [String], _ options: ClientOptions) throws -> Int32 {
  guard let action = arguments.first else {
    throw UsageError("replay takes pause, resume, seek SECONDS, speed FACTOR or step [EPOCHS]")
  }
  var members = [JSONMember("action", .string(action))]
  switch (action, arguments.count) {
  case ("pause", 1), ("resume", 1), ("step", 1): break
  case ("seek", 2):
    members.append(JSONMember("value", .number(try parseNumber(arguments[1], "SECONDS"))))
  case ("speed", 2):
    members.append(JSONMember("value", .number(try parseNumber(arguments[1], "FACTOR"))))
  case ("step", 2):
    members.append(JSONMember("value", .number(try parseNumber(arguments[1], "EPOCHS"))))
  default:
    throw UsageError("replay takes pause, resume, seek SECONDS, speed FACTOR or step [EPOCHS]")
  }
  return try authorizedCall(options, "replay", members, text: Format.replay)
}
