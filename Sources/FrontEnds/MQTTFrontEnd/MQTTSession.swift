import CMosquitto
import Glibc
import Synchronization
import SystemIO

/// Where the connection to the broker stands, as the front-end logs it (one line per change,
/// the shape of a `BACKEND` status: `uri`, `state`, `detail`).
public enum MQTTConnectionState: Sendable, Hashable {
  /// Connecting (first attempt or a retry).
  case connecting
  /// The broker accepted the connection (CONNACK 0).
  case connected
  /// The attempt failed or the connection was lost; the next attempt is in `retryIn` seconds.
  case failed(detail: String, retryIn: Double)
  /// Stopped at shutdown (a clean disconnect: the broker does not publish the Last Will).
  case stopped

  /// `connecting`, `connected`, `failed` or `stopped`.
  public var name: String {
    switch self {
    case .connecting: return "connecting"
    case .connected: return "connected"
    case .failed: return "failed"
    case .stopped: return "stopped"
    }
  }
}

/// What an ``MQTTSession`` needs besides the settings.
public struct MQTTSessionOptions: Sendable {
  /// The broker and the MQTT settings.
  public var settings: MQTTSettings
  /// Read from ``MQTTSettings/credentialsFile`` before the session starts.
  public var credentials: MQTTCredentials?
  /// Messages that arrive on the subscription: `(topic, payload, byteCount)`; a payload longer
  /// than `maxPayloadBytes` arrives empty, with its size in `byteCount`, to be refused by size.
  public var onMessage: @Sendable (String, [UInt8], Int) -> Void
  /// Each change of ``MQTTConnectionState``.
  public var onState: @Sendable (MQTTConnectionState) -> Void
  /// Payload bytes copied from a received message at most (plus one to tell it was longer).
  public var maxPayloadBytes: Int
  /// The Last Will's payload for a connection made at the given UNIX time (seconds).
  public var lastWill: @Sendable (Int64) -> [UInt8]

  /// Creates the options.
  public init(
    settings: MQTTSettings, credentials: MQTTCredentials?, maxPayloadBytes: Int,
    lastWill: @escaping @Sendable (Int64) -> [UInt8],
    onMessage: @escaping @Sendable (String, [UInt8], Int) -> Void,
    onState: @escaping @Sendable (MQTTConnectionState) -> Void
  ) {
    self.settings = settings
    self.credentials = credentials
    self.maxPayloadBytes = maxPayloadBytes
    self.lastWill = lastWill
    self.onMessage = onMessage
    self.onState = onState
  }
}

/// One MQTT client on a thread of its own: connects (with the Last Will), reconnects with
/// ``Backoff``, publishes the ``MQTTOutbox`` in order at most ``MQTTSettings/catchUpRate``
/// messages per second with at most ``MQTTSession/window`` unacknowledged, removes what the
/// broker acknowledged, and passes subscribed messages on.
///
/// Why a thread of the project's own rather than libmosquitto's (`mosquitto_loop_start`): the
/// reconnect policy, the status lines and the outbox pump live in one loop that owns the client,
/// so no lock is needed around libmosquitto (not thread-safe per client) and stopping is one
/// flag, read at least every 50 ms, like the gpsd worker.
public final class MQTTSession: Sendable {
  /// Messages published and not yet acknowledged, at most.
  public static let window = 64
  private let options: MQTTSessionOptions
  private let outbox: any MQTTOutbox
  private let control = MQTTControl()

  /// Creates a session; nothing happens before ``start()``.
  public init(options: MQTTSessionOptions, outbox: any MQTTOutbox) {
    self.options = options
    self.outbox = outbox
  }

  /// Loads libmosquitto and starts the session's thread.
  ///
  /// - Throws: ``MQTTSettingError`` (key `mqtt`) when libmosquitto cannot be loaded or the
  ///   thread cannot start.
  public func start() throws(MQTTSettingError) {
    if let failure = locationd_mqtt_load() {
      throw MQTTSettingError(key: "mqtt", value: options.settings.broker.description, reason: String(cString: failure))
    }
    let options = options
    let outbox = outbox
    do {
      try SystemIO.startThread { [control] in
        let worker = MQTTWorker(options: options, outbox: outbox, control: control)
        worker.run()
        control.finished.store(true, ordering: .releasing)
      }
    } catch {
      throw MQTTSettingError(key: "mqtt", value: options.settings.broker.description, reason: "cannot start its thread: \(error)")
    }
  }

  /// Disconnects cleanly (no Last Will) and ends the thread within about 100 ms.
  public func stop() { control.stopping.store(true, ordering: .releasing) }

  /// Whether the thread has ended after ``stop()``.
  public var hasFinished: Bool { control.finished.load(ordering: .acquiring) }
}

/// The flags shared between a session and its thread.
final class MQTTControl: Sendable {
  let stopping = Atomic<Bool>(false)
  let finished = Atomic<Bool>(false)
}

