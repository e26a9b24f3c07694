import LocationProtocol
import Synchronization

/// The event sequences (`locationUpdates`, `mapChanges`, `regionEvents`) and `requestLocation`.
extension LocationClient {
  // MARK: Event sequences

  /// Every location with a position while iterated, newest-first: when this task falls behind,
  /// the daemon skips to the newest fix (as `CLLocationUpdate.liveUpdates()`). Iterating
  /// tracks (the connection watches); breaking the loop, or cancelling the task, closes the
  /// connection, and the daemon stops the tracking that came with it. Resumes by itself after a
  /// daemon restart.
  ///
  /// - Throws (from the iteration): ``LocationClientError`` (``LocationClientError/Code/notAuthorized``
  ///   when refused or withdrawn; the last connection error when the daemon stays away).
  public var locationUpdates: some AsyncSequence<Location, any Error> {
    locationUpdates(everyFix: false)
  }

  /// ``locationUpdates``; with `everyFix` every location, none skipped (for recording): a task
  /// that cannot keep up is then disconnected by the daemon, and the sequence reconnects.
  public func locationUpdates(everyFix: Bool) -> ClientEvents<Location> {
    ClientEvents(client: self, coalesce: !everyFix, keepsEvery: everyFix) { Wire.location($0) }
  }

  /// The daemon's map state after each change, with what changed in
  /// ``MapStateSnapshot/changes``. The events come on a watching connection, so iterating
  /// tracks, as ``locationUpdates`` does.
  public var mapChanges: some AsyncSequence<MapStateSnapshot, any Error> {
    mapChanges(onWatching: nil)
  }

  /// ``mapChanges``, calling `onWatching` each time its connection starts watching (at first
  /// and after each reconnection): changes made before then are not in the sequence.
  func mapChanges(onWatching: (@Sendable () -> Void)?) -> ClientEvents<MapStateSnapshot> {
    var events = ClientEvents(client: self, coalesce: true, keepsEvery: true) { event in
      event["class"] == "MAP" ? try? MapStateSnapshot(map: event) : nil
    }
    events.onWatching = onWatching
    return events
  }

  /// Region transitions (CoreLocation's `CLMonitor.events`): `enter`, `exit`, `dwell`. Iterating
  /// tracks, as ``locationUpdates`` does; none is dropped for a slow task.
  public var regionEvents: some AsyncSequence<RegionEvent, any Error> {
    ClientEvents(client: self, coalesce: true, keepsEvery: true) { Wire.regionEvent($0) }
  }

  /// One location (CoreLocation's `requestLocation()`): watches on a connection, which starts
  /// the backend when nobody tracks, and returns the first location with a position; the
  /// connection is closed then, so tracking ends with it unless someone else tracks. Calls
  /// that overlap share one connection and its first fix (a thousand concurrent calls cost
  /// the daemon one client, not a thousand).
  ///
  /// - Parameter timeout: how long to wait for the fix (more than zero).
  /// - Throws: ``LocationClientError/Code/invalidArgument`` for a timeout of zero or less
  ///   (nothing is sent); ``LocationClientError/Code/timedOut`` when no fix came in time; the
  ///   connection's errors (``LocationClientError/Code/notAuthorized``...); `CancellationError`
  ///   when the calling task is cancelled.
  public func requestLocation(timeout: Duration) async throws -> Location {
    guard timeout > .zero else {
      throw LocationClientError(
        .invalidArgument, "requestLocation's timeout must be more than zero (got \(timeout))")
    }
    let sleep = sleep
    return try await withThrowingTaskGroup(of: Location.self) { group in
      group.addTask { try await self.sharedFirstFix() }
      group.addTask {
        try await sleep(timeout)
        throw LocationClientError(
          .timedOut, "no fix within \(timeout): the backend gave no position in that time")
      }
      defer { group.cancelAll() }
      guard let location = try await group.next() else {
        throw LocationClientError(.connectionClosed, "locationd ended the updates before a fix")
      }
      return location
    }
  }

