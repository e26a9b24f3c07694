import ServiceCore
import Testing

/// The shared outbound queue of the front-ends: coalescing with `missed`, the backlog bounds and
/// the drop rule, bursts, partial writes.
@Suite("Outbound queue")
struct OutboundQueueTests {
  private static func text(_ head: OutboundQueue.Head?) -> String? {
    head.map { String(decoding: $0.bytes, as: UTF8.self) }
  }

  @Test func coalescedEventReplacesTheWaitingOneAndCountsMissed() {
    var queue = OutboundQueue(
      limits: OutboundLimits(maxBytes: 100, maxMessages: 10), terminator: [0x0A])
    queue.coalesce(key: "TPV", body: Array(#"{"class":"TPV","n":1}"#.utf8))
    queue.append(Array("B1\n".utf8))
    queue.coalesce(key: "TPV", body: Array(#"{"class":"TPV","n":2}"#.utf8))
    queue.coalesce(key: "TPV", body: Array(#"{"class":"TPV","n":3}"#.utf8))
    queue.coalesce(key: "MAP", body: Array(#"{"class":"MAP"}"#.utf8))
    // The TPV moved behind B1 and replaced two others; MAP replaced none.
    let taken1 = queue.popFirst()
    #expect(Self.text(taken1) == "B1\n")
    let tpv = queue.popFirst()
    #expect(Self.text(tpv) == #"{"class":"TPV","n":3,"missed":2}"# + "\n")
    #expect(tpv?.kind == .coalesced(missed: 2))
    let map = queue.popFirst()
    #expect(Self.text(map) == #"{"class":"MAP"}"# + "\n")
    #expect(map?.kind == .coalesced(missed: 0))
    let taken2 = queue.popFirst()
    #expect(taken2 == nil)
    #expect(queue.isEmpty)
  }

  @Test func coalescedEventsDoNotCountAgainstTheBacklog() {
    var queue = OutboundQueue(limits: OutboundLimits(maxBytes: 10, maxMessages: 1))
    for n in 0..<1000 { queue.coalesce(key: "TPV", body: Array("{\"n\":\(n)}".utf8)) }
    #expect(queue.backlogBytes == 0)
    #expect(queue.backlogMessages == 0)
    let taken3 = queue.popFirst()
    #expect(Self.text(taken3) == #"{"n":999,"missed":999}"#)
  }

  @Test(arguments: [
    (maxBytes: 10, maxMessages: 100, refusedAt: 3), (maxBytes: 1000, maxMessages: 2, refusedAt: 3),
  ])
  func counterBeyondEitherBoundIsRefused(maxBytes: Int, maxMessages: Int, refusedAt: Int) {
    var queue = OutboundQueue(limits: OutboundLimits(maxBytes: maxBytes, maxMessages: maxMessages))
    var accepted: [Bool] = []
    for _ in 1...refusedAt { accepted.append(queue.append(Array("abcd".utf8))) }
    #expect(accepted == Array(repeating: true, count: refusedAt - 1) + [false])
    #expect(queue.backlogMessages == refusedAt)
    #expect(queue.backlogBytes == 4 * refusedAt)
    queue.removeAll()
    #expect(queue.isEmpty && queue.backlogBytes == 0 && queue.backlogMessages == 0)
  }

  @Test func uncountedBytesNeverTriggerTheDropRule() {
    var queue = OutboundQueue(limits: OutboundLimits(maxBytes: 4, maxMessages: 1))
    var accepted: [Bool] = []
    for _ in 0..<50 {
      accepted.append(queue.append(Array(": keep-alive\n\n".utf8), counted: false))
    }
    #expect(accepted == Array(repeating: true, count: 50))
    #expect(queue.backlogBytes == 0)
    let taken4 = queue.popFirst()
    #expect(taken4?.kind == .uncounted)
  }

  @Test func burstIsCheckedOnceBeforeItAndAgainAfterIt() {
    var queue = OutboundQueue(limits: OutboundLimits(maxBytes: 100, maxMessages: 2))
    let taken5 = queue.beginBurst()
    #expect(taken5)
    var accepted: [Bool] = []
    for _ in 0..<5 { accepted.append(queue.append(Array("REGION".utf8))) }
    #expect(accepted == Array(repeating: true, count: 5))
    queue.endBurst()
    #expect(queue.backlogMessages == 5)
    // Beyond the bounds now: the next entry is refused, and so is the next burst.
    let taken6 = queue.append(Array("W".utf8))
    #expect(!taken6)
    let taken7 = queue.beginBurst()
    #expect(!taken7)
    #expect(!queue.inBurst)
  }

  @Test func partialWritesKeepTheHeadAndCountOnlyWhatIsLeft() {
    var queue = OutboundQueue(limits: OutboundLimits(maxBytes: 100, maxMessages: 10))
    // A direct write took 2 of 6 bytes: 4 wait.
    queue.append(Array("abcdef".utf8), written: 2)
    #expect(queue.backlogBytes == 4)
    #expect(queue.backlogMessages == 1)
    queue.append(Array("gh".utf8))
    let head = queue.first()
    #expect(head?.offset == 2)
    let taken8 = queue.wrote(3)
    #expect(taken8 == false)
    let taken9 = queue.first()
    #expect(taken9?.offset == 5)
    #expect(queue.backlogBytes == 3)
    let taken10 = queue.wrote(1)
    #expect(taken10 == true)
    #expect(queue.backlogMessages == 1)
    let taken11 = queue.first()
    #expect(Self.text(taken11) == "gh")
    let taken12 = queue.first()
    #expect(taken12?.offset == 0)
    // `written` applies only to the first entry of an empty queue.
    queue.append(Array("ij".utf8), written: 1)
    #expect(queue.backlogBytes == 4)
  }

  @Test func coalescedHeadIsFixedOnceTakenAndANewerOneWaitsBehindIt() {
    var queue = OutboundQueue(
      limits: OutboundLimits(maxBytes: 100, maxMessages: 10), terminator: [0x0A])
    queue.coalesce(key: "TPV", body: Array(#"{"n":1}"#.utf8))
    let taken13 = queue.first()
    #expect(taken13?.kind == .coalesced(missed: 0))
    let taken14 = queue.wrote(2)
    #expect(taken14 == false)
    queue.coalesce(key: "TPV", body: Array(#"{"n":2}"#.utf8))
    // The partly written fix is finished as it was; the newer one follows, missing none.
    let taken15 = queue.first()
    #expect(Self.text(taken15) == #"{"n":1}"# + "\n")
    let taken16 = queue.wrote(100)
    #expect(taken16 == true)
    let taken17 = queue.popFirst()
    #expect(Self.text(taken17) == #"{"n":2}"# + "\n")
  }
}
