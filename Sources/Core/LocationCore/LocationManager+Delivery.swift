import LocationModel
import NMEA

// How backend events reach a ``LocationManager``'s clients: one consumer task reads the backend
// (in batches when it can), keeps the current and initial location, filters each location per
// client and posts it to the clients' mailboxes, waking each reader once per batch; and the
// backend is started and stopped as clients start and stop tracking.

extension LocationManager {
  // MARK: Backend

  func ensureConsumer() {
    guard consumer == nil, !isShutDown else { return }
    let events = backend.events
    // The task prefers the manager's executor, so that the backend queue's wait (nonisolated)
    // resumes there too, and a backend's thread can run the delivery itself (ServiceExecutor).
    consumer = Task(executorPreference: executor.taskExecutor) { await self.consume(events) }
  }

  /// The one delivery path from the backend: whatever its queue holds, up to 256 events at a
  /// time, handled as a batch (one wake-up per reader per batch).
  private func consume(_ events: BackendEvents) async {
    while let batch = await events.nextBatch(upTo: 256) {
      if Task.isCancelled { return }
      handle(batch: batch)
      flushWakes()
      await waitForLosslessReaders()
    }
  }

  /// Most events queued for an observer that gets every event before the manager stops taking
  /// events from the backend.
  public static let losslessBacklog = 1024

  /// Back-pressure for observers that keep every event (`observe(coalescing: false)`, such as
  /// the daemon's hub): while one holds ``losslessBacklog`` unread events, stop reading the
  /// backend, whose own bounded queue then makes it wait. A replay at speed 0 then runs at the
  /// pace of that observer instead of filling memory. (Client subscriptions without coalescing
  /// are not waited for: they are for recording and may be read only at the end.)
  private func waitForLosslessReaders() async {
    for mailbox in observers.values where !mailbox.coalesces {
      await mailbox.waitForSpace()
    }
  }

  /// Handles a batch of events. Clients whose filter accepts every fix and whose subscriptions all
  /// coalesce get only the newest location of each run of locations, with the others counted as
  /// missed: exactly what coalescing would leave them, for one push per run instead of one per fix.
  private func handle(batch: [BackendEvent]) {
    let coalescedOnly = trackingClients.map { record in
      record.authorization == .authorized && record.filter.acceptsEverything
        && record.subscriptions.values.allSatisfy(\.coalesces)
    }
    var pending: SharedLocation?
    var skipped = 0
    for event in batch {
      guard case .location(let location) = event else {
        deliverNewest(pending, skipped: skipped, to: coalescedOnly)
        pending = nil
        skipped = 0
        handle(event)
        continue
      }
      statistics.locationsReceived += 1
      let shared = SharedLocation(location)
      for mailbox in observers.values { post(.location(shared, missed: 0), to: mailbox) }
      guard backendActive, location.hasPosition else { continue }
      statistics.fixesWithPosition += 1
      current = shared
      if initial == nil { initial = shared }
      for (index, record) in trackingClients.enumerated() where !coalescedOnly[index] {
        deliver(shared, to: record)
      }
      if pending != nil { skipped += 1 }
      pending = shared
    }
    deliverNewest(pending, skipped: skipped, to: coalescedOnly)
  }

  /// Delivers `location` to the tracking clients flagged in `selected`, `skipped` fixes having
  /// been coalesced away before it.
  private func deliverNewest(_ location: SharedLocation?, skipped: Int, to selected: [Bool]) {
    guard let location else { return }
    for (index, record) in trackingClients.enumerated() where selected[index] && record.isTracking {
      record.lastDelivered = location
      statistics.deliveries += skipped + 1
      for mailbox in record.subscriptions.values {
        post(.location(location, missed: skipped), to: mailbox)
      }
    }
  }

  /// Brings the backend in line with the tracking clients: started while any client tracks,
  /// stopped otherwise. Serialized so that overlapping calls never start or stop it twice.
  func applyDesiredState() async throws(LocationManagerError) {
    while lifecycleBusy {
      await withCheckedContinuation { lifecycleWaiters.append($0) }
    }
    lifecycleBusy = true
    defer {
      lifecycleBusy = false
      if !lifecycleWaiters.isEmpty { lifecycleWaiters.removeFirst().resume() }
    }
    let wanted = !trackingClients.isEmpty
    if wanted && !backendActive {
      ensureConsumer()
      current = nil
      initial = nil
      backendActive = true
      do {
        try await backend.start()
      } catch {
        backendActive = false
        for record in trackingClients { record.isTracking = false }
        trackingClients = []
        let message = String(describing: error)
        backendStatus = .stopped
        backendStatusDetail = message
        throw .backendFailed(message)
      }
    } else if !wanted && backendActive {
      backendActive = false
      current = nil
      initial = nil
      await backend.stop()
      current = nil
      initial = nil
    }
  }

  private func handle(_ event: BackendEvent) {
    switch event {
    case .location(let location):
      statistics.locationsReceived += 1
      let shared = SharedLocation(location)
      for mailbox in observers.values { post(.location(shared, missed: 0), to: mailbox) }
      guard backendActive, location.hasPosition else { return }
      statistics.fixesWithPosition += 1
      current = shared
      if initial == nil { initial = shared }
      for record in trackingClients { deliver(shared, to: record) }
    case .status(let status, let detail):
      backendStatus = status
      backendStatusDetail = detail
      for mailbox in observers.values { post(.other(event.managerEvent), to: mailbox) }
      for record in clients.values where record.authorization == .authorized {
        for mailbox in record.subscriptions.values {
          post(.other(.status(status, detail: detail)), to: mailbox)
        }
      }
    case .error(let message):
      for mailbox in observers.values { post(.other(.error(message)), to: mailbox) }
    }
  }

  /// Queues `event` in `mailbox`; a waiting reader is woken by ``flushWakes()`` (after the
  /// current event or batch), so a burst of fixes costs one wake-up per reader, not one per fix.
  private func post(_ event: MailboxEntry, to mailbox: EventMailbox) {
    if mailbox.postWithoutWake(event) { pendingWakes.append(mailbox) }
  }

  func flushWakes() {
    for mailbox in pendingWakes { mailbox.wake() }
    pendingWakes.removeAll(keepingCapacity: true)
  }

  func deliver(_ location: SharedLocation, to record: ClientRecord) {
    guard record.authorization == .authorized, record.isTracking,
      record.filter.accepts(location, after: record.lastDelivered)
    else { return }
    record.lastDelivered = location
    statistics.deliveries += 1
    for mailbox in record.subscriptions.values { post(.location(location, missed: 0), to: mailbox) }
  }
}

extension BackendEvent {
  var managerEvent: ManagerEvent {
    switch self {
    case .location(let location): return .location(location, missed: 0)
    case .status(let status, let detail): return .status(status, detail: detail)
    case .error(let message): return .error(message)
    }
  }
}