/// The session thread's state; used only on that thread (libmosquitto's callbacks run there
/// too, inside `locationd_mqtt_connect` and `locationd_mqtt_loop`).
final class MQTTWorker {
  let options: MQTTSessionOptions
  let outbox: any MQTTOutbox
  let control: MQTTControl
  let topic: String
  var client: OpaquePointer?
  /// Whether the next attempt needs a new client (the last connection was lost or refused).
  var freshClientNeeded = false
  var connected = false
  var connecting = false
  var backoff: Backoff
  var limiter: RateLimiter
  var nextAttempt = 0.0
  var lastSent: Int64?
  var lastState: MQTTConnectionState?
  /// Published and unacknowledged, in publish order.
  var pending: [(mid: Int32, sequence: Int64, acknowledged: Bool)] = []

  init(options: MQTTSessionOptions, outbox: any MQTTOutbox, control: MQTTControl) {
    self.options = options
    self.outbox = outbox
    self.control = control
    backoff = Backoff(maximum: options.settings.reconnectMaximum)
    topic = options.settings.effectiveTopic
    limiter = RateLimiter(rate: options.settings.catchUpRate)
  }

  func report(_ state: MQTTConnectionState) {
    lastState = state
    options.onState(state)
  }

  /// A new libmosquitto client with the credentials and TLS settings; `nil` (after reporting
  /// why) when none can be made.
  func makeClient() -> OpaquePointer? {
    let settings = options.settings
    // The context pointer stays valid: this worker outlives its clients (each destroyed on this
    // thread, the last before run returns).
    let context = Unmanaged.passUnretained(self).toOpaque()
    let made = locationd_mqtt_new(settings.effectiveClientID, context) { context, event in
      guard let context, let event else { return }
      Unmanaged<MQTTWorker>.fromOpaque(context).takeUnretainedValue().handle(event.pointee)
    }
    guard let made else {
      report(.failed(detail: "cannot create an MQTT client (client id \(settings.effectiveClientID))", retryIn: .infinity))
      return nil
    }
    if let credentials = options.credentials {
      let rc = locationd_mqtt_credentials(made, credentials.user, credentials.password)
      if rc != 0 { report(.failed(detail: "credentials refused by libmosquitto: \(Self.text(rc))", retryIn: .infinity)) }
    }
    if settings.broker.tls {
      guard let caFile = settings.caFile else {
        report(.failed(detail: "mqtts needs mqtt-ca-file (the CA certificates that signed the broker's certificate)", retryIn: .infinity))
        locationd_mqtt_destroy(made)
        return nil
      }
      let rc = locationd_mqtt_tls(made, caFile)
      if rc != 0 {
        report(.failed(detail: "TLS setup failed with CA file \(caFile): \(Self.text(rc))", retryIn: .infinity))
        locationd_mqtt_destroy(made)
        return nil
      }
    }
    return made
  }

  func run() {
    let settings = options.settings
    guard var client = makeClient() else { return }
    self.client = client
    defer { if let client = self.client { locationd_mqtt_destroy(client) } }
    while !control.stopping.load(ordering: .acquiring) {
      let now = MonotonicClock.seconds()
      if !connected && !connecting {
        if now < nextAttempt {
          usleep(UInt32(min(50_000, max(1_000, (nextAttempt - now) * 1e6))))
          continue
        }
        if freshClientNeeded {
          // libmosquitto keeps the messages in flight on a lost connection and sends them
          // again after its next CONNACK, while this session publishes them again from its
          // queue: each would reach the broker twice more. A new client starts with none.
          locationd_mqtt_destroy(client)
          self.client = nil
          guard let made = makeClient() else { return }
          client = made
          self.client = made
          freshClientNeeded = false
        }
        connect(client)
        continue
      }
      let rc = locationd_mqtt_loop(client, 50)
      if rc != 0, connected || connecting {
        // Before CONNACK the failure belongs to the attempt (a TLS handshake fails here).
        lost(connected ? "connection lost: \(Self.detail(rc))" : "cannot connect to \(settings.broker): \(Self.detail(rc))")
        continue
      }
      if connected { pump(client) }
    }
    if connected || connecting { _ = locationd_mqtt_disconnect(client) }
    report(.stopped)
  }

  func connect(_ client: OpaquePointer) {
    report(.connecting)
    let will = options.lastWill(Int64(time(nil)))
    _ = will.withUnsafeBytes { raw in
      locationd_mqtt_will_set(client, topic, raw.baseAddress, Int32(clamping: raw.count), Int32(options.settings.qos), false)
    }
    let broker = options.settings.broker
    errno = 0
    let rc = locationd_mqtt_connect(client, broker.host, Int32(broker.port), Int32(options.settings.keepalive))
    guard rc == 0 else {
      let code = errno
      var detail = "cannot connect to \(broker): \(Self.detail(rc))"
      // libmosquitto's text for MOSQ_ERR_ERRNO is strerror(errno) already in 2.0, not in 1.6.
      if rc == MOSQ_ERR_ERRNO.rawValue, code != 0, !detail.hasSuffix(String(cString: strerror(code))) {
        detail += " (\(String(cString: strerror(code))))"
      }
      lost(detail)
      return
    }
    connecting = true
  }

