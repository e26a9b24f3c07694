import JSON
import LocationModel
import Testing

@testable import Regions

@Suite struct PersistenceTests {
  let center = Coordinate(latitude: -33.8688, longitude: 151.2093)
  let t0: Int64 = 1_764_500_000_000

  func sample() throws -> RegionMonitor {
    var monitor = RegionMonitor()
    monitor.add(try Region(id: "home", title: "Home \"sweet\" home", shape: .circle(center: center, radius: 123.456), dwell: 30))
    let exterior = ring(around: offset(center, 90, 3_000), radius: 1_000, count: 9)
    let hole = ring(around: offset(center, 90, 3_000), radius: 100.5, count: 5)
    monitor.add(
      try Region(id: "park", shape: .polygon(exterior: exterior, holes: [hole]), notifyOnEntry: true, notifyOnExit: false))
    for i in 0..<3 {
      let time = t0 + Int64(i) * 1000
      _ = monitor.update(with: location(center, time: time, error95: 4), now: time)
    }
    _ = monitor.advance(to: t0 + 40_000)
    return monitor
  }

  @Test func roundTripKeepsRegionsStatesAndDwell() throws {
    let monitor = try sample()
    #expect(monitor.status(id: "home")?.state == .inside)
    #expect(monitor.status(id: "park")?.state == .outside)
    let document = monitor.persisted()
    let text = document.encoded
    let restored = try RegionMonitor(restoring: try JSONValue.parse(text))
    #expect(restored.regions == monitor.regions)
    for id in ["home", "park"] {
      #expect(restored.status(id: id)?.state == monitor.status(id: id)?.state)
      #expect(restored.status(id: id)?.since == monitor.status(id: id)?.since)
    }
    #expect(restored.persisted() == document)
    // Restored inside stays inside: the next fixes inside fire nothing (no second enter, and the
    // dwell already fired).
    var next = restored
    for i in 0..<3 {
      let time = t0 + 100_000 + Int64(i) * 1000
      #expect(next.update(with: location(center, time: time, error95: 4), now: time).isEmpty)
    }
  }

  @Test func restoreRefusesInvalidDocuments() throws {
    let good = try sample().persisted()
    guard case .object(var members) = good, case .array(let regions) = good["regions"], case .object(let home) = regions[0]
    else {
      Issue.record("unexpected document shape")
      return
    }
    func withRegion(_ change: (inout [JSONMember]) -> Void) -> JSONValue {
      var region = home
      change(&region)
      var copy = members
      copy[1] = JSONMember("regions", .array([.object(region)] + regions.dropFirst()))
      return .object(copy)
    }
    func replacing(_ key: String, _ value: JSONValue) -> JSONValue {
      withRegion { region in
        if let index = region.firstIndex(where: { $0.key == key }) { region[index].value = value }
      }
    }
    let radiusZero: JSONValue = .object([
      JSONMember("type", "circle"), JSONMember("center", [151, -33]), JSONMember("radius", 0),
    ])
    let bowTie: JSONValue = .object([
      JSONMember("type", "polygon"), JSONMember("exterior", [[0, 0], [1, 1], [1, 0], [0, 1]]), JSONMember("holes", []),
    ])
    let bad: [JSONValue] = [
      .null, [], .object([]), .object([JSONMember("version", 2), JSONMember("regions", [])]),
      .object([JSONMember("version", 1)]), .object([JSONMember("version", 1), JSONMember("regions", [1])]),
      .object([JSONMember("version", 1), JSONMember("regions", []), JSONMember("extra", 1)]),
      replacing("id", ""), replacing("id", 5), replacing("state", "sideways"), replacing("since", "yesterday"),
      replacing("shape", radiusZero), replacing("shape", bowTie), replacing("dwell", -1),
      replacing("notifyOnExit", "yes"), replacing("title", 7),
      withRegion { $0.append(JSONMember("colour", "red")) }, withRegion { $0.removeAll { $0.key == "shape" } },
      // Duplicate id.
      .object([members[0], JSONMember("regions", .array([.object(home), .object(home)]))]),
    ]
    for document in bad {
      #expect(throws: RegionError.self, "\(document.jsonString)") { try RegionMonitor(restoring: document) }
    }
    _ = members.popLast()
  }

  @Test func restoreErrorNamesTheRegion() throws {
    let document: JSONValue = .object([
      JSONMember("version", 1),
      JSONMember(
        "regions",
        [
          .object([
            JSONMember("id", "pool"), JSONMember("title", .null), JSONMember("notifyOnEntry", true),
            JSONMember("notifyOnExit", true), JSONMember("dwell", .null),
            JSONMember(
              "shape",
              .object([JSONMember("type", "circle"), JSONMember("center", [.double(.nan), 10]), JSONMember("radius", 5)])),
            JSONMember("state", "inside"), JSONMember("since", 5), JSONMember("dwellFired", false),
          ])
        ]),
    ])
    #expect {
      try RegionMonitor(restoring: document)
    } throws: { error in
      guard case .invalidDocument(let reason) = error as? RegionError else { return false }
      return reason.hasPrefix("region 0 (id \"pool\"): invalid coordinate at circle center")
    }
  }
}