  /// Waits for the first fix of the one-shot connection that overlapping
  /// ``requestLocation(timeout:)`` calls share, opening it when none is open; the last waiter
  /// to be cancelled closes it.
  func sharedFirstFix() async throws -> Location {
    let id = oneShot.withLock { state -> Int in
      state.nextWaiter += 1
      return state.nextWaiter
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let cancelled = oneShot.withLock { state -> Bool in
          if Task.isCancelled { return true }
          state.waiters[id] = continuation
          if state.task == nil {
            state.generation += 1
            let generation = state.generation
            let updates = locationUpdates(everyFix: false)
            state.task = Task { [weak self] in
              var result: Result<Location, any Error> = .failure(
                LocationClientError(.connectionClosed, "locationd ended the updates before a fix"))
              do {
                for try await location in updates {
                  result = .success(location)
                  break
                }
              } catch {
                result = .failure(error)
              }
              self?.deliverFirstFix(result, generation: generation)
            }
          }
          return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
      }
    } onCancel: {
      let (waiter, task) = oneShot.withLock { state in
        let waiter = state.waiters.removeValue(forKey: id)
        guard state.waiters.isEmpty, let task = state.task else {
          return (waiter, Task<Void, Never>?.none)
        }
        // Nobody waits any more: the connection closes, and the tracking it brought ends.
        state.task = nil
        state.generation += 1
        return (waiter, task)
      }
      task?.cancel()
      waiter?.resume(throwing: CancellationError())
    }
  }

  /// How many ``requestLocation(timeout:)`` calls wait for the shared connection's fix (tests).
  var oneShotWaiterCount: Int { oneShot.withLock { $0.waiters.count } }

  /// Hands the shared one-shot connection's outcome to every call waiting for it.
  func deliverFirstFix(_ result: Result<Location, any Error>, generation: Int) {
    let waiters = oneShot.withLock { state -> [CheckedContinuation<Location, any Error>] in
      guard state.generation == generation else { return [] }
      state.task = nil
      defer { state.waiters.removeAll() }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume(with: result) }
  }

  /// Runs one event sequence: opens a connection, asks for authorization, watches, and yields
  /// what `transform` makes of each event; reconnects after the daemon went away; closes the
  /// connection when the consumer stops.
  func runEvents<Element: Sendable>(
    coalesce: Bool, onWatching: (@Sendable () -> Void)? = nil,
    transform: @Sendable (JSONValue) -> Element?,
    into continuation: AsyncThrowingStream<Element, any Error>.Continuation
  ) async {
    if let invalid = invalidTimeout {
      continuation.finish(throwing: invalid)
      return
    }
    var connectedBefore = false
    var failures = 0
    while !Task.isCancelled {
      let (inputs, feed) = AsyncStream<TransportInput>.makeStream()
      let channel = Channel(transport: makeTransport(), timeout: timeout, sleep: sleep) { input in
        feed.yield(input)
        if case .closed = input { feed.finish() }
      }
      do {
        try await channel.open()
        _ = try await channel.call("request")
        _ = try await channel.call("watch", coalesce ? [] : [JSONMember("coalesce", false)])
        connectedBefore = true
        failures = 0
        onWatching?()
      } catch let error as LocationClientError
        where connectedBefore && error.code != .notAuthorized && error.code != .permissionDenied
      {
        channel.close()
        failures += 1
        if failures >= reconnectAttempts {
          continuation.finish(throwing: error)
          return
        }
        do { try await sleep(reconnectDelay) } catch { break }
        continue
      } catch let closed as ClosedBeforeSending where connectedBefore {
        channel.close()
        failures += 1
        if failures >= reconnectAttempts {
          continuation.finish(throwing: closed.error)
          return
        }
        do { try await sleep(reconnectDelay) } catch { break }
        continue
      } catch let closed as ClosedBeforeSending {
        channel.close()
        continuation.finish(throwing: closed.error)
        return
      } catch {
        channel.close()
        if error is CancellationError || Task.isCancelled { break }
        continuation.finish(throwing: error)
        return
      }
      for await input in inputs {
        guard case .message(let event) = input else { break }
        if event["class"] == "AUTHORIZATION", event["authorization"] != "authorized" {
          channel.close()
          continuation.finish(
            throwing: LocationClientError(
              .notAuthorized, "locationd withdrew this client's authorization (its group changed)",
              reply: event))
          return
        }
        if event["class"] == "ERROR" {
          channel.close()
          continuation.finish(throwing: LocationClientError(errorReply: event))
          return
        }
        if let element = transform(event) { continuation.yield(element) }
      }
      channel.close()
    }
    continuation.finish()
  }
}