  func lost(_ detail: String) {
    connected = false
    connecting = false
    freshClientNeeded = true
    // Sent and still in the queue: each is published again after the reconnect, and those the
    // broker had already taken reach receivers twice (at least once, QoS 1). Said in the log,
    // so that duplicates are counted.
    let again = options.settings.qos == 0 ? 0 : pending.count
    pending.removeAll()
    lastSent = nil
    let delay = backoff.next()
    nextAttempt = MonotonicClock.seconds() + delay
    let resend = again > 0 ? "; \(again) messages sent but not all confirmed are published again (receivers may get them twice)" : ""
    report(.failed(detail: detail + resend, retryIn: delay))
  }

  func handle(_ event: locationd_mqtt_event) {
    switch event.kind {
    case Int32(LOCATIOND_MQTT_CONNECTED.rawValue):
      guard event.code == 0 else {
        if let client { _ = locationd_mqtt_disconnect(client) }
        lost("the broker refused the connection: \(String(cString: locationd_mqtt_connack_string(event.code)))")
        return
      }
      connected = true
      connecting = false
      backoff.reset()
      pending.removeAll()
      lastSent = nil
      if let pattern = options.settings.subscribe, let client {
        _ = locationd_mqtt_subscribe(client, pattern, Int32(options.settings.qos))
      }
      report(.connected)
    case Int32(LOCATIOND_MQTT_DISCONNECTED.rawValue):
      if (connected || connecting) && !control.stopping.load(ordering: .acquiring) {
        lost("connection lost: \(Self.detail(event.code))")
      }
    case Int32(LOCATIOND_MQTT_PUBLISHED.rawValue):
      acknowledge(event.mid)
    case Int32(LOCATIOND_MQTT_MESSAGE.rawValue):
      guard let topicPointer = event.topic else { return }
      let topic = String(cString: topicPointer)
      let length = Int(event.payload_length)
      var payload: [UInt8] = []
      if length > 0, length <= options.maxPayloadBytes, let base = event.payload {
        // libmosquitto gives payload_length bytes at payload (checked >= 0 in C); larger ones are not copied.
        payload = Array(UnsafeRawBufferPointer(start: base, count: length))
      }
      options.onMessage(topic, payload, length)
    default:
      return
    }
  }

  func acknowledge(_ mid: Int32) {
    guard let index = pending.firstIndex(where: { $0.mid == mid }) else { return }
    pending[index].acknowledged = true
    removeAcknowledgedPrefix()
  }

  /// Removes from the queue every message up to the first one still unacknowledged, so that a
  /// reconnect publishes again, in order, everything the broker has not confirmed.
  func removeAcknowledgedPrefix() {
    var through: Int64?
    while let first = pending.first, first.acknowledged {
      through = first.sequence
      pending.removeFirst()
    }
    if let through {
      do { try outbox.remove(through: through) } catch {
        report(.failed(detail: "the queue cannot remove delivered messages: \(error)", retryIn: 0))
      }
    }
  }

  func pump(_ client: OpaquePointer) {
    let room = MQTTSession.window - pending.count
    guard room > 0 else { return }
    let allowed = min(room, limiter.available(now: MonotonicClock.seconds()))
    guard allowed > 0 else { return }
    let messages: [OutboxMessage]
    do { messages = try outbox.oldest(after: lastSent, limit: allowed) } catch {
      report(.failed(detail: "the queue cannot be read: \(error)", retryIn: 0))
      return
    }
    var sent = 0
    for message in messages {
      var mid: Int32 = 0
      let rc = message.payload.withUnsafeBytes { raw in
        locationd_mqtt_publish(
          client, &mid, message.topic, raw.baseAddress, Int32(clamping: raw.count), Int32(options.settings.qos),
          message.retain)
      }
      guard rc == 0 else {
        lost("publishing failed: \(Self.text(rc))")
        break
      }
      // QoS 0 has no acknowledgement: sent is done (libmosquitto may call back before
      // publish returns, so its callback is not waited for).
      pending.append((mid, message.sequence, options.settings.qos == 0))
      lastSent = message.sequence
      sent += 1
    }
    if options.settings.qos == 0 { removeAcknowledgedPrefix() }
    limiter.take(sent)
  }

  static func text(_ code: Int32) -> String { String(cString: locationd_mqtt_strerror(code)) }

  /// libmosquitto's text for `code`, with what to check for a TLS failure.
  static func detail(_ code: Int32) -> String {
    code == MOSQ_ERR_TLS.rawValue
      ? "TLS handshake failed (\(text(code))): check mqtt-ca-file, the broker's certificate and its name"
      : text(code)
  }
}
