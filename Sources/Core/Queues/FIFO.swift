/// A first-in first-out queue that pops in O(1), releases each element as it is taken, and gives
/// its storage back once drained (keeping up to `retainedCapacity` slots for reuse).
///
/// For the event queues of this package: a backend's queue to its consumer, a socket client's
/// outgoing lines and pending requests. Not thread-safe; keep it under a lock.
///
/// Public and inlinable so that each module specialises it for its element type: as `package`
/// declarations the bodies were not available to other modules, and every call ran the generic
/// code (metadata lookups and out-of-line copies, about 13 % more CPU in `core-bench`).
public struct FIFO<Element> {
  /// Queued elements from `head` on; taken slots are cleared so they release their element.
  @usableFromInline var storage: [Element?] = []
  @usableFromInline var head = 0
  @usableFromInline let retainedCapacity: Int

  /// Creates an empty queue that keeps up to `retainedCapacity` slots when drained.
  @inlinable public init(retainedCapacity: Int = 16) {
    self.retainedCapacity = retainedCapacity
  }

  /// Whether nothing is queued.
  @inlinable public var isEmpty: Bool { head == storage.count }
  /// Number of queued elements.
  @inlinable public var count: Int { storage.count - head }
  /// The next element to be taken.
  @inlinable public var first: Element? { isEmpty ? nil : storage[head] }
  /// The element appended last.
  @inlinable public var last: Element? { isEmpty ? nil : storage[storage.count - 1] }

  /// Queues `element` last.
  @inlinable public mutating func append(_ element: Element) { storage.append(element) }

  /// Takes the first element; `nil` when empty.
  @inlinable public mutating func popFirst() -> Element? {
    guard head < storage.count else { return nil }
    let element = storage[head].take()
    head += 1
    if head == storage.count {
      storage.removeAll(keepingCapacity: storage.capacity <= retainedCapacity)
      head = 0
    } else if head >= 64 && head * 2 >= storage.count {
      storage.removeFirst(head)
      head = 0
    }
    return element
  }

  /// Replaces the first element; the queue must not be empty.
  @inlinable public mutating func replaceFirst(_ element: Element) { storage[head] = element }

  /// Replaces the last element; the queue must not be empty.
  @inlinable public mutating func replaceLast(_ element: Element) { storage[storage.count - 1] = element }

  /// Removes and returns the first element that matches, if any: O(1) when it is the first,
  /// otherwise O(count).
  @inlinable public mutating func removeFirst(where matches: (Element) -> Bool) -> Element? {
    var index = head
    while index < storage.count {
      if let element = storage[index], matches(element) {
        if index == head { return popFirst() }
        storage.remove(at: index)
        return element
      }
      index += 1
    }
    return nil
  }

  /// Removes the last element that matches, if any.
  @inlinable public mutating func removeLast(where matches: (Element) -> Bool) {
    var index = storage.count - 1
    while index >= head {
      if let element = storage[index], matches(element) {
        storage.remove(at: index)
        return
      }
      index -= 1
    }
  }

  /// Empties the queue and releases its storage.
  @inlinable public mutating func removeAll() {
    storage = []
    head = 0
  }
}
